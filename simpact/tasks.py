"""The task suite: YAML configs under ``configs/tasks/`` turned into scenes, reference plans and checks.

A task config holds the instruction, the robot's start, the objects, named ``targets`` (numbers such as a
target line or region centre), seeded ``randomize`` ranges, the ``success`` check with its parameters, and a
``reference`` plan whose parameters may be expressions over the scene (see ``simpact.core.expressions``):
``<object>.x|y|z`` (position), ``<object>.sx|sy|sz`` (size components), ``ee.x|y|z`` (tool position when
the plan starts) and ``targets.<name>``.

Seed 0 is the nominal scene; seeds >= 1 add uniform offsets drawn from ``randomize`` with
``numpy.random.default_rng(seed)``, in the order the keys are written. A key is ``<object>.<field>`` or
``targets.<name>``; the object may be a glob (``bean_*.position``): each match gets its own offset, or one
common offset with ``shared: true``; a list of ranges applies each in turn. ``templates`` holds YAML
anchors for repeated object fields.

``success.check`` names the check (see :func:`load_check`): a shipped one by name (``pivoting``), an
importable ``package.module:function``, or a Python file ``path/to/check.py:function`` relative to the task
file, so a task written outside the package brings its own check. The other ``success`` keys are the
check's parameters.

An optional ``skeleton`` is the task's symbolic plan with open parameters, the search space of the VLM-free
planners (``simpact.planner.offline``): a list of actions like the reference, where each parameter is either
a fixed expression or a range ``[low, high]`` of two expressions. Besides the reference-plan names, an
expression may use ``a<i>.<field>``, the value already chosen for field ``field`` of skeleton action ``i``
(an earlier one), e.g. to undo a sideways step.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

import numpy as np
import yaml

from simpact.core.actions import ACTION_SPECS, Plan, PlanError, StartPose
from simpact.core.errors import SimpactError
from simpact.core.expressions import ExpressionError, evaluate
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene, SceneError
from simpact.goals import Goal, GoalError, GoalHint, goal_names, parse_goal

__all__ = [
    "Check",
    "Evaluation",
    "GoalHint",
    "SkeletonStep",
    "Task",
    "TaskError",
    "list_tasks",
    "load_check",
    "load_task",
    "tasks_dir",
]


class TaskError(SimpactError, ValueError):
    """A task that does not exist or whose config is malformed."""


@dataclass(frozen=True)
class Evaluation:
    """A task's own judgement of a rollout: ``success``, a dense progress ``score`` in [0, 1], and the
    quantities behind them."""

    success: bool
    score: float
    details: dict[str, Any] = field(default_factory=dict)


Expression = str | float


@dataclass(frozen=True)
class SkeletonStep:
    """One skeleton action: its ``type``, ``fixed`` parameters (expressions) and open ``ranges`` (a low and a
    high expression per parameter)."""

    type: str
    fixed: Mapping[str, Expression]
    ranges: Mapping[str, tuple[Expression, Expression]]
    reason: str | None = None


def _parse_skeleton(raw: Any, where: str) -> tuple[SkeletonStep, ...]:
    if not isinstance(raw, list) or not raw:
        raise TaskError(f"{where}: 'skeleton' must be a non-empty list of actions")
    steps = []
    for i, action in enumerate(raw):
        label = f"{where}: skeleton action {i}"
        if not isinstance(action, Mapping):
            raise TaskError(f"{label}: expected a mapping like {{type: MOVE, dx: [low, high], ...}}")
        kind = str(action.get("type", "")).upper()
        if kind not in ACTION_SPECS:
            raise TaskError(
                f"{label}: unknown type {action.get('type')!r}; expected one of {', '.join(ACTION_SPECS)}"
            )
        spec = ACTION_SPECS[kind]
        extra = set(action) - set(spec.fields) - {"type", "reason"}
        if extra:
            raise TaskError(f"{label} ({kind}): unknown fields {sorted(extra)}; allowed: {list(spec.fields)}")
        fixed: dict[str, Expression] = {}
        ranges: dict[str, tuple[Expression, Expression]] = {}
        for name in spec.fields:
            if name not in action:
                raise TaskError(f"{label} ({kind}): field '{name}' is missing ({spec.doc})")
            value = action[name]
            if isinstance(value, list):
                if len(value) != 2 or not all(_is_expression(v) for v in value):
                    raise TaskError(f"{label} ({kind}): range '{name}' must be [low, high], got {value!r}")
                ranges[name] = (value[0], value[1])
            elif _is_expression(value):
                fixed[name] = value
            else:
                raise TaskError(
                    f"{label} ({kind}): field '{name}' must be a number, an expression or [low, high], "
                    f"got {value!r}"
                )
        reason = action.get("reason")
        steps.append(SkeletonStep(kind, fixed, ranges, None if reason is None else str(reason)))
    return tuple(steps)


def _is_expression(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))


class Check(Protocol):
    def __call__(
        self, rollout: Rollout, scene: Scene, targets: Mapping[str, float], params: Mapping[str, Any]
    ) -> Evaluation: ...


def load_check(spec: str, base: Path, task: str = "?") -> Check:
    """The success check a task config names in ``success.check``:

    - ``NAME``: a shipped check, ``simpact.checks.NAME``'s ``check``;
    - ``package.module:function`` (or ``package.module``, function ``check``): any importable module;
    - ``path/to/check.py:function`` (or ``path/to/check.py``, function ``check``): a Python file, relative
      to ``base`` (the task file's folder) unless absolute, so a task kept outside the package brings its
      own check.
    """
    target, colon, function = spec.rpartition(":")
    if not colon:
        target, function = spec, "check"
    if not target or not function.isidentifier():
        raise TaskError(
            f"task {task}: success check '{spec}' must be NAME, module:function or path/to/check.py:function"
        )
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _check_file(Path(target).expanduser(), base, spec, task)
    else:
        name = target if (colon or "." in target) else f"simpact.checks.{target}"
        if not all(part.isidentifier() for part in name.split(".")):
            raise TaskError(f"task {task}: success check '{spec}': '{target}' is not a module name")
        module = _check_module(name, spec, task)
    check = getattr(module, function, None)
    if not callable(check):
        raise TaskError(
            f"task {task}: success check '{spec}': {module.__name__} has no function '{function}'"
        )
    return cast(Check, check)


def _check_module(name: str, spec: str, task: str) -> ModuleType:
    """Import module ``name`` for check ``spec``; a module that does not exist is a TaskError."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(f"{exc.name}.")):
            raise TaskError(f"task {task}: success check '{spec}': importing {name} failed: {exc}") from exc
        if ":" not in spec and "." not in spec:
            raise TaskError(f"task {task}: no success check named '{spec}'") from None
        raise TaskError(f"task {task}: success check '{spec}': no module named '{name}'") from None
    except (ImportError, SyntaxError) as exc:
        raise TaskError(f"task {task}: success check '{spec}': importing {name} failed: {exc}") from exc


def _check_file(path: Path, base: Path, spec: str, task: str) -> ModuleType:
    """Load the Python file of check ``spec`` (relative to ``base``) as a module of its own, registered in
    ``sys.modules`` under a name unique to the file's resolved path."""
    path = (path if path.is_absolute() else base / path).resolve()
    if not path.is_file():
        raise TaskError(f"task {task}: success check '{spec}': file {path} does not exist")
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_simpact_task_check_{stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise TaskError(f"task {task}: success check '{spec}': {path} cannot be loaded as Python")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        loader_spec.loader.exec_module(module)
    except (ImportError, SyntaxError) as exc:
        del sys.modules[name]
        raise TaskError(f"task {task}: success check '{spec}': importing {path} failed: {exc}") from exc
    except BaseException:
        del sys.modules[name]
        raise
    return module


def tasks_dir() -> Path:
    """The shipped task configs (inside the installed package)."""
    return Path(str(resources.files("simpact.configs") / "tasks"))


def list_tasks() -> list[str]:
    return sorted(p.stem for p in tasks_dir().glob("*.yaml"))


def load_task(name_or_path: str | Path) -> Task:
    """A shipped task by name, or a task config file by path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = tasks_dir() / f"{name_or_path}.yaml"
        if not path.exists():
            raise TaskError(f"unknown task '{name_or_path}'; available: {', '.join(list_tasks())}")
    elif not path.exists():
        raise TaskError(f"task config {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TaskError(f"task config {path} is not valid YAML: {exc}") from None
    if not isinstance(raw, Mapping):
        raise TaskError(f"task config {path} must be a mapping")
    return Task(raw, path)


_REQUIRED = {"name", "instruction", "objects", "reference"}
_OPTIONAL = {
    "success",
    "goal",
    "tail_s",
    "robot",
    "table_size",
    "table_friction",
    "targets",
    "randomize",
    "camera",
    "templates",
    "skeleton",
}


_FIELD_TYPES: dict[str, type] = {
    "name": str,
    "instruction": str,
    "objects": list,
    "success": Mapping,
    "robot": Mapping,
    "targets": Mapping,
    "randomize": Mapping,
}


def _check_field_types(raw: Mapping[str, Any], path: Path | None) -> None:
    """One line naming the field when a task file's top-level value has the wrong type."""
    for key, kind in _FIELD_TYPES.items():
        if key in raw and not isinstance(raw[key], kind):
            expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise TaskError(
                f"task config {path}: '{key}' must be a {expected}, got {type(raw[key]).__name__}"
            )
    if not all(isinstance(o, Mapping) for o in raw["objects"]):
        raise TaskError(f"task config {path}: every entry of 'objects' must be a mapping of its fields")


class Task:
    """One task: builds seeded scenes, expands its reference plan, judges rollouts."""

    def __init__(self, raw: Mapping[str, Any], path: Path | None = None) -> None:
        missing = _REQUIRED - set(raw)
        if missing:
            raise TaskError(f"task config {path}: missing fields {sorted(missing)}")
        unknown = set(raw) - _REQUIRED - _OPTIONAL
        if unknown:
            raise TaskError(
                f"task config {path}: unknown fields {sorted(unknown)}; "
                f"allowed: {sorted(_REQUIRED | _OPTIONAL)}"
            )
        _check_field_types(raw, path)
        try:
            self._build(raw, path)
        except SimpactError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            raise TaskError(f"task config {path}: malformed ({type(exc).__name__}: {exc})") from None

    def _build(self, raw: Mapping[str, Any], path: Path | None) -> None:
        self.raw = raw
        self.path = path
        self.name: str = raw["name"]
        self.instruction: str = raw["instruction"]
        self.tail_s = float(raw.get("tail_s", 1.0))
        """Hold after the plan before the success check, s."""
        if ("goal" in raw) == ("success" in raw):
            raise TaskError(
                f"task config {path}: give either 'goal' (predicates in YAML) or 'success' (a Python check)"
            )
        self.goal: Goal | None = None
        """The goal's predicates (a task written in goal YAML), or ``None`` for a Python check."""
        self.success_params: dict[str, Any] = dict(raw.get("success", {}))
        self._check: Check | None = None
        if "goal" in raw:
            try:
                self.goal = parse_goal(raw["goal"], f"task {raw['name']}: goal")
            except GoalError as exc:
                raise TaskError(str(exc)) from None
        else:
            self._check = load_check(
                str(self.success_params.pop("check", self.name)),
                path.parent if path else Path.cwd(),
                self.name,
            )
        self.skeleton: tuple[SkeletonStep, ...] | None = (
            _parse_skeleton(raw["skeleton"], f"task {self.name}") if "skeleton" in raw else None
        )
        """The symbolic skeleton with open parameter ranges, or ``None``."""
        self.nominal_scene = self.scene(0)
        if self.goal is not None:
            try:
                self.goal.check_names(self.nominal_scene, goal_names(self.nominal_scene, self.targets(0)))
            except GoalError as exc:
                raise TaskError(f"task {self.name}: {exc}") from None

    # --- scenes ------------------------------------------------------------------------------------------
    def _sample(self, seed: int) -> tuple[dict[str, Any], dict[str, float]]:
        raw = {"objects": [dict(o) for o in self.raw["objects"]], "robot": dict(self.raw.get("robot", {}))}
        for key in ("table_size", "table_friction"):
            if key in self.raw:
                raw[key] = self.raw[key]
        targets = {k: float(v) for k, v in self.raw.get("targets", {}).items()}
        if seed == 0:
            return raw, targets
        rng = np.random.default_rng(seed)
        objects = {o["name"]: o for o in raw["objects"]}
        draws = [
            (key, spec)
            for key, specs in self.raw.get("randomize", {}).items()
            for spec in (specs if isinstance(specs, list) else [specs])
        ]
        for key, spec in draws:
            try:
                self._apply_draw(key, spec, rng, objects, targets)
            except SimpactError:
                raise
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise TaskError(f"task {self.name}: randomize '{key}' is malformed ({exc})") from None
        return raw, targets

    def _apply_draw(
        self,
        key: str,
        spec: Any,
        rng: np.random.Generator,
        objects: dict[str, dict[str, Any]],
        targets: dict[str, float],
    ) -> None:
        """Add one seeded draw of ``spec`` (``low``, ``high``, optional ``shared``) to the object fields or
        target that ``key`` names (``NAME.field`` with a glob for NAME, or ``targets.NAME``)."""
        if not (isinstance(spec, Mapping) and "low" in spec and "high" in spec):
            raise TaskError(f"task {self.name}: randomize '{key}' needs 'low' and 'high', got {spec!r}")
        low, high = np.asarray(spec["low"], dtype=float), np.asarray(spec["high"], dtype=float)
        owner, _, attr = key.partition(".")
        if owner == "targets":
            if attr not in targets:
                raise TaskError(f"task {self.name}: randomize key '{key}' names no target")
            targets[attr] += float(rng.uniform(low, high))
            return
        names = fnmatch.filter(objects, owner)
        if not names:
            raise TaskError(f"task {self.name}: randomize key '{key}' names no object or target")
        shared = rng.uniform(low, high) if spec.get("shared", False) else None
        for name in names:
            offset = shared if shared is not None else rng.uniform(low, high)
            objects[name][attr] = (np.asarray(objects[name][attr], dtype=float) + offset).tolist()

    def scene(self, seed: int = 0) -> Scene:
        """The scene for ``seed`` (0 = nominal)."""
        raw, _ = self._sample(seed)
        try:
            return Scene.from_dict(raw)
        except SceneError as exc:
            raise TaskError(f"task {self.name}: {exc}") from None

    def targets(self, seed: int = 0) -> dict[str, float]:
        return self._sample(seed)[1]

    # --- plans and checks --------------------------------------------------------------------------------
    def names(self, scene: Scene, start: StartPose, targets: Mapping[str, float]) -> dict[str, float]:
        """Quantities a reference-plan expression may use."""
        out = {f"targets.{k}": v for k, v in targets.items()}
        for axis, value in zip("xyz", start.position):
            out[f"ee.{axis}"] = value
        for obj in scene.objects:
            for axis, value in zip("xyz", obj.position):
                out[f"{obj.name}.{axis}"] = value
            for axis, value in zip("xyz", obj.size):
                out[f"{obj.name}.s{axis}"] = value
        return out

    def reference_plan(self, scene: Scene, start: StartPose, seed: int = 0) -> Plan:
        """The config's reference plan with its expressions evaluated for this scene and start pose."""
        names = self.names(scene, start, self.targets(seed))
        actions = []
        for i, action in enumerate(self.raw["reference"]):
            try:
                actions.append(
                    {k: v if k in ("type", "reason") else evaluate(v, names) for k, v in action.items()}
                )
            except ExpressionError as exc:
                raise TaskError(f"task {self.name}: reference action {i}: {exc}") from None
        try:
            return Plan.from_actions(
                actions, description=f"reference plan of {self.name}", start_pose=start.to_dict()
            )
        except PlanError as exc:
            raise TaskError(f"task {self.name}: reference plan: {exc}") from None

    def skeleton_dims(self) -> list[tuple[int, str]]:
        """The skeleton's open parameters, in order: (action index, field)."""
        if self.skeleton is None:
            raise TaskError(f"task {self.name} has no skeleton")
        return [(i, name) for i, step in enumerate(self.skeleton) for name in step.ranges]

    def skeleton_plan(self, scene: Scene, start: StartPose, unit: Any, seed: int = 0) -> Plan:
        """The skeleton's plan with open parameter ``k`` at ``low + unit[k] * (high - low)`` (``unit`` in
        [0, 1], one value per ``skeleton_dims()``); values are clipped to each action's valid range."""
        dims = self.skeleton_dims()
        unit = np.asarray(unit, dtype=float)
        if unit.shape != (len(dims),):
            raise TaskError(
                f"task {self.name}: skeleton needs {len(dims)} parameters, got shape {unit.shape}"
            )
        assert self.skeleton is not None
        names = self.names(scene, start, self.targets(seed))
        actions: list[dict[str, Any]] = []
        k = 0
        for i, step in enumerate(self.skeleton):
            spec = ACTION_SPECS[step.type]
            action: dict[str, Any] = {"type": step.type}
            for name, (lo_bound, hi_bound) in zip(spec.fields, spec.ranges):
                try:
                    if name in step.ranges:
                        low, high = (evaluate(e, names) for e in step.ranges[name])
                        value = low + float(np.clip(unit[k], 0.0, 1.0)) * (high - low)
                        k += 1
                    else:
                        value = evaluate(step.fixed[name], names)
                except ExpressionError as exc:
                    raise TaskError(f"task {self.name}: skeleton action {i} field '{name}': {exc}") from None
                value = float(np.clip(value, lo_bound, hi_bound))
                names[f"a{i}.{name}"] = value
                action[name] = value
            if step.reason is not None:
                action["reason"] = step.reason
            actions.append(action)
        return Plan.from_actions(
            actions, description=f"skeleton plan of {self.name}", start_pose=start.to_dict()
        )

    def evaluate(self, rollout: Rollout, scene: Scene, seed: int = 0) -> Evaluation:
        """The task's own success check and progress score for a rollout of ``scene``: its goal's
        predicates, or its Python check."""
        if self.goal is not None:
            try:
                outcome = self.goal.evaluate(rollout, scene, goal_names(scene, self.targets(seed)))
            except GoalError as exc:
                raise TaskError(f"task {self.name}: {exc}") from None
            return Evaluation(outcome.ok, float(np.clip(outcome.score, 0.0, 1.0)), outcome.details)
        assert self._check is not None
        result = self._check(rollout, scene, self.targets(seed), self.success_params)
        return Evaluation(bool(result.success), float(np.clip(result.score, 0.0, 1.0)), result.details)

    def lasting_failures(self, evaluation: Evaluation) -> list[str]:
        """The goal predicates ``evaluation`` failed that judge the whole rollout (failed once, failed for
        every continuation of it); empty for a task whose check is Python."""
        return [] if self.goal is None else self.goal.lasting_failures(evaluation.details)

    def goal_hints(self, scene: Scene, seed: int = 0) -> list[GoalHint]:
        """What the goal asks of each object in ``scene`` (globs expanded, points resolved), for planners that
        build motions from it; empty for a task whose check is Python."""
        if self.goal is None:
            return []
        try:
            return self.goal.hints(scene, goal_names(scene, self.targets(seed)))
        except GoalError as exc:
            raise TaskError(f"task {self.name}: {exc}") from None
