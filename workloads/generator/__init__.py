"""The workload generator: shaped open-loop rates, out-of-order event time, skewed keys,
and ground truth of every event sent.

    from workloads import generator
    report = generator.generate(spec, "127.0.0.1:9092", truth_dir)

Modules, in the order data flows through them:
  spec        the [workload] table validated into a WorkloadSpec (workloads/validate.py reads TOML)
  shapes      rate shapes: tick() gives the target rate for now (Locust's LoadTestShape)
  keys        Zipf, uniform and hot-key choice;  delays: out-of-order event time
  plan        Planner: the schedule, block by block (intended send time, key, event time)
  encode      record values in the wire format (workloads/wire.py)
  anchors     which events carry a delivery report, and the offsets of the others
  producer    Sender: the paced open-loop send loop
  stages      Feeder and Drain threads around the sender
  truth       ground truth in Parquet;  histogram: the schedule slip
  run         generate(), generate_parallel(), create_topic(), send_control(), end_offsets()
  cli         python -m workloads generate;  locustfile: the same plan under Locust

The public names below load on first use, so validating a scenario does not import the
Kafka client.
"""

from __future__ import annotations

_PUBLIC = ("START_LEAD_MS", "create_topic", "end_offsets", "generate", "generate_parallel", "merge_reports",
           "send_control", "write_report")
__all__ = list(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        # by name, on first use (run imports the Kafka client)
        from workloads.generator import run

        return getattr(run, name)
    raise AttributeError(f"module 'workloads.generator' has no attribute {name!r}")
