"""The SimuGuard recorder: monitoring changes nothing, records what it should, and never stops a step."""

import logging

import mujoco
import numpy as np
import pytest
from mujoco import rollout

from simpact.guard import Recorder, com_velocity
from simpact.guard.recorder import _ContactBuffer, state_layout
from solvers.mujoco.world import mujoco_access

ARM = """<mujoco><option timestep="0.002" cone="{cone}"/>
<worldbody>
  <geom name="floor" type="plane" size="1 1 0.1"/>
  <body name="fr3_link1" pos="0 0 0.3">
    <joint name="j1" type="hinge" axis="0 0 1"/>
    <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.02" mass="1"/>
    <body name="fr3_link2" pos="0.25 0 0">
      <joint name="j2" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
    </body>
  </body>
  <body name="box" pos="0.2 0.0 0.03"><freejoint/>
    <geom type="box" size="0.03 0.03 0.03" mass="0.2"/></body>
  <body name="ball" pos="-0.2 0.1 0.3"><freejoint/><geom type="sphere" size="0.03" mass="0.1"/></body>
</worldbody>
<actuator>
  <position joint="j1" kp="50" kv="5"/><position joint="j2" kp="20" kv="2"/>
</actuator></mujoco>"""


def arm(cone: str = "pyramidal") -> tuple[mujoco.MjModel, mujoco.MjData]:
    model = mujoco.MjModel.from_xml_string(ARM.format(cone=cone))
    return model, mujoco.MjData(model)


def controls(n: int) -> np.ndarray:
    t = np.arange(n) * 0.002
    return np.column_stack([1.5 * np.sin(3 * t), 0.8 * np.sin(5 * t)])


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_monitor_on_and_off_give_bit_identical_trajectories(cone):
    ctrl = controls(700)
    model, plain = arm(cone)
    qpos, qvel = [], []
    for u in ctrl:
        plain.ctrl[:] = u
        mujoco.mj_step(model, plain)
        qpos.append(plain.qpos.copy())
        qvel.append(plain.qvel.copy())
    _, stepped = arm(cone)
    recorder = Recorder(model, stepped, model_hash="test")
    for k, u in enumerate(ctrl):
        recorder.step(u)
        assert np.array_equal(stepped.qpos, qpos[k]) and np.array_equal(stepped.qvel, qvel[k])
    _, ran = arm(cone)
    Recorder(model, ran, model_hash="test").run(ctrl)
    assert np.array_equal(ran.qpos, qpos[-1]) and np.array_equal(ran.qvel, qvel[-1])
    assert recorder.errors == 0
    assert recorder.recording().contact_bodies.size > 0  # the episode had contacts


def test_recorded_run_equals_the_worlds_rollout():
    from simpact.tasks import load_task
    from solvers.world import make_world

    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = make_world(scene)
    mj = mujoco_access(world)
    plan = task.reference_plan(scene, world.start_pose())
    _, ctrl, _, _ = mj.controls(plan, mj.initial_snapshot)
    ctrl = ctrl[:1500]
    data = mj.new_data(mj.initial_snapshot)
    full = np.empty(mujoco.mj_stateSize(mj.model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(mj.model, data, full, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    states, _ = rollout.rollout(  # the World's own stepping path, on the same controls
        mj.model, data, full[None], ctrl[None], initial_warmstart=data.qacc_warmstart.copy()[None]
    )
    mj.restore(mj.initial_snapshot, data)
    recorder = Recorder.for_world(world, data, model_hash="test")
    recorder.run(ctrl)
    nq = mj.model.nq
    assert np.array_equal(data.qpos, states[0, -1, 1 : 1 + nq])
    rec = recorder.close()
    roles = dict(zip(rec.manifest.bodies, rec.manifest.roles))
    assert roles["hand"] == "robot" and roles["fr3_link3"] == "robot"
    assert roles["carton"] == "object" and roles["world"] == "static"
    assert rec.manifest.meta["objects"] == mj.objects


def test_com_velocity_matches_mj_object_velocity():
    model, data = arm()
    recorder = Recorder(model, data, model_hash="test")
    recorder.run(controls(300))
    kin_xpos, kin_xquat, kin_cvel = data.xpos.copy(), data.xquat.copy(), data.cvel.copy()
    vel = com_velocity(model, kin_xpos[None], kin_xquat[None], kin_cvel[None])[0]
    for name in ("fr3_link1", "fr3_link2", "box", "ball"):
        b = model.body(name).id
        expected = np.empty(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, b, expected, 0)
        np.testing.assert_allclose(vel[b], expected[3:], rtol=1e-12, atol=1e-12)
    assert np.linalg.norm(vel[model.body("fr3_link2").id]) > 0.1  # a moving link was checked


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_resting_box_normal_impulse_is_m_g_dt(cone):
    xml = f"""<mujoco><option timestep="0.002" cone="{cone}"/><worldbody>
      <geom name="table" type="plane" size="1 1 0.1"/>
      <body name="box" pos="0 0 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="0.7"/></body>
    </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    recorder = Recorder(model, data, model_hash="test")
    for _ in range(500):
        recorder.step()
    rec = recorder.recording()
    last = rec.contacts(rec.nsteps - 1)
    assert rec.contact_bodies[last].tolist() == [[0, 1]]
    assert rec.contact_count[last].tolist() == [4]  # four corners merged into one pair
    expected = 0.7 * 9.81 * 0.002
    assert rec.contact_impulse[last][0] == pytest.approx(expected, rel=1e-4)
    assert 0 < rec.contact_depth[last][0] < 1e-3
    # ... and the per-contact normal forces agree with mj_contactForce
    total = 0.0
    for i in range(data.ncon):
        force = np.empty(6)
        mujoco.mj_contactForce(model, data, i, force)
        total += force[0]
    assert rec.contact_impulse[last][0] == pytest.approx(total * 0.002, rel=1e-12)


def test_actuation_is_logged_only_when_it_changes():
    model, data = arm()
    recorder = Recorder(model, data, model_hash="test")
    for k in range(600):
        recorder.step([0.5, 0.2] if k < 100 else [1.0, -0.3])
        if k == 300:
            data.xfrc_applied[model.body("box").id, 2] = 1.0
    rec = recorder.close()
    steps, values = rec.actuation["ctrl"]
    assert steps.tolist() == [0, 100]
    assert values.tolist() == [[0.5, 0.2], [1.0, -0.3]]
    steps, values = rec.actuation["xfrc_applied"]
    assert steps.tolist() == [0, 301]
    assert values[1].reshape(-1, 6)[model.body("box").id, 2] == 1.0
    assert rec.actuation["qfrc_applied"][0].tolist() == [0]


def test_state_written_between_steps_is_recorded():
    model, data = arm()
    recorder = Recorder(model, data, model_hash="test")
    recorder.run(controls(100))
    box = model.joint(model.body("box").jntadr[0]).qposadr[0]
    data.qpos[box + 2] += 0.05  # teleport the box up, as benchmark code might
    mujoco.mj_forward(model, data)
    data.qacc_warmstart[:] = 0.0  # rewrite the solver's warm start
    recorder.step()
    recorder.run(controls(50))
    rec = recorder.close()
    assert rec.writes["qpos"][0].tolist() == [100]
    assert rec.writes["qpos"][1][0][box + 2] == pytest.approx(rec.xpos[100, model.body("box").id, 2])
    assert rec.writes["warmstart"][0].tolist() == [100]
    assert not rec.writes["warmstart"][1].any()
    assert rec.writes["qvel"][0].tolist() == []


def test_snapshots_every_250_steps_restore_the_state_exactly():
    model, data = arm()
    ctrl = controls(600)
    recorder = Recorder(model, data, model_hash="test")
    recorder.run(ctrl)
    rec = recorder.close()
    assert rec.snapshot_step.tolist() == [0, 250, 500]
    other = mujoco.MjData(model)
    mujoco.mj_setState(model, other, rec.snapshots[1], mujoco.mjtState.mjSTATE_INTEGRATION)
    for u in ctrl[250:]:
        other.ctrl[:] = u
        mujoco.mj_step(model, other)
    assert np.array_equal(other.qpos, data.qpos) and np.array_equal(other.qvel, data.qvel)
    layout = state_layout(model)
    o, s = layout["ctrl"]
    assert np.array_equal(rec.snapshots[2][o : o + s], ctrl[500])
    o, _ = layout["time"]
    assert rec.snapshots[2][o] == pytest.approx(500 * 0.002)


def test_a_monitor_that_throws_does_not_stop_the_episode(caplog, monkeypatch):
    ctrl = controls(400)
    model, plain = arm()
    for u in ctrl:
        plain.ctrl[:] = u
        mujoco.mj_step(model, plain)

    def broken_hook(recorder: Recorder) -> None:
        raise RuntimeError("hook failed")

    calls = {"n": 0}
    original = _ContactBuffer.add

    def flaky_add(self, row, d):
        calls["n"] += 1
        if calls["n"] % 7 == 0:
            raise ValueError("recording failed")
        original(self, row, d)

    monkeypatch.setattr(_ContactBuffer, "add", flaky_add)
    _, data = arm()
    recorder = Recorder(model, data, hooks=[broken_hook], model_hash="test")
    with caplog.at_level(logging.WARNING, logger="simpact.guard.recorder"):
        for u in ctrl:
            recorder.step(u)
    assert np.array_equal(data.qpos, plain.qpos) and np.array_equal(data.qvel, plain.qvel)
    assert recorder.nsteps == 400
    failed_rows = calls["n"] // 7
    assert recorder.errors == 400 + failed_rows
    assert "hook failed" in caplog.text
    assert len(caplog.records) <= 11  # logged up to a limit, then only counted
    rec = recorder.close()
    assert rec.manifest.errors == recorder.errors
    assert rec.valid is not None and (~rec.valid).sum() == failed_rows
