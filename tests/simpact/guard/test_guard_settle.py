"""settle_check: a scene left alone for a second reports its overlaps, artifacts and motion."""

import json

import mujoco
import numpy as np
import pytest

from simpact.core.scene import Scene, SceneObject
from simpact.guard.settle import placed_state, settle_check
from solvers.mujoco.world import SETTLE_S, mujoco_access
from solvers.world import make_world

RESTING = Scene((SceneObject("box", "box", (0.05, 0.05, 0.05), (0.5, 0.0, 0.025), mass=0.2),))
# a light 8 cm lid created 7 cm deep inside a 10 cm crate (what a bad real2sim fit can produce)
OVERLAPPING = Scene(
    (
        SceneObject("crate", "box", (0.1, 0.1, 0.1), (0.5, 0.0, 0.05), mass=0.5),
        SceneObject("lid", "box", (0.08, 0.08, 0.08), (0.5, 0.0, 0.07), mass=0.05),
    )
)


def test_box_resting_on_the_table_is_clean():
    world = make_world(RESTING)
    before = world.snapshot()
    report = settle_check(world)
    assert np.array_equal(world.snapshot(), before)  # the world's own data is not touched
    assert report.clean and report.events == [] and report.overlaps == []
    assert report.nsteps == 500 and report.seconds == pytest.approx(1.0)
    motion = report.motion["box"]
    assert motion.displacement < 1e-3 and motion.rotation < 1e-3 and motion.max_speed < 0.05
    assert motion.start_position == pytest.approx((0.5, 0.0, 0.025))
    out = json.loads(json.dumps(report.to_dict()))
    assert out["clean"] is True and out["artifacts"] == 0


def test_boxes_created_overlapping_report_the_overlap_and_an_artifact():
    report = settle_check(OVERLAPPING)
    assert not report.clean
    assert [o.bodies for o in report.overlaps] == [("crate", "lid")]
    assert report.max_overlap == pytest.approx(0.07, abs=1e-6)
    assert [e.body for e in report.artifacts] == ["lid"]
    event = report.artifacts[0]
    assert event.onset_step <= 5 and event.contact_pair == ("crate", "lid") and event.peak_speed > 1.0
    assert report.motion["lid"].displacement > 0.05 and report.motion["crate"].displacement < 0.01
    out = json.loads(json.dumps(report.to_dict()))
    assert out["artifacts"] == 1 and out["overlaps"][0]["bodies"] == ["crate", "lid"]
    assert out["events"][0]["flagged"] is True


def test_a_box_placed_past_the_table_edge_falls_and_the_scene_is_not_clean():
    # the table spans x from -0.3 to 1.1 m: a box at 1.3 m has nothing under it
    beyond = Scene((RESTING.objects[0].moved(position=(1.3, 0.0, 0.025)),))
    report = settle_check(beyond)
    assert report.fallen == ["box"] and not report.clean
    assert report.to_dict()["fallen"] == ["box"]
    assert settle_check(RESTING).fallen == []


LEANING = Scene(  # a 20 cm pole placed leaning 25° on its edge (a real2sim fit off by a tilt): it topples
    (
        SceneObject(
            "pole",
            "box",
            (0.02, 0.02, 0.2),
            (0.5, 0.0, 0.01 * np.sin(np.radians(25)) + 0.1 * np.cos(np.radians(25))),
            (float(np.cos(np.radians(12.5))), float(np.sin(np.radians(12.5))), 0.0, 0.0),
            mass=0.1,
        ),
        SceneObject("box", "box", (0.05, 0.05, 0.05), (0.3, 0.2, 0.025), mass=0.2),
    )
)


def test_an_object_that_topples_did_not_rest_where_it_was_placed():
    report = settle_check(LEANING)
    assert report.shifted == ["pole"] and report.fallen == []  # the box beside it rests
    assert report.motion["pole"].rotation > np.radians(45)
    assert report.to_dict()["shifted"] == ["pole"]
    assert settle_check(RESTING).shifted == []


def test_placed_state_is_the_world_before_its_settling():
    world = make_world(OVERLAPPING)
    mj = mujoco_access(world)
    data = mj.new_data()
    placed_state(world, data)
    mujoco.mj_step(mj.model, data, round(SETTLE_S / mj.timestep))
    assert np.array_equal(mj.snapshot(data).view(np.uint64), world.initial_snapshot.view(np.uint64))


def test_seconds_must_be_positive():
    with pytest.raises(ValueError, match="seconds"):
        settle_check(RESTING, seconds=0.0)
