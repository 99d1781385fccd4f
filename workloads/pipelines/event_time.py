"""Whether a job's watermark is on the replay's event-time column, read from its analysed plan.

    watermark_problems(df, "ts") -> ["the watermark is on `sent_at`, which the job computes from
                                       Kafka's `timestamp` column ..."]   (empty: it is)

The harness decides which records came late by comparing each record's event time, the
replay file's `event_time` column, with the watermark Spark used for its batch
(harness/check/batch_oracle/job_input.py, batch_reads.late_watermarks). That is Spark's own
decision only when the watermark's column holds that same event time. A column the job derives from it alone
(`at = timestamp_millis(ts)`, `to_timestamp(ts)`) holds it; a watermark on Kafka's
`timestamp` (when the harness sent the record) or on another field of the record does not,
and the oracle would then leave out, or compare, the wrong records.

The watermark's column is traced down the plan to what it is computed from: a field of the
records as the job's `from_json` (or the harness's, for `build = ...`) parsed it, a field read
with `get_json_object`, or one of Kafka's own columns. Only a column computed from fields and
columns the trace can name is judged; a watermark computed in a way it cannot follow (the
value split as text, a column of a static table) is left to the job.
"""

from __future__ import annotations

from workloads.pipelines import plan_tree

_KAFKA_SAID = {"timestamp": "Kafka's `timestamp` column (when the harness sent the record, not its "
                             "event time)"}


def watermark_problems(df, event_time: str) -> list[str]:
    """Why `df`'s watermarks (each EventTimeWatermark of its analysed plan) are not on the
    event-time column `event_time`: one sentence per watermark that is not."""
    analyzed = df._jdf.queryExecution().analyzed()
    nodes = plan_tree.walk(analyzed)
    defs, sources = _definitions(nodes)
    problems = []
    for node in nodes:
        if str(node.nodeName()) != "EventTimeWatermark":
            continue
        column = node.eventTime()
        reads = _reads(column, defs, sources)
        if None in reads or ("column", "value") in reads:
            continue   # computed in a way the trace cannot name: not judged
        if reads == {("field", event_time.lower())}:
            continue
        said = ", ".join(_said(r) for r in sorted(reads)) or "no field of the records (a constant)"
        problems.append(f"the watermark is on `{column.name()}`, which the job computes from {said}, "
                        f"not from the replay's event-time column `{event_time}` alone")
    return problems


def _said(read: tuple[str, str]) -> str:
    kind, name = read
    if kind == "field":
        return f"the records' field `{name}`"
    return _KAFKA_SAID.get(name, f"Kafka's `{name}` column")


def _definitions(nodes: list) -> tuple[dict[int, list], dict[int, str]]:
    """exprId -> the expressions that define it (an alias's child; a union's inputs), and
    exprId -> the column name of each attribute a streaming source gives."""
    defs: dict[int, list] = {}
    sources: dict[int, str] = {}
    for node in nodes:
        children = node.children()
        if children.size() == 0:
            if node.isStreaming():
                output = node.output()
                for i in range(output.size()):
                    sources[_id(output.apply(i))] = str(output.apply(i).name())
            continue
        exprs = node.expressions()
        for i in range(exprs.size()):
            e = exprs.apply(i)
            if str(e.getClass().getSimpleName()) == "Alias":
                defs.setdefault(_id(e), []).append(e.child())
        if str(node.nodeName()) == "Union":
            output = node.output()
            for c in range(children.size()):
                theirs = children.apply(c).output()
                for i in range(min(output.size(), theirs.size())):
                    if _id(theirs.apply(i)) != _id(output.apply(i)):
                        defs.setdefault(_id(output.apply(i)), []).append(theirs.apply(i))
    return defs, sources


def _id(named) -> int:
    return int(named.exprId().id())


def _reads(expr, defs: dict[int, list], sources: dict[int, str]) -> set:
    """What `expr` is computed from: ("field", name) for a parsed field of the records,
    ("column", name) for a source column, None for what the trace cannot name."""
    out: set = set()
    stack, seen = [expr], set()
    while stack:
        e = stack.pop()
        cls = str(e.getClass().getSimpleName())
        if cls == "AttributeReference":
            key = _id(e)
            if key in seen:
                continue
            seen.add(key)
            if key in defs:
                stack.extend(defs[key])
            elif key in sources:
                out.add(("column", sources[key]))
            else:
                out.add(None)
            continue
        if cls == "GetStructField" and _parsed(e.child(), defs):
            out.add(("field", str(e.extractFieldName()).lower()))
            continue
        if cls == "GetJsonObject":
            path = e.right()
            if str(path.getClass().getSimpleName()) == "Literal" and str(path.toString()).startswith("$."):
                out.add(("field", str(path.toString())[2:].lower()))
                continue
        children = e.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return out


def _parsed(expr, defs: dict[int, list]) -> bool:
    """Whether `expr` is the records as from_json parsed them (through the aliases it went by)."""
    for _ in range(64):
        cls = str(expr.getClass().getSimpleName())
        if cls == "JsonToStructs":
            return True
        if cls != "AttributeReference" or len(defs.get(_id(expr), [])) != 1:
            return False
        expr = defs[_id(expr)][0]
    return False
