"""The machine a run was timed on, recorded in every ``result.json``: timings compare only on the same one
(the same real2sim frames took up to 3 times longer on one cloud VM than on another)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["cpu_model", "machine"]

CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (``model name`` in ``cpuinfo`` on Linux), else what :mod:`platform` says."""
    try:
        with cpuinfo.open() as lines:
            for line in lines:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, str | int]:
    """The CPU model, how many CPUs this process may use, the system and Python's version."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {
        "cpu": cpu_model(),
        "cpus": cpus,
        "system": platform.system(),
        "python": platform.python_version(),
    }
