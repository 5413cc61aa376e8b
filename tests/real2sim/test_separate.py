"""Overlapping guesses of hidden sides cut apart at the plane between what the camera saw."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from real2sim.separate import OVERLAP_M3, _overlap_m3, separating_plane, trim_overlaps
from real2sim.types import ObjectGeometry
from simpact.core.rotations import quat_to_matrix


def _clouds(normal: np.ndarray, gap: float, outliers: int) -> tuple[np.ndarray, np.ndarray]:
    """Two clouds of 800 points 10 cm across on either side of the plane ``normal · x = 0.3``, ``gap`` (m)
    apart, each 1 cm thick or so; ``outliers`` of ``a``'s points are thrown past the plane into ``b``."""
    rng = np.random.default_rng(4)
    n = normal / np.linalg.norm(normal)
    basis = np.linalg.qr(np.column_stack([n, rng.normal(size=(3, 2))]))[0]  # n, then two in-plane axes
    basis[:, 0] *= np.sign(basis[:, 0] @ n)

    def cloud(side: float) -> np.ndarray:
        along = 0.3 + side * (gap / 2 + np.abs(rng.normal(0.0, 0.01, 800)))
        across = rng.uniform(-0.05, 0.05, (800, 2))
        return np.column_stack([along, across]) @ basis.T

    a, b = cloud(-1.0), cloud(1.0)
    a[:outliers] += (gap + 0.02) * n
    return a, b


def test_the_plane_is_found_between_two_clouds_despite_stray_points() -> None:
    n = np.array([1.0, 0.3, -0.2]) / np.linalg.norm([1.0, 0.3, -0.2])
    a, b = _clouds(n, 0.02, outliers=8)  # 1 % of a lies past b's nearest points
    normal, offset, gap = separating_plane(a, b)
    assert np.degrees(np.arccos(normal @ n)) < 3.0
    assert 0.3 - 0.01 < offset < 0.3 + 0.01 and gap == pytest.approx(0.02, abs=0.004)
    # From b to a the plane is the same one, its normal turned round.
    normal_ba, offset_ba, gap_ba = separating_plane(b, a)
    assert normal_ba @ normal < -0.998 and offset_ba == pytest.approx(-offset, abs=2e-3)
    assert gap_ba == pytest.approx(gap, abs=1e-3)


def test_interleaved_clouds_report_their_overlap_as_a_negative_gap() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-0.05, 0.05, (500, 3)), rng.uniform(-0.05, 0.05, (500, 3))
    assert separating_plane(a, b)[2] < -0.05


def _box(label: str, x: float, width: float) -> ObjectGeometry:
    """A box ``width`` (m) wide standing at world ``x``, its guessed back reaching 6 cm along +y, seen only on
    its front face (y = -0.03, 5.8 cm wide). Its frame is turned 90° about z: object x is world y."""
    size = (0.06, width, 0.08)
    face = np.stack(np.meshgrid(np.linspace(-0.029, 0.029, 12), np.linspace(0.001, 0.079, 12)), -1)
    face = face.reshape(-1, 2)
    points = np.column_stack([x + face[:, 0], np.full(len(face), -0.03), face[:, 1]])
    turn = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])
    return ObjectGeometry(
        label, trimesh.creation.box(size), np.array([x, 0.0, 0.04]), turn, np.array(size), points
    )


def test_two_guessed_backs_that_meet_are_cut_where_the_fronts_part() -> None:
    # Two boxes side by side, their seen fronts 2.2 cm apart; a's guessed width reaches 1 cm into b.
    wide, b = _box("a", 0.0, 0.12), _box("b", 0.08, 0.06)
    assert _overlap_m3(wide, b) == pytest.approx(0.01 * 0.06 * 0.08, rel=1e-4)
    out, cuts = trim_overlaps([wide, b], ["a", "b"])
    assert _overlap_m3(out[0], out[1]) <= OVERLAP_M3
    assert [c["with"] for c in cuts["a"]] == ["b"] and cuts["a"][0]["gap_cm"] == pytest.approx(2.2, abs=0.05)
    for g, before in zip(out, (wide, b)):
        assert g.mesh.is_watertight and 0 < g.mesh.volume <= before.mesh.volume + 1e-12
        lo, hi = g.mesh.bounds
        np.testing.assert_allclose(0.5 * (lo + hi), 0.0, atol=1e-6)  # re-centred on its bounding box
        np.testing.assert_allclose(g.extent, hi - lo)
        # Every point the camera saw is still on (or in) the mesh.
        local = (g.points_world - g.position) @ quat_to_matrix(g.quaternion)
        assert np.all(local >= lo - 1e-5) and np.all(local <= hi + 1e-5)
    # The plane lies midway between the fronts (x = 0.04): a loses 2 cm of its width, b nothing.
    assert out[0].extent[1] == pytest.approx(0.1, abs=5e-4) and out[0].position[0] == pytest.approx(
        -0.01, abs=3e-4
    )
    assert (
        cuts["a"][0]["removed_cm3"] == pytest.approx(1e6 * 0.02025 * 0.06 * 0.08, rel=0.01)
        and cuts["b"][0]["removed_cm3"] == 0.0
    )
    # Same inputs, same cut, bit for bit.
    again, _ = trim_overlaps([wide, b], ["a", "b"])
    for g, h in zip(out, again):
        assert np.array_equal(g.mesh.vertices, h.mesh.vertices) and np.array_equal(g.position, h.position)


def test_objects_that_do_not_overlap_are_left_as_they_are() -> None:
    a, b = _box("a", 0.0, 0.06), _box("b", 0.1, 0.06)
    out, cuts = trim_overlaps([a, b], ["a", "b"])
    assert out[0] is a and out[1] is b and cuts == {"a": [], "b": []}
