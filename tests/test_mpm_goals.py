"""The footprint goal predicates of MPM tasks on crafted particle sets: a bar matches its rectangle and its
length-to-width ratio, a round lump does not, and the footprint does not depend on the particle spacing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from simpact.core.rollout import DeformableState
from simpact.core.scene import Scene, SceneObject
from simpact.goals import GoalError, parse_goal
from simpact.goals.footprint import footprint_area
from solvers.mpm import sample_box, sample_cylinder

DOUGH = SceneObject(name="dough", shape="box", size=(0.02, 0.12, 0.02), position=(0.5, 0.0, 0.01), kind="mpm")
SCENE = Scene(objects=(DOUGH,))


def _evaluate(goal: list, particles: np.ndarray):
    final = SimpleNamespace(deformables={"dough": DeformableState(particles)})
    return parse_goal(goal).evaluate(SimpleNamespace(final=final), SCENE, {})  # type: ignore[arg-type]


BAR = sample_box((0.5, 0.0, 0.01), (0.03, 0.12, 0.02), 0.005)
LUMP = sample_cylinder((0.5, 0.0, 0.0), 0.03, 0.03, 0.005)


def test_footprint_iou_holds_for_the_bar_and_fails_for_a_lump_or_a_turned_target():
    goal = [{"footprint_iou": {"object": "dough", "centre": [0.5, 0.0], "size": [0.03, 0.12]}}]
    ok = _evaluate(goal, BAR)
    assert ok.ok and ok.details["footprint_iou:dough.iou"] > 0.85
    assert not _evaluate(goal, LUMP).ok
    turned = [
        {"footprint_iou": {"object": "dough", "centre": [0.5, 0.0], "size": [0.03, 0.12], "yaw": 1.5708}}
    ]
    bad = _evaluate(turned, BAR)
    assert not bad.ok and bad.score < ok.score


def test_footprint_ratio_measures_length_over_width_along_the_principal_axes():
    goal = [{"footprint_ratio": {"object": "dough", "ratio": 4.0, "tolerance": 0.15}}]
    bar = _evaluate(goal, BAR)
    assert bar.ok and bar.details["footprint_ratio:dough.ratio"] == pytest.approx(4.0, rel=0.05)
    turn = np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])
    turned = BAR.copy()
    turned[:, :2] = (BAR[:, :2] - [0.5, 0.0]) @ turn.T
    assert _evaluate(goal, turned).ok, "the bar's direction does not matter"
    lump = _evaluate(goal, LUMP)
    assert not lump.ok and lump.details["footprint_ratio:dough.ratio"] == pytest.approx(1.0, abs=0.1)


def test_footprint_area_hardly_depends_on_the_particle_spacing():
    areas = [footprint_area(sample_cylinder((0.0, 0.0, 0.0), 0.03, 0.02, s)) for s in (0.0025, 0.005, 0.01)]
    disc = np.pi * 0.03**2
    assert areas[0] == pytest.approx(disc, rel=0.12) and areas[1] == pytest.approx(disc, rel=0.12)
    assert areas[2] == pytest.approx(disc, rel=0.3), "a 1 cm lattice overstates it (see the module)"


def test_malformed_footprint_goals_are_one_line():
    with pytest.raises(GoalError, match="footprint_iou"):
        _evaluate([{"footprint_iou": {"object": "dough", "centre": [0.5], "size": [0.03, 0.12]}}], BAR)
    with pytest.raises(GoalError, match="not a deformable"):
        _evaluate([{"footprint_ratio": {"object": "cube", "ratio": 2.0}}], BAR)
