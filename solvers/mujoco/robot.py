"""The Franka Research 3 with the Franka hand, as MuJoCo sees it.

The MJCF and meshes come from the ``franky-sim`` package (``franky_sim/assets/fr3.xml``, from MuJoCo
Menagerie, Apache-2.0), so the robot loads offline. On top of it this module adds what the planner needs:
gravity compensation (the real arm compensates its own weight), a stiff gripper position servo whose
command is the finger opening in metres, grippy fingertip pads, and a tool-centre-point site between the
fingertips with sensors for its pose.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np

__all__ = [
    "ARM_JOINTS",
    "FINGER_JOINTS",
    "HOME_QPOS",
    "JOINT_VELOCITY_LIMITS",
    "ROBOT_PREFIX",
    "TCP_SITE",
    "add_squeeze_plates",
    "fr3_assets",
    "load_fr3_spec",
]

ARM_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
HOME_QPOS = np.array([0.0, 0.0, 0.0, -1.57079, 0.0, 1.57079, -0.7853])
"""Arm joint angles of the home pose, rad."""
JOINT_VELOCITY_LIMITS = np.array([2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26])
"""FR3 joint speed limits, rad/s (Franka datasheet)."""
TCP_SITE = "tcp"
TCP_OFFSET = 0.1034
"""Offset from the hand frame to the tool centre point (between the fingertip pads), m."""
ROBOT_PREFIX = ("fr3_", "hand", "left_finger", "right_finger", "base")
"""Body-name prefixes of the robot's links (for contact classification)."""

GRIPPER_KP = 2000.0
"""Gripper servo stiffness on the finger tendon, N/m: closing on a 7 cm object from a 0 command squeezes
with 70 N, the Franka hand's continuous force."""
GRIPPER_KV = 40.0
"""Gripper servo damping, N s/m."""
FINGER_FRICTION = (1.2, 0.01, 0.0001)
"""Sliding, torsional, rolling friction of the fingertip pads."""


PLATE_HALF = (0.05, 0.005, 0.035)
"""Half extents of each squeezing plate, m: 10 cm long (across the closing direction), 1 cm thick (along
it), 7 cm tall."""
PLATE_BELOW_TCP = 0.02
"""How far the plates' lower edges reach beyond the tool centre point (toward the table), m."""


def add_squeeze_plates(spec: mujoco.MjSpec) -> None:
    """Fit a flat plate to each fingertip (the ``squeeze_plates`` tool; the SIMPACT paper squeezed dough with
    a printed end effector): a box of :data:`PLATE_HALF` whose inner face is flush with the fingertip pad's,
    centred on the pad along the finger's width and reaching :data:`PLATE_BELOW_TCP` beyond the tool centre
    point. Closing the gripper to width ``d`` leaves ``d`` between the plates. The plates are visible and
    are colliders of deformables (MPM, PD) but take no MuJoCo contacts (contact bit 2, which nothing else
    has) and no mass: the hand's dynamics and every rigid contact are those of the bare hand."""
    for finger in ("left_finger", "right_finger"):
        body = spec.body(finger)
        pad = max(
            (g for g in body.geoms if g.type == mujoco.mjtGeom.mjGEOM_BOX and (g.contype or g.conaffinity)),
            key=lambda g: float(np.prod(g.size)),
        )
        inner = float(pad.pos[1] - pad.size[1])  # the pad's face toward the other finger (finger frame y)
        tcp = TCP_OFFSET - float(body.pos[2])  # the tool centre point along the finger (finger frame z)
        body.add_geom(
            name=f"{finger}_plate",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(PLATE_HALF),
            pos=[0.0, inner + PLATE_HALF[1], tcp + PLATE_BELOW_TCP - PLATE_HALF[2]],
            rgba=[0.85, 0.85, 0.9, 1.0],
            contype=2,
            conaffinity=2,
            density=0.0,
            group=2,
        )


def fr3_assets() -> Path:
    """Folder holding ``fr3.xml`` and ``meshes/`` inside the installed ``franky-sim`` package."""
    try:
        root = resources.files("franky_sim") / "assets"
    except ModuleNotFoundError as exc:  # pragma: no cover - franky-sim is a core dependency
        raise RuntimeError("the FR3 model ships with franky-sim: pip install franky-sim") from exc
    return Path(str(root))


@functools.cache
def _fr3_xml() -> str:
    return (fr3_assets() / "fr3.xml").read_text()


def load_fr3_spec() -> mujoco.MjSpec:
    """The FR3 + hand as an editable MjSpec, prepared for Cartesian control (see the module docstring)."""
    spec = mujoco.MjSpec.from_string(_fr3_xml())
    spec.meshdir = str(fr3_assets() / "meshes")
    for body in spec.bodies:
        if body.name and body.name.startswith(ROBOT_PREFIX):
            body.gravcomp = 1.0
    for joint in spec.joints:
        if joint.name in ARM_JOINTS:
            joint.actgravcomp = True
    hand = spec.body("hand")
    hand.add_site(name=TCP_SITE, pos=[0, 0, TCP_OFFSET], size=[0.005, 0, 0], rgba=[1, 0, 0, 0.0], group=4)
    gripper = spec.actuator("hand")
    gripper.gainprm[0] = 0.5 * GRIPPER_KP  # ctrl is the finger opening (m); the tendon is half of it
    gripper.biasprm[:3] = [0.0, -GRIPPER_KP, -GRIPPER_KV]
    gripper.ctrlrange = [0.0, 0.08]
    for finger in ("left_finger", "right_finger"):
        for geom in spec.body(finger).geoms:
            if geom.contype or geom.conaffinity:
                geom.friction = list(FINGER_FRICTION)
                geom.condim = 4
                geom.priority = 1
    for name, kind in (
        ("tcp_pos", mujoco.mjtSensor.mjSENS_FRAMEPOS),
        ("tcp_quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT),
    ):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=TCP_SITE)
    for name in FINGER_JOINTS:
        spec.add_sensor(
            name=name, type=mujoco.mjtSensor.mjSENS_JOINTPOS, objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=name
        )
    while spec.keys:
        spec.delete(spec.keys[0])
    return spec
