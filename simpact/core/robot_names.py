"""Names the robot's bodies carry in a simulated world, for code above the solvers (success checks, contact
classification) that must tell robot links from objects without importing a solver.

``solvers.mujoco.robot.ROBOT_PREFIX`` is the same tuple (a test keeps the two equal).
"""

from __future__ import annotations

__all__ = ["ROBOT_PREFIX", "is_robot_link"]

ROBOT_PREFIX = ("fr3_", "hand", "left_finger", "right_finger", "base")
"""Body-name prefixes of the robot's links (Franka Research 3 with the Franka hand)."""


def is_robot_link(name: str) -> bool:
    """Whether body ``name`` is one of the robot's links."""
    return name.startswith(ROBOT_PREFIX)
