"""The user's own code, named in a scenario as "module:name": imported and checked.

The scenario file's directory is put on the import path (of the harness by the scenario
loader, of the driver and its Python workers through PYTHONPATH), so a scenario and the
module beside it travel together. Every mistake is a SpecError that names the scenario
key, what is wrong and the fix; nothing has started when it is raised.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import inspect
import site
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workloads.errors import SpecError

SINK_METHODS = ("setup", "write", "read", "close")


_ADDED: list[str] = []   # the directories add_import_paths put on sys.path: the user's code


def add_import_paths(paths: Iterable[str]) -> None:
    """Put `paths` first on sys.path, in their order (once each: one already on it moves to the
    front, so that the scenario loaded last finds its own modules first)."""
    for path in reversed(list(paths)):
        if not path:
            continue
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)
        if path not in _ADDED:
            _ADDED.append(path)


def load(target: str, field: str, where: Path | None = None) -> Any:
    """The object `target` ("module:name") names; `field` is its scenario key, `where` the
    directory the module should be in (named in the fix)."""
    module_name, sep, name = str(target).partition(":")
    if not sep or not module_name or not name or not name.isidentifier():
        raise SpecError(f"{field} = {target!r} is not of the form \"module:name\"",
                        f'write it as {field} = "my_module:my_function", module my_module.py '
                        "beside the scenario file")
    _forget_shadowed(module_name)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            place = f"in {where}" if where else "on the import path"
            raise SpecError(f"{field} = {target!r}: no module named {module_name!r} {place}",
                            f"put {module_name.replace('.', '/')}.py beside the scenario file "
                            "(its directory is on the import path)") from None
        raise _import_failed(field, target, exc) from None
    except Exception as exc:  # noqa: BLE001 - any error at import time is the user's module's
        raise _import_failed(field, target, exc) from None
    try:
        return getattr(module, name)
    except AttributeError:
        raise SpecError(f"{field} = {target!r}: module {module_name!r} ({module.__file__}) has no {name!r}",
                        f"define {name} in it, or name one it has") from None


def _forget_shadowed(module_name: str) -> None:
    """Forget a module of the user's that an earlier scenario imported from its own directory
    when the import path now finds one of that name elsewhere: two scenarios loaded in one
    process (a pytest suite running examples/balances and examples/dedup, each with its job.py)
    must each get their own, not the first one's (the second was refused: "module 'job'
    (examples/balances/job.py) has no 'transform'"). Only modules loaded from the directories
    add_import_paths added are forgotten: the harness's own and installed ones never are."""
    top = module_name.partition(".")[0]
    cached = sys.modules.get(top)
    origin = getattr(cached, "__file__", None)
    if not origin or not any(_inside(origin, d) for d in _ADDED):
        return
    spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    if spec is None or spec.origin is None or Path(spec.origin).resolve() == Path(origin).resolve():
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


def forget_added() -> list[str]:
    """Forget every module loaded from a directory add_import_paths added (the user's code), so
    that the next import runs it again and its module-level values start afresh, as in a new
    process: the batch oracle's server runs many cases' jobs in one (oracle_server.py). The
    harness's own and installed modules are never forgotten. Returns the names forgotten."""
    added = [Path(d).resolve() for d in _ADDED]
    installed = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, *site.getsitepackages()}]
    gone = []
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if not origin or name.partition(".")[0] in _OURS:
            continue
        where = Path(origin).resolve()
        users = any(where.is_relative_to(d) for d in added)
        if users and not any(where.is_relative_to(p) for p in installed):
            del sys.modules[name]
            gone.append(name)
    return gone


_OURS = ("harness", "workloads", "faults")   # an import path of the checkout's root holds them too


def _inside(path: str, directory: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(directory).resolve())


def _import_failed(field: str, target: str, exc: BaseException) -> SpecError:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return SpecError(f"{field} = {target!r}: importing the module failed: {last}",
                     "fix the module so that `python -c 'import <module>'` works in the scenario's directory")


def function(target: str, field: str, params: tuple[str, ...], where: Path | None = None):
    """The callable `target` names, which must accept exactly `params` positionally."""
    fn = load(target, field, where)
    shown = f"{target.partition(':')[2]}({', '.join(params)})"
    if not callable(fn):
        raise SpecError(f"{field} = {target!r} is a {type(fn).__name__}, not a function",
                        f"name a function {shown}")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError as exc:
        raise SpecError(f"{field} = {target!r} cannot be called as {shown}: {exc}",
                        f"define it as def {shown}: ...") from None
    except ValueError:   # no signature to inspect (a builtin): accept it
        pass
    return fn


def sink_class(target: str, field: str, where: Path | None = None) -> type:
    """The sink class `target` names: built as Class(ctx), with setup, write, read, close."""
    cls = load(target, field, where)
    if not inspect.isclass(cls):
        raise SpecError(f"{field} = {target!r} is a {type(cls).__name__}, not a class",
                        "name a class built as Class(ctx) with setup(), write(batch_df, batch_id), "
                        "read() and close()")
    missing = [m for m in SINK_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise SpecError(f"{field} = {target!r}: class {cls.__name__} has no {', '.join(missing)}",
                        "a sink needs setup(), write(batch_df, batch_id), read() and close()")
    checks = {"__init__": ("ctx",), "write": ("batch_df", "batch_id"), "read": (), "setup": (), "close": ()}
    for method, args in checks.items():
        try:
            inspect.signature(getattr(cls, method)).bind(object(), *args)
        except TypeError as exc:
            raise SpecError(f"{field} = {target!r}: {cls.__name__}.{method} cannot be called as "
                            f"{method}({', '.join(('self', *args))}): {exc}",
                            f"define def {method}({', '.join(('self', *args))}): ...") from None
        except ValueError:
            pass
    return cls
