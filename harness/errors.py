"""Exceptions of the harness. Every error with a fix derives from workloads' `Problem`, so
one `except Problem` maps all of them, the generator's included, to exit code 2."""

from workloads.errors import Interrupted, Problem, SpecError

__all__ = ["EnvironmentProblem", "HarnessError", "RunAborted", "ScenarioError", "ServiceError"]

# one validator reads the workload's keys and the scenario's, so they share one error type
ScenarioError = SpecError
# SIGINT or SIGTERM while a run is under way: services are being stopped
RunAborted = Interrupted


class HarnessError(Problem):
    """Bad input or a broken environment found by the harness: the CLI exits 2 and prints it."""


class EnvironmentProblem(HarnessError):
    """A missing tool (java, mvn, postgres) or an artifact that is not fetched."""


class ServiceError(HarnessError):
    """A service that did not start, did not become ready, or died."""
