"""Symbolic actions and plan files.

The VLM's vocabulary (paper Supp. A.2, ``shared/TASKS.md``): displacements are metres along the robot base
frame's axes from where the end effector is when the action starts; angles are radians about the vertical
axis; gripper widths are metres (0 closed ... 0.1 open; the Franka hand opens to 0.08 m, wider is clamped).

A plan file is JSON::

    {"description": "...", "start_pose": {"position": [x, y, z], "quaternion": [w, x, y, z],
     "gripper_width": 0.08},
     "actions": [{"type": "MOVE", "dx": 0.1, "dy": 0.0, "dz": -0.05, "reason": "..."}, ...]}

Extra fields (a per-action ``reason``, a plan-level ``description``) are kept and ignored by execution.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError

__all__ = [
    "ACTION_SPECS",
    "Action",
    "ActionSpec",
    "Plan",
    "PlanError",
    "StartPose",
    "load_plan",
]


class PlanError(SimpactError, ValueError):
    """A plan or action that cannot be executed; the message names the action and the field."""


@dataclass(frozen=True)
class ActionSpec:
    """Parameters of one symbolic action and the closed range each may take (SI units)."""

    fields: tuple[str, ...]
    ranges: tuple[tuple[float, float], ...]
    doc: str


_D = 0.5  # largest displacement in one action, metres
ACTION_SPECS: dict[str, ActionSpec] = {
    "PUSH": ActionSpec(("dx", "dy"), ((-_D, _D), (-_D, _D)), "move horizontally by (dx, dy), keeping height"),
    "LIFT": ActionSpec(("dz",), ((0.0, _D),), "move up by dz >= 0"),
    "DESCEND": ActionSpec(("dz",), ((0.0, _D),), "move down by dz >= 0"),
    "GRASP": ActionSpec(("d",), ((0.0, 0.1),), "set the gripper width to d (0 closed, 0.1 open)"),
    "RELEASE": ActionSpec((), (), "open the gripper fully"),
    "ROTATE": ActionSpec(("dyaw",), ((-math.pi, math.pi),), "turn the end effector about z by dyaw"),
    "MOVE": ActionSpec(("dx", "dy", "dz"), ((-_D, _D),) * 3, "move by (dx, dy, dz)"),
}


@dataclass(frozen=True)
class Action:
    """One validated symbolic action: ``type`` and its parameters (metres, radians); ``extra`` is kept
    verbatim."""

    type: str
    params: Mapping[str, float]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], index: int = 0) -> Action:
        """Validate one action from its JSON form; ``index`` only labels error messages."""
        if not isinstance(raw, Mapping):
            raise PlanError(f"action {index}: expected an object like {{'type': 'MOVE', ...}}, got {raw!r}")
        kind = raw.get("type")
        if not isinstance(kind, str) or kind.upper() not in ACTION_SPECS:
            raise PlanError(
                f"action {index}: unknown type {kind!r}; expected one of {', '.join(ACTION_SPECS)}"
            )
        kind = kind.upper()
        spec = ACTION_SPECS[kind]
        params: dict[str, float] = {}
        for name, (lo, hi) in zip(spec.fields, spec.ranges):
            label = f"action {index} ({kind}): field '{name}'"
            if name not in raw:
                raise PlanError(f"{label} is missing ({spec.doc})")
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PlanError(f"{label} must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise PlanError(f"{label} is {value} (must be finite)")
            if not lo <= value <= hi:
                raise PlanError(f"{label} = {value:g} is outside [{lo:g}, {hi:g}] ({spec.doc})")
            params[name] = value
        extra = {k: v for k, v in raw.items() if k != "type" and k not in spec.fields}
        return cls(kind, params, extra)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.params, **self.extra}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v:.3f}" for k, v in self.params.items())
        return f"{self.type}({args})"


@dataclass(frozen=True)
class StartPose:
    """Where a plan begins: end-effector position (m) and orientation quaternion (w, x, y, z) in the base
    frame, and the gripper width (m)."""

    position: tuple[float, float, float]
    quaternion: tuple[float, float, float, float]
    gripper_width: float

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StartPose:
        try:
            pos = np.asarray(raw["position"], dtype=float)
            quat = np.asarray(raw["quaternion"], dtype=float)
            width = float(raw["gripper_width"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(
                f"start_pose: expected position [x, y, z], quaternion [w, x, y, z], gripper_width; {exc}"
            ) from exc
        if pos.shape != (3,) or quat.shape != (4,):
            raise PlanError(f"start_pose: position must have 3 values and quaternion 4, got {pos} and {quat}")
        if not (np.isfinite(pos).all() and np.isfinite(quat).all() and math.isfinite(width)):
            raise PlanError("start_pose: values must be finite")
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > 1e-3:
            raise PlanError(f"start_pose: quaternion must have unit norm, got norm {norm:.4f}")
        if not 0.0 <= width <= 0.1:
            raise PlanError(f"start_pose: gripper_width = {width:g} is outside [0, 0.1]")
        q = quat / norm
        return cls(
            (float(pos[0]), float(pos[1]), float(pos[2])),
            (float(q[0]), float(q[1]), float(q[2]), float(q[3])),
            width,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": list(self.position),
            "quaternion": list(self.quaternion),
            "gripper_width": self.gripper_width,
        }


@dataclass(frozen=True)
class Plan:
    """A validated sequence of symbolic actions, with optional ``start_pose`` and ``description``."""

    actions: tuple[Action, ...]
    start_pose: StartPose | None = None
    description: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Plan:
        if not isinstance(raw, Mapping):
            raise PlanError(f"a plan must be a JSON object with an 'actions' list, got {type(raw).__name__}")
        actions = raw.get("actions")
        if not isinstance(actions, Sequence) or isinstance(actions, (str, bytes)):
            raise PlanError("a plan must have an 'actions' list")
        if not actions:
            raise PlanError("the plan's 'actions' list is empty")
        start = raw.get("start_pose")
        desc = raw.get("description")
        extra = {k: v for k, v in raw.items() if k not in ("actions", "start_pose", "description")}
        return cls(
            tuple(Action.from_dict(a, i) for i, a in enumerate(actions)),
            StartPose.from_dict(start) if start is not None else None,
            None if desc is None else str(desc),
            extra,
        )

    @classmethod
    def from_actions(cls, actions: Sequence[Mapping[str, Any]], **kw: Any) -> Plan:
        return cls.from_dict({"actions": list(actions), **kw})

    def with_start_pose(self, start_pose: StartPose) -> Plan:
        return Plan(self.actions, start_pose, self.description, self.extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.description is not None:
            out["description"] = self.description
        if self.start_pose is not None:
            out["start_pose"] = self.start_pose.to_dict()
        out.update(self.extra)
        out["actions"] = [a.to_dict() for a in self.actions]
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    def __str__(self) -> str:
        return " -> ".join(str(a) for a in self.actions)


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan file; errors name the file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"plan file {path} does not exist") from None
    except IsADirectoryError:
        raise PlanError(f"plan file {path} is a folder, not a plan file") from None
    except UnicodeDecodeError:
        raise PlanError(f"plan file {path} is not text (a JSON plan was expected)") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"plan file {path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise PlanError(f"plan file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        return Plan.from_dict(raw)
    except PlanError as exc:
        raise PlanError(f"plan file {path}: {exc}") from None
