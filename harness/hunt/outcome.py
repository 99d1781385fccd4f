"""What a hunt's run counts for: only what landed (issue 43).

A run of a fault plan ends one of five ways:

  breaks      its output broke the declared guarantee (a violation: what the hunt is for),
              whether or not every fault landed
  holds       every fault landed, and the guarantee held
  refused     Spark refused to go on after a fault that landed (every one before it landed too):
              the query stopped loudly (kafka-retention under failOnDataLoss), which breaks nothing
              by itself (copies and wrong values it wrote before it stopped do), and the faults
              after it had no query to act on
  not-landed  a fault failed, was missed or was not seen, and nothing broke: the run tested
              nothing of the plan as drawn (its pairs with that fault are not covered)
  undecided   every fault landed and nothing broke, but the case's verdict could not say the
              guarantee held: UNKNOWN (a sink whose read() raised, an oracle that raised), or
              FAIL for something else than its output (a driver that died unasked, a drain
              that timed out)

The last two are runs that tested nothing: never a hold, and an undecided run covers none of
its pairs (harness/hunt/feedback.py `Cover.ran`, plan.py `coverage`), so they are tried again.
A hunt without a violation whose runs did not all test something exits 4 (UNKNOWN), as `run`
does for an undecided case.
"""

from __future__ import annotations

from harness.results.model import CaseResult, FaultRecord
from harness.results.verdict import FAIL, PASS, UNCHECKED, UNKNOWN, guarantee_holds

BREAKS, HOLDS, REFUSED, NOT_LANDED, UNDECIDED = "breaks", "holds", "refused", "not-landed", "undecided"
TESTED_NOTHING = (NOT_LANDED, UNDECIDED)
STATUS = {BREAKS: FAIL, HOLDS: PASS, REFUSED: PASS, NOT_LANDED: UNKNOWN, UNDECIDED: UNKNOWN}


def breaks(case: CaseResult) -> bool:
    """Whether the case's output breaks its declared guarantee (not: a fault that missed). When
    Spark refused to go on after a fault (kafka-retention under failOnDataLoss, a damaged
    checkpoint), the query stopped loudly: what it never read is not lost by the sink, so only
    copies, rows nothing sent explains and rows with wrong values break it. After a fault a job
    must survive (a machine's crash: the kind's `refusal_breaks`), the refusal itself breaks it:
    the job is down until someone repairs its checkpoint by hand. Rows with wrong values (a count
    that took an event twice) break any guarantee. An output that could not be checked (a sink
    whose read() raised, an oracle that raised: observed `unchecked`) breaks nothing that is
    known: the run is undecided, never a violation to shrink."""
    if case.verdict.observed == UNCHECKED:
        return False
    copies = int(case.events.get("duplicated") or 0) + int(case.events.get("unexpected") or 0)
    if refused(case):
        return copies > 0 or wrote_wrong_values(case) or refused_after_crash(case)
    unexpected = int(case.events.get("unexpected") or 0)
    return (not guarantee_holds(case.guarantee, case.verdict.observed) or unexpected > 0
            or wrote_wrong_values(case))


def wrote_wrong_values(case: CaseResult) -> bool:
    """Whether the sink holds rows with wrong values (an event's row with other values, a count
    that took an event twice): a refusal stops the query before what it never read, and no
    refusal explains a value the query wrote wrong."""
    return int(case.events.get("wrong") or 0) > 0 or any(f.cls == "wrong-value" for f in case.findings)


def refused(case: CaseResult) -> bool:
    """Whether Spark refused to go on after one of the case's faults."""
    return any(f.outcome == "refused" for f in case.faults)


def refused_after_crash(case: CaseResult) -> bool:
    """Whether Spark refused to go on after a fault a job must survive (`refusal_breaks`)."""
    from faults.registry import KINDS

    return any(f.outcome == "refused" and f.kind in KINDS and KINDS[f.kind].refusal_breaks
               for f in case.faults)


def fault_landed(f: FaultRecord) -> bool:
    """Whether the fault took effect where it aims: injected (not missed, not failed), seen,
    and landed (a record from before `landed` was kept: seen)."""
    return not f.missed and f.observed and f.landed is not False


def outcome(case: CaseResult) -> str:
    """How the run ended: BREAKS, HOLDS, REFUSED, NOT_LANDED or UNDECIDED (the module's text)."""
    if breaks(case):
        return BREAKS
    if not all(fault_landed(f) for f in case.faults[:stopped_at(case)]):
        return NOT_LANDED
    if refused(case):
        return REFUSED
    return HOLDS if case.verdict.status == PASS else UNDECIDED


def stopped_at(case: CaseResult) -> int:
    """How many of the case's faults (in the order of their `at`) came before Spark stopped the
    query for good, the refusing one included: those after it had no query to act on, and their
    not landing is the refusal's consequence, not the run's failure (all of them: none refused)."""
    return next((i + 1 for i, f in enumerate(case.faults) if f.outcome == "refused" and fault_landed(f)),
                len(case.faults))


def why_not_landed(case: CaseResult) -> str:
    """A sentence for each fault that did not land: what its record says."""
    return "; ".join(f"{f.kind} ({f.asked}): " + ("missed: " + f.missed if f.missed else
                                                 (f.landed_detail if f.observed and f.landed_detail
                                                  else f.detail))
                     for f in case.faults if not fault_landed(f))
