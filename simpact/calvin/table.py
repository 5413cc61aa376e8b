"""Scene D's objects in PyBullet: the articulated table (slider, drawer, button + LED, switch + lightbulb),
the three blocks and the floor, with ``scene_obs`` read and written in CALVIN's layout.

As in ``calvin_env.scene``: the table is loaded at global scaling 0.8 (so the joint ranges are 0.28 m for
the slider, 0.22 m drawer, 0.02 m button, 0.088 m switch); the slider and drawer are free joints with a
4 N velocity motor acting as friction; the button is held at 0 by a 4 N position motor and toggles the LED
on each press past half its travel; the switch turns the lightbulb on while it is past half its travel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BLOCKS", "DOORS", "LIGHTS", "PlayTable"]

#: Block colour → URDF file, in ``scene_obs`` order.
BLOCKS = {
    "red": "blocks/block_red_middle.urdf",
    "blue": "blocks/block_blue_small.urdf",
    "pink": "blocks/block_pink_big.urdf",
}
#: Prismatic door joints in ``scene_obs`` order.
DOORS = ("base__slide", "base__drawer")
#: Light → (link, colour when on), in ``scene_obs`` order.
LIGHTS = {"lightbulb": ("light_link", (1.0, 1.0, 0.0, 1.0)), "led": ("led_link", (0.0, 1.0, 0.0, 1.0))}
_MOTOR_FORCE = 4.0
_OFF = (1.0, 1.0, 1.0, 1.0)


@dataclass
class _Toggle:
    """The button (toggles its light on each press) or the switch (its light follows its position)."""

    joint: int
    threshold: float
    light: str
    is_button: bool
    state: int = 0
    was_pressed: bool = False


class PlayTable:
    """Table, blocks and floor inside PyBullet client ``cid``; ``led_reset_bug`` mimics the pinned version."""

    def __init__(self, pb: Any, cid: int, data_dir: str, scaling: float, led_reset_bug: bool = False) -> None:
        self.pb, self.cid, self.led_reset_bug = pb, cid, led_reset_bug
        # Blocks before the table, as calvin_env loads them, so body ids match the official back-end's.
        self.blocks = {
            color: int(
                pb.loadURDF(
                    f"{data_dir}/{path}",
                    (0, 0, 1.0 + 0.2 * k),
                    (0, 0, 0, 1),
                    globalScaling=scaling,
                    physicsClientId=cid,
                )
            )
            for k, (color, path) in enumerate(BLOCKS.items())
        }
        self.uid = int(
            pb.loadURDF(
                f"{data_dir}/calvin_table_D/urdf/calvin_table_D.urdf",
                (0, 0, 0),
                (0, 0, 0, 1),
                globalScaling=scaling,
                physicsClientId=cid,
            )
        )
        joints = [
            pb.getJointInfo(self.uid, i, physicsClientId=cid)
            for i in range(pb.getNumJoints(self.uid, physicsClientId=cid))
        ]
        self.joint_ids = {info[1].decode(): i for i, info in enumerate(joints)}
        self.links = {info[12].decode(): i for i, info in enumerate(joints)} | {"base_link": -1}
        self.limits = {info[1].decode(): (float(info[8]), float(info[9])) for info in joints}
        for name in DOORS + ("base__switch",):
            pb.setJointMotorControl2(
                self.uid, self.joint_ids[name], pb.VELOCITY_CONTROL, force=_MOTOR_FORCE, physicsClientId=cid
            )
        pb.setJointMotorControl2(
            self.uid,
            self.joint_ids["base__button"],
            pb.POSITION_CONTROL,
            targetPosition=0.0,
            force=_MOTOR_FORCE,
            physicsClientId=cid,
        )
        self.toggles = [
            self._toggle("base__button", "led", True),
            self._toggle("base__switch", "lightbulb", False),
        ]
        self.lights = dict.fromkeys(LIGHTS, 0)
        self.plane = int(pb.loadURDF(f"{data_dir}/plane/plane.urdf", physicsClientId=cid))

    def _toggle(self, joint: str, light: str, is_button: bool) -> _Toggle:
        low, high = self.limits[joint]
        return _Toggle(self.joint_ids[joint], (low + high) / 2.0, light, is_button)

    def joint(self, name: str) -> float:
        """Position (m) of a table joint by name."""
        return float(self.pb.getJointState(self.uid, self.joint_ids[name], physicsClientId=self.cid)[0])

    def set_light(self, name: str, on: int) -> None:
        self.lights[name] = int(on)
        link, color = LIGHTS[name]
        self.pb.changeVisualShape(
            self.uid, self.links[link], rgbaColor=color if on else _OFF, physicsClientId=self.cid
        )

    def _pressed(self, t: _Toggle) -> bool:
        return float(self.pb.getJointState(self.uid, t.joint, physicsClientId=self.cid)[0]) > t.threshold

    def step(self) -> None:
        """Update the lights from the button and switch (once per control step, after physics)."""
        for t in self.toggles:
            pressed = self._pressed(t)
            if t.is_button:
                if pressed and not t.was_pressed:
                    t.state = 1 - t.state
                    self.set_light(t.light, t.state)
                t.was_pressed = pressed
            else:
                if pressed != bool(t.state):
                    self.set_light(t.light, int(pressed))
                t.state = int(pressed)

    def reset(self, scene_obs: np.ndarray) -> None:
        """Joints, lights and block poses from ``scene_obs`` (24 values, CALVIN's layout)."""
        pb, cid = self.pb, self.cid
        values = np.asarray(scene_obs, dtype=float)
        for name, q in zip(DOORS + ("base__button", "base__switch"), values[:4]):
            pb.resetJointState(self.uid, self.joint_ids[name], float(q), physicsClientId=cid)
        for name, on in zip(LIGHTS, values[4:6]):
            self.set_light(name, int(round(on)))
        for t in self.toggles:
            # The pinned calvin_env resets the button to off whatever the LED shows (turn_off_led bug).
            t.state = 0 if (t.is_button and self.led_reset_bug) else self.lights[t.light]
            t.was_pressed = self._pressed(t)
            if not t.is_button:
                t.state = 0
        for k, uid in enumerate(self.blocks.values()):
            pose = values[6 + 6 * k : 12 + 6 * k]
            quat = pb.getQuaternionFromEuler(list(map(float, pose[3:])))
            pb.resetBasePositionAndOrientation(uid, list(map(float, pose[:3])), quat, physicsClientId=cid)
            pb.resetBaseVelocity(uid, (0, 0, 0), (0, 0, 0), physicsClientId=cid)

    def observation(self) -> np.ndarray:
        """``scene_obs`` (24): slider, drawer, button, switch, lightbulb, LED, then block poses (m, euler)."""
        pb, cid = self.pb, self.cid
        joints = [self.joint(n) for n in DOORS + ("base__button", "base__switch")]
        poses: list[float] = []
        for uid in self.blocks.values():
            pos, quat = pb.getBasePositionAndOrientation(uid, physicsClientId=cid)
            poses += [*pos, *pb.getEulerFromQuaternion(quat)]
        return np.array([*joints, self.lights["lightbulb"], self.lights["led"], *poses])
