"""CALVIN's static and gripper cameras: RGB, depth linearised to metres, ground-truth segmentation.

Static camera (``cameras/static.yaml``): 200x200, vertical fov 10°, fixed eye and target. Gripper camera
(``cameras/gripper.yaml``): 84x84, fov 75°, on the robot's ``gripper_cam`` link looking along its y axis.
Segmentation is the renderer's body id per pixel (-1: nothing) and link id (-1: the body's base).
:func:`to_frame` turns a render into the project's :class:`~simpact.core.frame.Frame` (OpenCV intrinsics
and axes, the camera pose in the robot base frame, ground-truth masks of the blocks) for real2sim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simpact.core.frame import Frame

__all__ = ["CameraImage", "CameraSpec", "render", "to_frame"]


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
        """3x3 pinhole matrix (px), OpenCV convention (pixel centres at integer coordinates):
        f = height / (2 tan(fov/2)), principal point ((W-1)/2, (H-1)/2), the image centre."""
        f = self.height / (2.0 * np.tan(np.deg2rad(self.fov) / 2.0))
        return np.array(
            [[f, 0.0, (self.width - 1) / 2.0], [0.0, f, (self.height - 1) / 2.0], [0.0, 0.0, 1.0]]
        )


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


#: OpenGL camera axes (x right, y up, z backward) to OpenCV's (x right, y down, z forward).
_GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])


def to_frame(image: CameraImage, masks: dict[int, str], base_position: np.ndarray) -> Frame:
    """``image`` as a :class:`Frame`: ``masks`` maps body ids to names (others are 0, no object);
    ``T_base_cam`` is the camera pose in the robot base frame (the base is at ``base_position`` m, not
    rotated); ``metadata["T_world_cam"]`` is the pose in CALVIN's world frame."""
    T_world_cam = np.linalg.inv(_GL_TO_CV @ image.view)
    T_base_cam = T_world_cam.copy()
    T_base_cam[:3, 3] -= np.asarray(base_position, dtype=float)
    ids = np.zeros(image.body.shape, dtype=np.int32)
    names: dict[int, str] = {}
    for k, (uid, name) in enumerate(sorted(masks.items()), start=1):
        ids[image.body == uid] = k
        names[k] = name
    return Frame(
        rgb=image.rgb.copy(),
        depth=image.depth.astype(np.float32),
        K=image.K,
        T_base_cam=T_base_cam,
        masks=ids,
        mask_names=names,
        metadata={"T_world_cam": T_world_cam.tolist(), "source": "calvin"},
    )
