"""The plain types of the robot's closed loop (:mod:`robot.loop`): its settings (:class:`ClosedLoopConfig`),
the records of an attempt and of the whole loop (:class:`Attempt`, :class:`LoopResult`), a failed stage
(:class:`StageFailed`), the simulated world's :class:`Oracle`, and a task given only by its instruction
(:class:`InstructionTask`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from simpact.core.frame import Frame
from simpact.core.scene import Scene
from simpact.core.vocab import BENCH_PLANNERS
from simpact.tasks import Evaluation, TaskError

__all__ = [
    "PLANNERS",
    "Attempt",
    "ClosedLoopConfig",
    "InstructionTask",
    "LoopResult",
    "Motion",
    "Observed",
    "Oracle",
    "StageFailed",
]


PLANNERS = BENCH_PLANNERS
"""``reference``: the task's reference plan on the perceived scene; ``cem``/``template``/``gaussian``: the
VLM-free planners; ``vlm``: Algorithm 1 with a VLM."""


class StageFailed(Exception):
    """A stage of an attempt failed: ``stage`` names it; ``robot_stopped`` when the robot stopped with an
    error (it stays stopped until recovered)."""

    def __init__(self, stage: str, message: str, robot_stopped: bool = False) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message
        self.robot_stopped = robot_stopped


class Oracle(Protocol):
    """Exact knowledge of a simulated world, for evaluation: ``mark()`` when an execution begins,
    ``ground_truth(plan)`` the task's check on what the world did since."""

    def mark(self) -> None: ...

    def ground_truth(self, plan: Any) -> dict[str, Any]: ...


class InstructionTask:
    """A task given only by its instruction (``--instruction``): it has no success check of its own, so the
    VLM decides: real2sim asks it for the objects to look for (unless ``labels`` are given), the planner
    accepts on its TaskSuccess (every proposal scores 0 here) and the loop's judge is the VLM."""

    name = "instruction"
    tail_s = 1.0
    """Hold after a simulated plan, s (as the shipped tasks)."""
    skeleton = None

    def __init__(self, instruction: str, labels: list[str] | None = None) -> None:
        if not instruction.strip():
            raise ValueError("the instruction is empty")
        self.instruction = instruction.strip()
        self.labels = labels
        self.raw: dict[str, Any] = {}
        self.nominal_scene = Scene(())

    def targets(self, seed: int = 0) -> dict[str, float]:
        return {}

    def evaluate(self, rollout: Any, scene: Any, seed: int = 0) -> Any:
        return Evaluation(False, 0.0, {"check": "none: an instruction is judged by the VLM"})

    def reference_plan(self, scene: Any, start: Any, seed: int = 0) -> Any:
        raise TaskError("an instruction has no reference plan: plan with --planner vlm")


@dataclass(frozen=True)
class ClosedLoopConfig:
    """Settings of the robot's closed loop (SI units); the planner's own settings are
    :class:`simpact.planner.loop.LoopConfig`."""

    attempts: int = 3
    """Most plan-and-execute attempts."""
    planner: str = "cem"
    """One of :data:`PLANNERS`."""
    judge: Literal["task", "vlm"] = "task"
    seed: int = 0
    """The task's seed: its targets (and, with ``--sim``, the stand-in world's scene)."""
    speed: float | None = None
    """Peak tool speed of the executed plan, m/s (default: the plan's own)."""
    transit_height: float = 0.3
    """Height of the tool while it crosses back to the capture pose, m (at least the higher end's)."""
    transit_speed: float = 0.1
    """Peak tool speed of the retreat, m/s."""
    settle_s: float = 1.0
    """Wait after the retreat before the after-frame, s."""
    start: Literal["task", "current"] = "task"
    """Where plans start and frames are taken (the capture pose): the task's robot start (the robot goes
    there, up-over-down, once the first plan is confirmed), or wherever the robot is when the loop begins."""
    k: int = 10
    """Algorithm 1's K (with the ``vlm`` planner)."""
    k_max: int = 13

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.planner not in PLANNERS:
            raise ValueError(f"planner must be one of {', '.join(PLANNERS)}, got {self.planner!r}")
        if self.start not in ("task", "current"):
            raise ValueError(f"start must be task or current, got {self.start!r}")
        if self.judge not in ("task", "vlm"):
            raise ValueError(f"judge must be task or vlm, got {self.judge!r}")
        for name in ("transit_height", "transit_speed"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ValueError(f"settle_s must be >= 0 s, got {self.settle_s}")
        if self.speed is not None and not (math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"speed must be positive, got {self.speed}")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Attempt:
    """What one attempt did: per-stage wall times, the verdict, and the failed stage (if any)."""

    index: int
    dir: Path
    timings_s: dict[str, float] = field(default_factory=dict)
    stages_done: list[str] = field(default_factory=list)
    success: bool | None = None
    """The judge's verdict; None when the attempt did not reach it."""
    failed_stage: str | None = None
    error: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.index,
            "dir": self.dir.name,
            "success": self.success,
            "stages_done": list(self.stages_done),
            "failed_stage": self.failed_stage,
            "error": self.error,
            "timings_s": dict(self.timings_s),
            "total_s": round(sum(self.timings_s.values()), 3),
            **self.info,
        }


@dataclass
class LoopResult:
    """The loop's outcome: ``success`` (the last judge's verdict; None when no attempt was judged),
    ``stopped`` (why it ended: ``success``, ``attempts exhausted``, ``dry run``, ``failed``), the attempts."""

    success: bool | None = None
    stopped: str = "running"
    failed_stage: str | None = None
    robot_stopped: bool = False
    dry_run: str | None = None
    """Why nothing moved (the confirmation's answer), or None."""
    attempts: list[Attempt] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.header,
            "success": self.success,
            "stopped": self.stopped,
            "failed_stage": self.failed_stage,
            "robot_stopped": self.robot_stopped,
            "dry_run": self.dry_run,
            "n_attempts": len(self.attempts),
            "attempts": [a.to_dict() for a in self.attempts],
            "wall_s": round(self.wall_s, 3),
        }


# --- what the stages share ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """An attempt's after-frame, the scene real2sim measured in it and its real2sim folder: the next
    attempt's before-frame and scene."""

    frame: Frame
    scene: Scene
    real2sim_dir: Path


@dataclass(frozen=True)
class Motion:
    """The tool pose (position m, quaternion, gripper width m) before the plan and after the retreat, and
    the time from the plan's start to the end of the retreat, s."""

    before: tuple[Any, Any, float]
    after: tuple[Any, Any, float]
    elapsed_s: float
