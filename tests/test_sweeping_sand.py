"""sweeping_sand: a heap of MPM sand swept into the dustpan area with a hand-held brush. The particle-fraction
goal on crafted particles; the reference plan succeeds and its rollout screens clean; plans that sweep
with the brush too high or stop short fail; a rollout is bit-identical alone and in a batch."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.core.rollout import DeformableState
from simpact.core.scene import Scene, SceneObject
from simpact.goals import GoalError, parse_goal
from simpact.planner.audit import audit_and_repair, particle_domains, screen_deformables
from simpact.tasks import load_task
from solvers.world import make_world

pytest.importorskip("warp")

AREA = SceneObject("area", "box", (0.08, 0.20, 0.002), (0.55, 0.0, 0.001), collides=False)
GOAL = [{"particles_in_region": {"object": "sand", "region": "area", "fraction": 0.65}}]


def _judge(goal: list[Any], particles: np.ndarray) -> Any:
    final = SimpleNamespace(deformables={"sand": DeformableState(particles)}, objects={})
    rollout = SimpleNamespace(final=final)
    return parse_goal(goal).evaluate(rollout, Scene(objects=(AREA,)), {})  # type: ignore[arg-type]


def test_the_fraction_of_particles_over_the_region_is_judged():
    rng = np.random.default_rng(0)
    inside = rng.uniform([0.52, -0.09, 0.0], [0.58, 0.09, 0.02], (70, 3))
    outside = rng.uniform([0.40, -0.05, 0.0], [0.50, 0.05, 0.02], (30, 3))
    ok = _judge(GOAL, np.concatenate([inside, outside]))
    assert ok.ok and ok.details["particles_in_region:sand.fraction_inside"] == pytest.approx(0.7)
    short = _judge(GOAL, np.concatenate([inside[:50], outside]))
    assert not short.ok and 0.5 < short.score < 1.0
    assert _judge(GOAL, outside).score < short.score
    with pytest.raises(GoalError, match="not a deformable"):
        _judge([{"particles_in_region": {"object": "brush", "region": "area"}}], inside)


def _plan(task: Any, world: Any, edit: Any = None) -> Plan:
    start = world.start_pose()
    actions = [a.to_dict() for a in task.reference_plan(world.scene, start).actions]
    return Plan.from_actions(actions if edit is None else edit(actions), start_pose=start.to_dict())


def _too_high(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The brush lifted 4 cm before the stroke: it passes over the 2.5 cm heap."""
    return [*actions[:2], {"type": "LIFT", "dz": 0.04}, *actions[2:]]


def _short(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stroke of 5 cm: the heap is pushed, but stops short of the area."""
    actions[2]["dx"] = 0.05
    return actions


@pytest.fixture(scope="module")
def swept():
    task = load_task("sweeping_sand")
    world = make_world(task.scene(0))
    plans = [_plan(task, world), _plan(task, world, _too_high), _plan(task, world, _short)]
    rollouts = world.rollouts(plans, tail_s=task.tail_s)
    return task, world, plans, rollouts


def test_the_reference_sweeps_the_sand_in_and_screens_clean(swept):
    task, world, _, rollouts = swept
    evaluation = task.evaluate(rollouts[0], world.scene, 0)
    assert evaluation.success, evaluation.details
    assert evaluation.details["particles_in_region:sand.fraction_inside"] > 0.7
    assert screen_deformables(world, rollouts[0]) == []
    assert 500 <= rollouts[0].final.deformables["sand"].particles.shape[0] <= 3000


def test_sand_leaving_the_grid_in_a_real_trace_is_flagged(swept):
    task, world, _, rollouts = swept
    rollout = rollouts[0]
    grid = world.deformables[0].engines[0].grid
    domain = particle_domains(world)["sand"]
    assert np.allclose(domain.lo, np.asarray(grid.origin) + 0.5 * grid.dx)
    records = rollout.trace.particles["sand"].copy()
    assert ((records > domain.lo) & (records < domain.hi)).all(), "the reference stays on the grid"
    k = len(records) // 2
    records[k:, 5, 0] = np.float32(domain.hi[0] + 0.01)  # one particle teleported off the grid
    moved = replace(rollout, trace=replace(rollout.trace, particles={"sand": records}))
    evaluation = task.evaluate(moved, world.scene, 0)
    audit = audit_and_repair(world, task, world.scene, 0, moved, evaluation)
    assert [(e["reason"], e["particle"], e["particles"]) for e in audit.events] == [("escape", 5, 1)]
    assert not audit.artifact_free


def test_a_brush_too_high_or_a_short_stroke_fails(swept):
    task, world, _, rollouts = swept
    high, short = (task.evaluate(r, world.scene, 0) for r in rollouts[1:])
    assert not high.success and high.details["particles_in_region:sand.fraction_inside"] < 0.05
    assert not short.success and short.details["particles_in_region:sand.fraction_inside"] < 0.5
    assert high.score < short.score < 1.0


def test_a_rollout_is_bit_identical_alone_and_in_a_batch(swept):
    task, world, plans, rollouts = swept
    again = world.rollout(plans[2], tail_s=task.tail_s)
    before = rollouts[2].trace
    assert np.array_equal(again.trace.particles["sand"], before.particles["sand"])
    assert np.array_equal(again.trace.qpos, before.qpos)
    final = rollouts[2].final.deformables["sand"].particles
    assert np.array_equal(again.final.deformables["sand"].particles, final)
