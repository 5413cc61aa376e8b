"""Goal predicates on crafted states: each holds, fails and sits on its boundary as documented; ``all`` and
``any`` combine them; malformed goals are one clear error; hints resolve to names and points."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.core.rollout import ObjectState, RobotState, Rollout, Trace, WorldState
from simpact.core.rotations import rpy_to_quat
from simpact.core.scene import Scene
from simpact.goals import PREDICATES, GoalError, GoalHint, goal_names, parse_goal
from simpact.goals.base import HINT_KINDS
from simpact.tasks import Task, TaskError, load_task

# Sizes and positions are binary fractions, so boundaries are exact in floating point.
SCENE = Scene.from_dict(
    {
        "objects": [
            {"name": "box", "shape": "box", "size": [0.0625, 0.125, 0.25], "position": [0.5, 0.0, 0.125]},
            {"name": "can", "shape": "cylinder", "size": [0.03125, 0.125], "position": [0.25, 0.25, 0.0625]},
            {"name": "block", "shape": "box", "size": [0.125, 0.125, 0.125], "position": [0.5, 0.25, 0.0625]},
            {"name": "cube_a", "shape": "box", "size": [0.03125] * 3, "position": [0.5, -0.25, 0.015625]},
            {"name": "cube_b", "shape": "box", "size": [0.03125] * 3, "position": [0.625, -0.25, 0.015625]},
            {
                "name": "small",
                "shape": "bowl",
                "size": [0.03125, 0.03125, 0.00390625],
                "position": [0.25, -0.5, 0],
            },
            {
                "name": "big",
                "shape": "bowl",
                "size": [0.0625, 0.0625, 0.0078125],
                "position": [0.75, -0.5, 0],
            },
            {
                "name": "pad",
                "shape": "box",
                "size": [0.25, 0.25, 0.001],
                "position": [0.5, 0.5, 0.0005],
                "collides": False,
            },
        ]
    }
)
UP = (1.0, 0.0, 0.0, 0.0)
FAR = (0.0, 0.0, 1.0)  # the tool centre point, far from everything


def tilted(deg: float, axis: str = "x") -> tuple[float, ...]:
    rpy = [0.0, 0.0, 0.0]
    rpy["xyz".index(axis)] = math.radians(deg)
    return tuple(float(v) for v in rpy_to_quat(np.array(rpy)))


Pose = tuple[Sequence[float], Sequence[float]]


def rollout(
    steps: Sequence[Mapping[str, Pose]] = ({},),
    *,
    contacts: Sequence[tuple[str, str]] = (),
    tcp: Sequence[Sequence[float]] | None = None,
    velocity: Mapping[str, Sequence[float]] | None = None,
) -> Rollout:
    """A rollout of SCENE whose objects follow ``steps`` (one pose per moved object per step, 0.5 s apart;
    objects not named stay at their scene pose), with the final ``contacts``, tool path and velocities."""
    names = [o.name for o in SCENE.objects]
    start = {o.name: (o.position, o.quaternion) for o in SCENE.objects}
    frames = [{**start, **step} for step in [{}, *steps]]
    qpos = np.array([[v for n in names for v in (*f[n][0], *f[n][1])] for f in frames], dtype=float)
    t = len(frames)
    tcp_path = np.array([FAR] * t if tcp is None else [FAR, *tcp], dtype=float)
    trace = Trace(
        time=np.arange(t) * 0.5,
        qpos=qpos,
        qvel=np.zeros((t, 6 * len(names))),
        ctrl=np.zeros((t, 1)),
        tcp_position=tcp_path,
        tcp_quaternion=np.tile([0.0, 1.0, 0.0, 0.0], (t, 1)),
        gripper_width=np.zeros(t),
        object_qpos={n: 7 * i for i, n in enumerate(names)},
    )
    velocity = velocity or {}

    def state(frame: Mapping[str, Pose], time: float) -> WorldState:
        objects = {
            n: ObjectState(
                np.asarray(frame[n][0], float),
                np.asarray(frame[n][1], float),
                np.asarray(velocity.get(n, (0.0, 0.0, 0.0)), float),
                np.zeros(3),
            )
            for n in names
        }
        robot = RobotState(np.asarray(FAR), np.array([0.0, 1.0, 0.0, 0.0]), 0.0)
        return WorldState(time, robot, objects)

    final = state(frames[-1], float(trace.time[-1]))
    plan = Plan.from_actions([{"type": "LIFT", "dz": 0.01}])
    return Rollout(plan, state(frames[0], 0.0), [final], final, trace, list(contacts), 0.0, t, 0.0)


def judge(goal: Any, run: Rollout) -> tuple[bool, float, dict[str, Any]]:
    outcome = parse_goal(goal).evaluate(run, SCENE, goal_names(SCENE, {}))
    assert 0.0 <= outcome.score <= 1.0
    assert outcome.ok == (outcome.score == 1.0)
    return outcome.ok, outcome.score, outcome.details


def at_box(x: float, y: float = 0.0, z: float = 0.125, q: Sequence[float] = UP) -> dict[str, Pose]:
    return {"box": ((x, y, z), q)}


# (predicate, its parameters, the rollout, whether it holds)
CASES: list[tuple[str, dict[str, Any], Rollout, bool]] = [
    # at: per axis, on the boundary, relative to another object, in the plane
    ("at", {"object": "box", "x": 0.5, "tolerance": 0.25}, rollout([at_box(0.75)]), True),
    ("at", {"object": "box", "x": 0.5, "tolerance": 0.125}, rollout([at_box(0.75)]), False),
    ("at", {"object": "box", "x": "block.x + 0.25", "tolerance": 0.0}, rollout([at_box(0.75)]), True),
    (
        "at",
        {"object": "box", "relative_to": "can", "x": 0.5, "tolerance": 0.0},
        rollout([at_box(0.75)]),
        True,
    ),
    (
        "at",
        {"object": "box", "relative_to": "can", "y": 0.0, "tolerance": 0.125},
        rollout([at_box(0.75)]),
        False,
    ),
    ("at", {"object": "box", "x": 0.5, "y": 0.0, "tolerance": 0.0625}, rollout([at_box(0.5, 0.0625)]), True),
    (
        "at",
        {"object": "box", "x": 0.5, "y": 0.0, "tolerance": 0.0625},
        rollout([at_box(0.5625, 0.0625)]),
        False,
    ),
    # in_region: a marker's footprint (boundary inside), an axis-aligned box, a fraction of a glob
    ("in_region", {"object": "box", "region": "pad"}, rollout([at_box(0.625, 0.5)]), True),
    ("in_region", {"object": "box", "region": "pad"}, rollout([at_box(0.75, 0.5)]), False),
    ("in_region", {"object": "box", "region": "pad", "tolerance": 0.125}, rollout([at_box(0.75, 0.5)]), True),
    ("in_region", {"object": "box", "min": [0.25, -0.25, 0], "max": [0.75, 0.25, 0.125]}, rollout(), True),
    ("in_region", {"object": "box", "min": [0.25, -0.25, 0], "max": [0.75, 0.25, 0.0625]}, rollout(), False),
    (
        "in_region",
        {"object": "cube_*", "min": [0.25, -0.5], "max": [0.5, 0.0], "fraction": 0.5},
        rollout(),
        True,
    ),
    ("in_region", {"object": "cube_*", "min": [0.25, -0.5], "max": [0.5, 0.0]}, rollout(), False),
    # upright / tilt_below: about any horizontal axis, at the end or throughout, either end up
    ("upright", {"object": "box"}, rollout([at_box(0.5, q=tilted(14.9, "y"))]), True),
    ("upright", {"object": "box"}, rollout([at_box(0.5, q=tilted(15.1, "x"))]), False),
    ("tilt_below", {"object": "box", "max_deg": 30}, rollout([at_box(0.5, q=tilted(29.9))]), True),
    ("tilt_below", {"object": "box", "max_deg": 30}, rollout([at_box(0.5, q=tilted(30.1, "y"))]), False),
    (
        "upright",
        {"object": "box", "during": "rollout"},
        rollout([at_box(0.5, q=tilted(40)), at_box(0.5)]),
        False,
    ),
    ("upright", {"object": "box"}, rollout([at_box(0.5, q=tilted(40)), at_box(0.5)]), True),
    ("upright", {"object": "box"}, rollout([at_box(0.5, q=tilted(180))]), False),
    (
        "tilt_below",
        {"object": "box", "max_deg": 5, "either_end": True},
        rollout([at_box(0.5, q=tilted(180))]),
        True,
    ),
    ("tilt_below", {"object": "box", "max_deg": 5, "axis": "y"}, rollout([at_box(0.5, q=tilted(90))]), True),
    # standing_on: the face down is the smallest (longest axis vertical) or the largest (shortest axis)
    ("standing_on", {"object": "box", "face": "smallest"}, rollout(), True),
    ("standing_on", {"object": "box", "face": "smallest"}, rollout([at_box(0.5, q=tilted(19.9))]), True),
    ("standing_on", {"object": "box", "face": "smallest"}, rollout([at_box(0.5, q=tilted(20.1))]), False),
    ("standing_on", {"object": "box", "face": "smallest"}, rollout([at_box(0.5, q=tilted(70))]), False),
    ("standing_on", {"object": "box", "face": "smallest"}, rollout([at_box(0.5, q=tilted(90))]), False),
    ("standing_on", {"object": "box", "face": "largest"}, rollout([at_box(0.5, q=tilted(90, "y"))]), True),
    ("standing_on", {"object": "box", "face": "largest"}, rollout([at_box(0.5, q=tilted(90, "x"))]), False),
    ("standing_on", {"object": "box", "face": "smallest"}, rollout([at_box(0.5, q=tilted(180))]), True),
    (
        "standing_on",
        {"object": "cube_a", "face": "smallest"},
        rollout([{"cube_a": ((0.5, -0.25, 0.02), tilted(90))}]),
        True,
    ),
    # on_top_of: lowest point within max_gap of the top, centre over the footprint
    ("on_top_of", {"object": "can", "onto": "block"}, rollout([{"can": ((0.5, 0.25, 0.1875), UP)}]), True),
    (
        "on_top_of",
        {"object": "can", "onto": "block", "max_gap": 0.015625},
        rollout([{"can": ((0.5, 0.25, 0.203125), UP)}]),
        True,
    ),
    ("on_top_of", {"object": "can", "onto": "block"}, rollout([{"can": ((0.5, 0.25, 0.25), UP)}]), False),
    ("on_top_of", {"object": "can", "onto": "block"}, rollout([{"can": ((0.5625, 0.25, 0.1875), UP)}]), True),
    ("on_top_of", {"object": "can", "onto": "block"}, rollout([{"can": ((0.625, 0.25, 0.1875), UP)}]), False),
    ("on_top_of", {"object": "can", "onto": "block"}, rollout(), False),
    # nested_in: inside the bowl (above its floor, below its rim, centres close)
    (
        "nested_in",
        {"object": "small", "onto": "big"},
        rollout([{"small": ((0.75, -0.5, 0.0078125), UP)}]),
        True,
    ),
    ("nested_in", {"object": "small", "onto": "big"}, rollout(), False),
    ("nested_in", {"object": "small", "onto": "big"}, rollout([{"small": ((0.75, -0.5, 0.0), UP)}]), False),
    (
        "nested_in",
        {"object": "small", "onto": "big", "max_xy": 0.015625},
        rollout([{"small": ((0.765625, -0.5, 0.0078125), UP)}]),
        True,
    ),
    (
        "nested_in",
        {"object": "small", "onto": "big", "max_xy": 0.015625},
        rollout([{"small": ((0.78125, -0.5, 0.0078125), UP)}]),
        False,
    ),
    (
        "nested_in",
        {"object": "small", "onto": "big"},
        rollout([{"small": ((0.75, -0.5, 0.0703125), UP)}]),
        False,
    ),
    # lifted: lowest point above the table by dz, held or not, at the end or over the last seconds
    ("lifted", {"object": "can", "dz": 0.125}, rollout([{"can": ((0.25, 0.25, 0.1875), UP)}]), True),
    ("lifted", {"object": "can", "dz": 0.1875}, rollout([{"can": ((0.25, 0.25, 0.1875), UP)}]), False),
    # from_z: measured from another height (a drawer's floor below the table plane)
    (
        "lifted",
        {"object": "can", "dz": 0.2, "from_z": -0.1},
        rollout([{"can": ((0.25, 0.25, 0.1875), UP)}]),
        True,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.1, "from_z": 0.1},
        rollout([{"can": ((0.25, 0.25, 0.1875), UP)}]),
        False,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.125, "held": True},
        rollout([{"can": ((0.25, 0.25, 0.1875), UP)}]),
        False,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.125, "held": True},
        rollout([{"can": ((0.25, 0.25, 0.1875), UP)}], contacts=[("can", "left_finger")]),
        True,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.125, "held": False},
        rollout([{"can": ((0.25, 0.25, 0.1875), UP)}], contacts=[("can", "left_finger")]),
        False,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.125, "during": 0.75},
        rollout(
            [{"can": ((0.25, 0.25, 0.1875), UP)}] * 2 + [{}] * 2 + [{"can": ((0.25, 0.25, 0.1875), UP)}] * 2
        ),
        True,
    ),
    (
        "lifted",
        {"object": "can", "dz": 0.125, "during": 1.5},
        rollout(
            [{"can": ((0.25, 0.25, 0.1875), UP)}] * 2 + [{}] * 2 + [{"can": ((0.25, 0.25, 0.1875), UP)}] * 2
        ),
        False,
    ),
    # not_moved: within tolerance (boundary), over the rollout or at the end
    ("not_moved", {"object": "box", "tolerance": 0.015625}, rollout([at_box(0.515625)]), True),
    ("not_moved", {"object": "box", "tolerance": 0.015625}, rollout([at_box(0.53125)]), False),
    ("not_moved", {"object": "box"}, rollout([at_box(0.53125), at_box(0.5)]), False),
    ("not_moved", {"object": "box", "during": "end"}, rollout([at_box(0.53125), at_box(0.5)]), True),
    ("not_moved", {"object": "box", "max_deg": 10}, rollout([at_box(0.5, q=tilted(20, "z"))]), False),
    # not_touched: by the robot (contact at the end, disturbed, the tool at it) or by an object (clearance)
    ("not_touched", {"object": "box"}, rollout([{}], tcp=[(0.5, 0.0, 0.3)]), True),
    ("not_touched", {"object": "box"}, rollout([{}], contacts=[("hand", "box")]), False),
    ("not_touched", {"object": "box", "during": "end"}, rollout([at_box(0.5625), at_box(0.5)]), True),
    ("not_touched", {"object": "box"}, rollout([at_box(0.5625), at_box(0.5)]), False),
    ("not_touched", {"object": "box"}, rollout([{}], tcp=[(0.5, 0.0, 0.252)]), False),
    (
        "not_touched",
        {"object": "block", "by": "can"},
        rollout([{"can": ((0.375, 0.25, 0.0625), UP)}]),
        True,
    ),
    (
        "not_touched",
        {"object": "block", "by": "can"},
        rollout([{"can": ((0.375, 0.25, 0.0625), UP)}, {}]),
        True,
    ),
    (
        "not_touched",
        {"object": "block", "by": ["robot", "c*"]},
        rollout([{"can": ((0.4375, 0.25, 0.0625), UP)}, {}]),
        False,
    ),
    ("not_touched", {"object": "block", "by": "can"}, rollout([{"can": ((0.4, 0.25, 0.0625), UP)}]), True),
    # stays_on_table: never lifted more than max_lift, ends over the table
    ("stays_on_table", {"object": "box"}, rollout([at_box(0.625, z=0.1328125)]), True),
    ("stays_on_table", {"object": "box"}, rollout([at_box(0.625, z=0.15625), at_box(0.625)]), False),
    (
        "stays_on_table",
        {"object": "box", "max_lift": 0.0625},
        rollout([at_box(0.625, z=0.15625), at_box(0.625)]),
        True,
    ),
    ("stays_on_table", {"object": "box"}, rollout([at_box(1.25, z=-0.5)]), False),
    # at_rest: slower than max_speed at the end
    ("at_rest", {"object": "box"}, rollout(velocity={"box": (0.005, 0.0, 0.0)}), True),
    ("at_rest", {"object": "box"}, rollout(velocity={"box": (0.02, 0.0, 0.0)}), False),
    # turned: the yaw change from the start, in the direction (ccw positive about +z), on the boundary
    (
        "turned",
        {"object": "box", "min_deg": 45, "direction": "ccw"},
        rollout([at_box(0.5, q=tilted(60, "z"))]),
        True,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 45, "direction": "cw"},
        rollout([at_box(0.5, q=tilted(60, "z"))]),
        False,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 45, "direction": "cw"},
        rollout([at_box(0.5, q=tilted(-60, "z"))]),
        True,
    ),
    ("turned", {"object": "box", "min_deg": 45}, rollout([at_box(0.5, q=tilted(-60, "z"))]), True),
    (
        "turned",
        {"object": "box", "min_deg": 45, "direction": "ccw"},
        rollout([at_box(0.5, q=tilted(30, "z"))]),
        False,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 90, "direction": "ccw"},
        rollout([at_box(0.5, q=tilted(90, "z"))]),
        True,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 90, "direction": "ccw"},
        rollout([at_box(0.5, q=tilted(89, "z"))]),
        False,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 10, "max_tilt_deg": 30},
        rollout([at_box(0.5, q=tilted(60, "x"))]),
        False,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 45, "max_move": 0.0625},
        rollout([at_box(0.5625, q=tilted(60, "z"))]),
        True,
    ),
    (
        "turned",
        {"object": "box", "min_deg": 45, "max_move": 0.03125},
        rollout([at_box(0.5625, q=tilted(60, "z"))]),
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "params", "run", "holds"), CASES, ids=[f"{i}-{c[0]}-{c[3]}" for i, c in enumerate(CASES)]
)
def test_a_predicate_on_a_crafted_state(name: str, params: dict[str, Any], run: Rollout, holds: bool) -> None:
    ok, score, details = judge([{name: params}], run)
    assert ok is holds, details
    assert (score == 1.0) is holds and (score > 0.0)


def test_every_predicate_has_crafted_cases_that_hold_and_fail() -> None:
    """Every rigid-body predicate (the deformables' ones are tested with their solvers)."""
    rigid = [n for n, spec in PREDICATES.items() if spec.check.__module__ == "simpact.goals.predicates"]
    assert len(rigid) >= 12
    for name in rigid:
        verdicts = {holds for n, _, _, holds in CASES if n == name}
        assert verdicts == {True, False}, name


def test_the_score_falls_with_the_violation() -> None:
    scores = [
        judge([{"at": {"object": "box", "x": 0.5, "tolerance": 0.0}}], rollout([at_box(x)]))[1]
        for x in (0.5, 0.53125, 0.5625, 0.75)
    ]
    assert scores[0] == 1.0 and scores[1] > scores[2] > scores[3] > 0.0
    assert scores[2] == pytest.approx(0.99 / (1 + (0.0625 / 0.05) ** 2))
    near_misses = [
        judge([{"at": {"object": "box", "x": 0.5, "tolerance": 0.0}}], rollout([at_box(x)]))[1]
        for x in (0.5009765625, 0.501953125)
    ]
    assert 0.99 > near_misses[0] > near_misses[1]  # near misses still rank by how near they are


def test_all_is_the_geometric_mean_and_any_the_best() -> None:
    run = rollout([at_box(0.5625)])
    near = {"at": {"object": "box", "x": 0.5, "tolerance": 0.0, "label": "near"}}
    far = {"at": {"object": "box", "x": 0.25, "tolerance": 0.0, "label": "far"}}
    holds = {"at": {"object": "box", "x": 0.5, "tolerance": 0.125, "label": "holds"}}
    _, s_near, details = judge([near], run)
    _, s_far, _ = judge([far], run)
    ok, s_all, details = judge([near, far], run)
    assert not ok and s_all == pytest.approx(math.sqrt(s_near * s_far))
    assert set(details) >= {"near.ok", "near.error_m", "far.ok", "far.score"}
    ok, s_any, _ = judge({"any": [near, far]}, run)
    assert not ok and s_any == pytest.approx(s_near)
    assert judge({"any": [far, holds]}, run)[:2] == (True, 1.0)
    assert judge([holds, {"any": [far, holds]}], run)[:2] == (True, 1.0)
    assert judge({"all": [holds, far]}, run)[0] is False


def test_the_same_rollout_gives_the_same_verdict_bit_for_bit() -> None:
    run = rollout([at_box(0.5625, q=tilted(12)), {"can": ((0.40625, 0.25, 0.0625), UP)}])
    goal = [
        {"upright": {"object": "box", "during": "rollout"}},
        {"not_touched": {"object": "block", "by": ["robot", "can"]}},
        {"in_region": {"object": "cube_*", "region": "pad"}},
    ]
    assert judge(goal, run) == judge(goal, run)


@pytest.mark.parametrize(
    ("goal", "message"),
    [
        ([{"near": {"object": "box"}}], "unknown predicate 'near'"),
        ([{"at": {"object": "box", "x": 0.5}}], r"'at' is missing \['tolerance'\]"),
        ([{"at": {"object": "box", "x": 0.5, "tolerance": 0.1, "tol": 1}}], r"'at' has unknown \['tol'\]"),
        (
            [{"at": {"object": "box", "tolerance": 0.1}, "upright": {"object": "box"}}],
            "each entry must be one",
        ),
        ([], "empty list"),
        ({"any": []}, "'any' needs a non-empty list"),
        ([{"upright": "box"}], "'upright' needs a mapping"),
    ],
)
def test_a_malformed_goal_is_one_clear_error(goal: Any, message: str) -> None:
    with pytest.raises(GoalError, match=message) as caught:
        parse_goal(goal)
    assert "\n" not in str(caught.value)


def _task(goal: Any, **extra: Any) -> dict[str, Any]:
    return {
        "name": "toy",
        "instruction": "Leave the box alone.",
        "objects": [o.to_dict() for o in SCENE.objects],
        "reference": [{"type": "LIFT", "dz": 0.02}],
        "goal": goal,
        **extra,
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_task([{"upright": {"object": "mug"}}]), "no object matches 'mug'"),
        (_task([{"at": {"object": "box", "x": "mug.x", "tolerance": 0.1}}]), "at.x: .*mug.x"),
        (_task([{"not_touched": {"object": "box", "by": "cup"}}]), "no object matches 'cup'"),
        (_task([{"upright": {"object": "box", "during": "always"}}]), "'during' must be end, rollout"),
        (_task([{"upright": {"object": "box"}}], success={"check": "x"}), "either 'goal'"),
    ],
)
def test_a_task_with_a_bad_goal_fails_to_load_with_one_line(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskError, match=message) as caught:
        task = Task(raw)
        task.evaluate(rollout(), SCENE)
    assert "\n" not in str(caught.value)


def test_hints_name_each_object_and_resolve_points() -> None:
    goal = [
        {"at": {"object": "box", "relative_to": "block", "x": 0.125, "tolerance": 0.01}},
        {"in_region": {"object": "cube_*", "region": "pad"}},
        {"upright": {"object": "box"}},
        {"standing_on": {"object": "box", "face": "largest"}},
        {"standing_on": {"object": "block", "face": "smallest"}},
        {"on_top_of": {"object": "can", "onto": "block"}},
        {"nested_in": {"object": "small", "onto": "big"}},
        {"any": [{"lifted": {"object": "can", "dz": 0.1}}, {"not_moved": {"object": "block"}}]},
        {"at_rest": {"object": "box"}},
    ]
    hints = parse_goal(goal).hints(SCENE, goal_names(SCENE, {}))
    assert {h.kind for h in hints} <= set(HINT_KINDS)
    assert hints == [
        GoalHint("box", "place", point=(0.625, 0.0, 0.125)),
        GoalHint("cube_a", "place", point=(0.5, 0.5, 0.015625)),
        GoalHint("cube_b", "place", point=(0.5, 0.5, 0.015625)),
        GoalHint("box", "upright"),
        GoalHint("box", "topple", face="largest"),
        GoalHint("block", "standing", face="smallest"),
        GoalHint("can", "place", point=(0.5, 0.25, 0.1875), onto="block"),
        GoalHint("small", "place", point=(0.75, -0.5, 0.0078125), onto="big"),
        GoalHint("can", "lift", height=0.1),
        GoalHint("block", "keep"),
    ]


def test_a_goal_task_gives_hints_and_a_python_check_task_none(tmp_path: Any) -> None:
    push = load_task("non_toppling_push")
    scene = push.scene(3)
    blue = scene.object("blue_box")
    hints = push.goal_hints(scene, seed=3)
    assert hints[0].object == "carton" and hints[0].kind == "place"
    assert hints[0].point is not None and hints[0].point[0] == pytest.approx(blue.position[0])
    assert {h.kind for h in hints} == {"place", "upright", "keep"}
    check = tmp_path / "check.py"
    check.write_text("def check(rollout, scene, targets, params):\n    raise AssertionError\n")
    raw = _task(None, success={"check": str(check)})
    del raw["goal"]
    assert Task(raw).goal_hints(SCENE) == []


def test_lasting_failures_are_the_failed_whole_rollout_predicates_the_goal_requires() -> None:
    goal = parse_goal(
        [
            {"stays_on_table": {"object": "a"}},
            {"not_moved": {"object": "b", "during": "end"}},
            {"upright": {"object": "a", "during": "rollout"}},
            {"at": {"object": "a", "x": 0.5, "tolerance": 0.01}},
            {"any": [{"not_touched": {"object": "b"}}, {"at": {"object": "b", "x": 0.1, "tolerance": 0.01}}]},
        ]
    )
    failed = {
        "stays_on_table:a.ok": False,
        "not_moved:b.ok": False,
        "upright:a.ok": False,
        "at:a.ok": False,
        "not_touched:b.ok": False,
        "at:b.ok": False,
    }
    # a rollout-long predicate that failed cannot recover; end-of-rollout ones and those under `any` can
    assert goal.lasting_failures(failed) == ["stays_on_table:a", "upright:a"]
    assert goal.lasting_failures({**failed, "stays_on_table:a.ok": True, "upright:a.ok": True}) == []
