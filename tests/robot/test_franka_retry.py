"""FrankaRobot sends a motion to one target again when franky's motion planner fails on it, once.

franky's own robot is replaced by a stand-in that fails as franky does (ruckig's error surfaces as a plain
RuntimeError); the motions are franky's real objects. franky-sim showed the failure once in about a dozen
runs of its tests, too rarely to reproduce on it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

franky = pytest.importorskip("franky")

from robot.base import RobotError  # noqa: E402
from robot.franka import PLANNER_RETRIES, FrankaRobot  # noqa: E402

PLANNER_ERROR = RuntimeError("Motion planner failed with error code -111")


class _Robot:
    """franky.Robot's calls that FrankaRobot makes, failing ``failures`` moves in turn."""

    def __init__(self, failures: list[BaseException], recovers: bool = True) -> None:
        self.failures = failures
        self.recovers = recovers
        self.moves: list[Any] = []
        self.recoveries = 0
        self.stops = 0
        pose = SimpleNamespace(translation=np.array([0.5, 0.0, 0.4]), quaternion=np.array([1.0, 0, 0, 0]))
        self.current_cartesian_state = SimpleNamespace(pose=SimpleNamespace(end_effector_pose=pose))

    def move(self, motion: Any) -> None:
        self.moves.append(motion)
        if self.failures:
            raise self.failures.pop(0)

    def recover_from_errors(self) -> bool:
        self.recoveries += 1
        return self.recovers

    def stop(self) -> None:
        self.stops += 1


def _connected(robot: _Robot) -> FrankaRobot:
    driver = FrankaRobot("franky-stand-in", realtime=False)
    driver._robot = robot
    return driver


TARGET = (np.array([0.5, 0.05, 0.35]), np.array([0.0, 1.0, 0.0, 0.0]))


def test_a_planner_failure_is_recovered_and_the_motion_sent_again() -> None:
    robot = _Robot([PLANNER_ERROR])
    driver = _connected(robot)
    driver.move_to(*TARGET, speed=0.1)
    assert len(robot.moves) == 2 and robot.recoveries == 1 and robot.stops == 0
    assert all(isinstance(m, franky.CartesianMotion) for m in robot.moves)
    assert driver.planner_retries == 1
    driver.home()  # not faulted: it moves on
    assert isinstance(robot.moves[-1], franky.JointMotion)


def test_a_planner_failure_that_repeats_stops_the_robot() -> None:
    robot = _Robot([PLANNER_ERROR] * (PLANNER_RETRIES + 1))
    driver = _connected(robot)
    with pytest.raises(RobotError, match=r"moving to \[0.5, 0.05, 0.35\] failed .*-111") as err:
        driver.move_to(*TARGET, speed=0.1)
    assert err.value.kind == "planner" and robot.stops == 1
    assert len(robot.moves) == PLANNER_RETRIES + 1
    with pytest.raises(RobotError, match="only after recover"):
        driver.home()


@pytest.mark.parametrize(
    ("error", "recovers"),
    [(franky.ControlException("cartesian_reflex"), True), (PLANNER_ERROR, False)],
    ids=["reflex", "recovery-fails"],
)
def test_a_reflex_or_a_failed_recovery_is_not_retried(error: BaseException, recovers: bool) -> None:
    robot = _Robot([error], recovers=recovers)
    driver = _connected(robot)
    with pytest.raises(RobotError):
        driver.home()
    assert len(robot.moves) == 1 and driver.planner_retries == 0 and robot.stops == 1
