"""The product works from a non-editable install: configs and prompts ship inside the wheel."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_packages_configs_and_prompts(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("simpact-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        str(path.relative_to(ROOT))
        for package in ("simpact", "solvers", "real2sim", "robot")
        for path in (ROOT / package).rglob("*.py")
    }
    assert sources - names == set()  # every module of the checkout ships
    assert "simpact/configs/tasks/non_toppling_push.yaml" in names
    assert any(n.startswith("simpact/prompts/") for n in names)

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import simpact, simpact.tasks as t; print(simpact.__file__); "
        "print(' '.join(n for n in t.list_tasks() if t.load_task(n)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    where, tasks = done.stdout.splitlines()
    assert where.startswith(str(target))
    assert "non_toppling_push" in tasks.split()
