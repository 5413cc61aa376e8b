"""Goals a task file states in YAML: predicates over a rollout's final state (and, where marked, over the
whole rollout or its last seconds), combined with ``all`` (the default for a list) and ``any``, from which
both the task's success check and its dense score in [0, 1] are derived.

```yaml
goal:
  - at: {object: carton, relative_to: blue_box, x: 0.0, tolerance: 0.02}
  - upright: {object: carton, during: rollout}
  - any:
      - on_top_of: {object: can, onto: block}
      - in_region: {object: can, region: red_square}
```

Score: a predicate scores 1 exactly when it holds, less the further it is from holding; ``all`` is the
geometric mean of its parts, ``any`` the best. Success is the whole tree holding (score 1). The predicates
live in :mod:`simpact.goals.predicates`, one function each, registered by name in ``PREDICATES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simpact.core.rollout import Rollout
from simpact.core.scene import Scene
from simpact.goals import curves as _curves  # noqa: F401  (registers curve_distance)
from simpact.goals import footprint as _footprint  # noqa: F401  (registers footprint_iou, footprint_ratio)
from simpact.goals import fraction as _fraction  # noqa: F401  (registers particles_in_region)
from simpact.goals import joints as _joints  # noqa: F401  (registers joint_at)
from simpact.goals import predicates as _predicates  # noqa: F401  (registers the predicates)
from simpact.goals.base import (
    PREDICATES,
    Context,
    GoalError,
    GoalHint,
    HintContext,
    Outcome,
    PredicateSpec,
    progress,
    register,
)

__all__ = [
    "PREDICATES",
    "Goal",
    "GoalError",
    "GoalHint",
    "Outcome",
    "PredicateSpec",
    "parse_goal",
    "progress",
    "register",
]


@dataclass(frozen=True)
class Leaf:
    """One predicate with its parameters and the label its details are reported under."""

    spec: PredicateSpec
    params: Mapping[str, Any]
    label: str


@dataclass(frozen=True)
class Combine:
    """``all`` or ``any`` of parts."""

    op: str
    parts: tuple[Leaf | Combine, ...]


Node = Leaf | Combine


def _parse(raw: Any, where: str, labels: dict[str, int]) -> Node:
    if isinstance(raw, list):
        if not raw:
            raise GoalError(f"{where}: an empty list of predicates")
        return Combine("all", tuple(_parse(r, f"{where}[{i}]", labels) for i, r in enumerate(raw)))
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise GoalError(f"{where}: each entry must be one predicate, e.g. {{at: {{object: a, x: 0.5, ...}}}}")
    ((name, body),) = raw.items()
    if name in ("all", "any"):
        if not isinstance(body, list) or not body:
            raise GoalError(f"{where}: '{name}' needs a non-empty list of predicates")
        return Combine(name, tuple(_parse(r, f"{where}.{name}[{i}]", labels) for i, r in enumerate(body)))
    spec = PREDICATES.get(str(name))
    if spec is None:
        raise GoalError(
            f"{where}: unknown predicate '{name}'; known: {', '.join(sorted(PREDICATES))}, all, any"
        )
    if not isinstance(body, Mapping):
        raise GoalError(f"{where}: '{name}' needs a mapping of parameters")
    missing = spec.required - set(body)
    unknown = set(body) - spec.required - spec.optional
    if missing or unknown:
        raise GoalError(
            f"{where}: '{name}' "
            + (f"is missing {sorted(missing)}" if missing else f"has unknown {sorted(unknown)}")
            + f"; takes {sorted(spec.required)} and optionally {sorted(spec.optional)}"
        )
    label = str(body.get("label", f"{name}:{body['object']}" if "object" in body else name))
    labels[label] = labels.get(label, 0) + 1
    if labels[label] > 1:
        label = f"{label}#{labels[label]}"
    return Leaf(spec, dict(body), label)


def parse_goal(raw: Any, where: str = "goal") -> Goal:
    """A goal from its YAML: a list (all of), or ``{all: [...]}`` / ``{any: [...]}``."""
    return Goal(_parse(raw, where, {}))


class Goal:
    """A parsed goal: evaluates rollouts and gives hints."""

    def __init__(self, root: Node) -> None:
        self.root = root

    def leaves(self) -> list[Leaf]:
        out: list[Leaf] = []
        stack: list[Node] = [self.root]
        while stack:
            node = stack.pop(0)
            if isinstance(node, Leaf):
                out.append(node)
            else:
                stack[:0] = list(node.parts)
        return out

    def evaluate(self, rollout: Rollout, scene: Scene, names: Mapping[str, float]) -> Outcome:
        """Success, the dense score and per-predicate details (``LABEL.quantity``, ``LABEL.ok``, ...)."""
        details: dict[str, Any] = {}
        result = self._evaluate(self.root, Context(rollout, scene, names), details)
        return Outcome(result.ok, result.score, details)

    def _evaluate(self, node: Node, ctx: Context, details: dict[str, Any]) -> Outcome:
        if isinstance(node, Leaf):
            try:
                result = node.spec.check(node.params, ctx)
            except KeyError as exc:
                raise GoalError(f"goal: {node.label}: no object {exc} in the rollout") from None
            details[f"{node.label}.ok"] = result.ok
            details[f"{node.label}.score"] = round(result.score, 6)
            details.update({f"{node.label}.{k}": v for k, v in result.details.items()})
            return result
        parts = [self._evaluate(p, ctx, details) for p in node.parts]
        scores = np.array([max(p.score, 1e-9) for p in parts])
        if node.op == "all":
            return Outcome(all(p.ok for p in parts), float(np.exp(np.log(scores).mean())))
        return Outcome(any(p.ok for p in parts), float(scores.max()))

    def lasting_failures(self, details: Mapping[str, Any]) -> list[str]:
        """Labels of the goal's required predicates (``all`` of the top level) that judge every instant of
        the rollout and failed in ``details`` (an evaluation's): no continuation of that rollout can
        succeed."""
        required = (
            self.root.parts if isinstance(self.root, Combine) and self.root.op == "all" else (self.root,)
        )
        return [
            leaf.label
            for leaf in required
            if isinstance(leaf, Leaf)
            and leaf.params.get("during", leaf.spec.during) == "rollout"
            and details.get(f"{leaf.label}.ok") is False
        ]

    def hints(self, scene: Scene, names: Mapping[str, float]) -> list[GoalHint]:
        """Every predicate's hints (``any`` branches included), in the order the goal lists them."""
        ctx = HintContext(scene, names)
        return [h for leaf in self.leaves() for h in leaf.spec.hints(leaf.params, ctx)]

    def check_names(self, scene: Scene, names: Mapping[str, float]) -> None:
        """Resolve every object and expression against ``scene`` once, so a typo fails at load time."""
        self.hints(scene, names)
        ctx = HintContext(scene, names)
        for leaf in self.leaves():
            for key in ("object", "onto", "relative_to", "region"):
                if key in leaf.params:
                    ctx.expand(str(leaf.params[key]))
            by = leaf.params.get("by", [])
            for who in [by] if isinstance(by, str) else list(by):
                if who != "robot":
                    ctx.expand(str(who))


def goal_names(scene: Scene, targets: Mapping[str, float]) -> dict[str, float]:
    """The names a goal's expressions may use: ``OBJ.x|y|z`` (scene position), ``OBJ.sx|sy|sz`` (size) and
    ``targets.NAME``."""
    out = {f"targets.{k}": float(v) for k, v in targets.items()}
    for obj in scene.objects:
        out.update({f"{obj.name}.{a}": float(v) for a, v in zip("xyz", obj.position)})
        out.update({f"{obj.name}.s{a}": float(v) for a, v in zip("xyz", obj.size)})
    return out
