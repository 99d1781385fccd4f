"""System prerequisites: check java, mvn and the PostgreSQL server; install what is missing.

`python -m harness.sysdeps [--env NAME]` is the one set-up step for the system tools: tox
runs it before the test and bench envs, and `.ci/run` before tox. When all is there it
prints nothing and exits 0 without calling apt. When something is missing it installs it
with apt-get as root, and otherwise prints the one command to run and exits 2.
`HARNESS_SKIP_SYSDEPS=1` skips the check, for tools installed where it does not look.

Stdlib only and no imports from the project: it must run before anything is installed.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

JAVA_MIN = 17
EXIT_MISSING = 2
SKIP_VAR = "HARNESS_SKIP_SYSDEPS"
# Debian's layout, searched after PATH (as harness.services.postgres.find_bindir does)
DEBIAN_INITDB_GLOB = "/usr/lib/postgresql/*/bin/initdb"


@dataclass(frozen=True)
class Prerequisite:
    """A system tool the harness runs.

    `problem()` returns what is wrong (not found, too old), or None when it is usable.
    `packages` are Debian packages that provide it, in order of preference: the first one
    apt knows is installed (Debian 13 has no openjdk-17). `envs` names the tox envs that
    need it; empty means every env.
    """

    name: str
    what: str
    problem: Callable[[], str | None]
    packages: tuple[str, ...]
    envs: frozenset[str] = frozenset()

    def needed_for(self, env: str | None) -> bool:
        return env is None or not self.envs or env in self.envs


def on_path(tool: str) -> Callable[[], str | None]:
    """A check that `tool` is on PATH."""

    def problem() -> str | None:
        return None if shutil.which(tool) else f"`{tool}` is not on PATH"

    return problem


def java_problem() -> str | None:
    """`java` on PATH, version JAVA_MIN or newer."""
    java = shutil.which("java")
    if java is None:
        return "`java` is not on PATH"
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{java} -version` failed: {exc}"
    major = parse_java_major(proc.stderr + proc.stdout)
    if major is None:
        return f"could not read the version from `{java} -version`"
    if major < JAVA_MIN:
        return f"{java} is Java {major}; {JAVA_MIN} or newer is needed"
    return None


def parse_java_major(version_text: str) -> int | None:
    """The major version in `java -version` output: '17.0.15' -> 17, '1.8.0_292' -> 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def postgres_problem() -> str | None:
    """`initdb` with `postgres` beside it, on PATH or in Debian's layout."""
    for initdb in filter(None, [shutil.which("initdb"), *glob.glob(DEBIAN_INITDB_GLOB)]):
        if (Path(initdb).resolve().parent / "postgres").exists():
            return None
    return f"no `initdb` with `postgres` beside it on PATH or in {DEBIAN_INITDB_GLOB}"


# One line per prerequisite. A tool that only some envs need names them, e.g.
#   Prerequisite("go", "Go", on_path("go"), ("golang-go",), envs=frozenset({"bench"})),
PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite("java", f"a JDK {JAVA_MIN} or newer", java_problem,
                 ("openjdk-17-jdk-headless", "openjdk-21-jdk-headless")),
    Prerequisite("mvn", "Maven", on_path("mvn"), ("maven",)),
    Prerequisite("PostgreSQL server", "the PostgreSQL server (initdb, postgres)", postgres_problem,
                 ("postgresql",)),
    # builds Toxiproxy (the network fault) from the Go module proxy: `python -m harness fetch`
    Prerequisite("go", "the Go toolchain", on_path("go"), ("golang-go",)),
    # the storage faults' FUSE file system mounts with it (workloads/faultfs.py)
    Prerequisite("fusermount3", "FUSE 3 (fusermount3, libfuse3)", on_path("fusermount3"), ("fuse3",)),
    # the clock faults move a process's clock with it (faults/clock.py, workloads/clock.py)
    Prerequisite("faketime", "libfaketime (the clock faults)", on_path("faketime"), ("faketime",)),
    # the report test opens report.html in it (tests/test_report_html.py)
    Prerequisite("chromium", "Chromium, headless", on_path("chromium"), ("chromium",),
                 envs=frozenset({"test"})),
)


def find_missing(prereqs: Iterable[Prerequisite], env: str | None) -> list[tuple[Prerequisite, str]]:
    """The prerequisites that `env` needs and that are not usable, each with its problem."""
    found = ((p, p.problem()) for p in prereqs if p.needed_for(env))
    return [(p, problem) for p, problem in found if problem is not None]


def known_to_apt(packages: Sequence[str]) -> set[str]:
    """The packages that apt's lists hold (empty when apt-cache is missing or never updated)."""
    if not packages or shutil.which("apt-cache") is None:
        return set()
    proc = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages],
                          capture_output=True, text=True)
    return set(re.findall(r"^Package: (\S+)$", proc.stdout, re.MULTILINE))


def choose_packages(prereqs: Iterable[Prerequisite], known: set[str]) -> list[str]:
    """One package per prerequisite, the first that apt knows (else the first listed), no repeats."""
    chosen = (next((pkg for pkg in p.packages if pkg in known), p.packages[0]) for p in prereqs)
    return list(dict.fromkeys(chosen))


def fix_command(packages: Sequence[str], known: set[str]) -> str:
    """The one line a non-root user runs; it updates apt's lists first when they lack a package."""
    install = "sudo apt-get install -y " + " ".join(packages)
    return install if set(packages) <= known else "sudo apt-get update && " + install


def _all_packages(prereqs: Iterable[Prerequisite]) -> list[str]:
    return list(dict.fromkeys(pkg for p in prereqs for pkg in p.packages))


def _say_missing(missing: list[tuple[Prerequisite, str]], headline: str) -> None:
    print(f"error: {headline}: {', '.join(p.name for p, _ in missing)}", file=sys.stderr)
    for p, problem in missing:
        print(f"  {p.name}: {problem}", file=sys.stderr)


def _install_as_root(missing: list[tuple[Prerequisite, str]], env: str | None) -> int:
    prereqs = [p for p, _ in missing]
    env_vars = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], env=env_vars, check=False)
    packages = choose_packages(prereqs, known_to_apt(_all_packages(prereqs)))
    print(f"sysdeps: installing {' '.join(packages)} (for {', '.join(p.name for p in prereqs)})",
          flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
                   env=env_vars, check=False)
    still = find_missing(prereqs, env)
    if not still:
        return 0
    _say_missing(still, "still missing after apt-get install")
    return EXIT_MISSING


def _tell_user(missing: list[tuple[Prerequisite, str]]) -> int:
    _say_missing(missing, "missing system packages")
    prereqs = [p for p, _ in missing]
    if shutil.which("apt-get") is None:
        wanted = "; ".join(p.what for p in prereqs)
        print(f"  fix: install with your system's package manager: {wanted}", file=sys.stderr)
    else:
        known = known_to_apt(_all_packages(prereqs))
        print(f"  fix: {fix_command(choose_packages(prereqs, known), known)}", file=sys.stderr)
    print(f"  (installed where this check does not look? set {SKIP_VAR}=1)", file=sys.stderr)
    return EXIT_MISSING


def check(env: str | None = None) -> int:
    """Check the prerequisites `env` needs, install the missing ones as root; the exit code."""
    if os.environ.get(SKIP_VAR, "") not in ("", "0"):
        return 0
    missing = find_missing(PREREQUISITES, env)
    if not missing:
        return 0
    if os.geteuid() == 0 and shutil.which("apt-get") is not None:
        return _install_as_root(missing, env)
    return _tell_user(missing)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.sysdeps",
                                     description="Check and install the system prerequisites.")
    parser.add_argument("--env", default=os.environ.get("TOX_ENV_NAME"),
                        help="check what this tox env needs (default: $TOX_ENV_NAME, else everything)")
    return check(parser.parse_args(argv).env)


if __name__ == "__main__":
    sys.exit(main())
