"""The pieces every goal predicate shares: the hint a goal gives a planner, a predicate's outcome, the
registry of predicates by name, and the context a predicate reads (the rollout over a time window, the
scene, the names its expressions may use)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.expressions import ExpressionError, evaluate
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene, SceneObject

__all__ = [
    "PREDICATES",
    "Context",
    "GoalError",
    "GoalHint",
    "HintContext",
    "Outcome",
    "PredicateSpec",
    "progress",
    "register",
]

HINT_KINDS = (
    "place",
    "upright",
    "standing",
    "lift",
    "topple",
    "keep",
    "on_table",
    "turn",
    "shape",
    "actuate",
)
"""Every :class:`GoalHint` ``kind`` a predicate may give."""


class GoalError(SimpactError, ValueError):
    """A goal whose YAML is malformed: an unknown predicate, a missing or unknown parameter, a bad value."""


@dataclass(frozen=True)
class GoalHint:
    """What a goal asks of one object, for planners that build motions from it.

    ``kind``: ``place`` (at / in_region / on_top_of / nested_in), ``upright`` (upright / tilt_below),
    ``standing`` (standing_on a smallest face), ``lift`` (lifted), ``topple`` (standing_on a largest
    face), ``keep`` (not_moved / not_touched), ``on_table`` (stays_on_table: it may move, never lifted),
    ``turn`` (turned: its yaw about the vertical changes by ``angle``), ``actuate`` (joint_at: an
    articulated part's joint driven to ``joint``).
    ``point``: the world point (m) where the goal wants the object's centre, when it names one; ``onto``:
    the object it should rest on or in; ``face``: ``smallest`` or ``largest``; ``height``: m above the
    table for ``lift``; ``angle``: the yaw change for ``turn``, degrees, positive counterclockwise seen
    from above; ``joint``: the joint position for ``actuate`` (m for a slide, rad for a hinge)."""

    object: str
    kind: str
    point: tuple[float, float, float] | None = None
    onto: str | None = None
    face: str | None = None
    height: float | None = None
    angle: float | None = None
    joint: float | None = None


@dataclass(frozen=True)
class Outcome:
    """One predicate's verdict: ``ok``, a dense ``score`` in [0, 1] (1 exactly when ok) and its numbers."""

    ok: bool
    score: float
    details: dict[str, Any] = field(default_factory=dict)


def progress(violation: float, scale: float) -> float:
    """A dense score in (0, 1]: 1 at no violation, 0.5 when the violation is ``scale``."""
    return float(1.0 / (1.0 + (max(float(violation), 0.0) / scale) ** 2))


def outcome(ok: bool, raw_score: float, **details: Any) -> Outcome:
    """An outcome whose score is 1 when ``ok`` and otherwise 0.99 times ``raw_score`` (clipped to [0, 1]),
    so near misses still rank by how near they are."""
    score = 1.0 if ok else 0.99 * float(np.clip(raw_score, 0.0, 1.0))
    return Outcome(bool(ok), score, {k: _plain(v) for k, v in details.items()})


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.bool_):
        return bool(value)
    return value


class HintContext:
    """A scene and the names its goal's expressions may use (object positions and sizes, targets)."""

    def __init__(self, scene: Scene, names: Mapping[str, float]) -> None:
        self.scene = scene
        self.names = names

    def object(self, name: str) -> SceneObject:
        try:
            return self.scene.object(name)
        except SimpactError as exc:
            raise GoalError(f"goal: {exc}") from None

    def expand(self, pattern: str) -> list[str]:
        """Object names matching ``pattern`` (a name or a glob such as ``cube_*``), in scene order."""
        names = [o.name for o in self.scene.objects if fnmatch.fnmatchcase(o.name, pattern)]
        if not names:
            raise GoalError(f"goal: no object matches '{pattern}'")
        return names

    def value(self, expression: Any, what: str) -> float:
        """A number or an expression over the scene's names (``blue_box.x + 0.02``)."""
        try:
            return float(evaluate(expression, self.names))
        except (ExpressionError, TypeError, ValueError) as exc:
            raise GoalError(f"goal: {what}: {exc}") from None


class Context(HintContext):
    """What a predicate reads: the rollout, its scene and expression names."""

    def __init__(self, rollout: Rollout, scene: Scene, names: Mapping[str, float]) -> None:
        super().__init__(scene, names)
        self.rollout = rollout

    def poses(self, name: str, during: Any) -> tuple[np.ndarray, np.ndarray]:
        """Positions (T, 3) and quaternions (T, 4) of object ``name`` over ``during``: ``end`` (the final
        state, T = 1), ``rollout`` (every traced step, or the start, each action's end and the final state
        when the rollout has no trace) or a number of seconds (the trace's trailing window)."""
        final = self.rollout.final.objects[name]
        if during == "end":
            return final.position[None], final.quaternion[None]
        trace = self.rollout.trace
        if trace is None or name not in trace.object_qpos:
            states = [self.rollout.initial, *self.rollout.states, self.rollout.final]
            pos = np.array([s.objects[name].position for s in states])
            quat = np.array([s.objects[name].quaternion for s in states])
            return pos, quat
        pos, quat = trace.object_pose(name)
        if during != "rollout":
            first = int(np.searchsorted(trace.time, trace.time[-1] - float(during)))
            pos, quat = pos[first:], quat[first:]
        return np.asarray(pos, dtype=float), np.asarray(quat, dtype=float)

    def initial_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        state = self.rollout.initial.objects[name]
        return state.position, state.quaternion


Check = Callable[[Mapping[str, Any], Context], Outcome]
Hints = Callable[[Mapping[str, Any], HintContext], list[GoalHint]]


@dataclass(frozen=True)
class PredicateSpec:
    """A registered predicate: its check, the hints it gives, and the parameters it takes."""

    name: str
    check: Check
    hints: Hints
    required: frozenset[str]
    optional: frozenset[str]
    doc: str
    during: str = "end"
    """The window it judges unless a task says otherwise: ``end``, or ``rollout`` (every instant; once it
    fails on a rollout's beginning, no continuation can make it hold)."""


PREDICATES: dict[str, PredicateSpec] = {}
"""Every goal predicate by the name a task file uses; :func:`register` adds one."""


def register(
    name: str,
    *,
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
    hints: Hints | None = None,
    during: str = "end",
) -> Callable[[Check], Check]:
    """Decorator: register ``check(params, context) -> Outcome`` as goal predicate ``name``, judged over
    ``during`` (its default window) unless a task's ``during`` says otherwise."""

    def add(check: Check) -> Check:
        PREDICATES[name] = PredicateSpec(
            name,
            check,
            hints if hints is not None else (lambda params, ctx: []),
            frozenset(required),
            frozenset(optional) | {"label"},
            (check.__doc__ or "").strip(),
            during,
        )
        return check

    return add


def during_of(params: Mapping[str, Any], default: str) -> Any:
    """A predicate's ``during``: ``end``, ``rollout`` or a positive number of seconds (trailing window)."""
    value = params.get("during", default)
    if value in ("end", "rollout"):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise GoalError(f"goal: 'during' must be end, rollout or a number of seconds > 0, got {value!r}")
