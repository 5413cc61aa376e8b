"""Mode ``simpact`` of ``bench calvin`` (the paper's): a VLM samples, optimises and judges each subtask's
plans, the subtask's own condition stays out of the planner, CALVIN's check judges (rebuild back-end, a
scripted VLM double; needs PyBullet and the CALVIN data)."""

from __future__ import annotations

import dataclasses
import json
from functools import partial
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pybullet")

from simpact.bench import calvin_simpact as cs  # noqa: E402
from simpact.bench.calvin import mode_policy  # noqa: E402
from simpact.bench.calvin_vlm import simpact_vlm_policy, subtask_task  # noqa: E402
from simpact.calvin.data import CalvinDataMissing, load_chains  # noqa: E402
from simpact.calvin.evaluate import evaluate_chain  # noqa: E402
from simpact.core.errors import SimpactError  # noqa: E402
from tests.vlm_doubles import ScriptedVLM  # noqa: E402

try:
    CHAIN = load_chains(29, 1)[0]  # starts with lift_red_block_table
except CalvinDataMissing:  # pragma: no cover - data folder absent
    pytest.skip("CALVIN data not found", allow_module_level=True)

SETTINGS = {"vlm": "scripted", "k": 2, "k_max": 3}


@pytest.fixture(scope="module")
def env():
    from simpact.calvin.env import CalvinEnv

    e = CalvinEnv()
    yield e
    e.close()


def _lift_plan(env: Any) -> str:
    """A plan that lifts the red block, written from the scene the policy will see (as a VLM would from the
    scene's description): above it, down around it, grasp, lift."""
    env.reset(CHAIN.robot_obs, CHAIN.scene_obs)
    scene = cs.calvin_scene(env, "ground_truth")
    block = np.asarray(scene.object("block_red").position)
    tcp = np.asarray(scene.robot.position)
    actions = [
        {"type": "MOVE", "dx": block[0] - tcp[0], "dy": block[1] - tcp[1], "dz": 0.0},
        {"type": "DESCEND", "dz": tcp[2] - block[2]},
        {"type": "GRASP", "d": 0.02},
        {"type": "LIFT", "dz": 0.10},
    ]
    return json.dumps({"description": "lift the red block", "actions": actions})


def test_the_vlm_plans_and_judges_and_calvin_checks(env) -> None:
    plan = _lift_plan(env)
    vlm = ScriptedVLM(roles={"sample/*": plan, "optimize/*": plan,
                             "evaluate/*": '{"reason": "the red block is up", "success": true}'})  # fmt: skip
    act = partial(simpact_vlm_policy, settings=SETTINGS, vlm=vlm)
    record = evaluate_chain(env, dataclasses.replace(CHAIN, sequence=CHAIN.sequence[:1]), act)
    assert record["completed"] == 1, record
    said = record["subtasks"][0]["policy"]
    assert said["accepted"] is True and said["rollouts"] == 3 and said["actions"] == 4
    assert said["scene_source"] == "frame" and "segmentation" in said["privileged"]
    # the VLM never saw a score: the subtask's condition is not in its planner
    texts = [p for r in vlm.calls for p in r.parts if isinstance(p, str)]
    assert texts and not any('"score"' in t for t in texts)
    assert [r for r in vlm.roles if r is not None and r.startswith("evaluate")] == ["evaluate/optimize/1"]


def test_a_plan_the_vlm_accepts_still_fails_calvins_check(env) -> None:
    """The VLM's verdict does not decide the benchmark: a plan that stops above the block fails."""
    stop = json.dumps({"description": "hover", "actions": [{"type": "LIFT", "dz": 0.02}]})
    vlm = ScriptedVLM(roles={"sample/*": stop, "optimize/*": stop,
                             "evaluate/*": '{"reason": "looks done", "success": true}'})  # fmt: skip
    act = partial(simpact_vlm_policy, settings=SETTINGS, vlm=vlm)
    record = evaluate_chain(env, dataclasses.replace(CHAIN, sequence=CHAIN.sequence[:1]), act)
    assert record["completed"] == 0
    assert record["subtasks"][0]["policy"]["accepted"] is True


def test_the_task_has_no_check_of_its_own(env) -> None:
    env.reset(CHAIN.robot_obs, CHAIN.scene_obs)
    spec = subtask_task("lift_red_block_table", "lift the red block", cs.calvin_scene(env, "ground_truth"))
    assert spec.goal is None and spec.instruction == "lift the red block"


def test_the_mode_needs_a_vlm() -> None:
    with pytest.raises(SimpactError, match="needs a VLM"):
        mode_policy("simpact")
    with pytest.raises(SimpactError, match="goes with --mode simpact"):
        mode_policy("scripted", {"vlm": "gemini"})
    assert callable(mode_policy("simpact", {"vlm": "gemini"}))  # built lazily, in the process that runs it
