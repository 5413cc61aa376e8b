"""JSON result files: NumPy arrays and scalars and paths written as plain JSON values, atomically (a reader
sees the old file or the new one, never half of one)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["atomic_write_text", "to_jsonable", "write_json"]


def to_jsonable(value: Any) -> Any:
    """The plain JSON value of a NumPy array or scalar or a path (``json.dumps``'s ``default``)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename, creating the
    folder; an interruption leaves the previous file (or none), never a truncated one. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` atomically, creating its folder; returns the path."""
    return atomic_write_text(path, json.dumps(payload, indent=2, default=to_jsonable) + "\n")
