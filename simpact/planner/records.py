"""What a planning run keeps: every proposal with its rollout and judgement, and the run's result.

Shared by the VLM loop (:mod:`simpact.planner.loop`) and the VLM-free planners
(:mod:`simpact.planner.offline`). ``PlanResult.to_dict`` is the ``result.json`` contract of ``simpact plan``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simpact.core.actions import Plan
from simpact.core.rollout import Rollout
from simpact.tasks import Evaluation

__all__ = ["Failure", "PlanHooks", "PlanResult", "Proposal", "best_by_score"]


def best_by_score(proposals: Sequence[Proposal]) -> int | None:
    """Index of the highest-scoring proposal (the earliest among equals), or None without any."""
    return max(range(len(proposals)), key=lambda i: (proposals[i].score, -i)) if proposals else None


@dataclass
class Proposal:
    """One plan that was rolled out: its ``rollout``, the task's own ``evaluation`` of it, the loop
    ``iteration`` it came from (0 = the sample round), its ``source`` (``sample/3``, ``optimize/1``, ``cem``,
    ...) and free-form ``notes`` (e.g. ``vlm_success``, ``vlm_reason``, ``audit``)."""

    plan: Plan
    rollout: Rollout
    evaluation: Evaluation
    iteration: int
    source: str
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return float(self.evaluation.score)

    @property
    def success(self) -> bool:
        return bool(self.evaluation.success)

    def summary(self) -> dict[str, Any]:
        """Plan, score, success and source, as ``result.json`` lists them."""
        out: dict[str, Any] = {
            "iteration": self.iteration,
            "source": self.source,
            "success": self.success,
            "score": round(self.score, 6),
            "plan": self.plan.to_dict(),
        }
        if "vlm_success" in self.notes:
            out["vlm_success"] = self.notes["vlm_success"]
        if "audit" in self.notes:
            out["audit"] = self.notes["audit"]
        if "audit_repair" in self.notes:
            out["audit_repair"] = self.notes["audit_repair"]
        return out


@dataclass(frozen=True)
class PlanHooks:
    """What a planner tells its caller as it goes, so nothing computed is lost (the planners do no file
    I/O): ``on_proposal(index, proposal)`` once a proposal is final (rolled out, checked, judged),
    ``on_exchange(index, record)`` once a VLM request is done (:meth:`Exchange.to_dict` form), and
    ``reuse(plan)``: a proposal already computed for this plan from the initial snapshot (a resumed run), or
    None to roll it out. Any hook may raise (e.g. KeyboardInterrupt) to stop the run."""

    on_proposal: Callable[[int, Proposal], None] | None = None
    on_exchange: Callable[[int, dict[str, Any]], None] | None = None
    reuse: Callable[[Plan, int, str], Proposal | None] | None = None
    """``reuse(plan, iteration, source)``: the stored proposal of ``plan``, relabelled, or None."""


@dataclass
class Failure:
    """A query that produced no rollout (malformed answer after repair, VLM error): kept, not fatal."""

    iteration: int
    source: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "source": self.source, "reason": self.reason}


@dataclass
class PlanResult:
    """A planning run: all ``proposals`` in order, the ``accepted`` index (judged successful) or ``None``,
    ``best`` (accepted, else highest task score), timings and the VLM back-end name (``None`` offline).

    In ``result.json``, ``success`` is the accepted plan's outcome (False with ``accepted: null``) and
    ``best`` is ``{index, success, score}``: the best rollout's own check, reported separately."""

    task: str
    seed: int
    proposals: list[Proposal]
    accepted: int | None
    best: int | None
    wall_s: float
    vlm: str | None
    iterations: int
    failures: list[Failure] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    method: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """More ``result.json`` fields (merged in last)."""
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    """Every prompt sent and answer received (written under ``prompts/``, not into ``result.json``)."""

    @property
    def chosen(self) -> Proposal | None:
        """The accepted proposal, else the best one."""
        idx = self.accepted if self.accepted is not None else self.best
        return None if idx is None else self.proposals[idx]

    @property
    def success(self) -> bool:
        """The outcome of the plan the planner accepted (its task check); False when none was accepted, e.g.
        when the VLM judged every plan a failure, whatever the best rollout's own check says."""
        return self.accepted is not None and self.proposals[self.accepted].success

    def best_summary(self) -> dict[str, Any] | None:
        """The best rollout's ``index``, own task check ``success`` and ``score`` (None without rollouts)."""
        if self.best is None:
            return None
        p = self.proposals[self.best]
        return {"index": self.best, "success": p.success, "score": round(p.score, 6)}

    def to_dict(self) -> dict[str, Any]:
        chosen = self.chosen
        out: dict[str, Any] = {
            "task": self.task,
            "seed": self.seed,
            "success": self.success,
            "plan": chosen.plan.to_dict() if chosen is not None else None,
            "score": round(chosen.score, 6) if chosen is not None else None,
            "accepted": self.accepted,
            "best": self.best_summary(),
            "iterations": self.iterations,
            "rollouts": len(self.proposals),
            "wall_s": round(self.wall_s, 3),
            "vlm": self.vlm,
            "method": self.method,
            "audit": self.audit,
            "proposals": [p.summary() for p in self.proposals],
            "failures": [f.to_dict() for f in self.failures],
        }
        if any("vlm_success" in p.notes for p in self.proposals):
            out["vlm_success"] = bool(chosen is not None and chosen.notes.get("vlm_success", False))
        out.update(self.extra)
        return out
