"""Offscreen RGB, depth and segmentation rendering of MuJoCo scenes through a calibrated pinhole camera.

Conventions
-----------
- Intrinsics ``K`` are OpenCV's: pixel ``(u, v)`` (column, row) has its centre at integer coordinates, so the
  image spans ``[-0.5, W - 0.5] x [-0.5, H - 0.5]``, and a point ``p_cam`` projects to
  ``u = fx * x / z + cx``, ``v = fy * y / z + cy``.
- ``T_base_cam`` (4x4) maps camera-frame points to the robot base / MuJoCo world frame, with the OpenCV
  camera axes: x right, y down, z forward (optical axis). MuJoCo cameras look along their -z with y up; the
  conversion is a rotation of pi about the camera x axis.
- Depth is in metres along the optical axis (camera-frame z), as a RealSense reports it; 0 marks no geometry.

The GL backend is chosen by MuJoCo from the ``MUJOCO_GL`` environment variable when ``mujoco`` is first
imported; this module never sets it. Headless machines need ``MUJOCO_GL=egl`` (or ``osmesa``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import imageio_ffmpeg
import mujoco
import numpy as np

from simpact.core.frame import Frame
from simpact.core.rotations import rigid_transform_problem

__all__ = [
    "MAX_IMAGE_SIDE",
    "CameraSpec",
    "RenderedFrame",
    "Renderer",
    "VideoWriter",
    "add_camera",
    "camera_from_model",
    "object_masks",
    "write_video",
]

#: Pixel pitch (m) of the virtual sensor written into the MJCF camera. A power of two keeps
#: ``sensorsize`` and ``focal``/``principal`` exact in MuJoCo's float32 storage; only ratios matter.
_PIXEL_PITCH = 2.0**-18

#: OpenCV camera axes (x right, y down, z forward) -> MuJoCo camera axes (x right, y up, z backward).
_CV_TO_MJ = np.diag([1.0, -1.0, -1.0])

_RIGID_ATOL = 1e-6

MAX_IMAGE_SIDE = 8192
"""Largest image width or height rendered offscreen, pixels: larger framebuffers fail in OpenGL (or exhaust
memory) with errors that do not name the size."""


def _default_K() -> np.ndarray:
    """RealSense D435i colour stream at 640x480 (fx = fy = 606 px, cx = 321 px, cy = 243 px)."""
    return np.array([[606.0, 0.0, 321.0], [0.0, 606.0, 243.0], [0.0, 0.0, 1.0]])


def _look_at_matrix(eye: Any, target: Any, up: Any = (0.0, 0.0, 1.0)) -> np.ndarray:
    """4x4 ``T_base_cam`` (OpenCV axes) of a camera at ``eye`` (m), optical axis through ``target`` (m)."""
    eye_v = np.asarray(eye, dtype=np.float64).reshape(3)
    z = np.asarray(target, dtype=np.float64).reshape(3) - eye_v
    up_v = np.asarray(up, dtype=np.float64).reshape(3)
    if not (np.all(np.isfinite(z)) and np.all(np.isfinite(up_v))):
        raise ValueError("look_at: eye, target and up must be finite")
    if np.linalg.norm(z) < 1e-9:
        raise ValueError("look_at: eye and target coincide")
    z /= np.linalg.norm(z)
    x = np.cross(z, up_v)  # image x (right) = forward x up
    if np.linalg.norm(x) < 1e-9:
        raise ValueError("look_at: viewing direction is parallel to `up`; choose another `up` vector")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)  # image y (down)
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, y, z, eye_v
    return T


def _default_T_base_cam() -> np.ndarray:
    """Camera 1.25 m in front of the robot base, 0.55 m up, looking at the table centre (0.5, 0, 0.05) m."""
    return _look_at_matrix((1.25, 0.0, 0.55), (0.5, 0.0, 0.05))


def _check_rigid(T: np.ndarray, what: str) -> None:
    problem = rigid_transform_problem(T, _RIGID_ATOL)
    if problem:
        raise ValueError(f"{what} {problem}")


@dataclasses.dataclass(frozen=True, eq=False)
class CameraSpec:
    """A calibrated pinhole camera: image size, intrinsics and pose in the robot base (= MuJoCo world) frame.

    The arrays are stored as read-only float64 copies.
    """

    width: int = 640
    """Image width (pixels)."""
    height: int = 480
    """Image height (pixels)."""
    K: np.ndarray = dataclasses.field(default_factory=_default_K)
    """3x3 intrinsics (pixels), OpenCV convention, zero skew."""
    T_base_cam: np.ndarray = dataclasses.field(default_factory=_default_T_base_cam)
    """4x4 camera-to-base transform (m), OpenCV camera axes (x right, y down, z forward)."""

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"CameraSpec.{name} must be a positive integer (pixels), got {value!r}")
            if value > MAX_IMAGE_SIDE:
                raise ValueError(
                    f"CameraSpec.{name} {value} px is larger than {MAX_IMAGE_SIDE} px, the largest image "
                    "rendered offscreen"
                )
            object.__setattr__(self, name, int(value))
        K = np.array(self.K, dtype=np.float64)
        if K.shape != (3, 3):
            raise ValueError(f"CameraSpec.K must be 3x3, got shape {K.shape}")
        if not np.all(np.isfinite(K)):
            raise ValueError("CameraSpec.K contains NaN or inf")
        if K[1, 0] != 0.0 or K[2, 0] != 0.0 or K[2, 1] != 0.0 or K[2, 2] != 1.0:
            raise ValueError(
                "CameraSpec.K must be an upper-triangular pinhole matrix [[fx,0,cx],[0,fy,cy],[0,0,1]], "
                f"got {K.tolist()}"
            )
        if K[0, 1] != 0.0:
            raise ValueError(f"CameraSpec.K has skew {K[0, 1]}; MuJoCo cameras cannot render skewed pixels")
        if K[0, 0] <= 0.0 or K[1, 1] <= 0.0:
            raise ValueError(f"CameraSpec.K focal lengths must be positive, got fx={K[0, 0]}, fy={K[1, 1]}")
        if not (-0.5 <= K[0, 2] <= self.width - 0.5 and -0.5 <= K[1, 2] <= self.height - 0.5):
            raise ValueError(
                f"CameraSpec.K principal point ({K[0, 2]}, {K[1, 2]}) px lies outside the "
                f"{self.width}x{self.height} image"
            )
        T = np.array(self.T_base_cam, dtype=np.float64)
        _check_rigid(T, "CameraSpec.T_base_cam")
        K.flags.writeable = False
        T.flags.writeable = False
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "T_base_cam", T)

    @classmethod
    def look_at(cls, eye: Any, target: Any, up: Any = (0.0, 0.0, 1.0), **kwargs: Any) -> CameraSpec:
        """Camera at ``eye`` (m, base frame), optical axis through ``target`` (m), image-up along ``up``.

        ``kwargs`` are the other fields (``width``, ``height``, ``K``).
        """
        return cls(T_base_cam=_look_at_matrix(eye, target, up), **kwargs)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CameraSpec:
        """From a config mapping: ``width``, ``height``, ``K`` (3x3), and either ``T_base_cam`` (4x4) or
        ``eye`` and ``target`` (m, optional ``up``); omitted fields keep the defaults."""
        known = {"width", "height", "K", "T_base_cam", "eye", "target", "up"}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"camera: unknown fields {sorted(unknown)}; expected some of {sorted(known)}")
        fields = {k: raw[k] for k in ("width", "height", "K") if k in raw}
        if "eye" in raw or "target" in raw:
            if "T_base_cam" in raw or not ("eye" in raw and "target" in raw):
                raise ValueError("camera: give either T_base_cam, or both eye and target")
            return cls.look_at(raw["eye"], raw["target"], raw.get("up", (0.0, 0.0, 1.0)), **fields)
        if "T_base_cam" in raw:
            fields["T_base_cam"] = raw["T_base_cam"]
        return cls(**fields)

    @property
    def fx(self) -> float:
        """Horizontal focal length (pixels)."""
        return float(self.K[0, 0])

    @property
    def fy(self) -> float:
        """Vertical focal length (pixels)."""
        return float(self.K[1, 1])

    @property
    def cx(self) -> float:
        """Principal point column (pixels)."""
        return float(self.K[0, 2])

    @property
    def cy(self) -> float:
        """Principal point row (pixels)."""
        return float(self.K[1, 2])

    def project(self, p_base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project base-frame points (..., 3) m to pixels (..., 2) ``(u, v)`` and depths (...,) m."""
        p = np.asarray(p_base, dtype=np.float64)
        T_cam_base = np.linalg.inv(self.T_base_cam)
        p_cam = p @ T_cam_base[:3, :3].T + T_cam_base[:3, 3]
        z = p_cam[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = np.stack(
                [self.fx * p_cam[..., 0] / z + self.cx, self.fy * p_cam[..., 1] / z + self.cy], axis=-1
            )
        return uv, z

    def unproject(self, uv: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Back-project pixels (..., 2) with optical-axis depths (...,) m to base-frame points (..., 3) m."""
        uv_a = np.asarray(uv, dtype=np.float64)
        z = np.asarray(depth, dtype=np.float64)
        p_cam = np.stack(
            [(uv_a[..., 0] - self.cx) / self.fx * z, (uv_a[..., 1] - self.cy) / self.fy * z, z], axis=-1
        )
        return p_cam @ self.T_base_cam[:3, :3].T + self.T_base_cam[:3, 3]


def add_camera(spec: mujoco.MjSpec, camera: CameraSpec, name: str = "simpact_camera") -> None:
    """Add a fixed camera to the worldbody of an uncompiled ``spec`` reproducing ``camera`` exactly.

    Intrinsics are written as a virtual sensor (``resolution``, ``sensor_size``, ``focal_pixel``,
    ``principal_pixel``); MuJoCo's principal offset is measured from the sensor centre, in pixels, with the
    sign and half-pixel shift that make the rendered image follow OpenCV's pixel-centre convention (checked
    by a depth projection test). The offscreen framebuffer is enlarged to fit the image if needed.
    """
    if spec.camera(name) is not None:
        raise ValueError(f"the MjSpec already has a camera named {name!r}")
    w, h = camera.width, camera.height
    R_mj = camera.T_base_cam[:3, :3] @ _CV_TO_MJ
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, R_mj.flatten())
    cam = spec.worldbody.add_camera(name=name)
    cam.pos = camera.T_base_cam[:3, 3].copy()
    cam.quat = quat
    cam.resolution = [w, h]
    cam.sensor_size = [w * _PIXEL_PITCH, h * _PIXEL_PITCH]
    cam.focal_pixel = [camera.fx, camera.fy]
    cam.principal_pixel = [w / 2.0 - camera.cx - 0.5, h / 2.0 - camera.cy - 0.5]
    glob = spec.visual.global_
    glob.offwidth = max(int(glob.offwidth), w)
    glob.offheight = max(int(glob.offheight), h)


def camera_from_model(model: mujoco.MjModel, name: str, data: mujoco.MjData | None = None) -> CameraSpec:
    """The :class:`CameraSpec` of camera ``name`` in a compiled model (inverse of :func:`add_camera`).

    The pose is read from ``data`` (after ``mj_forward``/``mj_kinematics``) when given, else from the model's
    reference pose, which is exact only for cameras fixed to the worldbody. Cameras defined by ``fovy`` alone
    map to a centred principal point and square pixels.
    """
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if cam_id < 0:
        raise ValueError(f"the model has no camera named {name!r}")
    w, h = (int(x) for x in model.cam_resolution[cam_id])
    sensor = model.cam_sensorsize[cam_id].astype(np.float64)
    if sensor[1] > 0.0:
        intr = model.cam_intrinsic[cam_id].astype(np.float64)
        fx, fy = intr[0] * w / sensor[0], intr[1] * h / sensor[1]
        cx = w / 2.0 - intr[2] * w / sensor[0] - 0.5
        cy = h / 2.0 - intr[3] * h / sensor[1] - 0.5
    else:
        if w <= 1 and h <= 1:
            w, h = 640, 480
        fy = (h / 2.0) / np.tan(np.deg2rad(float(model.cam_fovy[cam_id])) / 2.0)
        fx, cx, cy = fy, (w - 1) / 2.0, (h - 1) / 2.0
    K = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    T = np.eye(4)
    if data is not None:
        T[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3) @ _CV_TO_MJ
        T[:3, 3] = data.cam_xpos[cam_id]
    else:
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, model.cam_quat[cam_id])
        T[:3, :3] = mat.reshape(3, 3) @ _CV_TO_MJ
        T[:3, 3] = model.cam_pos[cam_id]
    return CameraSpec(width=w, height=h, K=K, T_base_cam=T)


@dataclasses.dataclass(frozen=True, eq=False)
class RenderedFrame:
    """One rendered view. ``H, W`` are the camera's image size."""

    rgb: np.ndarray
    """(H, W, 3) uint8 colour image."""
    depth: np.ndarray
    """(H, W) float32 depth (m) along the optical axis; 0 where no geometry is seen."""
    segmentation: np.ndarray
    """(H, W) int32 MuJoCo geom ids; -1 for background (and non-geom objects such as flexes)."""
    K: np.ndarray
    """3x3 intrinsics (pixels)."""
    T_base_cam: np.ndarray
    """4x4 camera-to-base transform at render time (m), OpenCV camera axes."""
    extra: np.ndarray | None = None
    """(H, W) int32 labels of geometry added by a ``decorate`` callback (:func:`add_rope`); -1 elsewhere."""

    def to_frame(self, masks: np.ndarray | None = None, mask_names: Mapping[int, str] | None = None) -> Frame:
        """This view as a :class:`~simpact.core.frame.Frame`, with optional object ``masks``."""
        return Frame(
            rgb=self.rgb,
            depth=self.depth,
            K=self.K,
            T_base_cam=self.T_base_cam,
            masks=masks,
            mask_names=dict(mask_names or {}),
        )


_GL_HELP = (
    "Could not create an OpenGL context for offscreen rendering (MUJOCO_GL={gl!r}): {err}. "
    "On a headless machine set MUJOCO_GL=egl (Debian package libegl1, with libgl1-mesa-dri for CPU "
    "rendering) or MUJOCO_GL=osmesa (Debian package libosmesa6) before `import mujoco`."
)


class Renderer:
    """Offscreen renderer for one named camera of a compiled model; a context manager that frees GL resources.

    ``camera`` gives the image size and intrinsics; it must match the model's camera (as written by
    :func:`add_camera`). Without it they are read from the model (:func:`camera_from_model`).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        camera_name: str = "simpact_camera",
        camera: CameraSpec | None = None,
        *,
        max_geom: int = 10000,
    ) -> None:
        self._renderer: Any = None
        from_model = camera_from_model(model, camera_name)
        if camera is None:
            camera = from_model
        elif (camera.width, camera.height) != (from_model.width, from_model.height) or not np.allclose(
            camera.K, from_model.K, rtol=1e-6, atol=1e-4
        ):
            raise ValueError(
                f"camera {camera_name!r} in the model ({from_model.width}x{from_model.height}, "
                f"K={from_model.K.tolist()}) does not match the CameraSpec ({camera.width}x{camera.height}, "
                f"K={camera.K.tolist()}); add it with add_camera(spec, camera)"
            )
        buf_w, buf_h = int(model.vis.global_.offwidth), int(model.vis.global_.offheight)
        if camera.width > buf_w or camera.height > buf_h:
            raise ValueError(
                f"image {camera.width}x{camera.height} exceeds the model's offscreen buffer {buf_w}x{buf_h}; "
                "set spec.visual.global_.offwidth/offheight (add_camera does)"
            )
        self._model = model
        self._camera_name = camera_name
        self._camera_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera_name)
        self._camera = camera
        extent = float(model.stat.extent)
        self._zfar = float(model.vis.map.zfar) * extent
        try:
            self._renderer = mujoco.Renderer(model, camera.height, camera.width, max_geom=max_geom)
        except (
            Exception
        ) as err:  # MuJoCo raises FatalError/ImportError/AttributeError depending on the backend
            gl = os.environ.get("MUJOCO_GL", "")
            raise RuntimeError(_GL_HELP.format(gl=gl, err=err)) from err

    @property
    def camera(self) -> CameraSpec:
        """The camera's size and intrinsics (pose as given or as in the model at construction)."""
        return self._camera

    def _gl(self) -> Any:
        if self._renderer is None:
            raise RuntimeError("Renderer is closed")
        return self._renderer

    def _T_base_cam(self, data: mujoco.MjData) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = data.cam_xmat[self._camera_id].reshape(3, 3) @ _CV_TO_MJ
        T[:3, 3] = data.cam_xpos[self._camera_id]
        return T

    def render_rgb(
        self, data: mujoco.MjData, shadows: bool = True, decorate: Decorate | None = None
    ) -> np.ndarray:
        """(H, W, 3) uint8 colour image only (one GL pass), e.g. for videos. ``data`` must be forwarded.
        Without ``shadows`` it renders about 5x faster on a CPU (llvmpipe). ``decorate`` adds geometry to
        the scene (e.g. :func:`add_rope`)."""
        r = self._gl()
        r.update_scene(data, camera=self._camera_name)
        if decorate is not None:
            decorate(r.scene)
        r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        return np.asarray(r.render(), dtype=np.uint8)

    def render(self, data: mujoco.MjData, decorate: Decorate | None = None) -> RenderedFrame:
        """Colour, depth (m) and geom segmentation of ``data`` (kinematics up to date: ``mj_forward``);
        ``decorate`` adds geometry (:func:`add_rope`), labelled in ``extra``."""
        r = self._gl()
        r.update_scene(data, camera=self._camera_name)
        if decorate is not None:
            decorate(r.scene)
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        rgb = np.asarray(r.render(), dtype=np.uint8)
        r.enable_depth_rendering()
        depth = np.asarray(r.render(), dtype=np.float32)
        r.enable_segmentation_rendering()
        seg = r.render()
        r.disable_segmentation_rendering()
        obj_id, obj_type = seg[..., 0], seg[..., 1]
        geom_ids = np.where(obj_type == int(mujoco.mjtObj.mjOBJ_GEOM), obj_id, -1).astype(np.int32)
        no_hit = (obj_type < 0) | (depth >= np.float32(self._zfar * (1.0 - 1e-6)))
        depth = np.where(no_hit, np.float32(0.0), depth).astype(np.float32)
        extra = np.where(obj_type == _EXTRA_OBJTYPE, obj_id, -1).astype(np.int32)
        return RenderedFrame(
            rgb=rgb,
            depth=depth,
            segmentation=geom_ids,
            K=self._camera.K.copy(),
            T_base_cam=self._T_base_cam(data),
            extra=extra if decorate is not None else None,
        )

    def close(self) -> None:
        """Free the GL context; further renders raise ``RuntimeError``. Safe to call twice."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> Renderer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


Decorate = Callable[[mujoco.MjvScene], None]
"""Adds geometry to a scene after ``update_scene`` (deformables drawn by their World)."""
_EXTRA_OBJTYPE = int(mujoco.mjtObj.mjOBJ_FLEX)
"""Object type given to added geometry, so segmentation tells it apart (the models have no flexes)."""


def add_rope(
    scene: mujoco.MjvScene,
    points: np.ndarray,
    radius: float,
    rgba: Sequence[float],
    label: int = 0,
    edges: np.ndarray | None = None,
) -> None:
    """Draw particles ``points`` (N, 3) m as capsules of ``radius`` m between consecutive points (a rope) or
    along ``edges`` (E, 2) index pairs (a cloth's grid), labelled ``label`` in segmentation
    (:attr:`RenderedFrame.extra`); stops when the scene is full."""
    points = np.asarray(points, dtype=np.float64)
    colour = np.asarray(rgba, dtype=np.float32)
    pairs = zip(points[:-1], points[1:]) if edges is None else zip(points[edges[:, 0]], points[edges[:, 1]])
    for a, b in pairs:
        if scene.ngeom >= scene.maxgeom:
            return
        geom = scene.geoms[scene.ngeom]
        mujoco.mjv_initGeom(
            geom, mujoco.mjtGeom.mjGEOM_CAPSULE, np.zeros(3), np.zeros(3), np.eye(3).ravel(), colour
        )
        mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_CAPSULE, radius, a, b)
        geom.objtype = _EXTRA_OBJTYPE
        geom.objid = label
        geom.segid = scene.ngeom
        scene.ngeom += 1


def add_particles(
    scene: mujoco.MjvScene, points: np.ndarray, radius: float, rgba: Sequence[float], label: int = 0
) -> None:
    """Draw particles ``points`` (N, 3) m as spheres of ``radius`` m, labelled ``label`` in segmentation
    (:attr:`RenderedFrame.extra`); stops when the scene is full."""
    colour = np.asarray(rgba, dtype=np.float32)
    size = np.array([radius, radius, radius])
    for point in np.asarray(points, dtype=np.float64):
        if scene.ngeom >= scene.maxgeom:
            return
        geom = scene.geoms[scene.ngeom]
        mujoco.mjv_initGeom(geom, mujoco.mjtGeom.mjGEOM_SPHERE, size, point, np.eye(3).ravel(), colour)
        geom.objtype = _EXTRA_OBJTYPE
        geom.objid = label
        geom.segid = scene.ngeom
        scene.ngeom += 1


def object_masks(
    seg_geom_ids: np.ndarray, model: mujoco.MjModel, body_to_object: Mapping[int, int]
) -> np.ndarray:
    """Map a geom-id segmentation (-1 = background) to object ids via ``model.geom_bodyid``.

    ``body_to_object`` maps MuJoCo body ids to positive object ids; geoms of other bodies and the background
    map to 0. Child bodies of an object must be listed explicitly. Returns int32, of the input's shape.
    """
    seg = np.asarray(seg_geom_ids)
    if not np.issubdtype(seg.dtype, np.integer):
        raise ValueError(f"seg_geom_ids must be an integer array, got {seg.dtype}")
    if seg.size and (seg.min() < -1 or seg.max() >= model.ngeom):
        raise ValueError(f"seg_geom_ids must lie in [-1, {model.ngeom}), got [{seg.min()}, {seg.max()}]")
    body_lut = np.zeros(model.nbody, dtype=np.int32)
    for body, obj in body_to_object.items():
        if not 0 <= int(body) < model.nbody:
            raise ValueError(f"body id {body} is out of range [0, {model.nbody})")
        if int(obj) <= 0:
            raise ValueError(f"object ids must be positive (0 means no object), got {obj} for body {body}")
        body_lut[int(body)] = int(obj)
    lut = np.zeros(model.ngeom + 1, dtype=np.int32)  # slot 0: background (geom id -1)
    lut[1:] = body_lut[model.geom_bodyid]
    return lut[seg.astype(np.int64) + 1]


class VideoWriter:
    """Write RGB frames to an H.264 mp4 (yuv420p) via imageio-ffmpeg; a context manager.

    Frames are (H, W, 3) uint8 (or (H, W) grey) of one size; odd sizes are padded by one edge pixel
    because yuv420p needs even dimensions.
    """

    def __init__(self, path: str | os.PathLike[str], fps: float = 30.0, quality: float = 7.0) -> None:
        if not fps > 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.path = Path(path)
        self.fps = float(fps)
        self.quality = float(quality)
        self._gen: Any = None
        self._shape: tuple[int, int] | None = None
        self.frames_written = 0

    def append(self, frame: np.ndarray) -> None:
        """Add one frame: (H, W, 3) or (H, W) uint8."""
        img = np.asarray(frame)
        if img.ndim == 2:
            img = np.repeat(img[..., None], 3, axis=2)
        if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
            raise ValueError(f"video frames must be (H, W, 3) uint8, got {img.shape} {img.dtype}")
        h, w = img.shape[:2]
        if self._shape is None:
            self._shape = (h, w)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._gen = imageio_ffmpeg.write_frames(
                str(self.path),
                (w + w % 2, h + h % 2),
                fps=self.fps,
                codec="libx264",
                pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p",
                quality=self.quality,
                macro_block_size=1,
                ffmpeg_log_level="error",
            )
            self._gen.send(None)
        elif (h, w) != self._shape:
            raise ValueError(
                f"frame {self.frames_written} is {h}x{w}, "
                f"earlier frames are {self._shape[0]}x{self._shape[1]}"
            )
        if h % 2 or w % 2:
            img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        self._gen.send(np.ascontiguousarray(img))
        self.frames_written += 1

    def close(self) -> None:
        """Finish the file. A writer that received no frame writes nothing."""
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def write_video(frames: Iterable[np.ndarray], path: str | os.PathLike[str], fps: float = 30.0) -> Path:
    """Write ``frames`` ((H, W, 3) uint8) to an H.264 mp4 at ``fps`` frames/s; returns the path."""
    with VideoWriter(path, fps=fps) as writer:
        for frame in frames:
            writer.append(frame)
    if writer.frames_written == 0:
        raise ValueError("write_video got no frames")
    return writer.path
