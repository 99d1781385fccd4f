"""The scenario format: a TOML file validated into frozen dataclasses before anything starts.

  load.py       reading and validating, with the [quick] overlay
  model.py      Scenario, Services, Pipeline, Case
  scenarios/    the shipped scenarios (smoke.toml, bench.toml)
"""

from pathlib import Path

from harness.scenario.load import load
from harness.scenario.model import (
           GUARANTEES,
           Case,
           KafkaConfig,
           Pipeline,
           PostgresConfig,
           Scenario,
           Services,
           SparkConfig,
)
from workloads.generator.spec import MAX_RATE_EPS, WorkloadSpec
from workloads.validate import parse_duration_ms

SCENARIOS_DIR = Path(__file__).parent / "scenarios"

__all__ = ["GUARANTEES", "MAX_RATE_EPS", "SCENARIOS_DIR", "Case", "KafkaConfig", "Pipeline", "PostgresConfig",
           "Scenario", "Services", "SparkConfig", "WorkloadSpec", "load", "parse_duration_ms"]
