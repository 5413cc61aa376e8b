"""The screen is conservative: every episode the detector finds an event in is suspicious; calm ones pass."""

import mujoco
import numpy as np

from simpact.guard import Recorder
from simpact.guard.labels import simulate
from simpact.guard.recorder import state_layout
from simpact.guard.screen import free_bodies_motion, screen, screen_rollout
from simpact.guard.suite import episode
from simpact.tasks import load_task
from solvers.mujoco.world import mujoco_access
from solvers.world import make_world


def test_every_suite_episode_with_an_event_is_suspicious():
    # overlap, sunk, thin wall, drop, throw, roll off, kick (the bench checks the whole suite)
    for seed in (0, 5, 13, 14, 16, 21, 23):
        run = simulate(episode(seed))
        if run.events:
            assert run.screen.suspicious, run.episode.name
    calm = simulate(episode(12))  # mass ratio: a heavy box rests on a light one
    assert not calm.events and not calm.screen.suspicious, calm.screen.reason


def test_screen_sees_what_the_recorder_records():
    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = make_world(scene)
    mj = mujoco_access(world)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    assert not screen_rollout(world, rollout).suspicious
    _, ctrl, _, _ = mj.controls(rollout.plan, mj.initial_snapshot, task.tail_s)
    data = mj.new_data(mj.initial_snapshot)
    recorder = Recorder.for_world(world, data)
    recorder.run(ctrl)
    rec = recorder.close()
    layout = state_layout(mj.model)
    (oq, nq), (ov, nv) = layout["qpos"], layout["qvel"]
    snap = mj.initial_snapshot
    objects = sorted(mj.objects.values())
    first = (snap[oq : oq + nq], snap[ov : ov + nv])
    trace = rollout.trace
    pos, vel = free_bodies_motion(mj.model, objects, trace.qpos[:-1], trace.qvel[:-1], first)
    assert np.array_equal(pos, rec.xpos[:, objects])  # a free body's frame is its joint's position
    np.testing.assert_allclose(vel, rec.vel[:, objects], rtol=0, atol=1e-12)


def test_an_object_the_screen_cannot_see_is_suspicious():
    xml = """<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
      <body name="door" pos="0 0 .5"><joint type="hinge"/><geom type="box" size=".1 .1 .1"/></body>
    </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    result = screen(model, np.zeros((3, model.nq)), np.zeros((3, model.nv)), robot_bodies=[])
    assert result.suspicious and result.body == "door" and "free joint" in result.reason
