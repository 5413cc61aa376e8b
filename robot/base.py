"""The robot interface the executor drives, usable while disconnected.

A robot answers its ``specs`` and safety ``limits`` without a connection; ``connect()`` / ``disconnect()``
(or ``with robot:``) open and close the link. Poses are the tool-centre point (between the fingertip pads)
in the robot base frame: position in metres, orientation as a quaternion (w, x, y, z).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import numpy as np

from robot.safety import SafetyLimits
from simpact.core.errors import EXIT_ROBOT_STOPPED, SimpactError

__all__ = [
    "ExecutionError",
    "MeasuredPath",
    "PlanRefused",
    "RobotBase",
    "RobotError",
    "RobotSpecs",
]


class RobotError(SimpactError, RuntimeError):
    """The robot could not be reached or stopped with an error (a reflex, a lost connection).

    ``kind`` is ``connection``, ``reflex``, ``gripper``, ``planner`` (the motion generator rejected a
    trajectory) or ``state``; the robot is left stopped.
    """

    def __init__(self, message: str, kind: str = "reflex") -> None:
        super().__init__(message)
        self.kind = kind


class ExecutionError(RobotError):
    """A robot error during a plan, with the step it happened at: ``action`` (index; None while moving to the
    start pose) and its type, and ``result`` (what had been executed and measured up to then)."""

    exit_code = EXIT_ROBOT_STOPPED

    def __init__(
        self, cause: RobotError, action: int | None, action_type: str, result: dict[str, Any]
    ) -> None:
        step = f"action {action} ({action_type})" if action is not None else action_type
        super().__init__(
            f"the robot stopped at {step}: {cause}; it stays stopped until recovered (--recover)", cause.kind
        )
        self.action = action
        self.action_type = action_type
        self.result = result


class PlanRefused(SimpactError, ValueError):
    """A plan refused before any motion; ``violations`` name the actions (see ``robot.safety``)."""

    def __init__(self, message: str, violations: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.violations = violations


@dataclass(frozen=True)
class RobotSpecs:
    """Fixed facts about a robot model (SI units)."""

    name: str
    dof: int
    control_rate_hz: float
    """Rate of the low-level control loop, Hz."""
    max_tcp_speed: float
    """Largest Cartesian tool speed the controller allows, m/s."""
    max_tcp_rotation_speed: float
    """Largest Cartesian tool rotation speed the controller allows, rad/s."""
    gripper_max_width: float
    """Widest gripper opening, m."""
    tcp_offset: float
    """Tool-centre point along the flange z axis (between the fingertip pads), m."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MeasuredPath:
    """Tool positions sampled while the robot followed a path: ``time`` (N,) s since the motion began,
    ``position`` (N, 3) m in the base frame; ``final_position`` (3,) and ``final_quaternion`` (4,) (w, x,
    y, z) once it stopped."""

    time: np.ndarray
    position: np.ndarray
    final_position: np.ndarray
    final_quaternion: np.ndarray


class RobotBase(ABC):
    """A robot arm with a parallel gripper, driven by Cartesian tool motions."""

    specs: RobotSpecs

    def __init__(self, limits: SafetyLimits | None = None) -> None:
        self._limits = limits if limits is not None else SafetyLimits()

    # --- while disconnected ------------------------------------------------------------------------------
    @property
    def limits(self) -> SafetyLimits:
        """The safety limits every motion is checked against."""
        return self._limits

    @property
    @abstractmethod
    def connected(self) -> bool: ...

    def describe(self) -> dict[str, Any]:
        """Specs, limits and connection state, as JSON-ready values."""
        return {"specs": self.specs.to_dict(), "limits": self.limits.to_dict(), "connected": self.connected}

    # --- connection --------------------------------------------------------------------------------------
    @abstractmethod
    def connect(self) -> None:
        """Open the link; raises ``RobotError`` (kind ``connection``) naming the address when it fails."""

    @abstractmethod
    def disconnect(self) -> None:
        """Close the link (idempotent)."""

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disconnect()

    # --- state -------------------------------------------------------------------------------------------
    @abstractmethod
    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Measured tool position (3,) m and quaternion (4,) (w, x, y, z) in the base frame."""

    @abstractmethod
    def gripper_width(self) -> float:
        """Measured gripper opening, m."""

    # --- motion ------------------------------------------------------------------------------------------
    @abstractmethod
    def home(self, dynamics_factor: float = 0.2) -> None:
        """Move to the home joint configuration (the simulator's) at this relative dynamics factor, (0, 1]."""

    @abstractmethod
    def move_to(self, position: np.ndarray, quaternion: np.ndarray, speed: float) -> None:
        """Move the tool straight to the pose and stop there; ``speed`` bounds the tool speed, m/s."""

    @abstractmethod
    def follow(
        self,
        position: np.ndarray,
        quaternion: np.ndarray,
        velocity: np.ndarray,
        yaw_rate: np.ndarray,
        speed: float,
    ) -> MeasuredPath:
        """Pass through tool poses in order and stop at the last one, sampling the tool position meanwhile.

        ``position`` (K, 3) m, ``quaternion`` (K, 4) (w, x, y, z), ``velocity`` (K, 3) m/s and ``yaw_rate``
        (K,) rad/s the tool should have at each pose (zero at the last); ``speed`` bounds the tool speed, m/s.
        """

    @abstractmethod
    def gripper_move(self, width: float, speed: float) -> float:
        """Open or close the fingers to ``width`` m at ``speed`` m/s; returns the measured width, m."""

    @abstractmethod
    def gripper_grasp(self, width: float, speed: float, force: float) -> float:
        """Close the fingers towards ``width`` m and hold with ``force`` N whatever they meet; returns the
        measured width, m."""

    def gripper_open(self, speed: float) -> float:
        """Open the fingers fully; returns the measured width, m."""
        return self.gripper_move(self.specs.gripper_max_width, speed)

    @abstractmethod
    def recover(self) -> None:
        """Clear a reflex or error so the robot accepts motions again (only when asked)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop any motion now."""
