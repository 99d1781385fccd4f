"""Exceptions shared by every part of the harness. Imports nothing of ours."""


class HarnessError(Exception):
    """Bad input or a broken environment: the CLI exits 2 and prints this.

    The message names the problem; `fix` says what the user should do about it.
    """

    exit_code = 2

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.problem}\n  fix: {self.fix}" if self.fix else self.problem


class ScenarioError(HarnessError):
    """A scenario file that does not validate."""


class EnvironmentProblem(HarnessError):
    """A missing tool (java, mvn, postgres) or an artifact that is not fetched."""


class ServiceError(HarnessError):
    """A service that did not start, did not become ready, or died."""


class RunAborted(Exception):
    """The run was interrupted (SIGINT or SIGTERM); services are being stopped."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
