"""Cues that split touching objects (concave creases, colour edges where the surface bends), the table's
extent, and label matches kept only when good."""

from __future__ import annotations

import numpy as np

from real2sim.clutter import colour_edges, concave_creases, regrow, surface_normals, table_extent_share
from real2sim.segment import Cluster, _assign_by_hints


def _folded(depth_at_centre_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """An organised point image (60 x 80) of two planes meeting at the centre column at 45°: a valley
    (concave, two objects' faces meeting) for a positive offset, a ridge (a box's own edge) for negative."""
    v, u = np.mgrid[0:60, 0:80].astype(float)
    x = (u - 40) * 0.002
    y = (v - 30) * 0.002
    z = 1.0 + depth_at_centre_offset - np.sign(depth_at_centre_offset) * np.abs(x)
    return np.stack([x * z, y * z, z], axis=-1), np.ones((60, 80), bool)


def test_a_valley_is_a_crease_and_a_ridge_is_not() -> None:
    valley, ok = _folded(0.05)
    ridge, _ = _folded(-0.05)
    crease = concave_creases(valley, ok)
    assert crease[:, 38:43].any(axis=1)[10:50].all()  # along the whole fold
    assert not crease[:, :30].any() and not crease[:, 50:].any()
    assert not concave_creases(ridge, ok).any()


def test_surface_normals_are_numpys_cross_product_exactly_and_face_the_camera() -> None:
    pts, valid = _folded(0.05)
    pts = pts + np.random.default_rng(0).normal(scale=1e-3, size=pts.shape)  # not a plane: every digit counts
    valid[20, 30] = False
    n, ok = surface_normals(pts, valid, 2)
    dx, dy = np.zeros_like(pts), np.zeros_like(pts)
    dx[:, 2:-2], dy[2:-2] = pts[:, 4:] - pts[:, :-4], pts[4:] - pts[:-4]
    cross = -np.cross(dx, dy)
    with np.errstate(invalid="ignore"):  # the border, where no normal is defined
        expected = cross / np.linalg.norm(cross, axis=-1, keepdims=True)
    assert np.array_equal(n[ok], expected[ok])
    assert not ok[:2].any() and not ok[20, 30] and not ok[20, 32] and ok[20, 33]
    assert (n[ok][:, 2] < 0).all()  # towards the camera, which looks along +z


def test_lengths_are_numpys_norm_exactly() -> None:
    from real2sim.clutter import _length

    v = np.random.default_rng(1).normal(size=(40, 50, 3)) * np.logspace(-6, 2, 50)[None, :, None]
    for image in (v, v[:, ::3], v[1:, :-2] - v[:-1, 2:]):  # contiguous, strided, a difference of slices
        assert np.array_equal(_length(image), np.linalg.norm(image, axis=-1))


def test_colour_edges_need_a_bend_that_is_not_convex() -> None:
    rgb = np.zeros((60, 80, 3), np.uint8)
    rgb[:, 40:] = (220, 30, 30)  # red right half, black left
    valley, ok = _folded(0.05)
    ridge, _ = _folded(-0.05)
    flat = valley.copy()
    flat[..., 2] = 1.0
    assert colour_edges(rgb, valley, ok)[:, 38:43].any()
    assert not colour_edges(rgb, ridge, ok).any()  # a box's printed edge
    assert not colour_edges(rgb, flat, ok).any()  # print on a flat face


def test_regrow_gives_cut_pixels_back() -> None:
    labels = np.zeros((5, 7), np.int32)
    labels[:, :3], labels[:, 4:] = 1, 2
    free = np.zeros((5, 7), bool)
    free[:, 3] = True
    out = regrow(labels, free)
    assert (out[:, 3] > 0).all() and (out[:, :3] == 1).all() and (out[:, 4:] == 2).all()


def test_table_extent_share() -> None:
    table = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], float)
    on = np.array([[0.5, 0.5, 0.1], [0.2, 0.9, 0.05]])
    beyond = np.array([[1.5, 0.5, 0.1], [0.5, 1.4, 0.1]])  # a chair seat behind the table
    assert table_extent_share(on, table) == 1.0 and table_extent_share(beyond, table) == 0.0


def _cluster(footprint: tuple[float, float], height: float, rgb: tuple[int, int, int]) -> Cluster:
    return Cluster(np.zeros((2, 2), bool), 100, height, footprint, rgb, "round")


def test_labels_match_regions_only_when_the_match_is_good() -> None:
    can = _cluster((0.066, 0.066), 0.10, (200, 40, 40))
    big = _cluster((0.40, 0.30), 0.25, (120, 120, 120))  # several objects in one region
    confidence: dict[int, float] = {}
    mapping = _assign_by_hints([big, can], ["tomato soup can", "cracker box"], confidence)
    assert mapping == {1: "tomato soup can"}  # the cracker box is not forced onto the big region
    assert 0.2 <= confidence[1] <= 1.0 and 0 not in confidence
    # A label whose only region is far too big for it: not found rather than wrong.
    assert _assign_by_hints([big], ["tomato soup can"], {}) == {}


def test_a_label_without_a_cue_is_matched_by_size_order_and_says_it_guessed() -> None:
    """A label naming no colour, size or object the matcher knows goes to the region of its rank in size,
    with a confidence no better than a guess among the regions (it was 0.95: banana on a cracker box)."""
    can = _cluster((0.066, 0.066), 0.10, (200, 40, 40))
    big = _cluster((0.16, 0.06), 0.21, (120, 120, 120))
    small = _cluster((0.03, 0.02), 0.02, (30, 30, 30))
    confidence: dict[int, float] = {}
    mapping = _assign_by_hints([can, big, small], ["stapler", "tomato soup can"], confidence)
    assert mapping == {1: "stapler", 0: "tomato soup can"}
    assert confidence[1] <= 1 / 3 and confidence[0] > 0.5


def test_a_handle_of_the_mugs_colour_joins_it_and_an_apple_does_not() -> None:
    from real2sim.clutter import merge_appendages

    v, u = np.mgrid[0:60, 80:0:-1].astype(float)  # a flat patch 1 m away, 2 mm per pixel
    pts = np.stack([(u - 40) * 0.002, (v - 30) * 0.002, np.ones_like(u)], axis=-1)
    valid = np.ones((60, 80), bool)
    rgb = np.zeros((60, 80, 3), np.uint8)
    mug = np.zeros((60, 80), bool)
    mug[10:50, 10:40] = True
    handle = np.zeros_like(mug)
    handle[20:35, 40:46] = True
    apple = np.zeros_like(mug)
    apple[35:50, 40:52] = True
    rgb[mug | handle] = (90, 140, 140)
    rgb[apple] = (180, 200, 40)
    merged = merge_appendages([(handle, 0.08), (mug, 0.1), (apple, 0.07)], pts, valid, rgb)
    assert len(merged) == 2
    assert merged[0][0].sum() == (mug | handle).sum() and merged[0][1] == 0.1
    assert np.array_equal(merged[1][0], apple)
    # A region taller than its neighbour is not a part of it (a bottle beside a tub).
    assert len(merge_appendages([(handle, 0.2), (mug, 0.1)], pts, valid, rgb)) == 2
