"""SimuGuard in the planner: a flagged rollout is rerun with the repair setting and its artifact-free outcome
is what the planner uses."""

import json

import numpy as np
import pytest

from simpact.core.scene import Scene, SceneObject
from simpact.guard import Recorder, detect
from simpact.guard.rerun import Change, rerun_controls
from simpact.guard.settle import placed_state
from simpact.planner.audit import (
    artifact_free,
    audit_and_repair,
    audit_rollout,
    audit_summary,
)
from simpact.planner.records import Proposal
from simpact.tasks import load_task
from solvers.mujoco.world import mujoco_access
from solvers.world import make_world

# a light lid created 7 cm deep in a crate, away from the pushed carton: ejected as soon as the physics runs
OVERLAP = (
    SceneObject("crate", "box", (0.1, 0.1, 0.1), (0.3, 0.45, 0.05), mass=0.5),
    SceneObject("lid", "box", (0.08, 0.08, 0.08), (0.3, 0.45, 0.07), mass=0.05),
)


@pytest.fixture(scope="module")
def flagged():
    """The push task with the overlap, rolled out from the scene as placed (before the world's settling)."""
    task = load_task("non_toppling_push")
    base = task.scene(0)
    scene = Scene(base.objects + OVERLAP, base.robot, base.table_size, base.table_friction)
    world = make_world(scene)
    mj = mujoco_access(world)
    data = mj.new_data()
    placed_state(world, data)
    snapshot = mj.snapshot(data)
    plan = task.reference_plan(scene, world.start_pose(snapshot))
    rollout = world.rollout(plan, snapshot=snapshot, tail_s=task.tail_s)
    return task, scene, world, snapshot, rollout, task.evaluate(rollout, scene, 0)


def test_a_flagged_rollout_is_rerun_with_the_repair_and_its_outcome_used(flagged):
    task, scene, world, snapshot, rollout, evaluation = flagged
    before = world.snapshot()
    audit = audit_and_repair(world, task, scene, 0, rollout, evaluation, snapshot)
    assert audit.screen.suspicious and audit.recorded
    assert [e["body"] for e in audit.events] == ["lid"] and audit.events[0]["peak_speed"] > 1.0
    repair = audit.repair
    assert repair is not None and repair["change"] == "depenetration:lid=0.3"
    assert repair["switch_step"] == 0 and repair["prefix_exact"] is None  # onset within 0.1 s of the start
    assert repair["events"] == [] and repair["artifact_free"] and audit.artifact_free
    # the planner gets the rerun: same plan, different physics for the lid, the task judged on it
    assert audit.rollout is not rollout and audit.rollout.plan == rollout.plan
    assert not np.array_equal(audit.rollout.trace.qpos, rollout.trace.qpos)
    assert repair["success"] == audit.evaluation.success and repair["score"] == audit.evaluation.score
    assert np.array_equal(world.snapshot(), before)  # the world's model and data are untouched
    notes = audit.notes()
    flag = notes["flags"][0]
    assert artifact_free(notes) and "lid was ejected at" in flag
    assert "Rerun with depenetration:lid=0.3" in flag and "that outcome is used" in flag
    summary = audit_summary([Proposal(rollout.plan, audit.rollout, audit.evaluation, 0, "cem/0", notes)])
    assert {k: summary[k] for k in ("audited", "recorded", "flagged", "rerun", "repaired")} == {
        "audited": 1,
        "recorded": 1,
        "flagged": 1,
        "rerun": 1,
        "repaired": 1,
    }
    json.dumps(summary)


def test_without_the_repair_the_flagged_rollout_is_not_artifact_free(flagged):
    task, scene, world, snapshot, rollout, evaluation = flagged
    audit = audit_and_repair(world, task, scene, 0, rollout, evaluation, snapshot, repair=None)
    assert audit.events and audit.repair is None and not audit.artifact_free
    assert audit.rollout is rollout and not artifact_free(audit.notes())
    assert audit_rollout(world, rollout, task.tail_s, snapshot) == audit.events


def test_a_rerun_switched_later_keeps_the_prefix_bit_for_bit(flagged):
    task, scene, world, snapshot, rollout, evaluation = flagged
    from simpact.guard.replay import compare

    mj = mujoco_access(world)
    _, ctrl, _, _ = mj.controls(rollout.plan, snapshot, task.tail_s)
    ctrl = ctrl[:400]
    data = mj.new_data(snapshot)
    recorder = Recorder.for_world(world, data)
    recorder.run(ctrl)
    original = recorder.close()
    lid = mj.model.body("lid").id
    rerun, model = rerun_controls(world, snapshot, ctrl, Change("solref", 0.2, "lid"), body=lid, switch=150)
    assert compare(original, rerun, stop=150) is None
    assert compare(original, rerun) is not None  # the change acts after the switch
    geoms = mj.model.geom_bodyid == lid
    assert np.all(model.geom_solref[geoms, 0] == 0.2) and np.all(mj.model.geom_solref[geoms, 0] < 0.2)
    assert len(detect(rerun)) <= len(detect(original))


def test_clean_rollouts_are_cleared_by_the_screen_alone():
    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = make_world(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    audit = audit_and_repair(world, task, scene, 0, rollout, task.evaluate(rollout, scene, 0))
    assert not audit.screen.suspicious and not audit.recorded and audit.events == [] and audit.repair is None
    assert audit.notes() == {"audit": [], "audit_recorded": False}


def test_the_vlm_loop_is_told_of_the_artifact_and_accepts_only_the_artifact_free_rerun(flagged, scripted):
    """Every rollout of the loop starts with the lid ejected: each is described to the VLM, rerun with the
    repair setting, and the plan is accepted on the artifact-free rerun."""
    import copy

    from simpact.planner.loop import LoopConfig, plan_with_vlm

    task, scene, world, snapshot, rollout, _ = flagged
    world = copy.copy(world)  # the same model, starting from the scene as placed
    world.initial_snapshot = snapshot
    plan = json.dumps({"description": "push", "actions": [a.to_dict() for a in rollout.plan.actions]})
    success = '{"reason": "upright at the line", "success": true}'
    vlm = scripted({"sample/*": plan, "optimize/*": plan, "evaluate/*": success})
    config = LoopConfig(k=1, k_max=2, images=False, judge="vlm")
    result = plan_with_vlm(task, scene, world, vlm, config=config)
    assert result.accepted == 1
    accepted = result.proposals[1]
    assert accepted.notes["audit"] and accepted.notes["audit_repair"]["artifact_free"]
    assert not np.array_equal(accepted.rollout.trace.qpos, rollout.trace.qpos)  # the rerun is used
    optimize_prompt = next(p for r, p in vlm.calls if r == "optimize/1")[-1]
    assert "lid was ejected at" in optimize_prompt and "not trustworthy" in optimize_prompt
    audit = result.to_dict()["audit"]
    counts = [audit[k] for k in ("audited", "recorded", "flagged", "rerun", "repaired")]
    assert counts == [2, 2, 2, 2, 2]
    assert result.to_dict()["proposals"][1]["audit_repair"]["change"] == "depenetration:lid=0.3"
