"""Algorithm 1 with a scripted VLM on non_toppling_push: shared snapshot, stopping, malformed answers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from simpact.planner.loop import LoopConfig, plan_with_vlm
from simpact.vlm import VLMRequestError
from simpact.vlm.answers import parse_plan

FAST = {"images": False}
LIFT = [{"type": "LIFT", "dz": 0.02}]
NUDGE = [{"type": "MOVE", "dx": 0.01, "dy": 0.0, "dz": 0.0}]


def test_samples_start_from_the_same_snapshot(push_world, scripted, as_plan):
    task, scene, world, _ = push_world
    vlm = scripted({"sample/0": as_plan(LIFT), "sample/1": as_plan(NUDGE), "sample/2": as_plan(LIFT)})
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=3, k_max=3, **FAST))
    assert [p.source for p in result.proposals] == ["sample/0", "sample/1", "sample/2"]
    initial = [p.rollout.initial for p in result.proposals]
    for state in initial[1:]:  # the state each rollout started from, exactly
        assert np.array_equal(state.robot.tcp_position, initial[0].robot.tcp_position)
        for name, obj in state.objects.items():
            assert np.array_equal(obj.position, initial[0].objects[name].position)
            assert np.array_equal(obj.quaternion, initial[0].objects[name].quaternion)
    a, b, c = (p.rollout.trace for p in result.proposals)
    assert np.array_equal(a.qpos, c.qpos) and np.array_equal(a.qvel, c.qvel)  # same plan, bit-identical
    serial = world.rollout(result.proposals[1].plan, snapshot=world.initial_snapshot, tail_s=task.tail_s)
    assert np.array_equal(serial.trace.qpos, b.qpos)
    assert result.iterations == 1 and result.accepted is None and result.best is not None


def test_sample_queries_are_concurrent(push_world, scripted, as_plan):
    task, scene, world, _ = push_world
    barrier = threading.Barrier(3, timeout=10)

    def meet(parts, role):
        barrier.wait()  # only passes when all three queries are in flight at once
        return as_plan(LIFT)

    vlm = scripted({"sample/*": meet})
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=3, k_max=3, **FAST))
    assert len(result.proposals) == 3 and not result.failures


def test_stops_on_success(push_world, scripted, as_plan):
    task, scene, world, ref = push_world
    vlm = scripted(
        {
            "sample/*": as_plan(LIFT),
            "optimize/*": as_plan(ref),
            "evaluate/*": '{"reason": "carton at the line, upright", "success": true}',
        }
    )
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=2, k_max=6, **FAST))
    assert len(result.proposals) == 3
    assert result.accepted == 2 and result.success
    assert result.proposals[2].notes["vlm_success"] is True
    assert vlm.roles.count("optimize/1") == 1 and "optimize/2" not in vlm.roles
    assert result.to_dict()["vlm_success"] is True
    # the optimize prompt carried every earlier rollout as context
    optimize_prompt = next(p for r, p in vlm.calls if r == "optimize/1")[-1]
    assert "sample/0" in optimize_prompt and "sample/1" in optimize_prompt and "end_state" in optimize_prompt


def test_runs_to_k_max_when_judged_failing(push_world, scripted, as_plan):
    task, scene, world, ref = push_world
    vlm = scripted({"optimize/*": as_plan(NUDGE), "evaluate/*": '{"reason": "not there", "success": false}'})
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=2, k_max=4, **FAST))
    assert len(result.proposals) == 4 and result.accepted is None
    assert result.iterations == 3
    assert result.to_dict()["vlm_success"] is False


MALFORMED = {
    "missing_fields": '{"description": "no actions here"}',
    "wrong_types": '{"actions": [{"type": "LIFT", "dz": "very high"}]}',
    "unknown_action": '{"actions": [{"type": "TELEPORT", "x": 1.0}]}',
    "prose_around_json": 'Here is my plan:\n{"actions": [{"type": "LIFT", "dz": 0.02}]}\nGood luck!',
    "truncated": '{"actions": [{"type": "LIFT", "dz": 0.0',
    "empty": "",
    "refusal": "I'm sorry, but I can't help with controlling this robot.",
    "not_an_object": "[1, 2, 3]",
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_answers_never_crash_nor_lose_rollouts(push_world, scripted, as_plan, kind):
    task, scene, world, _ = push_world
    bad = MALFORMED[kind]
    vlm = scripted(
        {
            "sample/0": bad,
            "sample/0/repair": bad,
            "sample/1": as_plan(LIFT),
            "optimize/*": bad,
            "evaluate/*": bad,
        }
    )
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=2, k_max=3, **FAST))
    usable = parse_plan(bad).ok
    sources = [p.source for p in result.proposals]
    assert "sample/1" in sources  # the good rollout is kept whatever the bad ones did
    roles = vlm.roles
    if usable:
        assert sources == ["sample/0", "sample/1", "optimize/1"] and "sample/0/repair" not in roles
    else:
        assert "sample/0/repair" in roles and "optimize/1/repair" in roles
        assert {f.source for f in result.failures} == {"sample/0", "optimize/1"}
        assert sources == ["sample/1"]
    assert result.best is not None
    assert result.to_dict()["rollouts"] == len(result.proposals)


def test_repair_round_fixes_an_answer(push_world, scripted, as_plan):
    task, scene, world, _ = push_world
    vlm = scripted({"sample/0": '{"actions": [{"type": "TELEPORT"}]}', "sample/0/repair": as_plan(LIFT)})
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=1, k_max=1, **FAST))
    assert [p.source for p in result.proposals] == ["sample/0"]
    assert result.proposals[0].notes["repairs"] == 1
    repair_prompt = next(p for r, p in vlm.calls if r == "sample/0/repair")
    assert "TELEPORT" in repair_prompt[-1] and repair_prompt[-2] == '{"actions": [{"type": "TELEPORT"}]}'


def test_vlm_errors_are_recorded_not_raised(push_world, scripted, as_plan):
    task, scene, world, _ = push_world
    boom = VLMRequestError("server said no", status=500)
    vlm = scripted({"sample/1": boom, "optimize/1": RuntimeError("bug"), "evaluate/*": boom})
    result = plan_with_vlm(task, scene, world, vlm, config=LoopConfig(k=2, k_max=4, **FAST))
    assert [p.source for p in result.proposals] == ["sample/0", "optimize/2"]
    assert {f.source for f in result.failures} == {"sample/1", "optimize/1"}
    assert (
        result.proposals[1].notes["vlm_success"] is False
        and "server said no" in result.proposals[1].notes["vlm_error"]
    )


def test_task_judge_and_clamped_parameters(push_world, scripted, as_plan):
    task, scene, world, ref = push_world
    vlm = scripted({"sample/*": as_plan([{"type": "LIFT", "dz": 50.0}]), "optimize/*": as_plan(ref)})
    config = LoopConfig(k=1, k_max=3, judge="task", **FAST)
    result = plan_with_vlm(task, scene, world, vlm, config=config)
    assert result.proposals[0].notes["clamps"]
    assert result.accepted == 1 and result.success
    assert not any(r.startswith("evaluate") for r in vlm.roles)
