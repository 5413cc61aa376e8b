"""JSON result files: NumPy arrays and scalars and paths written as plain JSON values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["to_jsonable", "write_json"]


def to_jsonable(value: Any) -> Any:
    """The plain JSON value of a NumPy array or scalar or a path (``json.dumps``'s ``default``)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path``, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=to_jsonable) + "\n")
    return path
