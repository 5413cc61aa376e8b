"""A flat object's own outline: a prism extruded back from the face it shows, where its hull fills it in."""

from __future__ import annotations

import types

import numpy as np
import trimesh

from real2sim.fitscore import render_depth
from real2sim.overlays import look_at
from real2sim.prisms import add_prism, eroded_by_sweep, levelled
from real2sim.types import ObjectGeometry

from ._render import plus_outline, seen_on_table

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
H, W = 240, 320
CAMERA = np.array([-0.45, -0.2, 0.35])
T_WORLD_CAM = look_at(CAMERA, np.array([0.0, 0.0, 0.04]))
DEPTH_M = 0.03  # the prism's, along its face's normal


def _cross_prism() -> trimesh.Trimesh:
    """A plus-shaped block (arms 8 cm long, 2.6 cm wide, 3 cm deep) standing on the table on one arm, its
    face turned to the camera (level): concave, its hull fills the four corners between its arms."""
    mesh = _extruded(plus_outline(0.08, 0.026), DEPTH_M)
    towards = np.array([CAMERA[0], CAMERA[1], 0.0]) / np.linalg.norm(CAMERA[:2])
    mesh.apply_transform(trimesh.geometry.align_vectors([0.0, 0.0, 1.0], towards))  # its face to the camera
    mesh.apply_translation(-mesh.bounds.mean(axis=0) + [0.0, 0.0, mesh.extents[2] / 2])
    return mesh


def _extruded(outline: np.ndarray, depth: float) -> trimesh.Trimesh:
    """``outline`` (counter-clockwise, M x 2) extruded along z from 0 to ``depth`` (manifold3d)."""
    import manifold3d

    m = manifold3d.CrossSection([outline]).extrude(depth).to_mesh()
    return trimesh.Trimesh(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts))


def _seen(obj: trimesh.Trimesh) -> tuple[types.SimpleNamespace, np.ndarray, np.ndarray]:
    """The frame of ``obj`` on a table, its mask and its points in the world (m)."""
    return seen_on_table(obj, T_WORLD_CAM, K, H, W)


def _as_hull(obj: trimesh.Trimesh, points: np.ndarray) -> ObjectGeometry:
    """``obj``'s convex hull posed where it stands: what a mirror-completed fit of it comes out as."""
    hull = obj.convex_hull
    centre = hull.bounds.mean(axis=0)
    hull.apply_translation(-centre)
    return ObjectGeometry("object_0", hull, centre, np.eye(4)[0], hull.extents.copy(), points, "mirror")


def _silhouette(g: ObjectGeometry) -> np.ndarray:
    depth, index, _ = render_depth([(g.world_vertices(), np.asarray(g.mesh.faces))], T_WORLD_CAM, K, H, W)
    return index == 0


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum()) / float((a | b).sum())


def _swept(shape: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """``shape`` swept ``dx``, ``dy`` pixels (right, down) in one-pixel steps along x."""
    out = shape.copy()
    h, w = shape.shape
    for k in range(1, dx + 1):
        ky = round(dy * k / dx)
        out[ky:, k:] |= shape[: h - ky, : w - k]
    return out


def test_a_sweep_is_taken_back_off_the_silhouette_it_made() -> None:
    """A U (its notch across the sweep) swept 6 px right, and a block swept 6 right and 3 down, each eroded
    by its sweep: the shape again."""
    shape = np.zeros((60, 80), bool)
    shape[10:40, 10:40] = True
    block = shape.copy()
    shape[10:30, 20:30] = False  # the notch
    assert np.array_equal(eroded_by_sweep(_swept(shape, 6, 0), np.array([6.0, 0.0])), shape)
    assert np.array_equal(eroded_by_sweep(_swept(block, 6, 3), np.array([6.0, 3.0])), block)
    assert np.array_equal(eroded_by_sweep(shape, np.array([0.0, 0.0])), shape)
    longer = np.array([float(np.ptp(np.nonzero(shape)[1])) + 1.0, 0.0])  # further than the shape reaches
    assert not eroded_by_sweep(shape, longer).any()
    assert not eroded_by_sweep(np.zeros_like(shape), longer).any()


def test_a_standing_outline_rests_on_both_feet() -> None:
    """Two feet, the right one's bottom 7 mm up (a shadow cut it short in the silhouette): the line the
    outline would rest on (its lower hull's edge under its middle) is brought level with the left foot, what
    stands 1 cm or more above that line stays."""
    outline = np.array(
        [(-0.04, 0.0), (-0.02, 0.0), (0.0, 0.012), (0.02, 0.007), (0.04, 0.007), (0.04, 0.06), (-0.04, 0.06)]
    )
    flat = levelled(outline, 0.0, 1.0)
    assert np.allclose(flat[[0, 1, 4], 1], 0.0, atol=1e-9)  # it rests on both feet
    assert 0.0 < flat[3, 1] < 0.004 and flat[2, 1] > 0.011  # the right foot's inner end, the notch
    assert np.allclose(flat[5:], outline[5:])  # the top
    assert np.allclose(levelled(flat, 0.0, 1.0), flat)  # level already: unchanged
    leaning = outline + np.outer(outline[:, 0] + 0.04, [0.0, 0.2])  # 1.6 cm higher at its right end
    assert np.array_equal(levelled(leaning, 0.0, 1.0), leaning)
    upside = levelled(outline * [1.0, -1.0], 0.1, -1.0)  # its axes pointing down, the face 10 cm up
    assert np.allclose(upside[[0, 1, 4], 1], 0.0, atol=1e-9)


def test_a_plus_shaped_block_becomes_its_prism() -> None:
    obj = _cross_prism()
    frame, mask, points = _seen(obj)
    hull = _as_hull(obj, points)
    fitted = add_prism(hull, frame, T_WORLD_CAM, mask, mask)  # type: ignore[arg-type]
    assert fitted.prism_depth_m is not None and fitted.concave
    assert abs(fitted.prism_depth_m - DEPTH_M) < 0.006
    assert _iou(_silhouette(hull), mask) < 0.85  # the hull fills the corners between the arms
    drawn = _silhouette(fitted)
    assert _iou(drawn, mask) > 0.95
    # To the silhouette's edge pixels (0.961 of it without the half pixel the traced outline is grown by).
    assert (drawn & mask).sum() >= 0.97 * mask.sum() and (drawn & ~mask).sum() <= 0.01 * drawn.sum()
    assert abs(fitted.mesh.volume - obj.volume) < 0.15 * obj.volume  # the hull's is 1.4 times the block's
    assert fitted.world_vertices()[:, 2].min() > -1e-6  # nothing under the table


def test_a_prism_whose_silhouette_stops_above_the_table_still_stands_on_it() -> None:
    """The segmenter leaves the band just above the table out of the silhouette (here 8 mm)."""
    obj = _cross_prism()
    frame, mask, points = _seen(obj)
    cut = mask.copy()
    cut[mask] = points[:, 2] > 0.008
    high = _as_hull(obj, points[points[:, 2] > 0.008])
    footless = add_prism(high, frame, T_WORLD_CAM, cut, cut)  # type: ignore[arg-type]
    assert footless.prism_depth_m is not None and abs(footless.world_vertices()[:, 2].min()) < 1e-6
    assert _iou(_silhouette(footless), mask) > 0.95  # its lowest band carried down, not all of it


def test_a_curved_object_lying_on_the_table_becomes_its_outline_from_above() -> None:
    """A banana-like crescent lying on the table (3.5 cm wide, its top rounded off in steps up to 3 cm, so
    that no plane holds half its points): its hull fills the inside of the curve; it becomes its outline
    seen from above, extruded up from the table."""
    import manifold3d

    angle = np.radians(np.linspace(200.0, 340.0, 29))
    arc = np.column_stack([np.cos(angle), np.sin(angle)])
    crescent = manifold3d.CrossSection([np.vstack([0.12 * arc, 0.085 * arc[::-1]])])  # counter-clockwise
    steps = [(0.0, 0.02, 0.0), (0.02, 0.026, 0.005), (0.026, 0.03, 0.01)]  # (from, to, inset), m
    solid = manifold3d.Manifold.batch_boolean(
        [
            crescent.offset(-inset).extrude(top - bottom).translate((0, 0, bottom))
            for bottom, top, inset in steps
        ],
        manifold3d.OpType.Add,
    )
    m = solid.to_mesh()
    obj = trimesh.Trimesh(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts))
    obj.apply_translation([-obj.bounds.mean(axis=0)[0], -obj.bounds.mean(axis=0)[1], 0.0])
    frame, mask, points = _seen(obj)
    hull = _as_hull(obj, points)
    fitted = add_prism(hull, frame, T_WORLD_CAM, mask, mask)  # type: ignore[arg-type]
    assert _iou(_silhouette(hull), mask) < 0.8
    assert fitted.prism_depth_m is not None and abs(fitted.extent[2] - 0.03) < 0.004
    assert _iou(_silhouette(fitted), mask) > 0.93
    assert abs(fitted.mesh.volume - obj.volume) < 0.2 * obj.volume


def test_a_plain_block_keeps_its_hull() -> None:
    block = trimesh.creation.box(extents=(0.08, 0.03, 0.08))
    block.apply_translation((0.0, 0.0, 0.04))
    frame, mask, points = _seen(block)
    plain = _as_hull(block, points)
    assert add_prism(plain, frame, T_WORLD_CAM, mask, mask) is plain  # no better outline to be had
