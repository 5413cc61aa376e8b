"""A structured-light depth camera's errors on a rendered frame: the development split of ``bench real2sim``.

The rendered frames' depth is exact, the real frames' is not (UOIS: 1-4 cm raised skirts around objects,
ClearGrasp: stereo edges fattened, missing depth in shadows), and the real frames have no ground truth. A
rendered frame with this model's errors has both: tune real2sim on it, report on the real frames. The model
follows what is published for the Kinect v1 / PrimeSense class of sensors (Khoshelham & Elberink 2012,
"Accuracy and resolution of Kinect depth data"; Nguyen, Izadi & Lovell 2012, "Modeling Kinect sensor
noise"), applied in this order, deterministically for a seed:

1. **shadows**: the projector sits ``baseline_m`` beside the camera (+x); a pixel whose point the projector
   cannot see, because a nearer surface on the projector's side hides it, reads 0 (the band of missing
   depth beside every object);
2. **grazing surfaces**: a pixel whose surface is seen at more than ``max_incidence_deg`` from its ray
   reads 0;
3. **smeared edges**: the depth is matched over a window, so it is the mean of the valid depth over a
   Gaussian window of ``smear_px`` (px, sigma): across an object's outline near and far surfaces mix.
   0.4 px matches the PoseCNN frames (an Asus Xtion) by :func:`edge_runs`: of the steep depth steps along
   their rows, 74 / 12 / 13 / 1 % are runs of 1 / 2 / 3 / 4+ px, against 78 / 9 / 12 / 0 % on five
   rendered task frames with this model (92 / 5 / 1 / 2 % exact); 1.5 px gives 4+ px runs on 31 %
   (``bench real2sim`` reports these shares for every frame kind);
4. **axial noise**: Gaussian, sigma = 1.2 mm + 1.9 mm/m² · (z − 0.4 m)² (Nguyen et al., their eq. 5);
5. **disparity steps**: the depth rounded to the sensor's disparity resolution, steps of
   ``quant_per_m2`` · z² (m; 1/8 px of disparity at f = 580 px and a 7.5 cm baseline: 2.85e-3 · z²).

What it does not model: the UOIS frames' raised skirts of 1-4 cm at objects' feet and their waves of
±1 cm across a surface (a smoothing filter more than a sensor), multipath, reflective and transparent
surfaces (glass is its own section of the bench), colour noise.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.ndimage import gaussian_filter

from simpact.core.frame import Frame

__all__ = ["SensorNoise", "add_sensor_noise", "edge_runs"]


@dataclasses.dataclass(frozen=True)
class SensorNoise:
    """The parameters of the model (see the module docstring); the defaults are a Kinect v1 at 0.5-1.5 m."""

    baseline_m: float = 0.075
    max_incidence_deg: float = 78.0
    smear_px: float = 0.4
    axial_base_m: float = 0.0012
    axial_per_m2: float = 0.0019
    quant_per_m2: float = 2.85e-3


def _shadowed(depth: np.ndarray, fx: float, baseline_m: float) -> np.ndarray:
    """(H, W) bool: pixels the projector, ``baseline_m`` (m) to the camera's +x, cannot see. A point at
    column u and depth z lies on the projector's column u − fx·b/z; a nearer point farther along the row
    toward the projector that falls on the same or a smaller projector column hides it."""
    h, w = depth.shape
    cols = np.arange(w, dtype=np.float64)[None, :].repeat(h, 0)
    proj = np.where(depth > 0, cols - fx * baseline_m / np.where(depth > 0, depth, 1.0), np.inf)
    # The smallest projector column among the pixels to the right of each pixel.
    right = np.minimum.accumulate(proj[:, ::-1], axis=1)[:, ::-1]
    beyond = np.full_like(proj, np.inf)
    beyond[:, :-1] = right[:, 1:]
    return (depth > 0) & (beyond < proj - 0.5)


def _grazing(depth: np.ndarray, K: np.ndarray, max_incidence_deg: float, jump_m: float = 0.02) -> np.ndarray:
    """(H, W) bool: pixels whose surface (normal from the depth's gradients) is seen at more than
    ``max_incidence_deg`` from the pixel's ray; a step of ``jump_m`` (m) to a neighbour is an edge between
    two surfaces, not a surface (its pixels are left to the smearing)."""
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([(u - K[0, 2]) / K[0, 0] * depth, (v - K[1, 2]) / K[1, 1] * depth, depth], axis=-1)
    du = np.gradient(pts, axis=1)
    dv = np.gradient(pts, axis=0)
    normal = np.cross(du, dv)
    norm = np.linalg.norm(normal, axis=-1)
    ray = pts / np.maximum(np.linalg.norm(pts, axis=-1, keepdims=True), 1e-9)
    cos = np.abs(np.sum(normal * ray, axis=-1)) / np.maximum(norm, 1e-12)
    edge = (np.abs(du[..., 2]) > jump_m / 2) | (np.abs(dv[..., 2]) > jump_m / 2)
    return (depth > 0) & (norm > 0) & ~edge & (cos < np.cos(np.deg2rad(max_incidence_deg)))


def add_sensor_noise(frame: Frame, seed: int, model: SensorNoise = SensorNoise()) -> Frame:
    """``frame`` with its depth (m, 0 invalid) as the model's sensor would measure it; colour, masks and
    camera unchanged. The same frame and seed give the same depth, bit for bit."""
    depth = np.asarray(frame.depth, dtype=np.float64)
    K = np.asarray(frame.K, dtype=np.float64)
    valid = depth > 0
    valid &= ~_shadowed(depth, float(K[0, 0]), model.baseline_m)
    valid &= ~_grazing(depth, K, model.max_incidence_deg)
    # Smeared edges: the mean of the valid depth over the window (normalised convolution).
    weight = gaussian_filter(valid.astype(np.float64), model.smear_px)
    smeared = gaussian_filter(np.where(valid, depth, 0.0), model.smear_px) / np.maximum(weight, 1e-9)
    z = np.where(valid & (weight > 0.5), smeared, 0.0)
    rng = np.random.default_rng(seed)
    sigma = model.axial_base_m + model.axial_per_m2 * (z - 0.4) ** 2
    z = np.where(z > 0, z + sigma * rng.standard_normal(z.shape), 0.0)
    if model.quant_per_m2 > 0:
        step = np.where(z > 0, model.quant_per_m2 * z**2, 1.0)
        z = np.round(z / step) * step
    return dataclasses.replace(frame, depth=z.astype(frame.depth.dtype))


def edge_runs(depth: np.ndarray, steep: float = 0.01) -> np.ndarray:
    """(4,) int: how many runs of 1, 2, 3 and 4 or more consecutive steep steps the rows of ``depth`` (m, 0
    invalid) hold; a step is steep when the depth changes by more than ``steep`` of itself from one pixel to
    the next. A sharp edge is one step, an edge smeared over k mixed pixels a run of k + 1: how a sensor
    blurs edges, compared between real and modelled frames."""
    z = np.asarray(depth, dtype=np.float64)
    step = np.diff(z, axis=1)
    both = (z[:, :-1] > 0) & (z[:, 1:] > 0)
    counts = np.zeros(4, np.int64)
    for sign in (1.0, -1.0):  # runs toward the far side and toward the near side
        steep_px = both & (sign * step > steep * z[:, :-1])
        edges = np.diff(np.pad(steep_px.astype(np.int8), ((0, 0), (1, 1))), axis=1)
        length = np.flatnonzero(edges.ravel() == -1) - np.flatnonzero(edges.ravel() == 1)
        counts += np.bincount(np.minimum(length, 4), minlength=5)[1:]
    return counts
