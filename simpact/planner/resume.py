"""Continue a planning run from its folder (``simpact plan --resume``) without repeating finished work.

Two things of an earlier run are reused, both read from its folder before planning starts:

* **VLM answers.** Every request is recorded in ``prompts/answers.jsonl`` (the format of
  :class:`~simpact.vlm.replay.RecordingVLM`, so the file also works as a ``--replay`` recording).
  :class:`ReplayFirstVLM` answers a request recorded there from the record, keyed like
  :mod:`simpact.vlm.replay` (texts, image digests, schema, temperature, role; images ignored when only the
  text key matches), identical requests in recorded order; everything else goes to the real back-end and is
  recorded. Recorded failures are asked again, not replayed.
* **Proposals.** ``proposals/NNN/{plan.json,rollout.json}`` of a rolled-out plan hold its task check
  (unrounded), its notes (the planner's search vector, the SimuGuard audit) and its states; a planner that
  meets the same plan again from the initial snapshot takes the stored proposal
  (:attr:`~simpact.planner.records.PlanHooks.reuse`) instead of simulating it. A stored rollout has no
  physics trace: the command re-simulates the chosen plan for its images and video.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.actions import Plan
from simpact.core.rollout import ObjectState, RobotState, Rollout, WorldState
from simpact.core.rotations import rpy_to_quat
from simpact.planner.records import Proposal
from simpact.tasks import Evaluation
from simpact.vlm import VLM, Part, VLMAnswer, VLMError, normalize_parts
from simpact.vlm.replay import request_record

__all__ = ["ANSWERS", "ReplayFirstVLM", "Resumed", "plan_key", "rollout_from_dict"]

ANSWERS = "prompts/answers.jsonl"
"""Every VLM request of a run with its answer or error, relative to the run's folder."""


def plan_key(plan: Plan) -> str:
    """A plan's canonical JSON (actions and start pose): equal plans from one snapshot roll out equally."""
    return json.dumps(plan.to_dict(), sort_keys=True, separators=(",", ":"))


def _arr(raw: Any) -> np.ndarray:
    return np.asarray(raw, dtype=float)


def _state(raw: Mapping[str, Any]) -> WorldState:
    robot = raw["robot"]
    objects = {
        name: ObjectState(
            _arr(o["position"]),
            _arr(o["quaternion"]),
            _arr(o["linear_velocity"]),
            _arr(o["angular_velocity"]),
        )
        for name, o in raw["objects"].items()
    }
    tcp = RobotState(
        _arr(robot["tcp_position"]), rpy_to_quat(robot["tcp_rpy"]), float(robot["gripper_width"])
    )
    return WorldState(float(raw["time"]), tcp, objects)


def rollout_from_dict(raw: Mapping[str, Any], plan: Plan) -> Rollout:
    """A :class:`Rollout` from its ``rollout.json`` (states rounded as written, no trace)."""
    return Rollout(
        plan=plan,
        initial=_state(raw["initial"]),
        states=[_state(s) for s in raw["states"]],
        final=_state(raw["final"]),
        trace=None,
        final_contacts=[(str(a), str(b)) for a, b in raw.get("final_contacts", [])],
        ik_residual_max=float(raw.get("ik_residual_max", 0.0)),
        nsteps=int(raw.get("nsteps", 0)),
        wall_s=float(raw.get("wall_s", 0.0)),
    )


def _stored_proposal(folder: Path) -> Proposal | None:
    """The proposal written in ``folder`` (``plan.json`` + ``rollout.json``), or None when incomplete."""
    try:
        plan = Plan.from_dict(json.loads((folder / "plan.json").read_text(encoding="utf-8")))
        raw = json.loads((folder / "rollout.json").read_text(encoding="utf-8"))
        ev = raw["evaluation"]
        evaluation = Evaluation(bool(ev["success"]), float(ev["score"]), dict(ev.get("details") or {}))
        rollout = rollout_from_dict(raw, plan)
        notes = dict(raw.get("notes") or {})
        return Proposal(plan, rollout, evaluation, int(raw["iteration"]), str(raw["source"]), notes)
    except (OSError, ValueError, KeyError, TypeError):  # a half-written or foreign folder: simulate again
        return None


@dataclass
class Resumed:
    """What an earlier run in the folder left: stored proposals by :func:`plan_key` and recorded VLM answers
    by request key (and by text-only key); counts of what this run took from them."""

    proposals: dict[str, list[Proposal]] = field(default_factory=dict)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    answers_text: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reused: int = 0
    """Proposals taken instead of rolled out."""
    replayed: int = 0
    """VLM requests answered from the record."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, out: Path) -> Resumed:
        """Read ``out/proposals/*`` and ``out/prompts/answers.jsonl`` (missing ones: nothing to reuse)."""
        found = cls()
        for folder in sorted((out / "proposals").glob("[0-9]*")):
            p = _stored_proposal(folder)
            if p is not None:
                found.proposals.setdefault(plan_key(p.plan), []).append(p)
        answers = out / ANSWERS
        lines = answers.read_text(encoding="utf-8").splitlines() if answers.is_file() else []
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # the last line of a killed run may be cut short
                continue
            if isinstance(record, dict) and "answer" in record and "key" in record:
                found.answers.setdefault(record["key"], []).append(record)
                found.answers_text.setdefault(str(record.get("key_text")), []).append(record)
        return found

    @property
    def stored(self) -> int:
        return sum(len(v) for v in self.proposals.values())

    def reuse(self, plan: Plan, iteration: int, source: str) -> Proposal | None:
        """The stored proposal of ``plan`` relabelled ``iteration``/``source`` (each used once), or None."""
        with self._lock:
            stored = self.proposals.get(plan_key(plan))
            if not stored:
                return None
            old = stored.pop(0)
            self.reused += 1
        return Proposal(old.plan, old.rollout, old.evaluation, iteration, source, dict(old.notes))

    def answer(self, key: str, key_text: str) -> dict[str, Any] | None:
        """The next recorded answer for this request (by full key, else by text key), or None."""
        with self._lock:
            for table, k in ((self.answers, key), (self.answers_text, key_text)):
                queue = table.get(k)
                if queue:
                    record = queue.pop(0)
                    other = self.answers_text if table is self.answers else self.answers
                    twin = other.get(str(record.get("key_text" if table is self.answers else "key")), [])
                    if record in twin:
                        twin.remove(record)
                    self.replayed += 1
                    return record
        return None


class ReplayFirstVLM(VLM):
    """``inner`` behind a record: requests recorded in ``resumed`` are answered from it, the rest are
    asked; each asked request's record is passed to ``on_record`` (to append to the record) as
    :class:`~simpact.vlm.replay.RecordingVLM` writes it."""

    def __init__(
        self, inner: VLM, resumed: Resumed, on_record: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # results name the real back-end
        self.model = inner.model
        self.resumed = resumed
        self.on_record = on_record
        self.calls: dict[str, int] = defaultdict(int)
        """Requests by outcome: ``replayed``, ``asked``."""

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def generate(
        self,
        parts: Sequence[Part] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        items = normalize_parts(parts)
        record = request_record(items, schema, temperature=temperature, role=role)
        old = self.resumed.answer(record["key"], record["key_text"])
        if old is not None:
            self.calls["replayed"] += 1
            return VLMAnswer.from_dict(old["answer"])
        self.calls["asked"] += 1
        try:
            answer = self.inner.generate(items, schema, temperature=temperature, role=role)
        except VLMError as exc:
            record["error"] = {"type": type(exc).__name__, "message": str(exc)}
            self._note(record)
            raise
        record["answer"] = answer.to_dict()
        self._note(record)
        return answer

    def _note(self, record: dict[str, Any]) -> None:
        if self.on_record is not None:
            self.on_record(record)
