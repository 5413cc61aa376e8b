"""VLM-free planners: sample or optimise a task's symbolic skeleton against the task's own progress score.

Methods (``plan_offline(..., method=...)``):

* ``template``: uniform samples from the skeleton's parameter ranges (``skeleton:`` in the task config).
* ``skeleton`` (``cem`` is its former name): the cross-entropy method over the skeleton's open parameters
  normalised to [0, 1], Prompting-with-the-Future style: a uniform first population, then Gaussian
  populations whose diagonal mean and spread are refit to the best quarter, each population rolled out in
  parallel from the same snapshot; it stops at the first success or when the time budget is spent.
* ``gaussian``: the paper's ablation (sec. 4.3): the skeleton's action types with every continuous parameter
  drawn from a zero-mean Gaussian over end-effector pose deltas, five times as many samples, then refit like
  ``cem``. An ablation: it is not expected to solve the suite.

Ablation switches: ``no_simulation`` (proposer-verifier: pick one proposal without rolling any out, the one
nearest the proposal distribution's mean, and roll out only that for the final check) and ``no_optimizer``
(best of one population, no refit).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simpact.core.actions import ACTION_SPECS, Plan, StartPose
from simpact.core.scene import Scene
from simpact.core.vocab import SKELETON_METHODS
from simpact.planner.audit import artifact_free, audit_and_repair, clean
from simpact.planner.records import PlanHooks, Proposal
from simpact.tasks import Task, TaskError
from solvers.world import World

__all__ = ["METHODS", "OfflineResult", "plan_offline", "refit"]

METHODS = SKELETON_METHODS

POPULATION = 12
"""Plans per CEM population (rolled out in parallel)."""
ELITE_FRACTION = 0.25
MIN_STD = 0.03
"""Smallest spread of a refit parameter (normalised units), so CEM keeps exploring."""
SMOOTHING = 0.8
"""Weight of the elites in each refit (the rest keeps the previous distribution)."""
GAUSSIAN_FACTOR = 5
"""The gaussian ablation's first population is this many times larger (paper sec. 4.3)."""
GAUSSIAN_STD = {"d": 0.1, "dyaw": 0.5}
"""Spread of the gaussian ablation's deltas per field (m, rad); displacements default to 0.1 m."""


@dataclass
class OfflineResult:
    """Every rolled-out ``proposals`` in order, the ``best`` index (first success, else highest score),
    whether it succeeded and the wall time, s."""

    proposals: list[Proposal]
    best: int | None
    success: bool
    wall_s: float
    repaired: list[int] = field(default_factory=list)
    """Indices of successes that needed SimuGuard's repaired rerun (not counted as successes)."""


class _Space:
    """Maps normalised vectors to plans: the skeleton's ranges, or (gaussian) free pose deltas."""

    def __init__(self, task: Task, scene: Scene, start: StartPose, seed: int, method: str) -> None:
        if task.skeleton is None:
            raise TaskError(f"task {task.name} has no 'skeleton:' section; the offline planners need one")
        self.task, self.scene, self.start, self.seed = task, scene, start, seed
        self.gaussian = method == "gaussian"
        if self.gaussian:
            self.fields = [
                (i, name) for i, step in enumerate(task.skeleton) for name in ACTION_SPECS[step.type].fields
            ]
        else:
            self.fields = task.skeleton_dims()
        self.dim = len(self.fields)

    def plan(self, x: np.ndarray) -> Plan:
        if not self.gaussian:
            return self.task.skeleton_plan(self.scene, self.start, x, self.seed)
        # Gaussian ablation: x is in standard-normal units; a parameter is std * x around 0 (GRASP around
        # half open), clipped to the action's range.
        assert self.task.skeleton is not None
        values = dict(zip(self.fields, x))
        actions = []
        for i, step in enumerate(self.task.skeleton):
            spec = ACTION_SPECS[step.type]
            action: dict[str, object] = {"type": step.type}
            for name, (lo, hi) in zip(spec.fields, spec.ranges):
                std = GAUSSIAN_STD.get(name, 0.1)
                centre = 0.04 if name == "d" else 0.0
                value = centre + std * float(values[(i, name)])
                if step.type in ("LIFT", "DESCEND"):
                    value = abs(value)
                action[name] = float(np.clip(value, lo, hi))
            actions.append(action)
        return Plan.from_actions(
            actions, description=f"gaussian plan of {self.task.name}", start_pose=self.start.to_dict()
        )

    def initial(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.gaussian:
            return rng.standard_normal((n, self.dim))
        return rng.uniform(0.0, 1.0, (n, self.dim))

    def clip(self, x: np.ndarray) -> np.ndarray:
        return x if self.gaussian else np.clip(x, 0.0, 1.0)


def plan_offline(
    task: Task,
    scene: Scene,
    world: World,
    seed: int,
    method: str = "cem",
    budget_s: float = 60.0,
    progress: Callable[[str], None] | None = None,
    *,
    population: int = POPULATION,
    no_simulation: bool = False,
    no_optimizer: bool = False,
    audit: bool = True,
    hooks: PlanHooks | None = None,
) -> OfflineResult:
    """Plan ``task`` in ``scene`` (seed ``seed``, which also seeds the sampler) without a VLM.

    Stops at the first trusted success or when the next population would overrun ``budget_s`` seconds;
    ``progress`` is called with a line per proposal as it is judged. With ``audit``, every rollout is
    audited by SimuGuard (:func:`~simpact.planner.audit.audit_and_repair`: the screen costs well under 1% of
    a rollout, and only rollouts it cannot clear are recorded in full); a flagged rollout is rerun with the
    repair setting, and a success is trusted only on an artifact-free rollout. ``hooks`` hears of each
    proposal as it is final and may hand back stored ones (a resumed run) instead of rolling them out."""
    if method not in METHODS:
        raise ValueError(f"unknown offline method '{method}'; expected one of {', '.join(METHODS)}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    space = _Space(task, scene, world.start_pose(), seed, method)
    first = population * (GAUSSIAN_FACTOR if method == "gaussian" else 1)
    judge = _Judge(task, scene, world, seed, space, progress, audit, hooks or PlanHooks())

    if no_simulation:
        xs = space.initial(rng, first)
        centre = np.zeros(space.dim) if space.gaussian else np.full(space.dim, 0.5)
        pick = xs[[int(np.argmin(np.linalg.norm(xs - centre, axis=1)))]]
        judge(pick, 0, f"{method}-verifier")
        judge.proposals[-1].notes["proposals_considered"] = first
        return _result(judge.proposals, t0)

    _search(judge, space, rng, method, first, population, budget_s, no_optimizer, t0)
    return _result(judge.proposals, t0)


@dataclass
class _Judge:
    """Rolls out (or reuses) the plans of a batch of normalised vectors and records each as a proposal."""

    task: Task
    scene: Scene
    world: World
    seed: int
    space: _Space
    progress: Callable[[str], None] | None
    audit: bool
    hooks: PlanHooks
    proposals: list[Proposal] = field(default_factory=list)

    def __call__(self, xs: np.ndarray, iteration: int, source: str) -> None:
        hooks, progress, proposals = self.hooks, self.progress, self.proposals
        plans = [self.space.plan(x) for x in xs]
        reused = [
            hooks.reuse(plan, iteration, f"{source}/{k}") if hooks.reuse else None
            for k, plan in enumerate(plans)
        ]
        todo = [plan for plan, old in zip(plans, reused) if old is None]
        fresh = iter(self.world.rollouts(todo, tail_s=self.task.tail_s) if todo else [])
        for k, old in enumerate(reused):
            if old is not None:
                proposals.append(old)
                if progress is not None:
                    progress(f"  {old.source}: reused from the earlier run, score {old.score:.3f}")
                if hooks.on_proposal is not None:
                    hooks.on_proposal(len(proposals) - 1, old)
                continue
            rollout = next(fresh)
            evaluation = self.task.evaluate(rollout, self.scene, self.seed)
            notes: dict[str, object] = {"x": xs[k].tolist()}
            if self.audit:  # a flagged rollout's repaired rerun, when artifact-free, is what the search uses
                checked = audit_and_repair(self.world, self.task, self.scene, self.seed, rollout, evaluation)
                rollout, evaluation = checked.rollout, checked.evaluation
                notes.update(checked.notes())
            proposal = Proposal(rollout.plan, rollout, evaluation, iteration, f"{source}/{k}", notes)
            proposals.append(proposal)
            if progress is not None:
                verdict = "success" if evaluation.success else "failure"
                progress(f"  {proposal.source}: {verdict}, score {evaluation.score:.3f}")
            if hooks.on_proposal is not None:
                hooks.on_proposal(len(proposals) - 1, proposal)


def _search(
    judge: _Judge,
    space: _Space,
    rng: np.random.Generator,
    method: str,
    first: int,
    population: int,
    budget_s: float,
    no_optimizer: bool,
    t0: float,
) -> None:
    """Judge populations (the first of ``first`` plans, then ``population`` each, refit unless
    ``template``) until a trusted success, ``no_optimizer``, or the next one would overrun ``budget_s``."""
    proposals = judge.proposals
    xs = space.initial(rng, first)
    mean: np.ndarray | None = np.zeros(space.dim) if space.gaussian else None
    std: np.ndarray | None = np.ones(space.dim) if space.gaussian else None
    iteration = 0
    while True:
        tb = time.perf_counter()
        judge(xs, iteration, method)
        batch_s = time.perf_counter() - tb
        if any(_trusted(p) for p in proposals) or no_optimizer:
            break
        elapsed = time.perf_counter() - t0
        n = population
        if elapsed + batch_s * n / len(xs) > budget_s:
            break
        iteration += 1
        if method == "template":
            xs = space.initial(rng, n)
            continue
        mean, std = _refit(proposals, len(xs), mean, std)
        xs = space.clip(mean + std * rng.standard_normal((n, space.dim)))


def _refit(
    proposals: list[Proposal], batch: int, mean: np.ndarray | None, std: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`refit` to everything judged so far (the proposals' normalised vectors and scores)."""
    scores = np.array([p.score for p in proposals])
    history = np.array([p.notes["x"] for p in proposals])
    return refit(history, scores, batch, mean, std)


def refit(
    history: np.ndarray, scores: np.ndarray, batch: int, mean: np.ndarray | None, std: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The CEM refit: the diagonal Gaussian (``mean``, ``std``; None at first) refit to the elites among the
    vectors ``history`` (N, D) judged so far with ``scores`` (N,), the elite count a fraction of the last
    ``batch`` size, smoothed with the previous distribution and kept at least ``MIN_STD`` wide."""
    n_elite = max(2, math.ceil(ELITE_FRACTION * batch))
    elite = history[np.argsort(-scores, kind="stable")[:n_elite]]
    e_mean, e_std = elite.mean(axis=0), elite.std(axis=0)
    if mean is None or std is None:
        return e_mean, np.maximum(e_std, MIN_STD)
    return SMOOTHING * e_mean + (1 - SMOOTHING) * mean, np.maximum(
        SMOOTHING * e_std + (1 - SMOOTHING) * std, MIN_STD
    )


def _trusted(proposal: Proposal) -> bool:
    """A success on a rollout SimuGuard did not flag (a repaired rerun's success is not counted)."""
    return proposal.success and clean(proposal.notes)


def _result(proposals: list[Proposal], t0: float) -> OfflineResult:
    if not proposals:
        return OfflineResult([], None, False, time.perf_counter() - t0)
    wins = [i for i, p in enumerate(proposals) if _trusted(p)]
    repaired = [
        i for i, p in enumerate(proposals) if p.success and not clean(p.notes) and artifact_free(p.notes)
    ]
    # Without a trusted success, the best score among rollouts with no flagged artifact.
    scores = [p.score if artifact_free(p.notes) else -1.0 for p in proposals]
    best = wins[0] if wins else int(np.argmax(scores))
    return OfflineResult(proposals, best, bool(wins), time.perf_counter() - t0, repaired)
