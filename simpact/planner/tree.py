"""The offline planner with no skeleton: a tree search over object-centric primitives with state-locked
branching and CEM over each primitive's parameters, scored by the task's own goal.

The root is the world's initial snapshot. Expanding a node builds the primitives its goal hints suggest
(:func:`simpact.planner.primitives.primitives_for`) from the objects' poses where the node ends, and for
each primitive runs the cross-entropy method over its parameters (a uniform population, then Gaussian ones
refit to the elites, :func:`simpact.planner.offline.refit`), every population rolled out in parallel from
the node's own end snapshot: a branch starts from the exact state its parent ended in, not from a replay
(state-locked branching, as in RoboAware), and steps the controls of the whole plan from the root compiled
as one (``MujocoWorld.rollout(prefix=...)``), so its history is bit for bit the whole plan's rollout (in a
world with deformables the end snapshot carries their state too, stepped as the rollout stepped them:
``CompositeWorld.snapshot_at``). A
sample is scored by the task's :meth:`~simpact.tasks.Task.evaluate` on the whole history (the parent's
trace up to its last action, then the sample's rollout with the task's hold), and the best sample of each
primitive becomes a child.
The search is lazy best-first: every (node, primitive) pair waits with its node's score as priority (the
root's score is the goal's score of doing nothing), so a child that improves on its parent is explored
before its siblings; plans have at most ``max_depth`` primitives. A node whose history fails a goal
predicate judged over the whole rollout (``Task.lasting_failures``) is a dead end: it is not expanded.

A child whose history the task judges a success is rolled out again as one plan from the initial snapshot
(every primitive's actions in order, as ``simpact rollout`` would run it), checked, and audited by
SimuGuard; that rollout is the proposal. A success counts only on a rollout SimuGuard did not flag:
a success that needed a repaired rerun is listed separately and the search goes on.

The score is the task's own goal (privileged information a VLM does not have); the goal hints name which
objects matter and where they should go. No skeleton and no reference plan is used. The search is
deterministic for a seed while under ``max_rollouts``; a run stopped by the wall-clock ``budget_s`` is not.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from simpact.core.actions import Plan, PlanError
from simpact.core.rollout import Rollout, Trace, WorldState
from simpact.core.scene import Scene
from simpact.planner.audit import audit_and_repair, clean
from simpact.planner.offline import refit
from simpact.planner.primitives import Context, Hint, Primitive, Tcp, geometry, lowest_tcp, safe_height
from simpact.planner.records import PlanHooks, Proposal
from simpact.planner.suggest import primitives_for
from simpact.tasks import Evaluation, Task
from solvers.composite import CompositeWorld
from solvers.mujoco.world import mujoco_access
from solvers.world import World

__all__ = ["Node", "TreeResult", "end_snapshot", "overruns", "plan_tree", "task_hints", "tree_markdown"]

POPULATION = 12
"""Samples per CEM population of one primitive (rolled out in parallel)."""
ITERATIONS = 4
"""CEM populations per primitive at a node."""
MAX_DEPTH = 3
"""Primitives in a plan at most."""
MAX_ROLLOUTS = 600
"""Rollouts a search may simulate (the deterministic budget)."""
BUDGET_S = 170.0
"""Wall-clock cap of one search, s."""
STALL = 0.005
"""A primitive's CEM stops after three populations unless its best beats its start node's score by this."""


@dataclass
class Node:
    """One node of the tree: the primitive that led here (``label``, its ``params``), its own ``actions``,
    the task's judgement of the whole history, the rollouts its CEM took (``samples``), and what it keeps
    for branching: the combined ``rollout`` from the root, the ``own`` rollout from its parent's snapshot,
    ``cut`` (trace rows up to its last action's end), its end ``snapshot`` (made when it is expanded)."""

    id: int
    parent: int | None
    depth: int
    label: str = "root"
    params: dict[str, float] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)
    score: float = -1.0
    success: bool = False
    samples: int = 0
    yaw: float = 0.0
    rollout: Rollout | None = None
    own: Rollout | None = None
    cut: int = 0
    snapshot: Any = None
    verified: str | None = None
    children: list[int] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    """The task's evaluation details of the whole history (per-predicate verdicts of a goal)."""
    dead: bool = False
    """Its history fails a goal predicate judged over the whole rollout: no child can succeed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent": self.parent,
            "depth": self.depth,
            "primitive": self.label,
            "params": self.params,
            "actions": len(self.actions),
            "score": round(self.score, 4),
            "success": self.success,
            "dead": self.dead,
            "samples": self.samples,
            "verified": self.verified,
            "children": list(self.children),
        }


@dataclass
class TreeResult:
    """The verified ``proposals`` (full plans from the initial snapshot), the ``best`` index (first clean
    success, else highest score), whether it succeeded cleanly, the ``tree``, rollouts simulated, wall s."""

    proposals: list[Proposal]
    best: int | None
    success: bool
    nodes: list[Node]
    rollouts: int
    wall_s: float
    hints: list[Any]
    repaired: list[int] = field(default_factory=list)


def task_hints(task: Task, scene: Scene, seed: int) -> list[Any]:
    """The task goal's hints (``Task.goal_hints``), or for a task whose goal is a Python check without
    hints, hints read from its success parameters (object and region, target line, upper and lower bowl,
    support, pieces and region)."""
    goal_hints = getattr(task, "goal_hints", None)
    found = list(goal_hints(scene, seed=seed)) if callable(goal_hints) else []
    if found:
        return found
    p, targets = task.success_params, task.targets(seed)
    objects = {o.name: o for o in scene.objects}
    hints: list[Any] = []
    if "upper" in p and "lower" in p:
        hints.append(Hint(p["upper"], "place", onto=p["lower"]))
    if "object" in p and "region" in p:
        hints.append(Hint(p["object"], "place", point=objects[p["region"]].position))
    if "object" in p and "target" in p:
        point = list(objects[p["object"]].position)
        point["xyz".index(p.get("axis", "x"))] = targets[p["target"]]
        hints.append(Hint(p["object"], "upright", point=(point[0], point[1], point[2])))
    if "object" in p and "support" in p:
        hints.append(Hint(p["object"], "standing", face="smallest"))
    if "pieces" in p and "region" in p:
        hints.append(Hint(f"{p['pieces']}*", "place", point=objects[p["region"]].position))
    if "obstacle" in p:
        hints.append(Hint(p["obstacle"], "keep"))
    return hints


def end_snapshot(world: World, snapshot: Any, own: Rollout, tail_s: float) -> tuple[Any, int]:
    """The exact state at the end of ``own``'s last action (before its hold), stepping its recorded controls
    from ``snapshot`` as the rollout did, and that step's trace row; checked bit for bit against it."""
    mj = mujoco_access(world)
    assert own.trace is not None, "branching needs traces"
    last = _last_action_row(own, world, tail_s)
    data = mj.new_data(snapshot)
    for u in own.trace.ctrl[: last + 1]:
        data.ctrl[:] = u
        mujoco.mj_step(mj.model, data)
    if not np.array_equal(data.qpos, own.trace.qpos[last]):
        raise RuntimeError("stepping a branch's controls diverged from its rollout")
    if isinstance(world, CompositeWorld):  # the deformables too, stepped as the rollout stepped them
        return world.snapshot_at(snapshot, own.trace, last, mj.snapshot(data)), last
    return mj.snapshot(data), last


def combine(parent: Node, own: Rollout, plan: Plan) -> Rollout:
    """``own`` (rolled out from ``parent``'s end snapshot) appended to ``parent``'s history: one rollout of
    ``plan`` (all actions from the root) as the task's check reads it."""
    if parent.rollout is None:
        return own
    head, tail = parent.rollout.trace, own.trace
    assert head is not None and tail is not None, "branching needs traces"
    cut = parent.cut + 1

    def join(k: str) -> np.ndarray:
        return np.concatenate([getattr(head, k)[:cut], getattr(tail, k)])

    particles, particle_time = dict(tail.particles), tail.particle_time
    if head.particle_time is not None and tail.particle_time is not None:  # deformables: records before own's
        earlier = head.particle_time < tail.particle_time[0]
        particles = {k: np.concatenate([head.particles[k][earlier], v]) for k, v in particles.items()}
        particle_time = np.concatenate([head.particle_time[earlier], tail.particle_time])
    trace = Trace(
        time=join("time"),
        qpos=join("qpos"),
        qvel=join("qvel"),
        ctrl=join("ctrl"),
        tcp_position=join("tcp_position"),
        tcp_quaternion=join("tcp_quaternion"),
        gripper_width=join("gripper_width"),
        object_qpos=dict(tail.object_qpos),
        particles=particles,
        particle_time=particle_time,
    )
    return Rollout(
        plan,
        parent.rollout.initial,
        parent.rollout.states[: len(parent.rollout.plan.actions)] + list(own.states),
        own.final,
        trace,
        own.final_contacts,
        max(parent.rollout.ik_residual_max, own.ik_residual_max),
        cut + own.nsteps,
        parent.rollout.wall_s + own.wall_s,
    )


def overruns(elapsed: float, done: int, more: int, budget: float) -> bool:
    """Whether ``more`` rollouts, at the pace of the ``done`` ones in ``elapsed`` s, would end past
    ``budget`` s: a population started just before the budget ran out took up to 25 s past CALVIN's 60 s
    when the machine was busy (1.35 s a rollout)."""
    pace = elapsed / done if done else 0.0
    return elapsed + more * pace > budget


class _Search:
    """One tree search (see the module docstring)."""

    def __init__(self, task: Task, scene: Scene, world: World, seed: int, **kw: Any) -> None:
        self.task, self.scene, self.world, self.seed = task, scene, world, seed
        self.population: int = kw["population"]
        self.iterations: int = kw["iterations"]
        self.max_depth: int = kw["max_depth"]
        self.max_rollouts: int = kw["max_rollouts"]
        self.budget_s: float = kw["budget_s"]
        self.audit: bool = kw["audit"]
        self.progress: Callable[[str], None] | None = kw["progress"]
        self.hooks: PlanHooks = kw["hooks"]
        self.rng = np.random.default_rng(seed)
        self.t0 = time.perf_counter()
        self.start = world.start_pose()
        self.hints = task_hints(task, scene, seed)
        root = Node(0, None, 0, yaw=float(scene.robot.yaw), snapshot=world.initial_snapshot)
        self.nodes = [root]
        self.rollouts = 0
        self.proposals: list[Proposal] = []
        self.repaired: list[int] = []
        self.done = False
        self._seq = 0
        self._contexts: dict[int, list[tuple[Primitive, Context]]] = {}

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def out_of_budget(self, more: int = 0) -> bool:
        """Whether ``more`` rollouts would pass ``max_rollouts``, or would end past ``budget_s`` at the
        search's pace so far (:func:`overruns`)."""
        elapsed = time.perf_counter() - self.t0
        return self.rollouts + more > self.max_rollouts or overruns(
            elapsed, self.rollouts, more, self.budget_s
        )

    def run(self) -> None:
        """Lazy best-first: every (node, primitive) pair waits with its node's score as priority; the best
        is optimised next, so a child that improves on its parent is explored before its siblings."""
        root = self.nodes[0]
        root.score, root.details = self.root_score()
        queue: list[tuple[float, int, int, int]] = []
        self.open(root, queue)
        while queue and not self.done and not self.out_of_budget(1):
            _, _, nid, k = heapq.heappop(queue)
            node = self.nodes[nid]
            prim, ctx = self.pending(node)[k]
            child = self.optimise(node, prim, ctx)
            if child is None:
                continue
            self.nodes.append(child)
            node.children.append(child.id)
            self.say(
                f"  node {child.id} (depth {child.depth}, from {node.id}): {child.label} "
                f"score {child.score:.3f}{' success' if child.success else ''} [{child.samples} rollouts]"
            )
            if child.success:
                self.verify(child)
            self.open(child, queue)

    def root_score(self) -> tuple[float, dict[str, Any]]:
        """The goal's score and details of doing nothing (one rollout of a zero lift)."""
        plan = Plan.from_actions([{"type": "LIFT", "dz": 0.0}], start_pose=self.start.to_dict())
        rollout = self.world.rollouts([plan], tail_s=self.task.tail_s)[0]
        self.rollouts += 1
        ev = self.task.evaluate(rollout, self.scene, self.seed)
        return float(ev.score), dict(ev.details)

    def open(self, node: Node, queue: list[tuple[float, int, int, int]]) -> None:
        """Queue ``node``'s primitives (none at the deepest level)."""
        if node.depth >= self.max_depth or node.dead:
            return
        boxes = geometry(self.scene, self.state_at(node))
        done = satisfied(node.details)
        for k, prim in enumerate(primitives_for(self.hints, boxes, node.depth, self.held(node))):
            self._seq += 1
            later = 1.0 if prim.subject in done else 0.0  # its object's goal already holds: try it last
            heapq.heappush(queue, (later - node.score, self._seq, node.id, k))

    def pending(self, node: Node) -> list[tuple[Primitive, Context]]:
        """``node``'s primitives with the context they are built in (its end snapshot made on first use)."""
        if node.id not in self._contexts:
            if node.snapshot is None:
                assert node.own is not None
                node.snapshot, _ = end_snapshot(
                    self.world, self.nodes[node.parent or 0].snapshot, node.own, self.task.tail_s
                )
            boxes = geometry(self.scene, self.state_at(node))
            start = self.world.start_pose(node.snapshot)
            ctx = Context(boxes, Tcp(start.position, node.yaw), safe_height(boxes), start.to_dict(),
                          lowest_tcp(boxes))  # fmt: skip
            found = primitives_for(self.hints, boxes, node.depth, self.held(node))
            self._contexts[node.id] = [(p, ctx) for p in found]
        return self._contexts[node.id]

    def held(self, node: Node) -> str | None:
        """The object in the hand where ``node`` ends: the scene's ``robot.holding`` at the root (every
        primitive but ``hold`` lets go, and ``hold`` only ends a branch: its goal is met or not)."""
        return self.scene.robot.holding if node.depth == 0 else None

    def state_at(self, node: Node) -> WorldState:
        return self.world.state() if node.own is None else node.own.states[-1]

    def _plans(
        self, prim: Primitive, ctx: Context, xs: np.ndarray, start: dict[str, Any]
    ) -> list[Plan | None]:
        out: list[Plan | None] = []
        for x in xs:
            try:
                out.append(Plan.from_actions(prim.actions(ctx, x), description=prim.label, start_pose=start))
            except PlanError:
                out.append(None)
        return out

    def optimise(self, node: Node, prim: Primitive, ctx: Context) -> Node | None:
        """CEM over ``prim``'s parameters from ``node``'s snapshot; the best sample as a child node. A sample
        whose history fails a predicate judged over the whole rollout (a dead end) ranks below every live
        one: its value is its score less one."""
        best: tuple[float, bool, np.ndarray, Rollout, Rollout, Evaluation] | None = None
        xs_all: list[np.ndarray] = []
        scores: list[float] = []
        mean = std = None
        samples = 0
        for it in range(self.iterations if prim.dim else 1):
            n = self.population if prim.dim else 1
            if self.out_of_budget(n):
                break
            if it == 0:
                xs = self.rng.uniform(0.0, 1.0, (n, prim.dim))
            else:
                assert mean is not None and std is not None
                xs = np.clip(mean + std * self.rng.standard_normal((n, prim.dim)), 0.0, 1.0)
            plans = self._plans(prim, ctx, xs, dict(ctx.start or {}))
            valid = [p for p in plans if p is not None]
            results = iter(self.branch_rollouts(node, valid))
            self.rollouts += len(valid)
            samples += len(valid)
            for x, plan in zip(xs, plans):
                value, success = -1.0, False
                if plan is not None:
                    own, full = next(results)
                    combined = combine(node, own, full)
                    ev = self.task.evaluate(combined, self.scene, self.seed)
                    value = float(ev.score) - (1.0 if self.task.lasting_failures(ev) else 0.0)
                    success = bool(ev.success)
                    if best is None or (success, value) > (best[1], best[0]):
                        best = (value, success, x, own, combined, ev)
                xs_all.append(x)
                scores.append(value)
            if best is not None and best[1]:
                break
            if it >= 2 and (best is None or best[0] <= node.score + STALL):
                break  # three populations and no better than where it started: this primitive does not help
            mean, std = refit(np.array(xs_all), np.array(scores), n, mean, std)
        if best is None:
            return None
        value, success, x, own, combined, ev = best
        child = Node(
            len(self.nodes),
            node.id,
            node.depth + 1,
            prim.label,
            prim.describe(x),
            [a.to_dict() for a in own.plan.actions],
            float(ev.score),
            success,
            samples,
            node.yaw + sum(a.params.get("dyaw", 0.0) for a in own.plan.actions),
            combined,
            own,
        )
        child.details = dict(ev.details)
        child.dead = bool(self.task.lasting_failures(ev))
        child.cut = (node.cut + 1 if node.rollout is not None else 0) + _last_action_row(
            own, self.world, self.task.tail_s
        )
        return child

    def history(self, node: Node) -> list[dict[str, Any]]:
        """Every action from the root to ``node``."""
        chain: list[dict[str, Any]] = []
        n: Node | None = node
        while n is not None and n.parent is not None:
            chain = n.actions + chain
            n = self.nodes[n.parent]
        return chain

    def full_plan(self, node: Node, plan: Plan) -> Plan:
        """Every action from the root to ``node``, then ``plan``'s, as one plan from the initial pose."""
        return Plan.from_actions(
            self.history(node) + [a.to_dict() for a in plan.actions],
            description="tree plan",
            start_pose=self.start.to_dict(),
        )

    def branch_rollouts(self, node: Node, plans: Sequence[Plan]) -> list[tuple[Rollout, Plan]]:
        """Each of ``plans`` rolled out from ``node``'s end snapshot as the continuation of the whole plan
        from the root (compiled whole, stepped from the snapshot: the full replay is the same bit for bit),
        with that whole plan."""
        fulls = [self.full_plan(node, p) for p in plans]
        prefix = len(self.history(node))
        if isinstance(self.world, CompositeWorld):  # node snapshots carry the deformables' states
            own = self.world.rollouts(fulls, snapshot=node.snapshot, tail_s=self.task.tail_s, prefix=prefix)
            return list(zip(own, fulls))
        mj = mujoco_access(self.world)
        own = mj.rollouts(fulls, snapshot=node.snapshot, tail_s=self.task.tail_s, prefix=prefix)
        return list(zip(own, fulls))

    def verify(self, node: Node) -> Proposal:
        """Roll ``node``'s whole plan out from the initial snapshot as one plan; check and audit it."""
        plan = self.full_plan(self.nodes[node.parent or 0], Plan.from_actions(node.actions))
        rollout = self.world.rollouts([plan], tail_s=self.task.tail_s)[0]
        self.rollouts += 1
        evaluation: Evaluation = self.task.evaluate(rollout, self.scene, self.seed)
        notes: dict[str, Any] = {"node": node.id, "branch_score": node.score}
        if self.audit:
            checked = audit_and_repair(self.world, self.task, self.scene, self.seed, rollout, evaluation)
            rollout, evaluation = checked.rollout, checked.evaluation
            notes.update(checked.notes())
        proposal = Proposal(plan, rollout, evaluation, node.depth, f"tree/node{node.id}", notes)
        self.proposals.append(proposal)
        index = len(self.proposals) - 1
        if self.hooks.on_proposal is not None:
            self.hooks.on_proposal(index, proposal)
        trusted = proposal.success and clean(notes)
        repaired = proposal.success and not trusted and "audit_repair" in notes
        node.verified = "success" if trusted else "repaired" if repaired else "failure"
        if repaired:
            self.repaired.append(index)
        self.say(
            f"  node {node.id} replayed from the start as one plan: {node.verified}, "
            f"score {proposal.score:.3f}"
        )
        self.done = self.done or trusted
        return proposal


def satisfied(details: dict[str, Any]) -> set[str]:
    """Objects whose every goal predicate holds, read from a goal's evaluation details
    (``PREDICATE:OBJECT.ok`` entries); empty for a Python check's details."""
    verdicts: dict[str, list[bool]] = {}
    for key, value in details.items():
        head, _, tail = key.partition(":")
        if tail.endswith(".ok") and head and "*" not in tail:
            verdicts.setdefault(tail[: -len(".ok")], []).append(bool(value))
    return {name for name, oks in verdicts.items() if all(oks)}


def _last_action_row(own: Rollout, world: World, tail_s: float) -> int:
    """The trace row of ``own``'s last action end (its rollout's steps before the hold)."""
    hold = round(tail_s / mujoco_access(world).timestep)
    return own.nsteps - hold - 1


def plan_tree(
    task: Task,
    scene: Scene,
    world: World,
    seed: int,
    progress: Callable[[str], None] | None = None,
    *,
    population: int = POPULATION,
    iterations: int = ITERATIONS,
    max_depth: int = MAX_DEPTH,
    max_rollouts: int = MAX_ROLLOUTS,
    budget_s: float = BUDGET_S,
    audit: bool = True,
    hooks: PlanHooks | None = None,
) -> TreeResult:
    """Search ``task`` in ``scene`` (seed ``seed``, which also seeds the sampler) without a skeleton."""
    search = _Search(
        task,
        scene,
        world,
        seed,
        population=population,
        iterations=iterations,
        max_depth=max_depth,
        max_rollouts=max_rollouts,
        budget_s=budget_s,
        audit=audit,
        progress=progress,
        hooks=hooks or PlanHooks(),
    )
    search.say(f"tree search: goal hints {[_hint_text(h) for h in search.hints]}")
    search.run()
    if not any(n.verified for n in search.nodes[1:]) and len(search.nodes) > 1:
        search.verify(max(search.nodes[1:], key=lambda n: (not n.dead, n.score, -n.id)))
    proposals = search.proposals
    wins = [i for i, p in enumerate(proposals) if p.success and clean(p.notes)]
    best = (
        wins[0]
        if wins
        else (max(range(len(proposals)), key=lambda i: (proposals[i].score, -i)) if proposals else None)
    )
    for n in search.nodes:  # free the traces: the tree's summary is what is kept
        n.rollout = n.own = n.snapshot = None
    return TreeResult(
        proposals,
        best,
        bool(wins),
        search.nodes,
        search.rollouts,
        time.perf_counter() - search.t0,
        search.hints,
        search.repaired,
    )


def _hint_text(h: Any) -> str:
    where = f" onto {h.onto}" if h.onto else (f" at ({h.point[0]:.3f}, {h.point[1]:.3f})" if h.point else "")
    return f"{h.kind} {h.object}{where}"


def tree_markdown(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The explored tree as an indented markdown list (one line per node, children under their parent)."""
    by_id = {n["id"]: n for n in nodes}
    lines: list[str] = []

    def walk(i: int, indent: int) -> None:
        n = by_id[i]
        params = ", ".join(f"{k}={v:g}" for k, v in n["params"].items())
        mark = f" — replayed: **{n['verified']}**" if n.get("verified") else ""
        text = (
            f"{n['primitive']}({params}) score {n['score']:.3f}"
            f"{' (branch success)' if n['success'] else ''}{' (dead end)' if n.get('dead') else ''}, "
            f"{n['samples']} rollouts{mark}"
        )
        lines.append(f"{'  ' * indent}- node {i}: {'root (initial snapshot)' if i == 0 else text}")
        for c in n["children"]:
            walk(c, indent + 1)

    if by_id:
        walk(0, 0)
    return lines
