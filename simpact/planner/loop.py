"""Algorithm 1 of the paper (§3.2): Sample K plans, roll them out, then Optimize → roll out → TaskSuccess
until success or K_max rollouts.

Every plan starts from the world's initial snapshot (state-locked branching). The K sample queries are issued
concurrently, each its own request (role ``sample/i``); their plans roll out in parallel. A malformed answer
gets one repair round (role ``<role>/repair``); if it is still unusable, or the VLM fails, the attempt is
recorded as a :class:`~simpact.planner.records.Failure` and the loop goes on: nothing already rolled out is
lost. A :class:`~simpact.core.errors.ServiceError` (the VLM unreachable, authentication refused, a replay
miss) is not such a failure: it stops the run at once (later queries would fail the same way). The judge is
the VLM's TaskSuccess (``evaluate`` prompt) unless ``judge="task"``; the task's own check
is always recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from simpact.core.actions import Plan
from simpact.core.errors import ServiceError
from simpact.core.scene import Scene
from simpact.planner.audit import artifact_free, audit_and_repair, audit_summary
from simpact.planner.context import history_context, initial_image, keyframes
from simpact.planner.records import Failure, PlanHooks, PlanResult, Proposal, best_by_score
from simpact.tasks import Task
from simpact.vlm import VLM, VLMAnswer
from simpact.vlm.answers import PlanAnswer, evaluation_schema, parse_evaluation, parse_plan, plan_schema
from simpact.vlm.ask import Asked, Exchange, Verdict, ask
from simpact.vlm.context import rollout_context, scene_context
from simpact.vlm.prompts import render_prompt

__all__ = ["LoopConfig", "Progress", "plan_with_vlm"]

V = TypeVar("V", bound=Verdict)

Progress = Callable[[str], None]
"""Receives one line per event (a proposal rolled out, a failed query, the verdict)."""


@dataclass(frozen=True)
class LoopConfig:
    """Settings of Algorithm 1."""

    k: int = 10
    """Proposals sampled in the first round, each from its own query."""
    k_max: int = 13
    """Most rollouts in all: K samples, then K_max - K optimize rounds (a round without a plan counts)."""
    sample_temperature: float | None = 1.0
    optimize_temperature: float | None = 0.7
    evaluate_temperature: float | None = 0.0
    judge: Literal["vlm", "task"] = "vlm"
    """Who decides success: the VLM's TaskSuccess or the task's own check."""
    judge_samples: bool = False
    """Also judge the K sampled rollouts (the paper judges only optimized plans)."""
    images: bool = True
    """Send the initial image with every query."""
    keyframes: int = 2
    """Final frames of this many best rollouts sent to Optimize and of the judged rollout to TaskSuccess
    (only with ``images``)."""
    out_of_range: Literal["clamp", "reject"] = "clamp"
    task_scores: bool = True
    """Show the task check's scores to the VLM (Optimize's history), pick Optimize's keyframes and the plan
    kept when none is accepted by them. False where the check is the benchmark's privileged condition: the
    VLM then sees only the rollouts, keyframes are of the latest proposals and the last proposal is kept."""
    concurrency: int | None = None
    """Most VLM queries in flight at once (default: K)."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if self.k_max < self.k:
            raise ValueError(f"k_max ({self.k_max}) must be at least k ({self.k})")


class _Session:
    """One planning run's shared state: the VLM, the context, and the record of every exchange."""

    def __init__(
        self,
        task: Task,
        scene: Scene,
        world: Any,
        vlm: VLM,
        seed: int,
        config: LoopConfig,
        progress: Progress | None,
        hooks: PlanHooks | None = None,
    ) -> None:
        self.task, self.scene, self.world, self.vlm, self.config = task, scene, world, vlm, config
        self.hooks = hooks or PlanHooks()
        self.seed = seed
        self.progress = progress or (lambda line: None)
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.snapshot = world.initial_snapshot
        self.context = scene_context(scene, world.state())
        self.image: np.ndarray | None = initial_image(world) if config.images else None

    # --- one query with its repair round -----------------------------------------------------------------
    def _record(self, exchange: Exchange) -> None:
        entry = exchange.to_dict()
        with self._lock:
            self.exchanges.append(entry)
            if self.hooks.on_exchange is not None:
                self.hooks.on_exchange(len(self.exchanges) - 1, entry)

    def _ask(
        self,
        role: str,
        parts: list[Any],
        schema: Mapping[str, Any],
        temperature: float | None,
        validate: Callable[[VLMAnswer], V],
    ) -> Asked[V]:
        """Ask, and once more with the errors if the answer is unusable; a failure of a request (a VLM
        error, or a back-end bug) is recorded, never raised, so no completed rollout is lost, except a
        :class:`ServiceError`, which is recorded and then stops the run."""
        asked = ask(
            self.vlm,
            parts,
            schema,
            validate,
            role=role,
            temperature=temperature,
            catch=(Exception,),
            record=self._record,
        )
        if isinstance(asked.error, ServiceError):
            raise asked.error
        return asked

    def _parse_plan(self, answer: VLMAnswer) -> PlanAnswer:
        return parse_plan(answer, out_of_range=self.config.out_of_range)

    def ask_plan(
        self, role: str, prompt: str, temperature: float | None, images: Sequence[np.ndarray]
    ) -> Any:
        parts: list[Any] = [*([self.image] if self.image is not None else []), *images, prompt]
        asked = self._ask(role, parts, plan_schema(), temperature, self._parse_plan)
        parsed = asked.result
        if parsed is None or parsed.plan is None:
            return Failure(-1, role, asked.reason)
        notes: dict[str, Any] = {"repairs": asked.repairs}
        if parsed.clamps:
            notes["clamps"] = [str(c) for c in parsed.clamps]
        description = parsed.data.get("description") if isinstance(parsed.data, Mapping) else None
        if description:
            notes["description"] = str(description)
        return parsed.plan, notes

    # --- prompts -----------------------------------------------------------------------------------------
    def _context_text(self) -> str:
        return json.dumps(self.context, separators=(",", ":"))

    def sample_prompt(self) -> str:
        return render_prompt("sample", task=self.task.instruction, context=self._context_text())

    def optimize_prompt(self, proposals: Sequence[Proposal]) -> str:
        history = json.dumps(
            history_context(proposals, scores=self.config.task_scores), separators=(",", ":")
        )
        return render_prompt(
            "optimize", task=self.task.instruction, context=self._context_text(), history=history
        )

    def judge(self, proposal: Proposal) -> None:
        """Fill ``notes["vlm_success"]`` (and the reason) with the VLM's TaskSuccess verdict."""
        rollout = json.dumps(rollout_context(proposal.rollout), separators=(",", ":"))
        prompt = render_prompt(
            "evaluate", task=self.task.instruction, context=self._context_text(), rollout=rollout
        )
        frames = self._keyframes([proposal], 1)
        parts: list[Any] = [*([self.image] if self.image is not None else []), *frames, prompt]
        role = f"evaluate/{proposal.source}"
        temperature = self.config.evaluate_temperature
        asked = self._ask(role, parts, evaluation_schema(), temperature, parse_evaluation)
        parsed = asked.result
        if parsed is None:
            proposal.notes.update(vlm_success=False, vlm_error=asked.reason)
            return
        proposal.notes.update(vlm_success=bool(parsed.success), vlm_reason=parsed.reason)
        if asked.repairs:
            proposal.notes["evaluate_repairs"] = asked.repairs

    def _keyframes(self, proposals: Sequence[Proposal], n: int) -> list[np.ndarray]:
        if self.image is None or self.config.keyframes <= 0 or not proposals:
            return []
        ranked = sorted(proposals, key=lambda p: -p.score) if self.config.task_scores else proposals[::-1]
        chosen = ranked[: min(n, self.config.keyframes)]
        frames: list[np.ndarray] = []
        for p in chosen:
            try:
                frames += keyframes(self.world, p.rollout)
            except Exception:  # rendering is a nicety; the numbers are in the text
                pass
        return frames

    # --- rollouts ----------------------------------------------------------------------------------------
    def proposed(self, proposals: list[Proposal], proposal: Proposal) -> None:
        """Append a final ``proposal`` and tell the caller."""
        proposals.append(proposal)
        if self.hooks.on_proposal is not None:
            self.hooks.on_proposal(len(proposals) - 1, proposal)

    def roll_out(
        self, items: Sequence[tuple[Plan, dict[str, Any], str]], iteration: int
    ) -> tuple[list[Proposal], list[Failure]]:
        """Roll every plan out from the initial snapshot (in parallel), audit it with SimuGuard (a flagged
        rollout is rerun with the repair setting) and score it with the task's check."""
        plans = [plan for plan, _, _ in items]
        tail = self.task.tail_s
        try:
            rollouts: list[Any] = list(self.world.rollouts(plans, snapshot=self.snapshot, tail_s=tail))
        except Exception:  # one bad plan must not cost the others: roll them one by one
            rollouts = []
            for plan in plans:
                try:
                    rollouts.append(self.world.rollout(plan, snapshot=self.snapshot, tail_s=tail))
                except Exception as exc:
                    rollouts.append(exc)
        proposals, failures = [], []
        for (_, notes, source), rollout in zip(items, rollouts):
            if isinstance(rollout, Exception):
                failures.append(
                    Failure(iteration, source, f"rollout failed: {type(rollout).__name__}: {rollout}")
                )
                self.progress(f"  {source}: rollout failed ({rollout})")
                continue
            evaluation = self.task.evaluate(rollout, self.scene, self.seed)
            try:
                audit = audit_and_repair(
                    self.world, self.task, self.scene, self.seed, rollout, evaluation, self.snapshot
                )
            except Exception as exc:  # an audit failure is recorded (the plan is not accepted), never fatal
                notes = {**notes, "audit_error": f"{type(exc).__name__}: {exc}"}
            else:  # a flagged rollout's repaired rerun, when artifact-free, is what the planner judges
                rollout, evaluation = audit.rollout, audit.evaluation
                notes = {**notes, **audit.notes()}
            proposals.append(Proposal(rollout.plan, rollout, evaluation, iteration, source, notes))
        return proposals, failures


def _report(progress: Progress, p: Proposal) -> None:
    vlm = p.notes.get("vlm_success")
    judged = "" if vlm is None else f", VLM says {'success' if vlm else 'failure'}"
    verdict = "success" if p.success else "failure"
    progress(
        f"  {p.source}: {len(p.plan.actions)} actions, score {p.score:.3f}, task check {verdict}{judged}"
    )


def _accepted(p: Proposal, judge: str) -> bool:
    """Judged successful, on an artifact-free rollout (not flagged by SimuGuard, or repaired)."""
    if not artifact_free(p.notes):
        return False
    return bool(p.notes.get("vlm_success")) if judge == "vlm" else p.success


def plan_with_vlm(
    task: Task,
    scene: Scene,
    world: Any,
    vlm: VLM,
    seed: int = 0,
    config: LoopConfig = LoopConfig(),
    progress: Progress | None = None,
    hooks: PlanHooks | None = None,
) -> PlanResult:
    """Run Algorithm 1 on ``world`` (a :class:`~solvers.world.World` of ``scene``); never raises
    on a bad answer or a failed query, but a :class:`ServiceError` stops it. ``hooks`` hears of each
    proposal and exchange as it is done. ``PlanResult.iterations`` counts rounds: the sample round plus each
    optimize round."""
    t0 = time.perf_counter()
    session = _Session(task, scene, world, vlm, seed, config, progress, hooks)
    say = session.progress
    proposals: list[Proposal] = []
    failures: list[Failure] = []

    # Sample: K independent queries in flight at once.
    prompt = session.sample_prompt()
    roles = [f"sample/{i}" for i in range(config.k)]
    with ThreadPoolExecutor(config.concurrency or config.k, thread_name_prefix="simpact-vlm") as pool:
        answers = list(
            pool.map(lambda role: session.ask_plan(role, prompt, config.sample_temperature, ()), roles)
        )
    items = []
    for role, got in zip(roles, answers):
        if isinstance(got, Failure):
            failures.append(Failure(0, role, got.reason))
            say(f"  {role}: no plan ({got.reason})")
        else:
            items.append((got[0], got[1], role))
    if items:
        new, lost = session.roll_out(items, 0)
        failures += lost
        if config.judge_samples and config.judge == "vlm":
            with ThreadPoolExecutor(config.concurrency or config.k, thread_name_prefix="simpact-vlm") as pool:
                list(pool.map(session.judge, new))
        for p in new:
            session.proposed(proposals, p)
            _report(say, p)
    accepted = None
    if config.judge_samples:
        accepted = next((i for i, p in enumerate(proposals) if _accepted(p, config.judge)), None)

    # Optimize -> roll out -> TaskSuccess, until accepted or the rollout budget is spent.
    iteration = 0
    attempts = config.k_max - config.k  # a failed query spends its slot too, so the loop always ends
    for _ in range(max(attempts, 0) if accepted is None else 0):
        iteration += 1
        role = f"optimize/{iteration}"
        images = session._keyframes(proposals, 2)
        got = session.ask_plan(role, session.optimize_prompt(proposals), config.optimize_temperature, images)
        if isinstance(got, Failure):
            failures.append(Failure(iteration, role, got.reason))
            say(f"  {role}: no plan ({got.reason})")
            continue
        new, lost = session.roll_out([(got[0], got[1], role)], iteration)
        failures += lost
        if not new:
            continue
        proposal = new[0]
        if config.judge == "vlm":
            session.judge(proposal)
        session.proposed(proposals, proposal)
        _report(say, proposal)
        if _accepted(proposal, config.judge):
            accepted = len(proposals) - 1
            break

    if accepted is not None or config.task_scores:
        best = accepted if accepted is not None else best_by_score(proposals)
    else:
        best = len(proposals) - 1 if proposals else None
    return PlanResult(
        task=task.name,
        seed=seed,
        proposals=proposals,
        accepted=accepted,
        best=best,
        wall_s=time.perf_counter() - t0,
        vlm=vlm.name,
        iterations=iteration + 1,
        failures=failures,
        method="simpact",
        audit=audit_summary(proposals),
        extra={"vlm_config": vlm.describe(), "judge": config.judge},
        exchanges=session.exchanges,
    )
