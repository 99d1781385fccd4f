"""The errors of everything that runs outside the harness. Imports nothing of ours.

A `Problem` names what is wrong and what to do about it; whoever runs a workload (the
harness, `python -m workloads`, Locust) maps it to an exit code (2: bad input or a
broken environment).
"""


class Problem(Exception):
    """Bad input or a broken environment: `problem` says what, `fix` says what to do."""

    exit_code = 2

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.problem}\n  fix: {self.fix}" if self.fix else self.problem


class SpecError(Problem):
    """A workload or scenario key that does not validate (the message names its dotted path)."""


class Interrupted(Exception):
    """The run was interrupted by a signal (SIGINT or SIGTERM); clean-up is under way."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
