"""A scripted VLM and a shared world of ``non_toppling_push`` for the planner tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from simpact.vlm import VLM, VLMAnswer

Script = Mapping[str, Any]
"""role (exact, or a prefix ending in '*') -> answer text, a list of texts (one per call), an exception, or a
callable(parts, role) -> text."""


class ScriptedVLM(VLM):
    """Answers each role from a script; records every request (role, parts)."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self, script: Script, default: str = '{"actions": [{"type": "LIFT", "dz": 0.02}]}'):
        self.script = dict(script)
        self.default = default
        self.calls: list[tuple[str, list[Any]]] = []
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def _entry(self, role: str) -> Any:
        if role in self.script:
            return self.script[role]
        for key, value in self.script.items():
            if key.endswith("*") and role.startswith(key[:-1]):
                return value
        return self.default

    def generate(
        self,
        parts: Sequence[Any] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        role = role or ""
        with self._lock:
            self.calls.append((role, list(parts)))
            n = self._counts[role] = self._counts.get(role, 0) + 1
        entry = self._entry(role)
        if isinstance(entry, list):
            entry = entry[min(n - 1, len(entry) - 1)]
        if isinstance(entry, BaseException):
            raise entry
        if callable(entry):
            entry = entry(parts, role)
        return VLMAnswer.from_text(entry, model=self.model, backend=self.name)

    def roles(self) -> list[str]:
        return [r for r, _ in self.calls]


def plan_text(actions: list[dict[str, Any]], description: str = "test plan") -> str:
    return json.dumps({"description": description, "actions": actions})


@pytest.fixture(scope="session")
def push_world() -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """(task, scene, world, reference actions) of non_toppling_push, seed 0."""
    from simpact.tasks import load_task
    from solvers.mujoco.world import MujocoWorld

    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = MujocoWorld(scene)
    ref = task.reference_plan(scene, world.start_pose(), 0)
    return task, scene, world, [a.to_dict() for a in ref.actions]


@pytest.fixture(scope="session")
def scripted() -> Callable[..., ScriptedVLM]:
    return ScriptedVLM


@pytest.fixture(scope="session")
def as_plan() -> Callable[..., str]:
    return plan_text
