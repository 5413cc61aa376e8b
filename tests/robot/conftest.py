"""franky-sim servers for the robot tests: a simulated FR3 + Franka hand speaking the libfranka protocol.

Each server runs franky-sim's embedded MuJoCo server in its own process (so its 1 kHz Python loop does not
compete with the test for the GIL), binds the first free loopback address (127.0.0.1, .2, ...) and prints
it; it stops when its stdin closes, so it never outlives the test session. The arm starts at the planner's
home pose (``solvers.mujoco.robot.HOME_QPOS``) with the gripper open.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

SERVER = r"""
import sys, threading
import franky_sim
from franky_sim.mujoco_simulator import MujocoSimulator

from solvers.mujoco.robot import HOME_QPOS

sim = MujocoSimulator(enable_visualization=False)
sim.init()
robot = sim.add_robot(initial_q=tuple(HOME_QPOS), initial_hand_width=0.08)  # the planner's home pose
server = franky_sim.SimulationServer(sim)
server.init()
print(robot.hostname, flush=True)

def watch():
    sys.stdin.read()
    server.running = False

threading.Thread(target=watch, daemon=True).start()
try:
    server.run_forever()
finally:
    server.cleanup()
"""


class FrankySim:
    """A running franky-sim server; connect to ``host`` with ``realtime=False``."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty server never blocks
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.process.stdout is not None
        self.host = self.process.stdout.readline().strip()
        if not self.host:
            self.process.wait(timeout=10)
            self.log.seek(0)
            raise RuntimeError(f"franky-sim did not start: {self.log.read()[-2000:]}")

    def stop(self) -> None:
        """Stop the server (idempotent): close its stdin, then terminate it if it lingers."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                self.process.wait(timeout=5)

    def kill(self) -> None:
        """End the server abruptly, as a crashed robot controller or a pulled cable would."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use a franky-sim server ``franky_sim``: its 1 kHz loop lags behind the clock when
    the tests share its core (`make test` runs them apart, after the rest)."""
    for item in items:
        if {"franky_sim", "fresh_franky_sim"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.franky_sim)


@pytest.fixture(scope="module")
def franky_sim() -> Iterator[FrankySim]:
    """One franky-sim server per test module (about 2 s to start). Not per session: its 1 kHz loop keeps a
    core busy while it lives, which would slow every later test of the suite."""
    pytest.importorskip("franky")
    pytest.importorskip("franky_sim")
    server = FrankySim()
    yield server
    server.stop()


@pytest.fixture
def fresh_franky_sim() -> Iterator[FrankySim]:
    """A franky-sim server of the test's own (for tests that stop it)."""
    pytest.importorskip("franky")
    pytest.importorskip("franky_sim")
    server = FrankySim()
    yield server
    server.kill()
