"""The VLM judges an execution from the camera's frames: one repair round, failures recorded, never raised."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from robot.judge import observed_rollout, vlm_judge
from simpact.core.actions import Plan
from simpact.tasks import load_task
from simpact.vlm import VLMRequestError
from solvers.mujoco.world import MujocoWorld
from tests.vlm_doubles import ScriptedVLM

FRAMES = [np.zeros((8, 8, 3), np.uint8), np.full((8, 8, 3), 255, np.uint8)]
YES = {"reason": "the carton is at the blue box's line", "success": True}


@pytest.fixture(scope="module")
def push() -> dict[str, Any]:
    """(instruction, scene before, world, observed rollout): the carton pushed 0.15 m along x."""
    task = load_task("non_toppling_push")
    before = task.scene(0)
    carton = before.object("carton")
    moved = dataclasses.replace(carton, position=(carton.position[0] + 0.15, *carton.position[1:]))
    after = dataclasses.replace(
        before, objects=tuple(moved if o.name == "carton" else o for o in before.objects)
    )
    plan = Plan.from_dict({"actions": [{"type": "PUSH", "dx": 0.15, "dy": 0.0}]})
    tool = (np.array([0.36, 0.0, 0.25]), np.array([0.0, 1.0, 0.0, 0.0]), 0.0)
    observed = observed_rollout(plan, before, after, tool, tool, 4.0)
    return dict(instruction=task.instruction, before=before, world=MujocoWorld(before), observed=observed)


def test_a_verdict_after_one_repair_round(push: dict[str, Any]) -> None:
    vlm = ScriptedVLM("Looks fine to me.", YES)
    verdict = vlm_judge(vlm, images=FRAMES, **push)
    assert verdict["success"] is True and verdict["reason"] == YES["reason"]
    assert vlm.roles == ["judge", "judge/repair"] and vlm.calls[0].parts[:2] == FRAMES
    prompt = vlm.calls[0].parts[2]
    assert "Push the carton" in prompt and "executed on the real robot" in prompt
    repair = vlm.calls[1].parts
    assert repair[2:4] == [prompt, "Looks fine to me."] and "could not be used" in repair[4]
    assert [e["role"] for e in verdict["exchanges"]] == ["judge", "judge/repair"]
    assert verdict["exchanges"][1]["prompt"] == repair[4] and verdict["exchanges"][1]["error"] is None


def test_no_usable_verdict_and_a_failed_request_are_answers_too(push: dict[str, Any]) -> None:
    verdict = vlm_judge(ScriptedVLM("hmm", "{}"), images=FRAMES, **push)
    assert verdict["success"] is None and verdict["reason"].startswith("no usable verdict")
    down = VLMRequestError("server down", status=503)
    verdict = vlm_judge(ScriptedVLM("hmm", down), images=FRAMES, **push)
    assert verdict["success"] is None and verdict["reason"] == "VLM error: server down"
    failed = verdict["exchanges"][-1]
    assert failed["role"] == "judge/repair" and failed["error"] == "server down" and failed["answer"] is None
    assert "Push the carton" in failed["prompt"]  # a failed request is recorded with the judge's prompt
