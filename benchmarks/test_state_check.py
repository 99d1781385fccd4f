"""The state as evidence, end to end (issue 49, part 1): the planted state loss is caught by
state-diverged with the right operator, key and batch, and its correct twin gives no finding.

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster. Both runs
are tests/scenarios/state_rollback*.toml: a windowed count on the HDFS-backed store, the driver
killed 6 s after the warm-up and started again 1 s later; the plant puts one partition's newest
state version back to the previous version's content meanwhile (tests/scenarios/state_rollback.py),
the twin touches nothing. Full bench only (tox -e bench): both took 797 s under flock on a
machine running three other harness runs (new drivers took 60-75 s to start).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

_run = run_scenario   # tests/scenarios/<name>.toml, run into tmp_path/<name>


def _touched(case_dir: Path, topic: str, batch: int) -> set[tuple[str, int]]:
    """(key, window start) of every event the committed batch `batch` read: the state the
    rolled-back delta held, ground truth and the checkpoint say which."""
    from harness.check import checkpoint
    from harness.check.batch_reads import assign_batches
    from workloads.generator import truth

    events = truth.read(case_dir / "truth", ["key", "event_time_ms", "partition", "offset"])
    batches = checkpoint.read_queries([case_dir / "checkpoint"], topic)
    read = events[assign_batches(events, batches).to_numpy() == batch]
    return {(str(k), int(t - t % 2000)) for k, t in zip(read["key"], read["event_time_ms"], strict=True)}


def _diverged_after_the_fault(tmp_path: Path, name: str):
    """A plant's run: (its directory, its case, the fault's record, the first batch read after
    the fault, the divergences found there); fails the test as "the plant did not bite" when the
    fault did not land, and when the state was not read after it or held no divergence there."""
    run_dir, summary, output = _run(tmp_path, name)
    (case,) = summary["cases"]
    (fault,) = case["faults"]
    if not fault.get("landed"):
        pytest.fail(f"the plant did not bite: {fault.get('detail')}")
    check = case.get("state_check") or {}
    after = [c for c in check.get("checked", []) if c["after"].startswith("after state-rollback")]
    assert after, f"the state was not read after the fault: {check}\n{output}"
    first = after[0]["batch"]
    diverged = pd.read_parquet(run_dir / "cases" / case["name"] / "state-check" / "diverged.parquet")
    at_first = diverged[diverged["batch"] == first]
    assert len(at_first), f"no divergence at batch {first}: {check}"
    _held_before_the_fault(case, first)
    return run_dir, case, fault, first, at_first


def _held_before_the_fault(case: dict, first: int) -> None:
    """The state the plant found: read from the copy made as it came due, before it acted, after
    an earlier batch than the first after it, it held what the model says (each store of it), and
    the finding's story says so: the divergence came with the fault, not before it."""
    before = [c for c in case["state_check"]["checked"] if c.get("before")]
    assert before, f"the state was not read before the fault: {case['state_check']}"
    assert all(c["batch"] < first and c["diverged"] == 0 for c in before), before
    assert any(c["keys"] > 0 for c in before), before
    (finding,) = [f for f in case["findings"] if f["class"] == "state-diverged"]
    said = "from the copy made as it came due, held what the oracle says"
    assert said in finding["story"], finding["story"]


def _the_twin_holds(tmp_path: Path, name: str) -> dict:
    """A twin's run: the state read before the fault (from the copy made as it came due), after
    the first batch after it and after the last, 0 diverged, no state-diverged finding, PASS; its case."""
    _, summary, output = _run(tmp_path, name)
    (case,) = summary["cases"]
    check = case.get("state_check") or {}
    assert check.get("diverged") == 0, f"{check}\n{output}"
    read = {c["after"].split(" at ")[0] for c in check["checked"]}
    assert read == {"before state-rollback", "after state-rollback", "final"}, check
    assert not [f for f in case.get("findings", []) if f["class"] == "state-diverged"]
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    return case


class TestStateRollback:
    def test_the_planted_state_loss_is_caught_at_the_first_batch_after_the_fault(self, tmp_path):
        """state_rollback.toml: the fault's record names the batch whose updates it threw away
        (batch N, version N + 1); the state check reads the state after the first batch the new
        driver committed and finds values held below what ground truth says, for keys batch N
        read and nothing else, on operator 0, at that batch; the case FAILs with state-diverged."""
        run_dir, case, fault, first, at_first = _diverged_after_the_fault(tmp_path, "state_rollback")
        assert set(at_first["operator"]) == {fault["operator"]} == {0}
        lost = _touched(run_dir / "cases" / case["name"], case["topic"], fault["batch"])
        keys = {(v["key"], v["window_start_ms"]) for v in map(json.loads, at_first["key_values"])}
        assert keys <= lost, f"divergent keys batch {fault['batch']} never read: {sorted(keys - lost)[:5]}"
        assert all(int(h) < int(e) for h, e in zip(at_first["held"], at_first["expected"], strict=True)
                   if h != "none" and e != "none"), at_first.to_string()
        (finding,) = [f for f in case["findings"] if f["class"] == "state-diverged"]
        assert finding["witness"][0]["batch"] == first and finding["witness"][0]["operator"] == 0
        assert "state-rollback" in finding["witness"][0]["fault"], finding["witness"][0]
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert "the state diverged" in case["verdict"]["detail"], case["verdict"]["detail"]

    def test_its_correct_twin_gives_no_finding(self, tmp_path):
        """state_rollback_twin.toml: the same kill and restart, no file touched: the state after
        the first batch after the fault and after the last is what ground truth says, and the
        case PASSes."""
        _the_twin_holds(tmp_path, "state_rollback_twin")


def _let_through(case_dir: Path, topic: str, batch: int) -> set[int]:
    """The event ids the committed batch `batch` read: those the rolled-back delta kept."""
    from harness.check import checkpoint
    from harness.check.batch_reads import assign_batches
    from workloads.generator import truth

    events = truth.read(case_dir / "truth", ["event_id", "event_time_ms", "partition", "offset"])
    batches = checkpoint.read_queries([case_dir / "checkpoint"], topic)
    return set(events.loc[assign_batches(events, batches).to_numpy() == batch, "event_id"].astype(int))


class TestStateRollbackOnDedup:
    """The same plant and twin on dropDuplicatesWithinWatermark's state
    (tests/scenarios/state_rollback_dedup*.toml): the model is the dedup oracle's own rules."""

    def test_the_planted_loss_of_kept_ids_is_caught(self, tmp_path):
        """The ids the rolled-back batch let through are missing from the state read after the
        first batch after the fault (held none, expected their expiry); nothing else diverges
        there; the case FAILs with state-diverged."""
        run_dir, case, fault, first, at_first = _diverged_after_the_fault(tmp_path, "state_rollback_dedup")
        lost = _let_through(run_dir / "cases" / case["name"], case["topic"], fault["batch"])
        ids = {int(json.loads(v)["event_id"]) for v in at_first["key_values"]}
        assert ids <= lost, f"divergent ids batch {fault['batch']} never read: {sorted(ids - lost)[:5]}"
        assert set(at_first["held"]) == {"none"}, at_first.to_string()
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert any(f["class"] == "state-diverged" for f in case["findings"]), case["findings"]

    def test_its_correct_twin_gives_no_finding(self, tmp_path):
        """The same kill and restart, no file touched: the dedup state after the first batch
        after the fault and after the last is what the oracle's rules say; PASS."""
        _the_twin_holds(tmp_path, "state_rollback_dedup_twin")


def _keys_read(case_dir: Path, topic: str, batch: int) -> set[str]:
    """The keys of the events the committed batch `batch` read: those whose sessions the
    rolled-back delta grew or opened."""
    from harness.check import checkpoint
    from harness.check.batch_reads import assign_batches
    from workloads.generator import truth

    events = truth.read(case_dir / "truth", ["key", "partition", "offset"])
    batches = checkpoint.read_queries([case_dir / "checkpoint"], topic)
    return set(events.loc[assign_batches(events, batches).to_numpy() == batch, "key"].astype(str))


class TestStateRollbackOnSessions:
    """The same plant and twin on a session_window aggregation's state
    (tests/scenarios/state_rollback_sessions*.toml): the model is the sessions oracle's own
    rules, batch by batch (harness/check/sessions.py, state_after)."""

    def test_the_planted_loss_of_session_updates_is_caught(self, tmp_path):
        """The sessions the rolled-back batch grew hold less than the model says after the first
        batch after the fault (or are missing, or split), only for keys that batch read; the case
        FAILs with state-diverged."""
        run_dir, case, fault, first, at_first = _diverged_after_the_fault(tmp_path, "state_rollback_sessions")
        assert set(at_first["operator"]) == {fault["operator"]} == {0}
        read = _keys_read(run_dir / "cases" / case["name"], case["topic"], fault["batch"])
        keys = {json.loads(v)["key"] for v in at_first["key_values"]}
        assert keys <= read, f"divergent keys batch {fault['batch']} never read: {sorted(keys - read)[:5]}"
        counts = at_first[at_first["column"] == "count"]
        assert all(int(h) < int(e) for h, e in zip(counts["held"], counts["expected"], strict=True)), \
            at_first.to_string()
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert any(f["class"] == "state-diverged" for f in case["findings"]), case["findings"]

    def test_its_correct_twin_gives_no_finding(self, tmp_path):
        """The same kill and restart, no file touched: the sessions held after the first batch
        after the fault and after the last are the model's; PASS."""
        _the_twin_holds(tmp_path, "state_rollback_sessions_twin")


def _users_read(case_dir: Path, topic: str, batch: int, types: tuple[str, ...] = ("login-failed",),
                sources: int = 1) -> set[int]:
    """The users whose events of `types` the committed batch `batch` read (through any of the
    query's `sources`): for failed_logins, those whose list, map and value state and timers the
    rolled-back snapshot lost; for the join, those whose buffered rows it lost."""
    from harness.check import checkpoint
    from harness.check.batch_reads import assign_batches
    from workloads.generator import truth

    events = truth.read(case_dir / "truth", ["user", "event_type", "partition", "offset", "control"])
    events = events[events["event_type"].isin(types).to_numpy() & ~events["control"].to_numpy(bool)]
    batches = checkpoint.read_queries([case_dir / "checkpoint"], topic)
    users: set[int] = set()
    for source in range(sources):
        read = assign_batches(events, checkpoint.for_source(batches, source)).to_numpy() == batch
        users |= {int(u) for u in events.loc[read, "user"]}
    return users


class TestStateRollbackOnTransformWithState:
    """The same plant and twin on failed_logins' transformWithState state, on RocksDB
    (tests/scenarios/state_rollback_logins*.toml: the plant puts back a version's snapshot zip):
    the model is harness/check/logins.py's `state_after`, each state variable and the timers."""

    def test_the_planted_loss_of_failures_and_timers_is_caught(self, tmp_path):
        """After the first batch after the fault, the failures and timers the rolled-back batch
        wrote are missing (held none), only for users that batch read; the state variables are
        named; the case FAILs with state-diverged."""
        from harness.check.state_check import LOGINS_VARS

        run_dir, case, fault, first, at_first = _diverged_after_the_fault(tmp_path, "state_rollback_logins")
        assert fault.get("file") == "zip", fault
        assert set(at_first["operator"]) == {0} and set(at_first["store"]) <= set(LOGINS_VARS), at_first
        read = _users_read(run_dir / "cases" / case["name"], case["topic"], fault["batch"])
        users = {int(json.loads(v)["user_id"]) for v in at_first["key_values"]}
        assert users <= read, f"divergent users batch {fault['batch']} never read: {sorted(users - read)[:5]}"
        assert "none" in set(at_first["held"]), at_first.to_string()
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert any(f["class"] == "state-diverged" for f in case["findings"]), case["findings"]

    def test_its_correct_twin_gives_no_finding(self, tmp_path):
        """The same kill and restart, no file touched: every state variable and the timers after
        the first batch after the fault and after the last are the model's; PASS."""
        case = _the_twin_holds(tmp_path, "state_rollback_logins_twin")
        stores = {c.get("store") for c in case["state_check"]["checked"]}
        assert stores == {"pending", "seen", "raised", "registered-timers"}, case["state_check"]


class TestStateRollbackOnJoin:
    """The same plant and twin on order_payment_join's stream-stream join state
    (tests/scenarios/state_rollback_join*.toml: the plant puts back every store of one partition
    together): the model is harness/check/join.py's `state_after`, each side's buffered rows
    with `matched` and its rows per join key."""

    def test_the_planted_loss_of_buffered_rows_is_caught(self, tmp_path):
        """After the first batch after the fault, rows the rolled-back batch buffered are missing
        (held none), only for users that batch read, in the join's stores; the case FAILs with
        state-diverged."""
        run_dir, case, fault, first, at_first = _diverged_after_the_fault(tmp_path, "state_rollback_join")
        assert set(at_first["operator"]) == {0}, at_first
        assert set(at_first["store"]) <= {f"{side}-{store}" for side in ("left", "right")
                                          for store in ("keyWithIndexToValue", "keyToNumValues")}, at_first
        read = _users_read(run_dir / "cases" / case["name"], case["topic"], fault["batch"],
                           ("order", "payment"), sources=2)
        users = {int(json.loads(v)["user_id"]) for v in at_first["key_values"]}
        assert users <= read, f"divergent users batch {fault['batch']} never read: {sorted(users - read)[:5]}"
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert any(f["class"] == "state-diverged" for f in case["findings"]), case["findings"]

    def test_its_correct_twin_gives_no_finding(self, tmp_path):
        """The same kill and restart, no file touched: both sides' rows and counts after the
        first batch after the fault and after the last are the model's; PASS."""
        case = _the_twin_holds(tmp_path, "state_rollback_join_twin")
        stores = {c.get("store") for c in case["state_check"]["checked"]}
        assert stores == {f"{side}-{store}" for side in ("left", "right")
                          for store in ("keyWithIndexToValue", "keyToNumValues")}, case["state_check"]


def _downtime_outlived_the_ttl(run_dir: Path, case: dict, ttl_ms: int) -> None:
    """The kill landed and, between two committed batches, the batches' own timestamps (the
    offset log's batchTimestampMs, what the TTL is measured by) moved on by more than the TTL:
    the precondition for every count to expire across the downtime."""
    from harness.check import checkpoint

    (fault,) = case["faults"]
    if not fault.get("landed"):
        pytest.fail(f"the kill did not land: {fault.get('detail')}")
    read = checkpoint.read_queries([run_dir / "cases" / case["name"] / "checkpoint"], case["topic"])
    batches = [b for b in read if b.committed]
    steps = [b.timestamp_ms - a.timestamp_ms for a, b in zip(batches, batches[1:], strict=False)]
    if not steps or max(steps) <= ttl_ms:
        pytest.fail(f"the plant did not bite: no step between batches outlived the {ttl_ms} ms TTL "
                    f"(the longest: {max(steps, default=0)} ms)")


class TestStateTTL:
    """streak_count's count, a value state with a TTL, across a downtime longer than the TTL
    (tests/scenarios/ttl_early*.toml): the twin's counts expire when the oracle says, and the
    plant's (a quarter of the TTL) earlier: expired-early."""

    def test_a_ttl_shorter_than_the_job_s_is_expired_early(self, tmp_path):
        """The plant's counts of users quiet for more than a quarter of the TTL are gone where the
        model keeps them: expired-early names them, with how early; the output's numbering
        starts again too early (lost and unexpected rows); FAIL."""
        run_dir, summary, output = _run(tmp_path, "ttl_early")
        (case,) = summary["cases"]
        _downtime_outlived_the_ttl(run_dir, case, 6000)
        check = case.get("state_check") or {}
        assert check.get("expired_early", 0) > 0, f"{check}\n{output}"
        (finding,) = [f for f in case["findings"] if f["class"] == "expired-early"]
        assert all(0 < w["early_s"] <= 6.0 for w in finding["witness"]), finding["witness"]
        assert case["events"]["lost"] > 0 and case["events"]["unexpected"] > 0, case["events"]
        assert case["verdict"]["status"] == "FAIL", case["verdict"]

    def test_its_twin_expires_what_it_should_and_nothing_else(self, tmp_path):
        """The job's own TTL: every count after the first batch after the restart and after the
        last is the model's, with its expiry; the output's numbering, which starts again exactly
        where a count expired, is right row by row; PASS."""
        run_dir, summary, output = _run(tmp_path, "ttl_early_twin")
        (case,) = summary["cases"]
        _downtime_outlived_the_ttl(run_dir, case, 6000)
        check = case.get("state_check") or {}
        assert check.get("diverged") == 0 and check.get("expired_early") == 0, f"{check}\n{output}"
        read = {c["after"].split(" at ")[0] for c in check["checked"]}
        assert read == {"before kill-driver", "after kill-driver", "final"}, check
        assert not [f for f in case.get("findings", []) if f["class"] in ("expired-early", "state-diverged")]
        assert case["verdict"]["status"] == "PASS", case["verdict"]
