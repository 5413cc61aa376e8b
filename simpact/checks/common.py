"""Quantities several success checks share."""

from __future__ import annotations

import numpy as np

from simpact.core.robot_names import is_robot_link
from simpact.core.rollout import Rollout, Trace
from simpact.core.rotations import tilt_angle

__all__ = ["robot_touches", "tilt_deg", "trailing_window", "progress"]


def tilt_deg(quaternion: np.ndarray) -> np.ndarray:
    """Angle between the object's z axis and the vertical, degrees."""
    return np.degrees(tilt_angle(quaternion))


def robot_touches(rollout: Rollout, name: str) -> bool:
    """Whether a robot link touches object ``name`` at the end of the rollout."""
    return any(
        (a == name and is_robot_link(b)) or (b == name and is_robot_link(a))
        for a, b in rollout.final_contacts
    )


def trailing_window(trace: Trace, seconds: float) -> slice:
    """The steps of the last ``seconds`` of the trace."""
    t_end = trace.time[-1]
    first = int(np.searchsorted(trace.time, t_end - seconds))
    return slice(first, None)


def progress(distance: float, scale: float) -> float:
    """A dense score in (0, 1]: 1 at distance 0, 0.5 at ``scale``."""
    return float(1.0 / (1.0 + (max(distance, 0.0) / scale) ** 2))
