"""What a job's Python function reads that a second run would not read alike: the clock, uuids,
random numbers, the OS's entropy.

    reads(fn) -> ["calls time.time()", "calls uuid.uuid4()", ...]   (empty: nothing of those)

A Python UDF, a pandas UDF, an `applyInPandasWithState` function or a `transformWithState`
processor runs once in the stream and once more in the batch oracle; a value it takes from
the clock or a random generator differs between the two, and the oracle would compare
different values (a false FAIL). Spark cannot see inside the function (its plan flag says
deterministic unless the user wrote `asNondeterministic()`), so its code is read here.

Read by what each name resolves to, not by text: the function's bytecode names a global, a
closure cell or a local import, and that name is looked up where Python would look it up
(`__globals__`, `__closure__`, the module an `import` inside the function names), then each
attribute after it. So `from time import time as now; now()`, `import uuid as u; u.uuid4()`
and `clock = datetime.datetime; clock.now()` are all seen, and a docstring, a log line that
says "datetime.now()" or a function of the user's own called `random` are not. The functions
it calls (the user's own, not a library's), the lambdas and inner functions it defines and
the methods of a processor object it holds are read too.
"""

from __future__ import annotations

import dis
import importlib
import inspect
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# code under these directories is a library's (the standard library, site-packages): not read,
_LIBRARY_DIRS = tuple(dict.fromkeys(str(Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib",
                                                                     "platlib")
                                    if (p := sysconfig.get_paths().get(key))))
# and the harness's own packages: what a job calls of them (the timer log's clock, for its record
# of a firing) is the harness's doing, never a value of the job's output
_HARNESS_DIRS = tuple(str(Path(__file__).resolve().parents[2] / package) + "/"
                      for package in ("workloads", "harness", "faults"))
_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST", "LOAD_CLASSDEREF", "LOAD_FAST_CHECK"}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}
_STORES = {"STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"}
_CALLS = {"CALL", "PRECALL", "CALL_FUNCTION", "CALL_METHOD"}


def _targets() -> list[tuple[Any, str, int | None]]:
    """(object, its name as users write it, the most arguments a call may have and still read
    the clock or the entropy: None for any number)."""
    import datetime
    import os
    import random
    import time
    import uuid

    out: list[tuple[Any, str, int | None]] = [
        (time.time, "time.time", None), (time.time_ns, "time.time_ns", None),
        (time.monotonic, "time.monotonic", None), (time.monotonic_ns, "time.monotonic_ns", None),
        (time.perf_counter, "time.perf_counter", None), (time.perf_counter_ns, "time.perf_counter_ns", None),
        (time.process_time, "time.process_time", None), (time.localtime, "time.localtime", 0),
        (time.gmtime, "time.gmtime", 0), (time.ctime, "time.ctime", 0), (time.asctime, "time.asctime", 0),
        (time.strftime, "time.strftime", 1),
        (datetime.datetime.now, "datetime.datetime.now", None),
        (datetime.datetime.utcnow, "datetime.datetime.utcnow", None),
        (datetime.datetime.today, "datetime.datetime.today", None),
        (datetime.date.today, "datetime.date.today", None),
        (uuid.uuid1, "uuid.uuid1", None), (uuid.uuid4, "uuid.uuid4", None),
        (os.urandom, "os.urandom", None), (random.Random, "random.Random", 0),
        (random.SystemRandom, "random.SystemRandom", None)]
    if hasattr(os, "getrandom"):
        out.append((os.getrandom, "os.getrandom", None))
    pandas = sys.modules.get("pandas")
    if pandas is not None:
        out += [(pandas.Timestamp.now, "pandas.Timestamp.now", None),
                (pandas.Timestamp.utcnow, "pandas.Timestamp.utcnow", None),
                (pandas.Timestamp.today, "pandas.Timestamp.today", None)]
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        out += [(numpy_random.default_rng, "numpy.random.default_rng", 0),
                (numpy_random.RandomState, "numpy.random.RandomState", 0)]
    return out


def reads(fn: Any) -> list[str]:
    """What `fn` (a function, a bound method, a class or an object whose class the user wrote)
    and the user's code it reaches read of the clock, uuids, random numbers or the OS's
    entropy, each as "calls NAME()" with the path of functions that leads to it."""
    found: list[str] = []
    reader = _Reader(_targets())
    for path, code, scope in reader.codes(fn):
        for name in reader.calls(code, scope):
            where = " -> ".join(path)
            said = name if "(" in name else f"{name}()"
            found.append(f"{where}() calls {said}" if where else f"calls {said}")
    return list(dict.fromkeys(found))


class _Scope:
    """Where a code object's names resolve: its function's globals and closure, and the
    modules its own `import` statements bound."""

    def __init__(self, fn: types.FunctionType) -> None:
        self.globals = fn.__globals__
        self.cells: dict[str, Any] = {}
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                self.cells[name] = cell.cell_contents
            except ValueError:   # an empty cell: a name not bound yet
                pass
        self.imported: dict[str, Any] = {}

    def lookup(self, op: str, name: str) -> tuple[bool, Any]:
        if name in self.imported:
            return True, self.imported[name]
        if op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and name in self.cells:
            return True, self.cells[name]
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            if name in self.globals:
                return True, self.globals[name]
            builtins = self.globals.get("__builtins__")
            space = builtins if isinstance(builtins, dict) else vars(builtins) if builtins else {}
            if name in space:
                return True, space[name]
        return False, None


class _Reader:
    def __init__(self, targets: list[tuple[Any, str, int | None]]) -> None:
        self.targets = targets
        self.seen: set[int] = set()

    # -- which code is the user's --------------------------------------------------------
    def codes(self, obj: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], types.CodeType,
                                                                            _Scope]]:
        """Every code object of the user's reachable from `obj`, with the call path to it."""
        if id(obj) in self.seen or isinstance(obj, _PLAIN):
            return
        self.seen.add(id(obj))
        if isinstance(obj, types.MethodType):
            yield from self.codes(obj.__func__, path)
            yield from self.codes(obj.__self__, path)
        elif isinstance(obj, types.FunctionType):
            if not _users(obj.__code__.co_filename):
                return
            scope = _Scope(obj)
            here = (*path, obj.__qualname__)
            for code in _nested(obj.__code__):
                yield here, code, scope
            for value in self.reached(obj.__code__, scope):
                yield from self.codes(value, here)
        elif isinstance(obj, staticmethod | classmethod):
            yield from self.codes(obj.__func__, path)
        elif isinstance(obj, type):
            if _users_module(obj.__module__):
                for value in list(vars(obj).values()):
                    yield from self.codes(value, path)
        elif _users_module(getattr(type(obj), "__module__", "")):
            yield from self.codes(type(obj), path)
            for value in list(getattr(obj, "__dict__", {}).values()):
                yield from self.codes(value, path)
        else:   # a library's object (pyspark's wrapper of a processor): the user's things it holds
            for value in list(getattr(obj, "__dict__", {}).values()):
                if _users_thing(value):
                    yield from self.codes(value, path)

    def reached(self, code: types.CodeType, scope: _Scope) -> Iterator[Any]:
        """The user's functions, classes and objects `code` names (to read them too)."""
        for chain in _chains(code, scope):
            for _, value, _ in chain:
                if _users_thing(value):
                    yield value

    # -- what a code object calls ---------------------------------------------------------
    def calls(self, code: types.CodeType, scope: _Scope) -> list[str]:
        out = []
        for chain in _chains(code, scope):
            written, value, argc = chain[-1]
            name = self.forbidden(value, argc)
            if name:
                out.append(written if written == name else f"{written}() (that is {name})")
        return out

    def forbidden(self, value: Any, argc: int | None) -> str | None:
        for target, name, most in self.targets:
            if _same(value, target) and (most is None or (argc is not None and argc <= most)):
                return name
        owner = getattr(value, "__self__", None)
        if owner is not None and not isinstance(owner, type | types.ModuleType):
            kind = _generator(owner)
            if kind:   # a method of a shared generator: random.random is random._inst.random
                return f"{kind}.{getattr(value, '__name__', '?')}"
        module = getattr(value, "__module__", None) or ""
        if module == "secrets" or module.startswith("secrets."):
            return f"secrets.{getattr(value, '__name__', '?')}"
        return None


def _chains(code: types.CodeType, scope: _Scope) -> Iterator[list[tuple[str, Any, int | None]]]:
    """Each name `code` loads with the attributes read after it, resolved: a list of (dotted
    name, object, the argument count when the last is called at once, else None). Imports
    inside the function bind names in `scope` as they go."""
    ins = list(dis.get_instructions(code))
    pending: dict[str, Any] = {}
    for i, op in enumerate(ins):
        if op.opname == "IMPORT_NAME":
            fromlist = ins[i - 1].argval if i and ins[i - 1].opname == "LOAD_CONST" else None
            pending = {"module": op.argval, "fromlist": fromlist, "value": None}
            continue
        if op.opname == "IMPORT_FROM" and pending:
            base = pending["module"]
            pending["value"] = (_module(base) if pending["fromlist"] is None
                                else _attribute(_module(base), op.argval, f"{base}.{op.argval}"))
            continue
        if op.opname in _STORES and pending:
            value = pending["value"]
            if value is None and pending["fromlist"] is None:
                value = _module(pending["module"].split(".")[0])
            if value is not None:
                scope.imported[op.argval] = value
            pending["value"] = None
            if pending["fromlist"] is None:
                pending = {}
            continue
        if op.opname not in ("SWAP", "POP_TOP"):   # the import statement ended
            pending = {}
        if op.opname not in _LOADS or not isinstance(op.argval, str):
            continue
        found, value = scope.lookup(op.opname, op.argval)
        if not found:
            continue
        name = op.argval
        chain: list[tuple[str, Any, int | None]] = [(name, value, None)]
        j = i + 1
        while j < len(ins) and ins[j].opname in _ATTRS:
            name = f"{name}.{ins[j].argval}"
            value = _static_attribute(value, ins[j].argval)
            if value is _MISSING:
                break
            chain.append((name, value, None))
            j += 1
        if value is not _MISSING:
            last = chain[-1]
            chain[-1] = (last[0], last[1], _argc(ins, j))
        yield chain


_MISSING = object()


def _argc(ins: list[dis.Instruction], start: int) -> int | None:
    """The number of arguments the call of what was loaded just before `ins[start]` passes,
    or None when the value is not called there (passed along, or beyond a jump)."""
    depth = 0
    for op in ins[start:start + 64]:
        if op.opname in _CALLS:
            if depth == op.arg:
                return op.arg
        elif op.opname == "KW_NAMES":
            continue
        elif op.opcode in dis.hasjrel or op.opcode in dis.hasjabs or op.opname.startswith("RETURN"):
            return None
        try:
            depth += dis.stack_effect(op.opcode, op.arg, jump=False) if op.opcode >= dis.HAVE_ARGUMENT \
                else dis.stack_effect(op.opcode)
        except ValueError:
            return None
        if depth < 0:
            return None
    return None


def _static_attribute(value: Any, attr: str) -> Any:
    """`value.attr` without running the user's code: a module's or a class's attribute as
    Python gives it (a classmethod bound), an object's through its class's dict."""
    try:
        if isinstance(value, types.ModuleType | type) or _generator(value):
            return getattr(value, attr)
        found = inspect.getattr_static(value, attr)
        if isinstance(found, types.FunctionType):
            return types.MethodType(found, value)
        return found
    except Exception:   # noqa: BLE001 - an attribute that is not there is no call of ours
        return _MISSING


def _generator(obj: Any) -> str | None:
    """"random" or "numpy.random" when `obj` is a random generator object (whose methods
    draw from state a second run does not share)."""
    import random

    if isinstance(obj, random.Random):
        return "random"
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None and isinstance(obj, numpy_random.RandomState | numpy_random.Generator):
        return "numpy.random"
    return None


def _same(value: Any, target: Any) -> bool:
    if value is target:
        return True
    try:   # a classmethod (datetime.datetime.now) is a new bound object at each access
        return bool(getattr(value, "__self__", None) is getattr(target, "__self__", object())
                    and getattr(value, "__name__", None) == getattr(target, "__name__", ""))
    except Exception:   # noqa: BLE001
        return False


def _module(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except Exception:   # noqa: BLE001 - a module that does not import is no clock of ours
        return None


def _attribute(module: Any, attr: str, dotted: str) -> Any:
    if module is not None and hasattr(module, attr):
        return getattr(module, attr)
    return _module(dotted)


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and every code object defined in it (lambdas, inner functions, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)


def _users(filename: str) -> bool:
    """Whether code from `filename` is the user's (not the standard library's or a package's)."""
    if not filename or filename.startswith("<frozen"):
        return False
    try:
        path = str(Path(filename).resolve())
    except OSError:
        return True
    return not path.startswith(_LIBRARY_DIRS) and not path.startswith(_HARNESS_DIRS)


def _users_module(module: str) -> bool:
    found = sys.modules.get(module or "")
    file = getattr(found, "__file__", None)
    return isinstance(file, str) and _users(file)


_PLAIN = (int, float, str, bytes, bool, type(None), types.ModuleType, types.BuiltinFunctionType)


def _users_thing(value: Any) -> bool:
    """A function, class or object the user wrote (their code is read too)."""
    if isinstance(value, _PLAIN):
        return False
    if isinstance(value, types.MethodType):
        value = value.__func__
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if isinstance(value, types.FunctionType):
        return _users(value.__code__.co_filename)
    if isinstance(value, type):
        return _users_module(value.__module__)
    return _users_module(getattr(type(value), "__module__", ""))


def unpickled(command: bytes) -> Callable | None:
    """The Python function of a PythonUDF's pickled command (`(func, returnType)` or `func`),
    or None when it cannot be read here (a broadcast command, an unpicklable one)."""
    import pickle

    try:
        obj = pickle.loads(command)   # noqa: S301 - the user's own job, pickled by this process
    except Exception:   # noqa: BLE001
        return None
    if isinstance(obj, tuple) and obj:
        obj = obj[0]
    return obj if callable(obj) else None
