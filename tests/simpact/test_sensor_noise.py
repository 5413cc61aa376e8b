"""The depth camera model of the bench's development split (simpact.bench.sensor_noise)."""

from __future__ import annotations

import numpy as np

from simpact.bench.sensor_noise import SensorNoise, add_sensor_noise
from simpact.core.frame import Frame

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])


def _wall_with_a_block(wall_m: float = 1.0, block_m: float | None = 0.8) -> Frame:
    """A flat wall facing the camera, with a nearer block in the middle of the image (columns 140-179)."""
    depth = np.full((240, 320), wall_m, np.float32)
    if block_m is not None:
        depth[100:140, 140:180] = block_m
    return Frame(rgb=np.zeros((240, 320, 3), np.uint8), depth=depth, K=K)


def test_the_same_seed_gives_the_same_depth_and_another_seed_another() -> None:
    frame = _wall_with_a_block()
    a, b, c = (add_sensor_noise(frame, s).depth for s in (3, 3, 4))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(frame.depth, _wall_with_a_block().depth)  # the frame itself is left alone


def test_a_flat_wall_at_one_metre_reads_with_the_published_noise() -> None:
    noisy = add_sensor_noise(_wall_with_a_block(block_m=None), 0).depth[20:-20, 20:-20]
    # sigma(1 m) = 1.2 + 1.9 * 0.6^2 = 1.88 mm, plus the 2.85 mm disparity steps (uniform: 0.82 mm)
    assert 1.6e-3 < float(np.std(noisy)) < 2.6e-3
    assert abs(float(np.mean(noisy)) - 1.0) < 5e-4  # no bias
    steps = np.unique(np.round(noisy / (2.85e-3 * noisy.astype(np.float64) ** 2)))
    assert len(steps) < 20  # quantised to disparity steps, not continuous


def test_the_projector_casts_a_shadow_beside_a_nearer_block() -> None:
    noisy = add_sensor_noise(_wall_with_a_block(), 0, SensorNoise(smear_px=0.5)).depth
    # Projector 7.5 cm to the camera's +x: the wall just left of the block is hidden from it, a band of
    # 600 * 0.075 * (1/0.8 - 1/1.0) = 11 px; the wall right of the block is lit.
    rows = slice(105, 135)
    assert (noisy[rows, 131:138] == 0).all()
    assert (noisy[rows, 182:195] > 0).all() and (noisy[rows, 100:125] > 0).all()


def test_edges_are_smeared_between_the_near_and_the_far_surface() -> None:
    clean = _wall_with_a_block()
    exact = SensorNoise(smear_px=2.0, axial_base_m=0.0, axial_per_m2=0.0, quant_per_m2=0.0)
    noisy = add_sensor_noise(clean, 0, exact)
    across = noisy.depth[120, 176:186]  # the block's right edge at column 180, seen by the projector
    mixed = (across > 0.82) & (across < 0.98)
    assert mixed.sum() >= 2  # mixed depths: the raised skirt real frames show around objects
    assert noisy.depth[120, 160] == clean.depth[120, 160] and noisy.depth[120, 230] == clean.depth[120, 230]


def test_edge_runs_count_a_sharp_edge_as_one_step_and_a_smeared_one_as_a_run() -> None:
    from simpact.bench.sensor_noise import edge_runs

    frame = _wall_with_a_block()
    assert edge_runs(frame.depth).tolist() == [80, 0, 0, 0]  # 40 rows, a step up and a step down each
    ramp = frame.depth.copy()
    ramp[100:140, 180:182] = (0.85, 0.93)  # two mixed pixels on the block's right edge: a run of three
    assert edge_runs(ramp).tolist() == [40, 0, 40, 0]
    smeared = add_sensor_noise(frame, 0, SensorNoise(smear_px=2.0, axial_base_m=0.0, axial_per_m2=0.0))
    assert edge_runs(smeared.depth)[3] > 0  # runs of 4 or more: no real frame has many (see the model)
