"""SimuGuard on the rebuilt CALVIN scene: a scripted chain records clean physics (no artifact), two blocks
teleported into a deep overlap are flagged when PyBullet's depenetration throws the top one, the audit never
changes the trajectory, and success_range bounds the metrics by the flagged subtasks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet")

from simpact.calvin.audit import PhysicsAudit, artifacts, auditable  # noqa: E402
from simpact.calvin.data import load_chains  # noqa: E402
from simpact.calvin.env import CalvinEnv  # noqa: E402
from simpact.calvin.evaluate import evaluate_chain, scripted_policy, success_range, summarise  # noqa: E402
from simpact.guard.detector import detect  # noqa: E402
from tests.calvin_data import needs_calvin_data  # noqa: E402

pytestmark = needs_calvin_data


@pytest.fixture(scope="module")
def env():
    with CalvinEnv() as built:
        yield built


@pytest.fixture(scope="module")
def chain():
    return load_chains(2, 1)[0]  # lift_pink_block_slider, place_in_slider, open_drawer, rotate, lift


def test_a_scripted_chain_is_recorded_at_240_hz_and_the_detector_stays_silent(env, chain):
    record = evaluate_chain(env, chain, scripted_policy, audit=True)
    assert record["completed"] == 5
    assert record["artifacts"] == 0 and record["flagged"] is False
    assert [s["artifacts"] for s in record["subtasks"]] == [0] * 5
    steps = record["audit"]["physics_steps"]
    assert steps == 1 + 8 * sum(s["steps"] for s in record["subtasks"])  # the reset's step, 8 per action
    assert record["audit"]["dt"] == pytest.approx(1 / 240) and record["audit"]["errors"] == 0
    plain = evaluate_chain(env, chain, scripted_policy)
    assert "artifacts" not in plain and "audit" not in plain
    assert [s["steps"] for s in plain["subtasks"]] == [s["steps"] for s in record["subtasks"]]


def test_the_recording_names_the_bodies_and_the_audit_leaves_the_run_unchanged(chain):
    def run(audited: bool) -> tuple[np.ndarray, PhysicsAudit | None]:
        with CalvinEnv() as fresh:  # a reused environment is not exact across resets (contact caches)
            audit = PhysicsAudit(fresh) if audited else None
            if audit is not None:
                audit.attach()
            fresh.reset(chain.robot_obs, chain.scene_obs)
            for k in range(15):
                fresh.step(np.array([0.3, -0.2, -0.5, 0.0, 0.0, 0.1, 1.0 if k < 8 else -1.0]), relative=True)
            if audit is not None:
                audit.detach()
                assert auditable(fresh) and audit.recording().nsteps == audit.nsteps + 1
            return np.r_[fresh.robot_obs(), fresh.scene_obs()], audit

    plain, _ = run(False)
    audited, audit = run(True)
    assert np.array_equal(plain, audited)  # bit-identical, robot_obs included: the proxy only reads
    assert audit is not None and audit.nsteps == 1 + 15 * 8
    rec = audit.recording()  # after its client closed: everything was read while attached
    m = rec.manifest
    roles = dict(zip(m.bodies, m.roles))
    for name in ("block_red", "block_blue", "block_pink", "drawer", "slider", "button", "switch"):
        assert roles[name] == "object", name
    assert roles["table"] == roles["floor"] == "static"
    assert roles["panda_hand"] == roles["panda_leftfinger"] == roles["tcp"] == "robot"
    assert m.masses[m.body_id("block_red")] > 0 and m.gravity == [0.0, 0.0, -9.8]
    assert rec.xpos.shape == (rec.nsteps, len(m.bodies), 3) and rec.nsteps == audit.nsteps + 1
    # The red block rests on the table: touching it at every step, with its weight as normal impulse.
    red, table = m.body_id("block_red"), m.body_id("table")
    pairs = [tuple(p) for p in rec.contact_bodies[rec.contacts(5)]]
    assert (min(red, table), max(red, table)) in pairs
    step = rec.contacts(50)
    on_red = (rec.contact_bodies[step] == red).any(axis=1)
    assert rec.contact_impulse[step][on_red].sum() == pytest.approx(9.8 / 240, rel=0.05)
    assert np.allclose(rec.xquat[:, red, 0] ** 2 + (rec.xquat[:, red, 1:] ** 2).sum(-1), 1.0)  # w, x, y, z
    pts = audit.points()
    assert pts["position_on_a"].shape == pts["normal_on_b"].shape == (len(pts["step"]), 3)


def test_blocks_teleported_into_each_other_are_thrown_and_flagged(env, chain, tmp_path):
    env.reset(chain.robot_obs, chain.scene_obs)
    pb, cid = env.pb, env.cid
    red, blue, pink = (env.table.blocks[c] for c in ("red", "blue", "pink"))
    pos, quat = pb.getBasePositionAndOrientation(red, physicsClientId=cid)
    # 4 cm blocks stacked 3.5 cm into each other: the depenetration throws the top one at ~1.3 m/s.
    pb.resetBasePositionAndOrientation(blue, (pos[0], pos[1], pos[2] + 0.005), quat, physicsClientId=cid)
    pb.resetBasePositionAndOrientation(pink, (pos[0], pos[1], pos[2] + 0.010), quat, physicsClientId=cid)
    hold = np.r_[env.robot_obs()[:6], 1.0]
    with PhysicsAudit(env) as audit:
        for _ in range(30):
            env.step(hold)
    rec = audit.recording()
    events = detect(rec)
    flagged = artifacts(events)
    assert [e.body for e in flagged] == ["block_pink"]
    (event,) = flagged
    assert event.onset_step == 0 and event.peak_speed > 1.0
    assert set(event.contact_pair) == {"block_blue", "block_pink"} and event.contact_depth > 0.02
    assert event.ejection.reason == "free flight" and event.carrier.reason == "no carrier"


def test_success_range_bounds_the_rates_by_the_flagged_subtasks():
    def chain(outcomes: list[bool], flags: list[int]) -> dict:
        subtasks = [{"success": ok, "artifacts": a} for ok, a in zip(outcomes, flags)]
        return {"completed": sum(outcomes), "subtasks": subtasks}

    records = [
        chain([True] * 5, [0, 0, 0, 0, 0]),  # clean: 5 in every bound
        chain([True, True, True, False], [0, 1, 0, 0]),  # success helped by an artifact: lower 1
        chain([True, False], [0, 2]),  # failure caused by an artifact: upper 2
        chain([False], [0]),  # clean failure
        {"completed": 2, "subtasks": [{"success": True}, {"success": True}, {"success": False}]},  # no audit
    ]
    out = success_range(records)
    assert out["chains"] == 5 and out["flagged_chains"] == 2
    measured = summarise(records)
    assert out["measured"]["sr"] == measured["sr"] and out["measured"]["avg_len"] == measured["avg_len"]
    assert out["measured"]["avg_len"] == pytest.approx((5 + 3 + 1 + 0 + 2) / 5)
    assert out["lower"]["avg_len"] == pytest.approx((5 + 1 + 1 + 0 + 2) / 5)
    assert out["upper"]["avg_len"] == pytest.approx((5 + 3 + 2 + 0 + 2) / 5)
    assert out["lower"]["sr"] == [0.8, 0.4, 0.2, 0.2, 0.2]
    assert out["upper"]["sr"] == [0.8, 0.8, 0.4, 0.2, 0.2]
    for lo, mid, hi in zip(out["lower"]["sr"], out["measured"]["sr"], out["upper"]["sr"]):
        assert lo <= mid <= hi
    # A flagged first subtask that succeeded: the lower bound loses the whole chain.
    edge = success_range([chain([True] * 5, [1, 0, 0, 0, 1])])
    assert edge["lower"]["avg_len"] == 0 and edge["upper"]["avg_len"] == 5 == edge["measured"]["avg_len"]
    assert success_range([])["measured"] == {"sr": [0.0] * 5, "avg_len": 0.0}
