"""An object as the surface seen from above filled down to the table: columns as high as its points."""

from __future__ import annotations

import numpy as np
import trimesh

from real2sim.fitscore import render_depth
from real2sim.heightfield import CELL_M, add_heightfield, height_field
from real2sim.overlays import look_at
from real2sim.prisms import add_prism
from real2sim.types import ObjectGeometry

from ._render import seen_on_table

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
H, W = 240, 320
T_WORLD_CAM = look_at(np.array([-0.3, -0.35, 0.4]), np.array([0.0, 0.0, 0.02]))


def _as_hull(obj: trimesh.Trimesh, points: np.ndarray) -> ObjectGeometry:
    """``obj``'s convex hull posed where it stands: what a mirror-completed fit of it comes out as."""
    hull = obj.convex_hull
    centre = hull.bounds.mean(axis=0)
    hull.apply_translation(-centre)
    return ObjectGeometry("object_0", hull, centre, np.eye(4)[0], hull.extents.copy(), points, "mirror")


def _grid_points(top: np.ndarray, cell: float = 0.002) -> np.ndarray:
    """Points (N, 3, m) every ``cell`` over a (rows, columns) grid of heights ``top`` (m) from the origin."""
    i, j = np.nonzero(np.isfinite(top))
    return np.column_stack([(i + 0.5) * cell, (j + 0.5) * cell, top[i, j]])


def _points_only(points: np.ndarray) -> ObjectGeometry:
    """An object at the origin, unturned, of ``points`` (world, m): what a height field needs of it."""
    return ObjectGeometry(
        "object_0", trimesh.creation.box((0.01,) * 3), np.zeros(3), np.eye(4)[0], np.ones(3), points
    )


def _drill() -> trimesh.Trimesh:
    """A drill-like solid lying on the table: a body 14 x 5 cm, 6 cm high, and a grip beside it 6 x 4 cm,
    3 cm high (its top well under the body's: a hull's top slopes over it)."""
    body = trimesh.creation.box((0.14, 0.05, 0.06))
    body.apply_translation((0.0, 0.0, 0.03))
    grip = trimesh.creation.box((0.04, 0.06, 0.03))
    grip.apply_translation((-0.03, -0.055, 0.015))
    return trimesh.boolean.union([body, grip], engine="manifold")


def test_columns_are_as_high_as_the_points_over_them_and_close_into_one_solid() -> None:
    """A step (6 x 4 cm at 3 cm beside 6 x 4 cm at 1 cm): the solid's volume and both heights; a
    chequerboard of heights (cells touching only at their corners at each level) still one closed solid."""
    top = np.where(np.arange(40)[None, :] < 20, 0.03, 0.01) * np.ones((30, 1))
    step = add_heightfield(_points_only(_grid_points(top)))
    assert step is not None and step.mesh.is_watertight and step.concave and step.heightfield_cell_m == CELL_M
    assert abs(step.mesh.volume - 0.06 * 0.04 * 0.04) < 0.05 * 0.06 * 0.04 * 0.04
    world = step.world_vertices()
    assert np.allclose(np.unique(np.round(world[:, 2], 4)), [0.0, 0.01, 0.03])
    assert world[:, 1].min() > -0.003 and world[:, 1].max() < 0.083  # within a cell of the points
    chequer = np.where((np.arange(30)[:, None] // 2 + np.arange(30)[None, :] // 2) % 2 == 0, 0.02, 0.01)
    cells, corner = height_field(_grid_points(chequer))  # type: ignore[misc]
    assert cells.max() > 0.015 and corner.shape == (2,)
    solid = add_heightfield(_points_only(_grid_points(chequer)))
    assert solid is not None and solid.mesh.is_watertight and solid.mesh.euler_number == 2


def test_too_few_points_give_no_height_field() -> None:
    few = _grid_points(np.full((4, 4), 0.02))
    assert height_field(few) is None
    assert height_field(np.array([[0.0, 0.0, 0.001]])) is None  # on the table


def test_a_lying_drill_becomes_its_height_field() -> None:
    """The drill's hull slopes over its grip (the depth residual's 90th percentile 3 cm); its height field
    matches the depth (1.9 mm), so the prisms' rule keeps it; its volume is the drill's within 15 % (the
    hull's: 1.4 times)."""
    obj = _drill()
    frame, mask, points = seen_on_table(obj, T_WORLD_CAM, K, H, W)
    hull = _as_hull(obj, points)
    field = add_heightfield(hull)
    assert field is not None
    fitted = add_prism(hull, frame, T_WORLD_CAM, mask, mask, [field])  # type: ignore[arg-type]
    assert fitted.heightfield_cell_m == CELL_M
    assert _residual(hull, frame.depth, mask) > 0.02  # the premise: the hull slopes over the grip
    assert _residual(fitted, frame.depth, mask) < 0.003
    assert abs(fitted.mesh.volume - obj.volume) < 0.15 * obj.volume
    assert hull.mesh.volume > 1.3 * obj.volume


def _residual(g: ObjectGeometry, depth: np.ndarray, mask: np.ndarray) -> float:
    """90th percentile of |rendered - measured| depth (m) of ``g`` over the ``mask`` pixels it covers."""
    drawn, index, _ = render_depth([(g.world_vertices(), np.asarray(g.mesh.faces))], T_WORLD_CAM, K, H, W)
    seen = mask & (index == 0)
    return float(np.percentile(np.abs(drawn[seen] - depth[seen]), 90))
