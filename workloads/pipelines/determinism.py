"""What in a job's analysed plan a second run would not compute alike, named as users wrote it
and where it is: the one check behind the refusal before start (job_check.py) and the
driver's (job.plan_facts, job.refuse).

    node_findings(node) -> ["rand() in column `r`", "the Python function tag() in column `t`:
                            tag() calls uuid.uuid4()", ...]

Three sources, none of them a list of function names:
  Spark's own flag   every expression whose `deterministic` is false (rand, uuid, shuffle,
                     randstr, uniform, monotonically_increasing_id, a UDF marked
                     asNondeterministic(), and whatever Spark adds next), named by the
                     innermost one (the alias around rand() is not the cause, rand() is);
  Spark's own clock  every expression Spark's ComputeCurrentTime rule replaces by the query's
                     start time (current_timestamp, now, current_date, localtimestamp,
                     current_time): Spark calls them deterministic, as they are within one
                     query, but the stream computes them per batch and a batch run once;
  Python bodies      the Python function of each UDF, pandas UDF, applyInPandasWithState or
                     transformWithState processor, read for the clock, uuids and random
                     numbers by what its names resolve to (python_reads.py).
A `Sample` operator (df.sample) keeps other rows in another run; it is named too.

Aliases, module-level values, lambdas and methods are all gone by the time the plan is
analysed: what is there is what runs. SQL text (expr, selectExpr, filter, where, sql) is in
the plan as the expressions it parsed to; no other text is read.
"""

from __future__ import annotations

from workloads.pipelines import plan_tree, python_reads

_CLOCK_RULE = "org.apache.spark.sql.catalyst.optimizer.ComputeCurrentTime"
# an operator's own randomness (not an expression's): which rows it keeps differs in another run
_RANDOM_OPERATORS = {"Sample": "sample()"}
# where an expression is, by its node, in the words of the DataFrame API
_PLACES = {"Filter": "a filter (filter/where)", "Aggregate": "an aggregation",
           "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
           "FlatMapGroupsInPandas": "applyInPandas", "FlatMapCoGroupsInPandas": "cogroup().applyInPandas",
           "MapInPandas": "mapInPandas", "MapInArrow": "mapInArrow",
           "TransformWithStateInPySpark": "transformWithState", "Generate": "a generator (explode, a UDTF)",
           "Join": "a join condition", "Sort": "a sort", "Window": "a window function"}


def node_findings(node) -> list[str]:
    """Why a batch run of the plan would not compute `node` (one analysed plan node, through
    py4j) alike: each cause as the user wrote it, with where it is."""
    found = []
    if str(node.nodeName()) in _RANDOM_OPERATORS:
        found.append(f"{_RANDOM_OPERATORS[str(node.nodeName())]} (the {node.nodeName()} operator keeps other "
                     "rows in another run)")
    exprs = node.expressions()
    clocked = _clock_replaced(node)
    for i in range(exprs.size()):
        top = exprs.apply(i)
        where = _where(node, top)
        causes = [*_nondeterministic(top), *_clock_reads(top, clocked[i] if clocked else None)]
        found += [f"{cause} {where}" for cause in causes]
        found += [f"the Python function {name}() {where}: {read}" for name, read in _python_reads(top)]
    return list(dict.fromkeys(found))


def _nondeterministic(expr) -> list[str]:
    """The innermost expressions of `expr` Spark flags non-deterministic."""
    out = []
    for e in plan_tree.walk(expr):
        if e.deterministic():
            continue
        children = e.children()
        if all(children.apply(i).deterministic() for i in range(children.size())):
            out.append(_called(e))
    return out


def _clock_replaced(node) -> list | None:
    """`node`'s expressions after Spark's ComputeCurrentTime rule (the clock read once, as
    literals), in the order of node.expressions(); None when the rule is not there."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:
        return None
    try:
        rule = jvm
        for part in _CLOCK_RULE.split("."):
            rule = getattr(rule, part)
        after = rule.apply(node).expressions()
    except Exception:   # noqa: BLE001 - a Spark without the rule: the flag still applies
        return None
    return [after.apply(i) for i in range(after.size())]


def _clock_reads(before, after) -> list[str]:
    """The expressions of `before` that the rule replaced by a literal in `after` (the trees
    are alike but for those)."""
    if after is None:
        return []
    out, stack = [], [(before, after)]
    while stack:
        b, a = stack.pop()
        if b.getClass().getSimpleName() != a.getClass().getSimpleName():
            if a.getClass().getSimpleName() == "Literal":
                out.append(_called(b))
            continue
        bc, ac = b.children(), a.children()
        if bc.size() == ac.size():
            stack.extend((bc.apply(i), ac.apply(i)) for i in range(bc.size()))
    return out


def _python_reads(expr) -> list[tuple[str, str]]:
    """(function name, what it reads) for each Python function in `expr` Spark calls
    deterministic (one marked asNondeterministic() is Spark's flag already)."""
    out = []
    for e in plan_tree.walk(expr):
        if not str(e.getClass().getSimpleName()).startswith("PythonUD") or not e.deterministic():
            continue
        try:
            fn = python_reads.unpickled(bytes(e.func().command().unsafeArray()))
        except Exception:   # noqa: BLE001 - a command kept elsewhere (broadcast): not readable here
            fn = None
        if fn is not None:
            out += [(str(e.name()), read) for read in python_reads.reads(fn)]
    return out




def _called(e) -> str:
    """An expression as the user calls it: rand(), uuid(), a UDF by its name."""
    cls = str(e.getClass().getSimpleName())
    if cls.startswith("PythonUD"):
        return f"the Python function {e.name()}() marked asNondeterministic()"
    if cls.startswith("ScalaUDF"):
        return f"the UDF {e.prettyName()} marked asNondeterministic()"
    return f"{str(e.prettyName()).lower()}()"


def _where(node, top) -> str:
    """Where `top`, one of `node`'s expressions, is: its output column when it names one."""
    if str(top.getClass().getSimpleName()) == "Alias":
        return f"in column `{top.name()}`"
    name = str(node.nodeName())
    return f"in {_PLACES.get(name, f'the plan operator {name}')}"
