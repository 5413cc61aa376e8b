"""SimuGuard on episodes kept in folders: record one (an MJCF scene or a task rollout), read a recording or an
episode's detect/rerun result back, and pick the scene a settle check runs on. Bad input raises
:class:`AuditError` with a one-line message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simpact.core.actions import load_plan
from simpact.core.errors import SimpactError
from simpact.core.scene import Scene
from simpact.guard.replay import record_mjcf, record_task_rollout
from simpact.guard.score import ScoredEpisode
from simpact.guard.store import Recording, load_recording
from simpact.tasks import load_task

__all__ = [
    "DEFAULT_MJCF_STEPS",
    "AuditError",
    "episode_from_result",
    "open_recording",
    "record_episode",
    "scene_to_settle",
]

DEFAULT_MJCF_STEPS = 500
"""Physics steps of an MJCF recording when neither a step count nor controls are given."""


class AuditError(SimpactError, ValueError):
    """Bad input to a SimuGuard audit (reported in one line, exit status 2)."""


def open_recording(path: str | Path) -> Recording:
    """The recording in folder ``path``; one that cannot be read is an :class:`AuditError`."""
    try:
        return load_recording(path)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        raise AuditError(f"{path}: cannot read the recording: {exc}") from None


def _controls(path: str) -> np.ndarray:
    """The ``(N, nu)`` controls saved with ``np.save`` at ``path``, one row per physics step."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise AuditError(f"--ctrl {path}: {exc}") from None


def record_episode(
    out: str | Path,
    *,
    mjcf: str | None = None,
    task: str | None = None,
    steps: int | None = None,
    ctrl: str | None = None,
    robot_prefix: str | None = None,
    seed: int = 0,
    plan: str | None = None,
) -> Recording:
    """Record every physics step into folder ``out``: exactly one of ``mjcf`` (a scene file run from its first
    keyframe for ``steps`` steps, default the rows of the ``ctrl`` .npy file or :data:`DEFAULT_MJCF_STEPS`,
    with zero control unless ``ctrl`` is given) or ``task`` (its scene of ``seed`` running ``plan``, a plan
    JSON file, or its reference plan when ``plan`` is None or ``"reference"``)."""
    if (mjcf is None) == (task is None):
        raise AuditError("give exactly one of --mjcf FILE or --task TASK")
    if mjcf is not None:
        controls = _controls(ctrl) if ctrl else None
        n = steps if steps is not None else (len(controls) if controls is not None else DEFAULT_MJCF_STEPS)
        if n < 1:
            raise AuditError("--steps must be at least 1")
        prefix = robot_prefix if robot_prefix is not None else ()
        return record_mjcf(mjcf, n, out, robot_prefix=prefix, ctrl=controls)
    assert task is not None
    chosen = None if plan in (None, "reference") else load_plan(plan)
    return record_task_rollout(task, seed, chosen, out)


def episode_from_result(directory: str | Path) -> ScoredEpisode:
    """The episode whose detect or rerun ``result.json`` is in ``directory``: its outcome as run, whether an
    artifact was flagged, and (for a rerun) the rerun's outcome."""
    path = Path(directory) / "result.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AuditError(f"{path}: {exc}") from None
    success = raw.get("original_success", raw.get("success"))
    if success is None:
        raise AuditError(f"{path}: no outcome as run (original_success); record episodes with --task")
    flagged = raw.get("original_artifact", raw.get("flagged"))
    if flagged is None:
        raise AuditError(f"{path}: not a detect or rerun result (no 'flagged')")
    rerun = raw.get("rerun_success") if "rerun_success" in raw else None
    return ScoredEpisode(str(directory), bool(success), bool(flagged), None if rerun is None else bool(rerun))


def scene_to_settle(scene: str | None = None, task: str | None = None, seed: int = 0) -> Scene:
    """Exactly one of: the scene in JSON file ``scene`` (``Scene.to_dict``, e.g. from real2sim), or the scene
    of ``task`` for ``seed``."""
    if (scene is None) == (task is None):
        raise AuditError("give exactly one of --scene SCENE.json or --task TASK")
    if task is not None:
        return load_task(task).scene(seed)
    assert scene is not None
    try:
        return Scene.from_dict(json.loads(Path(scene).read_text()))
    except (OSError, ValueError) as exc:
        raise AuditError(f"--scene {scene}: {exc}") from None
