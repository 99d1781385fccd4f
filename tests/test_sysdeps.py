"""The system set-up step's decisions, on a pretend machine: no real apt or java is called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import sysdeps

pytestmark = pytest.mark.unit

# what each Debian package puts on PATH, on the pretend machine
PROVIDES = {
    "openjdk-17-jdk-headless": ("java", "17.0.15"),
    "openjdk-21-jdk-headless": ("java", "21"),
    "maven": ("mvn", None),
    "postgresql": ("initdb", None),
    "golang-go": ("go", None),
    "chromium": ("chromium", None),
    "fuse3": ("fusermount3", None),
    "faketime": ("faketime", None),
}
EVERY_PACKAGE = tuple(PROVIDES)


class FakeMachine:
    """PATH, java, apt-cache and apt-get of a pretend Debian box.

    `apt-get install` puts the installed packages' tools on PATH, unless `install_works`
    is False. Every command run is kept in `calls`, with its environment in `envs`.
    """

    def __init__(self, tmp_path: Path,
                 tools=("java", "mvn", "initdb", "go", "chromium", "fusermount3", "faketime"),
                 java_version="17.0.15",
                 apt_knows=EVERY_PACKAGE, root=False, has_apt=True, install_works=True):
        self.bindir = tmp_path / "bin"
        self.bindir.mkdir()
        (self.bindir / "postgres").touch()
        self.tools = set(tools) | ({"apt-get", "apt-cache"} if has_apt else set())
        self.java_version = java_version
        self.apt_knows = set(apt_knows)
        self.root = root
        self.install_works = install_works
        self.calls: list[list[str]] = []
        self.envs: list[dict | None] = []

    def which(self, name):
        return str(self.bindir / name) if name in self.tools else None

    def run(self, cmd, **kwargs):
        self.calls.append(list(cmd))
        self.envs.append(kwargs.get("env"))
        if cmd[1:] == ["-version"]:
            banner = f'openjdk version "{self.java_version}" 2025-04-15'
            return subprocess.CompletedProcess(cmd, 0, "", banner)
        if cmd[:2] == ["apt-cache", "show"]:
            out = "".join(f"Package: {pkg}\nVersion: 1\n\n" for pkg in cmd[3:] if pkg in self.apt_knows)
            return subprocess.CompletedProcess(cmd, 0 if out else 100, out, "")
        if cmd[:2] == ["apt-get", "install"] and self.install_works:
            for pkg in cmd[5:]:
                tool, version = PROVIDES[pkg]
                self.tools.add(tool)
                self.java_version = version or self.java_version
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def apt_get_calls(self):
        return [call for call in self.calls if call[0] == "apt-get"]


@pytest.fixture
def machine_with(tmp_path, monkeypatch):
    """A factory: machine_with(tools=..., root=...) installs a FakeMachine and returns it."""

    def install(**kwargs):
        machine = FakeMachine(tmp_path, **kwargs)
        monkeypatch.setattr(sysdeps.shutil, "which", machine.which)
        monkeypatch.setattr(sysdeps.subprocess, "run", machine.run)
        monkeypatch.setattr(sysdeps.os, "geteuid", lambda: 0 if machine.root else 1000)
        monkeypatch.setattr(sysdeps, "DEBIAN_INITDB_GLOB", str(tmp_path / "nowhere" / "*" / "initdb"))
        monkeypatch.delenv(sysdeps.SKIP_VAR, raising=False)
        return machine

    return install


class TestParseJavaMajor:
    @pytest.mark.parametrize("text, major", [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_292"', 8),
        ("command not found", None),
    ])
    def test_reads_the_major_version(self, text, major):
        """Both version schemes (1.8.x and 9+) give the major version; other text gives None."""
        assert sysdeps.parse_java_major(text) == major


class TestAllPresent:
    def test_exits_0_silently_without_apt(self, machine_with, capsys):
        """With every tool there, nothing is printed and apt is never called."""
        machine = machine_with()
        assert sysdeps.main([]) == 0
        assert capsys.readouterr() == ("", "")
        assert [call[0] for call in machine.calls] == [machine.which("java")]

    def test_the_skip_variable_checks_nothing(self, machine_with, monkeypatch):
        """HARNESS_SKIP_SYSDEPS=1 exits 0 even with nothing installed, running nothing."""
        machine = machine_with(tools=("go", "chromium", "fusermount3", "faketime"))
        monkeypatch.setenv(sysdeps.SKIP_VAR, "1")
        assert sysdeps.main([]) == 0
        assert machine.calls == []


class TestNotRoot:
    def test_names_the_missing_and_the_one_line_fix(self, machine_with, capsys):
        """Missing java and PostgreSQL give exit 2 and one sudo apt-get line; nothing is installed."""
        machine = machine_with(tools=("mvn", "go", "chromium", "fusermount3", "faketime"))
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING
        err = capsys.readouterr().err
        assert "error: missing system packages: java, PostgreSQL server\n" in err
        assert "  fix: sudo apt-get install -y openjdk-17-jdk-headless postgresql\n" in err
        assert machine.apt_get_calls() == []

    def test_an_old_java_counts_as_missing(self, machine_with, capsys):
        """Java 11 on PATH is reported with its version, and a JDK 17 is proposed."""
        machine_with(java_version="11.0.2")
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING
        err = capsys.readouterr().err
        assert "is Java 11; 17 or newer is needed" in err
        assert "fix: sudo apt-get install -y openjdk-17-jdk-headless\n" in err

    def test_takes_the_first_package_apt_knows(self, machine_with, capsys):
        """Where apt has no openjdk-17 (Debian 13), the fix names openjdk-21."""
        machine_with(tools=("mvn", "initdb", "go", "chromium", "fusermount3", "faketime"),
                     apt_knows={"openjdk-21-jdk-headless"})
        sysdeps.main([])
        assert "fix: sudo apt-get install -y openjdk-21-jdk-headless\n" in capsys.readouterr().err

    def test_updates_apt_lists_first_when_they_lack_a_package(self, machine_with, capsys):
        """Empty apt lists (a fresh container) put `apt-get update` before the install."""
        machine_with(tools=("java", "initdb", "go", "chromium", "fusermount3", "faketime"), apt_knows=())
        sysdeps.main([])
        assert "fix: sudo apt-get update && sudo apt-get install -y maven\n" in capsys.readouterr().err

    def test_without_apt_names_what_to_install(self, machine_with, capsys):
        """Off Debian, the message says what to install instead of an apt-get line."""
        machine_with(tools=("go", "chromium", "fusermount3", "faketime"), has_apt=False)
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING
        err = capsys.readouterr().err
        assert "apt-get" not in err
        assert "a JDK 17 or newer; Maven; the PostgreSQL server" in err


class TestRoot:
    def test_updates_once_installs_the_missing_and_exits_0(self, machine_with, capsys):
        """As root: one apt-get update, one non-interactive install of just the missing, exit 0."""
        machine = machine_with(tools=("java", "go", "chromium", "fusermount3", "faketime"), root=True)
        assert sysdeps.main([]) == 0
        assert machine.apt_get_calls() == [
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "maven", "postgresql"],
        ]
        assert all(env["DEBIAN_FRONTEND"] == "noninteractive"
                   for call, env in zip(machine.calls, machine.envs, strict=True) if call[0] == "apt-get")
        assert "installing maven postgresql" in capsys.readouterr().out

    def test_exits_2_naming_what_the_install_did_not_bring(self, machine_with, capsys):
        """When apt-get install does not produce the tool, exit 2 names it."""
        machine_with(tools=("java", "initdb", "go", "chromium", "fusermount3", "faketime"), root=True,
                     install_works=False)
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING
        assert "error: still missing after apt-get install: mvn\n" in capsys.readouterr().err

    def test_root_without_apt_only_tells(self, machine_with):
        """Root on a machine without apt-get gets the message, and nothing is run."""
        machine = machine_with(tools=("java", "initdb", "go", "chromium", "fusermount3", "faketime"),
                               root=True, has_apt=False)
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING
        assert machine.apt_get_calls() == []


class TestEnvs:
    def test_a_prerequisite_for_other_envs_is_not_checked(self, machine_with, monkeypatch):
        """A tool declared for `bench` only is ignored for `test` and required for `bench`."""
        machine_with()
        browser = sysdeps.Prerequisite("netsurf", "NetSurf", sysdeps.on_path("netsurf"), ("netsurf",),
                                       envs=frozenset({"bench"}))
        monkeypatch.setattr(sysdeps, "PREREQUISITES", (*sysdeps.PREREQUISITES, browser))
        assert sysdeps.main(["--env", "test"]) == 0
        assert sysdeps.main(["--env", "bench"]) == sysdeps.EXIT_MISSING

    def test_the_env_defaults_to_tox_env_name(self, machine_with, monkeypatch):
        """Under tox, TOX_ENV_NAME picks the env without an argument."""
        machine_with()
        browser = sysdeps.Prerequisite("netsurf", "NetSurf", sysdeps.on_path("netsurf"), ("netsurf",),
                                       envs=frozenset({"bench"}))
        monkeypatch.setattr(sysdeps, "PREREQUISITES", (*sysdeps.PREREQUISITES, browser))
        monkeypatch.setenv("TOX_ENV_NAME", "bench")
        assert sysdeps.main([]) == sysdeps.EXIT_MISSING


class TestChromium:
    def test_only_the_test_env_needs_chromium(self, machine_with):
        """The report test opens report.html in Chromium; the bench and lint do not need it."""
        machine_with(tools=("java", "mvn", "initdb", "go", "fusermount3", "faketime"))
        assert sysdeps.main(["--env", "bench"]) == 0
        assert sysdeps.main(["--env", "test"]) == sysdeps.EXIT_MISSING


class TestModule:
    def test_runs_as_python_dash_m(self):
        """It starts as `python -m harness.sysdeps`; the skip keeps this machine's tools out of it."""
        proc = subprocess.run([sys.executable, "-m", "harness.sysdeps"], capture_output=True, text=True,
                              timeout=60, env={**os.environ, sysdeps.SKIP_VAR: "1"})
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
