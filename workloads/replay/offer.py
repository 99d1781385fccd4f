"""A workload's sending, whichever its kind: the generator's events or a replay's records.

    generate(spec, bootstrap_servers, truth_dir, **options) -> the report
    send_control(spec, bootstrap_servers, topic, partitions, first_id, event_time_ms) -> truth rows

The harness's stages call these, so that a `[workload] kind = "replay"` is sent by
workloads/replay/send.py (its records, its control records in their format) and every other
kind by the generator, with the same options and the same report.
"""

from __future__ import annotations

from pathlib import Path

from workloads.replay.spec import KIND


def generate(spec, bootstrap_servers: str, truth_dir: Path, **options) -> dict:
    """The generator's generate(), or the replay's: a replay's records keep the partitions their
    keys hash to, so `partitions_from` (a topic that grows) adds none of them to the new ones."""
    if getattr(spec, "kind", "") == KIND:
        from workloads.replay import send

        options.pop("partitions_from", None)
        options.pop("partitions_timeout_s", None)
        return send.replay(spec, bootstrap_servers, truth_dir, **options)
    from workloads import generator

    return generator.generate(spec, bootstrap_servers, truth_dir, **options)


def send_control(spec, bootstrap_servers: str, topic: str, partitions: int, first_id: int,
                 event_time_ms: int) -> list[dict]:
    """The harness's control events (warm-up, watermark flush) in the workload's format."""
    if getattr(spec, "kind", "") == KIND:
        from workloads.replay import send

        return send.send_control(spec, bootstrap_servers, topic, partitions, first_id, event_time_ms)
    from workloads import generator

    return generator.send_control(bootstrap_servers, topic, partitions, first_id, event_time_ms)
