"""The composite World on the shape_rope task: make_world builds it, rollouts are deterministic and batched
exactly, snapshots restore exactly, frames show the rope, MuJoCo auditing attaches, and the task's
reference plan succeeds where wrong plans fail."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the PD rope needs torch (pip install -e '.[deformable]')")

from simpact.core.actions import Plan  # noqa: E402
from simpact.core.rollout import Rollout  # noqa: E402
from simpact.guard.screen import screen_rollout  # noqa: E402
from simpact.tasks import load_task  # noqa: E402
from solvers.composite import CompositeSnapshot, CompositeWorld  # noqa: E402
from solvers.mujoco.world import mujoco_access  # noqa: E402
from solvers.world import make_world  # noqa: E402

TASK = load_task("shape_rope")


@pytest.fixture(scope="module")
def world() -> CompositeWorld:
    built = make_world(TASK.scene(0))
    assert isinstance(built, CompositeWorld)
    return built


@pytest.fixture(scope="module")
def short_rollout(world: CompositeWorld) -> Rollout:
    """The short plan rolled out alone from the initial snapshot."""
    return world.rollout(_short(world))


def _edited(plan: Plan, index: int, **fields: Any) -> Plan:
    raw = plan.to_dict()
    raw["actions"][index].update(fields)
    return Plan.from_dict(raw)


def _short(world: CompositeWorld) -> Plan:
    """Grip the middle and drag it 5 cm: a quick plan that moves the rope."""
    return TASK.reference_plan(TASK.scene(0), world.start_pose(), 0).__class__.from_dict(
        {
            "actions": [
                {"type": "DESCEND", "dz": 0.142},
                {"type": "GRASP", "d": 0.01},
                {"type": "PUSH", "dx": 0.05, "dy": 0.0},
            ]
        }
    )


def test_the_reference_succeeds_and_wrong_plans_fail(world: CompositeWorld) -> None:
    scene = TASK.scene(0)
    reference = TASK.reference_plan(scene, world.start_pose(), 0)
    push = next(i for i, a in enumerate(reference.actions) if a.type == "PUSH")
    move = next(i for i, a in enumerate(reference.actions) if a.type == "MOVE")
    plans = {
        "reference": reference,
        "drags only 12 cm": _edited(reference, push, dx=0.12),
        "grips 10 cm off the middle": _edited(reference, move, dy=0.10),
    }
    rollouts = world.rollouts(list(plans.values()), tail_s=TASK.tail_s)
    results = {name: TASK.evaluate(r, scene, 0) for name, r in zip(plans, rollouts)}
    assert results["reference"].success, results["reference"].details
    for name in ("drags only 12 cm", "grips 10 cm off the middle"):
        assert not results[name].success, (name, results[name].details)
        assert results[name].score < results["reference"].score
    final = rollouts[0].final.to_dict()["deformables"]["rope"]
    assert final["bbox_max"][0] == pytest.approx(scene.object("rope").position[0] + 0.27, abs=0.01)
    assert 3 <= len(final["keypoints"]) <= 31


def test_rollouts_are_deterministic_and_batched_exactly(
    world: CompositeWorld, short_rollout: Rollout
) -> None:
    short = _short(world)
    alone = short_rollout
    again, other = world.rollouts([short, _edited(short, 2, dx=0.03)])
    assert alone.trace is not None and again.trace is not None and other.trace is not None
    assert np.array_equal(alone.trace.particles["rope"], again.trace.particles["rope"])
    assert np.array_equal(
        alone.final.deformables["rope"].particles, again.final.deformables["rope"].particles
    )
    assert not np.array_equal(
        alone.final.deformables["rope"].particles, other.final.deformables["rope"].particles
    )
    moved = alone.final.deformables["rope"].particles - alone.initial.deformables["rope"].particles
    assert np.abs(moved[:, 0]).max() > 0.02, "the dragged rope moved"
    assert np.array_equal(
        world.state().deformables["rope"].particles, world.initial_snapshot.deformables[0][0][0]
    ), "rollouts leave the world alone"


def test_snapshots_restore_exactly_and_survive_pickling(
    world: CompositeWorld, short_rollout: Rollout
) -> None:
    start = world.snapshot()
    assert isinstance(start, CompositeSnapshot)
    rope = world.deformables[0]
    for _ in range(3):
        rope.step(0.01)  # disturb the world's own rope
    rope._x = rope._x + 0.01  # type: ignore[attr-defined]
    world.restore(start)
    assert np.array_equal(world.state().deformables["rope"].particles, start.deformables[0][0][0])
    copied = pickle.loads(pickle.dumps(start))
    assert isinstance(copied, CompositeSnapshot) and np.array_equal(copied, start)
    a = world.rollout(_short(world), snapshot=copied)
    b = short_rollout
    assert np.array_equal(a.final.deformables["rope"].particles, b.final.deformables["rope"].particles)


def test_frames_show_the_rope_and_mujoco_auditing_attaches(
    world: CompositeWorld, short_rollout: Rollout
) -> None:
    frame = world.render()
    ids = {name: i for i, name in frame.mask_names.items()}
    assert (frame.masks == ids["rope"]).sum() > 50
    depth = frame.depth[frame.masks == ids["rope"]]
    assert depth.min() > 0
    access = mujoco_access(world)
    assert access.model is world.rigid.model
    rollout = short_rollout
    assert rollout.trace is not None
    assert not screen_rollout(world, rollout).suspicious
    assert rollout.trace.particles_at("rope", -1).shape == (31, 3)


def test_curve_distance_measures_the_rope_against_the_target_both_ways() -> None:
    from simpact.core.rollout import voxel_keypoints
    from simpact.goals.curves import polyline_distance, resample

    y = np.linspace(-0.12, 0.12, 31)
    u = np.c_[0.7 - 0.08 * (y / 0.12) ** 2, y]
    target = resample(u)
    assert polyline_distance(u, target).mean() < 1e-3
    shifted = u + [0.02, 0.0]
    assert polyline_distance(shifted, target).mean() == pytest.approx(0.02, abs=0.006)
    half = u[:16]  # a rope covering half the U lies on it, but the U is far from it
    assert polyline_distance(half, target).mean() < 1e-3 < polyline_distance(target, half).mean()
    keys = voxel_keypoints(np.c_[u, np.full(31, 0.0075)])
    assert 5 <= len(keys) <= 31 and keys[0][1] < keys[-1][1], "keypoints keep the rope's order"


def test_a_branch_from_a_mid_plan_snapshot_continues_the_whole_plan_exactly(world: CompositeWorld) -> None:
    """The tree search's state-locked branching on a deformable scene: the state where the rope has been
    gripped and dragged carries the rope's state (three particles held), and the whole plan continued from
    it (a lift) ends exactly where the whole plan rolled out from the start ends."""
    from simpact.planner.tree import end_snapshot

    dragged = _short(world).to_dict()["actions"]
    whole = Plan.from_dict({"actions": [*dragged, {"type": "LIFT", "dz": 0.04}]})
    own = world.rollout(Plan.from_dict({"actions": dragged}), tail_s=TASK.tail_s)
    snapshot, _ = end_snapshot(world, world.initial_snapshot, own, TASK.tail_s)
    assert isinstance(snapshot, CompositeSnapshot) and snapshot.deformables[0][2].sum() == 3, "held"
    branch = world.rollouts([whole], snapshot=snapshot, prefix=len(dragged))[0]
    alone = world.rollout(whole)
    assert branch.trace is not None and alone.trace is not None
    assert np.array_equal(branch.trace.qpos[-1], alone.trace.qpos[-1])
    lifted = alone.final.deformables["rope"].particles
    assert np.array_equal(branch.final.deformables["rope"].particles, lifted)
    assert lifted[:, 2].max() > 0.03, "the held part of the rope is lifted"
