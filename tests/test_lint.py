"""Style and types are part of the build: ruff and mypy on the packages."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["simpact", "solvers", "real2sim", "robot", "tests", "scripts"]


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff_check_and_format():
    ruff = _tool("ruff")
    for args in (["check", *PACKAGES], ["format", "--check", *PACKAGES]):
        done = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_mypy():
    done = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
