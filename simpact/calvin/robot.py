"""The CALVIN Panda (longer fingers) in PyBullet: loading, reset from ``robot_obs``, null-space IK, actions.

Follows ``calvin_env.robot.Robot`` with the ``panda_longer_finger`` configuration: position-controlled arm
joints (200 N·m, 2 rad/s), a gear constraint that keeps the fingers symmetric, gripper open (0.04 m per
finger, 2 N) or closed (0 m, 200 N), IK on the TCP link with PyBullet's null-space solver and the
initial joints as rest pose, the result clipped to the real joint limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_REL_ORN", "MAX_REL_POS", "Panda", "RobotConfig"]

#: Relative actions: metres and radians per unit of a [-1, 1] action component.
MAX_REL_POS = 0.02
MAX_REL_ORN = 0.05


@dataclass(frozen=True)
class RobotConfig:
    """The robot part of ``calvin_env/conf`` (``panda`` overridden by ``panda_longer_finger``)."""

    filename: str
    base_position: tuple[float, float, float]
    initial_joints: tuple[float, ...]
    lower_limits: tuple[float, ...]
    upper_limits: tuple[float, ...]
    max_joint_force: float
    gripper_force: float
    max_velocity: float
    arm_joint_ids: tuple[int, ...]
    gripper_joint_ids: tuple[int, ...]
    gripper_limits: tuple[float, float]
    tcp_link_id: int
    end_effector_link_id: int

    @classmethod
    def from_conf(cls, robot: dict[str, Any], scene: dict[str, Any]) -> RobotConfig:
        """From the merged robot yaml and the scene yaml (which holds the base pose and initial joints)."""
        return cls(
            filename=str(robot["filename"]),
            base_position=tuple(float(v) for v in scene["robot_base_position"]),  # type: ignore[arg-type]
            initial_joints=tuple(float(v) for v in scene["robot_initial_joint_positions"]),
            lower_limits=tuple(float(v) for v in robot["lower_joint_limits"]),
            upper_limits=tuple(float(v) for v in robot["upper_joint_limits"]),
            max_joint_force=float(robot["max_joint_force"]),
            gripper_force=float(robot["gripper_force"]),
            max_velocity=float(robot["max_velocity"]),
            arm_joint_ids=tuple(int(v) for v in robot["arm_joint_ids"]),
            gripper_joint_ids=tuple(int(v) for v in robot["gripper_joint_ids"]),
            gripper_limits=(float(robot["gripper_joint_limits"][0]), float(robot["gripper_joint_limits"][1])),
            tcp_link_id=int(robot["tcp_link_id"]),
            end_effector_link_id=int(robot["end_effector_link_id"]),
        )


class Panda:
    """The robot inside one PyBullet client ``cid`` (module ``pb`` is ``pybullet``)."""

    def __init__(self, pb: Any, cid: int, config: RobotConfig, data_dir: str) -> None:
        self.pb, self.cid, self.config = pb, cid, config
        self.uid = int(
            pb.loadURDF(
                f"{data_dir}/{config.filename}",
                basePosition=config.base_position,
                baseOrientation=(0.0, 0.0, 0.0, 1.0),
                useFixedBase=True,
                physicsClientId=cid,
            )
        )
        self._add_base_cylinder()
        left, right = config.gripper_joint_ids
        gear = pb.createConstraint(
            self.uid,
            left,
            self.uid,
            right,
            jointType=pb.JOINT_GEAR,
            jointAxis=(1, 0, 0),
            parentFramePosition=(0, 0, 0),
            childFramePosition=(0, 0, 0),
            physicsClientId=cid,
        )
        pb.changeConstraint(gear, gearRatio=-1, erp=0.1, maxForce=50, physicsClientId=cid)
        dof = int(pb.computeDofCount(self.uid, physicsClientId=cid))
        self._null = ([-7.0] * dof, [7.0] * dof, [7.0] * dof)
        self._rest = list(config.initial_joints) + [config.gripper_limits[1]] * (
            dof - len(config.initial_joints)
        )
        self.gripper_action = 1
        self.target_pos = np.zeros(3)
        self.target_orn = np.zeros(3)
        self.reset()

    def _add_base_cylinder(self) -> None:
        """The white pedestal under the robot (visual only, as in calvin_env)."""
        x, y, z = self.config.base_position
        shape = self.pb.createVisualShape(
            self.pb.GEOM_CYLINDER,
            rgbaColor=(1, 1, 1, 1),
            radius=0.13,
            length=z,
            visualFramePosition=(x - 0.05, y, z / 2),
            physicsClientId=self.cid,
        )
        self.pb.createMultiBody(baseVisualShapeIndex=shape, physicsClientId=self.cid)

    def reset(self, robot_obs: np.ndarray | None = None) -> None:
        """Joints and gripper from ``robot_obs`` (15 values) or the initial pose; motors hold them."""
        pb, cid, cfg = self.pb, self.cid, self.config
        if robot_obs is None:
            joints, finger = np.asarray(cfg.initial_joints), cfg.gripper_limits[1]
        else:
            joints, finger = np.asarray(robot_obs[7:14], dtype=float), float(robot_obs[6]) / 2.0
        for jid, q in zip(cfg.arm_joint_ids, joints):
            pb.resetJointState(self.uid, jid, float(q), physicsClientId=cid)
            pb.setJointMotorControl2(
                self.uid,
                jid,
                pb.POSITION_CONTROL,
                targetPosition=float(q),
                force=cfg.max_joint_force,
                maxVelocity=cfg.max_velocity,
                physicsClientId=cid,
            )
        for jid in cfg.gripper_joint_ids:
            pb.resetJointState(self.uid, jid, finger, physicsClientId=cid)
            pb.setJointMotorControl2(
                self.uid,
                jid,
                pb.POSITION_CONTROL,
                targetPosition=finger,
                force=cfg.gripper_force,
                maxVelocity=1,
                physicsClientId=cid,
            )
        self.gripper_action = 1 if robot_obs is None else (1 if float(robot_obs[14]) > 0 else -1)
        pos, orn = self.tcp_pose()
        self.target_pos, self.target_orn = pos, orn

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (m) and euler xyz (rad) in the world (the link's inertial frame, as calvin_env)."""
        state = self.pb.getLinkState(
            self.uid, self.config.tcp_link_id, computeForwardKinematics=True, physicsClientId=self.cid
        )
        return np.array(state[0]), np.array(self.pb.getEulerFromQuaternion(state[1]))

    def observation(self) -> np.ndarray:
        """``robot_obs`` (15): TCP position, TCP euler, gripper width, 7 arm joints, gripper action."""
        pb, cid = self.pb, self.cid
        state = pb.getLinkState(self.uid, self.config.tcp_link_id, physicsClientId=cid)
        width = sum(
            pb.getJointState(self.uid, j, physicsClientId=cid)[0] for j in self.config.gripper_joint_ids
        )
        joints = [pb.getJointState(self.uid, j, physicsClientId=cid)[0] for j in self.config.arm_joint_ids]
        euler = pb.getEulerFromQuaternion(state[1])
        return np.array([*state[0], *euler, width, *joints, float(self.gripper_action)])

    def ik(self, pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
        """Arm joints (rad) putting the TCP at ``pos`` (m) with orientation ``quat`` (xyzw); null-space IK."""
        low, high, ranges = self._null
        q = self.pb.calculateInverseKinematics(
            self.uid,
            self.config.tcp_link_id,
            list(map(float, pos)),
            list(map(float, quat)),
            lowerLimits=low,
            upperLimits=high,
            jointRanges=ranges,
            restPoses=self._rest,
            physicsClientId=self.cid,
        )
        n = len(self.config.arm_joint_ids)
        return np.clip(np.asarray(q[:n]), self.config.lower_limits, self.config.upper_limits)

    def absolute_target(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """(position m, euler rad, gripper ±1) of an absolute (7) or relative (7, ``relative``) action."""
        a = np.asarray(action, dtype=float)
        return a[:3], a[3:6], 1 if a[6] > 0 else -1

    def relative_target(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Integrate a relative action (7 values in [-1, 1]) into the kept target pose, as calvin_env does."""
        a = np.clip(np.asarray(action, dtype=float), -1.0, 1.0)
        self.target_pos = self.target_pos + a[:3] * MAX_REL_POS
        self.target_orn = self.target_orn + a[3:6] * MAX_REL_ORN
        return self.target_pos.copy(), self.target_orn.copy(), 1 if a[6] > 0 else -1

    def apply(self, pos: np.ndarray, euler: np.ndarray, gripper: int) -> None:
        """Send motor targets for a TCP pose (m, euler xyz rad) and a gripper command (1 open, -1 close)."""
        pb, cid, cfg = self.pb, self.cid, self.config
        q = self.ik(pos, np.asarray(pb.getQuaternionFromEuler(list(map(float, euler)))))
        for jid in range(cfg.end_effector_link_id):
            pb.setJointMotorControl2(
                self.uid,
                jid,
                pb.POSITION_CONTROL,
                targetPosition=float(q[jid]),
                force=cfg.max_joint_force,
                maxVelocity=cfg.max_velocity,
                physicsClientId=cid,
            )
        self.gripper_action = int(gripper)
        opening = cfg.gripper_limits[1] if gripper == 1 else cfg.gripper_limits[0]
        force = cfg.gripper_force / 100 if gripper == 1 else cfg.gripper_force
        for jid in cfg.gripper_joint_ids:
            pb.setJointMotorControl2(
                self.uid,
                jid,
                pb.POSITION_CONTROL,
                targetPosition=opening,
                force=force,
                maxVelocity=1,
                physicsClientId=cid,
            )
