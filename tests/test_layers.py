"""The import contracts in pyproject.toml ([tool.importlinter]) bite.

Setup: a copy of harness/, workloads/ and faults/ (.py files only) and pyproject.toml in a
tmp dir. Steps: plant a forbidden import in the copy, run lint-imports there, read its verdict.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "workloads", "faults")
# lint-imports's entry point, run by this interpreter so that the test env's import-linter is used
LINT_IMPORTS = ("import sys; from importlinter.cli import lint_imports_command; "
                "sys.exit(lint_imports_command())")


def _not_python(directory: str, names: list[str]) -> list[str]:
    return [name for name in names
            if name == "__pycache__" or not (name.endswith(".py") or (Path(directory) / name).is_dir())]


def _copy_of_the_packages(dest: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(REPO / package, dest / package, ignore=_not_python)
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """lint-imports with `root` as cwd and import path, so the copy is analysed, not the repo."""
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", "pyproject.toml", "--no-cache"],
        cwd=root, env={"PATH": "", "PYTHONPATH": str(root), "NO_COLOR": "1", "COLUMNS": "200"},
        capture_output=True, text=True, timeout=120,
    )


class TestImportContracts:
    def test_the_clean_tree_keeps_every_contract(self, tmp_path):
        """The packages as they are: every contract KEPT, exit 0."""
        proc = _lint_imports(_copy_of_the_packages(tmp_path))
        assert proc.returncode == 0, f"lint-imports exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"

    @pytest.mark.parametrize("planted, contract, named", [
        ({"workloads/_planted.py": "from harness import errors\n"},
         "harness above faults above workloads", "workloads._planted -> harness.errors"),
        ({"faults/_planted.py": "import harness.errors\n"},
         "harness above faults above workloads", "faults._planted -> harness.errors"),
        ({"harness/_cycle_a.py": "import harness._cycle_b\n",
          "harness/_cycle_b.py": "import harness._cycle_a\n"},
         "no import cycles between the modules of a package", "No cycles are allowed in harness."),
    ], ids=["workloads-imports-harness", "faults-imports-harness", "cycle-in-harness"])
    def test_a_planted_import_breaks_its_contract(self, tmp_path, planted, contract, named):
        """An import against a contract: non-zero exit, the contract BROKEN, the import named."""
        root = _copy_of_the_packages(tmp_path)
        for path, text in planted.items():
            (root / path).write_text(text)
        proc = _lint_imports(root)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"lint-imports passed with {sorted(planted)} planted:\n{out}"
        assert f"{contract} BROKEN" in out, out
        assert named in out, out
