"""Checks the commands run before any work: numbers, seeds, input paths and reusable output folders (a
fresh one is :func:`simpact.core.rundir.prepare_out`).

Each check raises a one-line :class:`~simpact.core.errors.UsageError` (exit status 2) naming the flag, so a
bad value never starts a rollout, a render or a connection, and never ends in a traceback.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

from simpact.core.errors import UsageError
from simpact.core.rundir import prepare_out

__all__ = [
    "OPTIONAL_EXTRAS",
    "finite",
    "input_dir",
    "input_file",
    "missing_package",
    "positive_int",
    "require_packages",
    "reusable_out",
    "seed",
]

#: Optional packages (import name) -> the ``pyproject.toml`` extra that installs them.
OPTIONAL_EXTRAS = {
    "cv2": "perception",
    "open3d": "perception",
    "manifold3d": "perception",
    "torch": "deformable",
    "warp": "deformable",
    "google": "vlm",
    "openai": "vlm",
    "franky": "robot",
    "pyrealsense2": "robot",
    "pybullet": "calvin",
    "rerun": "viz",
    "ray": "ray",
}


def missing_package(package: str) -> str | None:
    """The one-line fix for the optional ``package`` (an import name) not being installed; None when it is
    not one of :data:`OPTIONAL_EXTRAS`."""
    top = package.split(".")[0]
    extra = OPTIONAL_EXTRAS.get(top)
    if extra is None:
        return None
    return (
        f"this needs the optional package {top!r}, not installed: pip install -e '.[{extra}]' "
        "(make test installs every extra)"
    )


def require_packages(*packages: str) -> None:
    """Before any work: each of the optional ``packages`` a verb needs is installed."""
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise UsageError(missing_package(package) or f"this needs the package {package!r}, not installed")


def seed(value: int, flag: str = "--seed") -> int:
    """A scene seed: a non-negative integer."""
    if value < 0:
        raise UsageError(f"{flag} must be a non-negative integer, got {value}")
    return value


def positive_int(value: int, flag: str) -> int:
    """A count of at least 1."""
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, got {value}")
    return value


def finite(
    value: float | None, flag: str, *, positive: bool = False, minimum: float | None = None
) -> float | None:
    """A finite number (None passes), > 0 with ``positive``, >= ``minimum`` when given."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {value}")
    if positive and not value > 0:
        raise UsageError(f"{flag} must be > 0, got {value}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{flag} must be >= {minimum}, got {value}")
    return value


def input_file(path: str | os.PathLike[str], flag: str) -> Path:
    """An existing, readable file (not a folder)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{flag} {p}: no such file")
    if p.is_dir():
        raise UsageError(f"{flag} {p}: is a folder, expected a file")
    if not os.access(p, os.R_OK):
        raise UsageError(f"{flag} {p}: cannot read it (permission denied)")
    return p


def input_dir(path: str | os.PathLike[str], flag: str) -> Path:
    """An existing, readable folder (not a file)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{flag} {p}: no such folder")
    if not p.is_dir():
        raise UsageError(f"{flag} {p}: is a file, expected a folder")
    if not os.access(p, os.R_OK | os.X_OK):
        raise UsageError(f"{flag} {p}: cannot read it (permission denied)")
    return p


def reusable_out(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """An output folder a rerun may reuse (a benchmark resumes in it): refused when it is a file or cannot
    be written; an earlier run in it is kept. Created."""
    p = Path(path)
    return prepare_out(p, resume=p.is_dir() and any(p.iterdir()), flag=flag)
