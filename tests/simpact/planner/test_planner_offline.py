"""The VLM-free planners: CEM solves a rigid task, runs are reproducible, skeleton errors are clear."""

import numpy as np
import pytest

from simpact.planner.offline import plan_offline
from simpact.tasks import Task, TaskError, load_task
from solvers.world import make_world


@pytest.fixture(scope="module")
def push():
    task = load_task("non_toppling_push")
    scene = task.scene(2)
    return task, scene, make_world(scene)


def test_cem_solves_the_non_toppling_push(push):
    task, scene, world = push
    result = plan_offline(task, scene, world, seed=2, method="cem", budget_s=60.0)
    assert result.success and result.best is not None
    best = result.proposals[result.best]
    assert best.success and best.evaluation.details["upright:carton.tilt_deg"] < 15
    assert result.proposals[-1].iteration == best.iteration  # it stops after the first successful round
    assert result.wall_s < 60.0


def test_a_run_is_reproducible(push):
    task, scene, world = push
    a = plan_offline(task, scene, world, seed=5, method="template", budget_s=2.0, population=4)
    b = plan_offline(task, scene, world, seed=5, method="template", budget_s=2.0, population=4)
    n = min(len(a.proposals), len(b.proposals))
    assert n >= 4
    for p, q in zip(a.proposals[:n], b.proposals[:n]):
        assert p.plan.to_dict() == q.plan.to_dict()
        assert p.score == q.score


def test_the_gaussian_ablation_and_switches_run(push):
    task, scene, world = push
    result = plan_offline(task, scene, world, seed=1, method="gaussian", population=2, no_optimizer=True)
    assert len(result.proposals) == 10  # five times the population, one round
    assert {a.type for a in result.proposals[0].plan.actions} == {"MOVE", "DESCEND", "PUSH", "LIFT"}
    verifier = plan_offline(task, scene, world, seed=1, method="cem", no_simulation=True)
    assert len(verifier.proposals) == 1 and verifier.best == 0


def test_skeleton_samples_stay_inside_their_ranges(push):
    task, scene, world = push
    start = world.start_pose()
    low = task.skeleton_plan(scene, start, np.zeros(4), seed=2)
    high = task.skeleton_plan(scene, start, np.ones(4), seed=2)
    assert start.position[2] - high.actions[1].params["dz"] == pytest.approx(0.005)  # just above the table
    top = scene.object("carton").size[2]
    assert start.position[2] - low.actions[1].params["dz"] == pytest.approx(top)  # the carton's top
    with pytest.raises(TaskError, match="needs 4 parameters"):
        task.skeleton_plan(scene, start, np.zeros(3))


def _task_with(skeleton):
    raw = dict(load_task("non_toppling_push").raw)
    raw["skeleton"] = skeleton
    return Task(raw)


@pytest.mark.parametrize(
    ("skeleton", "message"),
    [
        ("MOVE", "non-empty list"),
        ([{"type": "JUMP"}], "skeleton action 0: unknown type 'JUMP'"),
        ([{"type": "PUSH", "dx": 0.1}], "field 'dy' is missing"),
        ([{"type": "LIFT", "dz": [0.0]}], "range 'dz' must be \\[low, high\\]"),
        ([{"type": "LIFT", "dz": 0.1, "dx": 0.0}], "unknown fields \\['dx'\\]"),
        ([{"type": "LIFT", "dz": None}], "must be a number, an expression or \\[low, high\\]"),
    ],
)
def test_skeleton_errors_are_clear(skeleton, message):
    with pytest.raises(TaskError, match=message):
        _task_with(skeleton)


def test_unknown_names_and_missing_skeletons_are_reported(push):
    task, scene, world = push
    bad = _task_with([{"type": "LIFT", "dz": ["0", "nope.z"]}])
    with pytest.raises(TaskError, match="skeleton action 0 field 'dz': unknown name 'nope.z'"):
        bad.skeleton_plan(scene, world.start_pose(), np.zeros(1))
    raw = {k: v for k, v in task.raw.items() if k != "skeleton"}
    with pytest.raises(TaskError, match="has no 'skeleton:' section"):
        plan_offline(Task(raw), scene, world, seed=1)
    with pytest.raises(ValueError, match="unknown offline method"):
        plan_offline(task, scene, world, seed=1, method="annealing")


def test_a_success_with_a_contact_artifact_is_not_trusted(monkeypatch):
    """The offline planner audits every rollout; a flagged success the repair rerun could not clear does
    not stop the search."""
    import simpact.planner.offline as offline
    from simpact.guard.screen import ScreenResult
    from simpact.planner.audit import Audit
    from simpact.tasks import load_task

    fake = {"body": "carton", "peak_speed": 3.1, "onset_s": 0.5}
    audited = []

    def flag_successes(world, task, scene, seed, rollout, evaluation):
        audited.append(rollout)
        events = [fake] if evaluation.success else []
        repair = {"change": "depenetration:carton=0.3", "artifact_free": False} if events else None
        return Audit(ScreenResult(True, "test"), True, events, rollout, evaluation, repair)

    monkeypatch.setattr(offline, "audit_and_repair", flag_successes)
    task = load_task("non_toppling_push")
    scene = task.scene(5)  # seed 5: the first population already holds a success
    result = offline.plan_offline(task, scene, make_world(scene), 5, no_optimizer=True)
    assert len(audited) == len(result.proposals)  # every rollout, not only the successes
    assert not result.success  # every success was flagged
    assert any(p.success and p.notes["audit"] == [fake] for p in result.proposals)
    assert not result.proposals[result.best].notes.get("audit")


def test_planner_audit_reproduces_the_rollout_bit_for_bit():
    from simpact.planner.audit import audit_rollout
    from simpact.tasks import load_task

    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = make_world(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    assert audit_rollout(world, rollout, task.tail_s) == []  # checks equality internally, no artifact
