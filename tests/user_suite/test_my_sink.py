"""A user's own test of their sink, as docs/pytest.md shows it: the harness's pytest plugin
runs the scenario beside this file against a real Kafka, Spark and PostgreSQL, and the test
asserts the guarantee and a latency bound on the typed result."""

from pathlib import Path

HERE = Path(__file__).parent


def test_my_sink_stays_exactly_once_when_a_batch_is_replayed(harness_run):
    result = harness_run(HERE / "my_scenario.toml", quick=True)
    case = result.case("my-sink")
    assert case.verdict.holds, case                  # on failure: the verdict and each finding's story
    assert case.events["duplicated"] == 0 and case.findings == []
    assert case.faults[0].landed, case.faults[0].landed_detail
