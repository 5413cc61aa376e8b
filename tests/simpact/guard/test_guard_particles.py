"""SimuGuard for particles: a clean rope rollout screens clean; a kicked particle, one escaping the grid or
through the table, and a non-finite one are flagged; fast motion the gripper or gravity explains is not;
the planner's audit reports a flagged deformable rollout and does not accept it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simpact.guard.particles import ColliderTrack, Domain, screen_particles
from simpact.planner.audit import artifact_free, audit_and_repair, audit_summary, screen_deformables
from simpact.planner.records import Proposal
from simpact.tasks import load_task
from solvers.world import make_world

DT = 0.01
"""Record interval of the synthetic traces, s (the composite World records once per control period)."""


def _rope(records: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """A 30-particle rope at rest on the table (z = 7.5 mm): times (S,) and particles (S, 30, 3)."""
    line = np.stack([np.full(30, 0.45), np.linspace(-0.15, 0.15, 30), np.full(30, 0.0075)], axis=1)
    return np.arange(records) * DT, np.repeat(line[None], records, axis=0)


def _box(time: np.ndarray, centre: np.ndarray) -> ColliderTrack:
    """One 2 x 2 x 4 cm box (a fingertip) at ``centre`` (S, 3) over ``time``."""
    rot = np.broadcast_to(np.eye(3), (len(time), 1, 3, 3))
    return ColliderTrack(time, centre[:, None, :], rot.copy(), np.array([[0.01, 0.01, 0.02]]), ("finger",))


PARKED = np.array([0.45, 0.4, 0.3])
"""Where the gripper waits, far from the rope."""


def test_a_rope_at_rest_is_clean_and_a_kicked_particle_is_flagged():
    t, x = _rope()
    parked = _box(t, np.repeat(PARKED[None], len(t), 0))
    assert screen_particles("rope", t, x, parked, Domain()) == []
    kicked = x.copy()
    kicked[20:26, 7, 1] += 2.0 * DT * np.arange(1, 7)  # 2 m/s along y from record 19, 60 ms, untouched
    kicked[26:, 7, 1] = kicked[25, 7, 1]
    (event,) = screen_particles("rope", t, kicked, parked, Domain())
    assert (event.reason, event.particle, event.particles, event.onset_record) == ("speed", 7, 1, 19)
    assert event.peak_speed == pytest.approx(2.0) and event.explained_speed == pytest.approx(0.25)
    assert event.to_dict()["kind"] == "particles"


def test_a_single_noisy_record_is_not_an_event():
    t, x = _rope()
    noisy = x.copy()
    noisy[30, 4] += [0.0, 0.03, 0.0]  # one record 3 cm off: 3 m/s out and back, no net motion
    assert screen_particles("rope", t, noisy) == []


def test_escaping_the_grid_or_the_table_and_non_finite_particles_are_flagged():
    t, x = _rope()
    grid = Domain(np.array([0.3, -0.2, -0.03]), np.array([0.6, 0.2, 0.2]))
    out = x.copy()
    out[:, 0, 1] = -0.15 - 0.002 * np.arange(len(t))  # drifts out at 0.2 m/s: slow, but off the grid
    (event,) = screen_particles("rope", t, out, None, grid)
    assert event.reason == "escape" and event.particle == 0 and out[event.onset_record, 0, 1] < -0.2
    sunk = x.copy()
    sunk[40:, 3, 2] = -0.02  # 2 cm under the table top
    assert [e.reason for e in screen_particles("rope", t, sunk, None, grid)] == ["escape"]
    blown = x.copy()
    blown[50:, 9] = np.nan
    (event,) = screen_particles("rope", t, blown, None, grid)
    assert (event.reason, event.onset_record, event.particles) == ("non_finite", 50, 1)


def test_fast_motion_the_gripper_or_gravity_explains_is_not_flagged():
    t, x = _rope()
    carried = x.copy()
    moving = np.repeat(x[0, 10][None], len(t), 0)
    moving[10:, 0] += 1.5 * DT * np.arange(len(t) - 10)  # the fingertip sweeps along x at 1.5 m/s
    carried[:, 8:13, 0] = moving[:, None, 0]  # carrying five particles with it
    finger = _box(t, moving)
    assert screen_particles("rope", t, carried, finger) == []
    parked = _box(t, np.repeat(PARKED[None], len(t), 0))
    (event,) = screen_particles("rope", t, carried, parked)  # the same motion with nothing to explain it
    assert event.reason == "speed" and event.particles == 5 and event.onset_record == 10
    dropped = x + [0.0, 0.0, 0.3]  # the rope falls 30 cm freely after a release at record 5
    fall = np.clip(t - 0.05, 0.0, None)
    dropped[..., 2] -= np.minimum(0.5 * 9.81 * fall**2, 0.3)[:, None]
    assert screen_particles("rope", t, dropped, parked) == []


@pytest.fixture(scope="module")
def rope_rollout():
    task = load_task("shape_rope")
    scene = task.scene(0)
    world = make_world(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    return task, scene, world, rollout, task.evaluate(rollout, scene, 0)


def test_the_shape_rope_reference_screens_clean_and_is_accepted(rope_rollout):
    task, scene, world, rollout, evaluation = rope_rollout
    assert evaluation.success and screen_deformables(world, rollout) == []
    audit = audit_and_repair(world, task, scene, 0, rollout, evaluation)
    assert audit.events == [] and audit.artifact_free
    notes = audit.notes()
    assert notes["audit_particles"] and artifact_free(notes)


def test_a_kick_in_a_real_rope_trace_is_reported_and_not_accepted(rope_rollout):
    task, scene, world, rollout, evaluation = rope_rollout
    trace = rollout.trace
    records = trace.particles["rope"].copy()
    k = len(records) // 2
    records[k + 1 : k + 9, 0, 2] += np.float32(1.0 * DT) * np.arange(1, 9, dtype=np.float32)  # 1 m/s up
    records[k + 9 :, 0, 2] = records[k + 8, 0, 2]
    kicked = replace(rollout, trace=replace(trace, particles={"rope": records}))
    audit = audit_and_repair(world, task, scene, 0, kicked, evaluation)
    (event,) = audit.events
    assert event["kind"] == "particles" and event["reason"] == "speed" and event["body"] == "rope"
    assert event["particle"] == 0 and event["onset_s"] == pytest.approx(trace.particle_time[k])
    assert trace.time[event["onset_step"]] == pytest.approx(event["onset_s"], abs=0.003)
    assert not audit.artifact_free and audit.repair is None  # the repair acts on MuJoCo bodies only
    notes = audit.notes()
    assert not artifact_free(notes) and "1 particle(s) of rope moved at up to" in notes["flags"][0]
    summary = audit_summary([Proposal(kicked.plan, kicked, evaluation, 0, "tree/node1", notes)])
    assert (summary["flagged"], summary["particles_screened"], summary["particles_flagged"]) == (1, 1, 1)
    assert summary["events"][0]["reason"] == "speed"
