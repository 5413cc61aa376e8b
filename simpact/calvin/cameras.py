"""CALVIN's static and gripper cameras: RGB, depth linearised to metres, ground-truth segmentation.

Static camera (``cameras/static.yaml``): 200x200, vertical fov 10°, fixed eye and target. Gripper camera
(``cameras/gripper.yaml``): 84x84, fov 75°, on the robot's ``gripper_cam`` link looking along its y axis.
Segmentation is the renderer's body id per pixel (-1: nothing) and link id (-1: the body's base).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CameraImage", "CameraSpec", "render"]


@dataclass(frozen=True)
class CameraSpec:
    """One camera of the yaml: image size (px), vertical fov (deg), clip planes (m), optional fixed pose."""

    name: str
    width: int
    height: int
    fov: float
    near: float
    far: float
    eye: tuple[float, float, float] | None = None
    target: tuple[float, float, float] | None = None
    up: tuple[float, float, float] | None = None

    @classmethod
    def from_conf(cls, name: str, conf: dict[str, Any]) -> CameraSpec:
        def vec(key: str) -> tuple[float, float, float] | None:
            return tuple(float(v) for v in conf[key]) if key in conf else None  # type: ignore[return-value]

        return cls(
            name,
            int(conf["width"]),
            int(conf["height"]),
            float(conf["fov"]),
            float(conf["nearval"]),
            float(conf["farval"]),
            vec("look_from"),
            vec("look_at"),
            vec("up_vector"),
        )

    @property
    def intrinsics(self) -> np.ndarray:
        """3x3 pinhole matrix (px): f = height / (2 tan(fov/2)), principal point at the image centre."""
        f = self.height / (2.0 * np.tan(np.deg2rad(self.fov) / 2.0))
        return np.array([[f, 0.0, self.width / 2.0], [0.0, f, self.height / 2.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class CameraImage:
    """One render: ``rgb`` (H, W, 3) uint8, ``depth`` (H, W) metres along the optical axis, ``body`` and
    ``link`` (H, W) int ids, ``view`` the 4x4 world→camera (OpenGL) matrix, ``K`` the intrinsics (px)."""

    rgb: np.ndarray
    depth: np.ndarray
    body: np.ndarray
    link: np.ndarray
    view: np.ndarray
    K: np.ndarray


def _gripper_view(pb: Any, cid: int, robot_uid: int, link: int) -> list[float]:
    state = pb.getLinkState(robot_uid, link, computeForwardKinematics=True, physicsClientId=cid)
    pos = np.asarray(state[4])
    rot = np.asarray(pb.getMatrixFromQuaternion(state[5])).reshape(3, 3)
    return list(pb.computeViewMatrix(pos.tolist(), (pos + rot[:, 1]).tolist(), (-rot[:, 2]).tolist()))


def render(pb: Any, cid: int, spec: CameraSpec, robot_uid: int = -1, cam_link: int = -1) -> CameraImage:
    """Render ``spec`` in client ``cid``: a fixed camera, or one on ``robot_uid``'s link ``cam_link``."""
    if spec.eye is not None and spec.target is not None and spec.up is not None:
        view = list(pb.computeViewMatrix(spec.eye, spec.target, spec.up))
    else:
        view = _gripper_view(pb, cid, robot_uid, cam_link)
    proj = pb.computeProjectionMatrixFOV(
        fov=spec.fov, aspect=spec.width / spec.height, nearVal=spec.near, farVal=spec.far
    )
    _, _, rgba, zbuf, seg = pb.getCameraImage(
        spec.width,
        spec.height,
        viewMatrix=view,
        projectionMatrix=proj,
        flags=pb.ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX,
        renderer=pb.ER_TINY_RENDERER,
        physicsClientId=cid,
    )
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(spec.height, spec.width, 4)[:, :, :3]
    z = np.asarray(zbuf, dtype=float).reshape(spec.height, spec.width)
    depth = spec.far * spec.near / (spec.far - (spec.far - spec.near) * z)
    seg = np.asarray(seg, dtype=np.int64).reshape(spec.height, spec.width)
    body = np.where(seg >= 0, seg & ((1 << 24) - 1), -1)
    link = np.where(seg >= 0, (seg >> 24) - 1, -1)
    return CameraImage(rgb, depth, body, link, np.asarray(view).reshape(4, 4).T, spec.intrinsics)
