"""The project's rebuild of CALVIN scene D in PyBullet (back-end ``"rebuild"``).

240 Hz physics, 30 Hz control (8 physics steps per action), gravity 9.8 m/s², deterministic contact pairs,
one private PyBullet client per environment (``DIRECT``, no window). Same URDFs, rates, robot and scene
configuration as ``calvin_env``, read from the data files (:func:`simpact.calvin.data.scene_config`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simpact.calvin.cameras import CameraImage, CameraSpec, render, to_frame
from simpact.calvin.checks import BlockState, Snapshot
from simpact.calvin.data import calvin_data_dir, scene_config
from simpact.calvin.robot import Panda, RobotConfig
from simpact.calvin.table import DOORS, PlayTable
from simpact.core.errors import SimpactError
from simpact.core.frame import Frame

__all__ = ["BACKEND", "CalvinEnv", "import_pybullet"]

#: What results record as the back-end of this environment.
BACKEND = "rebuild"


def import_pybullet() -> Any:
    """``pybullet``, or one line naming the extra to install."""
    try:
        import pybullet
    except ImportError:
        raise SimpactError("CALVIN needs PyBullet: pip install 'simpact[calvin]'") from None
    return pybullet


class CalvinEnv:
    """Scene D with the Panda: ``reset`` from a chain, ``step`` an action, observe, snapshot for checks.

    Actions: absolute ``(x, y, z, euler x, y, z, gripper)`` (m, rad, ±1) or, with ``relative=True``, seven
    values in [-1, 1] scaled by 0.02 m and 0.05 rad per unit added to the kept target pose.
    """

    backend = BACKEND

    def __init__(self, led_reset_bug: bool = False) -> None:
        pb = import_pybullet()
        conf = scene_config()
        self.pb = pb
        self.cid = int(pb.connect(pb.DIRECT))
        self.physics_hz = float(conf["env"]["bullet_time_step"])
        self.control_hz = float(conf["env"]["control_freq"])
        self.action_repeat = int(self.physics_hz // self.control_hz)
        pb.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=self.cid)
        pb.setTimeStep(1.0 / self.physics_hz, physicsClientId=self.cid)
        pb.setGravity(0, 0, -9.8, physicsClientId=self.cid)
        data = str(calvin_data_dir("calvin_env", "data"))
        self.robot = Panda(pb, self.cid, RobotConfig.from_conf(conf["robot"], conf["scene"]), data)
        scaling = float(conf["scene"]["global_scaling"])
        self.table = PlayTable(pb, self.cid, data, scaling, led_reset_bug=led_reset_bug)
        self.cameras = {name: CameraSpec.from_conf(name, c) for name, c in conf["cameras"].items()}
        links = [
            pb.getJointInfo(self.robot.uid, i, physicsClientId=self.cid)[12].decode()
            for i in range(pb.getNumJoints(self.robot.uid, physicsClientId=self.cid))
        ]
        self._cam_link = links.index("gripper_cam")

    def close(self) -> None:
        """Disconnect the PyBullet client (idempotent)."""
        if self.cid >= 0:
            self.pb.disconnect(physicsClientId=self.cid)
            self.cid = -1

    def __enter__(self) -> CalvinEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self, robot_obs: np.ndarray | None = None, scene_obs: np.ndarray | None = None) -> None:
        """Scene from ``scene_obs`` and robot from ``robot_obs``, then one physics step (as calvin_env)."""
        if scene_obs is not None:
            if len(scene_obs) != 24:
                raise SimpactError(f"scene_obs has {len(scene_obs)} values; CALVIN's has 24")
            self.table.reset(np.asarray(scene_obs, dtype=float))
        if robot_obs is not None and len(robot_obs) != 15:
            raise SimpactError(f"robot_obs has {len(robot_obs)} values; CALVIN's has 15")
        self.robot.reset(None if robot_obs is None else np.asarray(robot_obs, dtype=float))
        self.pb.stepSimulation(physicsClientId=self.cid)

    def step(self, action: np.ndarray, relative: bool = False) -> None:
        """One control step (1/30 s): IK to the action's TCP target, 8 physics steps, update the lights."""
        a = np.asarray(action, dtype=float).reshape(-1)
        if a.shape != (7,):
            raise SimpactError(f"a CALVIN action has 7 values, got {a.shape[0]}")
        pos, euler, grip = self.robot.relative_target(a) if relative else self.robot.absolute_target(a)
        if not relative:
            self.robot.target_pos, self.robot.target_orn = pos.copy(), euler.copy()
        self.robot.apply(pos, euler, grip)
        for _ in range(self.action_repeat):
            self.pb.stepSimulation(physicsClientId=self.cid)
        self.table.step()

    def settle(self, steps: int) -> None:
        """Hold the current targets for ``steps`` control steps."""
        for _ in range(steps):
            for _ in range(self.action_repeat):
                self.pb.stepSimulation(physicsClientId=self.cid)
            self.table.step()

    def robot_obs(self) -> np.ndarray:
        return self.robot.observation()

    def scene_obs(self) -> np.ndarray:
        return self.table.observation()

    def render(self, name: str = "static") -> CameraImage:
        """RGB, depth (m) and segmentation of the ``static`` or ``gripper`` camera."""
        if name not in self.cameras:
            raise SimpactError(f"no CALVIN camera {name!r}; choose from {sorted(self.cameras)}")
        return render(self.pb, self.cid, self.cameras[name], self.robot.uid, self._cam_link)

    def frame(self, name: str = "static") -> Frame:
        """The camera's RGB-D :class:`Frame` with ground-truth block masks and its pose in the base frame."""
        blocks = {uid: f"block_{color}" for color, uid in self.table.blocks.items()}
        return to_frame(self.render(name), blocks, np.asarray(self.robot.config.base_position))

    def names(self) -> dict[int, str]:
        """Body id → name, to read segmentation masks (``robot``, ``table``, ``block_red`` ..., ``floor``)."""
        out = {self.robot.uid: "robot", self.table.uid: "table", self.table.plane: "floor"}
        return out | {uid: f"block_{color}" for color, uid in self.table.blocks.items()}

    def _contacts(self, uid: int) -> frozenset[tuple[int, int]]:
        points = self.pb.getContactPoints(bodyA=uid, physicsClientId=self.cid)
        return frozenset((int(c[2]), int(c[4])) for c in points)

    def snapshot(self) -> Snapshot:
        """What the subtask checks read now: joints, lights, block poses, velocities and contacts."""
        pb, cid = self.pb, self.cid
        blocks = {}
        for color, uid in self.table.blocks.items():
            pos, quat = pb.getBasePositionAndOrientation(uid, physicsClientId=cid)
            lin, ang = pb.getBaseVelocity(uid, physicsClientId=cid)
            blocks[color] = BlockState(
                uid, tuple(pos), tuple(quat), tuple(lin), tuple(ang), self._contacts(uid)
            )
        return Snapshot(
            robot_uid=self.robot.uid,
            table_uid=self.table.uid,
            table_links=dict(self.table.links),
            doors={name: self.table.joint(name) for name in DOORS},
            lights=dict(self.table.lights),
            blocks=blocks,
            robot_contacts=self._contacts(self.robot.uid),
        )
