"""Objects lying on other objects: found as objects of their own, fitted on the surface they lie on; a lid, a
print and a label are not such objects."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import trimesh

from real2sim.perception import perceive
from real2sim.regions import find_clusters
from real2sim.stacked import stacked_on
from real2sim.table import camera_points, fit_table, heights_above_table
from simpact.core.frame import Frame

from .test_segment import cast_frame

EYE, TARGET = np.array([-0.55, -0.2, 0.5]), np.array([0.0, 0.0, 0.05])
#: Colour of each mesh by index: the table, then the objects.
PAINT = [(150, 120, 90), (200, 40, 40), (40, 160, 60), (60, 60, 200)]


def _box(size: tuple[float, float, float], centre: tuple[float, float, float]) -> trimesh.Trimesh:
    m = trimesh.creation.box(size)
    m.apply_translation(centre)
    return m


def _table() -> trimesh.Trimesh:
    return _box((1.2, 1.2, 0.02), (0.0, 0.0, -0.01))


def _painted(meshes: list[Any]) -> Frame:
    """:func:`cast_frame` with each mesh in its colour of :data:`PAINT`."""
    frame = cast_frame(meshes, EYE, TARGET)
    assert frame.masks is not None
    rgb = np.asarray(PAINT, np.uint8)[frame.masks]
    return Frame(rgb, frame.depth, frame.K, None, frame.masks, {})


def _stacked(frame: Frame, part_id: int, rest_id: int) -> float | None:
    table = fit_table(frame)
    pts, valid = camera_points(frame)
    height = heights_above_table(table, pts)
    assert frame.masks is not None
    part, rest = frame.masks == part_id, frame.masks == rest_id
    return stacked_on(part, rest, pts, valid, height, np.asarray(table.normal_cam))


def test_a_box_lying_on_a_larger_box_is_an_object_on_its_top() -> None:
    """A whiteboard eraser on a tub (UOIS frame 6): two objects, the eraser fitted on the tub's lid."""
    tub = _box((0.2, 0.14, 0.07), (0.0, 0.0, 0.035))
    eraser = _box((0.13, 0.05, 0.03), (0.02, 0.02, 0.085))
    frame = _painted([_table(), tub, eraser])
    assert frame.masks is not None
    assert abs(_stacked(frame, 2, 1) - 0.07) < 0.004  # type: ignore[operator]
    clusters = find_clusters(frame, fit_table(frame))
    assert len(clusters) == 2
    for obj_id, support in ((1, 0.0), (2, 0.07)):
        truth = frame.masks == obj_id
        best = max(clusters, key=lambda c: (c.mask & truth).sum() / (c.mask | truth).sum())
        assert (best.mask & truth).sum() / (best.mask | truth).sum() > 0.85, obj_id
        assert abs(best.support_m - support) < 0.004, (obj_id, best.support_m)
    found = perceive(frame, [])
    by_top = sorted(found.objects, key=lambda g: float(g.world_vertices()[:, 2].max()))
    tub_fit, eraser_fit = by_top
    assert abs(float(tub_fit.world_vertices()[:, 2].max()) - 0.07) < 0.005
    bottom, top = (float(f(eraser_fit.world_vertices()[:, 2])) for f in (np.min, np.max))
    assert abs(bottom - 0.07) < 0.005 and abs(top - 0.1) < 0.005  # on the lid, not on the table
    assert np.allclose(np.sort(eraser_fit.extent), [0.03, 0.05, 0.13], rtol=0.1), eraser_fit.extent


def test_a_lid_a_print_and_a_label_are_not_objects_lying_on_another() -> None:
    """Each is turned down by its own test: the lid by the surface around it lying under its edge (the tub's
    rim), the print by not rising above the face around it; the can's side around a label spans heights and
    rises above it."""
    tub = _box((0.2, 0.14, 0.07), (0.0, 0.0, 0.035))
    lid = _box((0.19, 0.13, 0.02), (0.0, 0.0, 0.08))  # set into the tub's rim
    assert _stacked(_painted([_table(), tub, lid]), 2, 1) is None
    box = _box((0.2, 0.14, 0.07), (0.0, 0.0, 0.035))
    printed = _box((0.1, 0.06, 0.0005), (0.0, 0.0, 0.07025))  # a label on the top face
    assert _stacked(_painted([_table(), box, printed]), 2, 1) is None
    can = trimesh.creation.cylinder(radius=0.05, height=0.2, sections=64)
    can.apply_translation([0.0, 0.0, 0.1])
    label = trimesh.creation.cylinder(radius=0.0505, height=0.06, sections=64)  # a band round its side
    label.apply_translation([0.0, 0.0, 0.12])
    assert _stacked(_painted([_table(), can, label]), 2, 1) is None


def test_placement_says_what_an_object_lies_on() -> None:
    from real2sim.placement import place_objects
    from real2sim.types import ObjectGeometry

    def box(size: tuple[float, float, float], centre: tuple[float, float, float]) -> ObjectGeometry:
        mesh = trimesh.creation.box(size)
        return ObjectGeometry(
            "b", mesh, np.array(centre), np.array([1.0, 0, 0, 0]), mesh.extents, np.zeros((0, 3))
        )

    tub, eraser = box((0.2, 0.14, 0.07), (0.5, 0.0, 0.035)), box((0.13, 0.05, 0.03), (0.5, 0.02, 0.085))
    held = box((0.05, 0.05, 0.05), (0.5, 0.3, 0.2))
    _, info, warnings = place_objects([tub, eraser, held], ["tub", "eraser", "held"])
    assert info["eraser"]["on"] == "tub" and info["held"]["on"] is None and "on" not in info["tub"]
    assert "'eraser' stands on or in 'tub', 0.070 m above the table" in warnings
    assert any(w.startswith("'held' floats 0.175 m above the table") for w in warnings)


def test_a_can_standing_in_a_bowl_stays_in_it() -> None:
    """A can the segmenter found standing on a bowl's floor 1.1 cm above the table (``support_m``: 9 mm, the
    depth's guess) is neither set down on the table nor pushed out of the bowl's hull, but lifted out of its
    floor: the bowl is simulated as columns around its open cavity. Before: the can was set down on the
    table, through the floor, and pushed out of the bowl's convex hull."""
    from real2sim.placement import place_objects
    from real2sim.types import ObjectGeometry

    outer = trimesh.creation.cylinder(radius=0.1, height=0.08, sections=48)
    inner = trimesh.creation.cylinder(radius=0.09, height=0.08, sections=48)
    inner.apply_translation([0.0, 0.0, 0.01 + 0.001])  # a 1 cm floor; the cavity open at the top
    bowl_mesh = outer.difference(inner)
    assert bowl_mesh.is_watertight

    def seen_whole(label: str, mesh: Any, position: list[float], **kw: Any) -> ObjectGeometry:
        """The object at ``position``, upright, its whole surface what the camera saw."""
        g = ObjectGeometry(
            label, mesh, np.array(position), np.array([1.0, 0, 0, 0]), mesh.extents, np.zeros((0, 3)), **kw
        )
        return dataclasses.replace(g, points_world=g.world_vertices())

    bowl = seen_whole("bowl", bowl_mesh, [0.5, 0.0, 0.04], concave=True)
    can = seen_whole(
        "can",
        trimesh.creation.cylinder(radius=0.035, height=0.1, sections=32),
        [0.52, 0.01, 0.059],
        support_m=0.009,
    )
    placed, info, warnings = place_objects([bowl, can], ["bowl", "can"])
    assert info["can"]["on"] == "bowl"
    assert np.allclose(placed[1].position[:2], [0.52, 0.01], atol=1e-3), placed[1].position
    assert 0.011 <= placed[1].world_vertices()[:, 2].min() <= 0.0125  # on the floor (1.1 cm), not in it
    assert info["can"]["lift_m"] == pytest.approx(placed[1].world_vertices()[:, 2].min() - 0.009)
    assert np.allclose(placed[0].position, [0.5, 0.0, 0.04], atol=1e-3)
    assert not any("still overlap" in w for w in warnings)
