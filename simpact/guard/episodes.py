"""SimuGuard on episodes kept in folders: record one (an MJCF scene or a task rollout), read a recording or an
episode's detect/rerun result back, and pick the scene a settle check runs on. Bad input raises
:class:`AuditError` with a one-line message."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.actions import load_plan
from simpact.core.errors import SimpactError
from simpact.core.scene import Scene
from simpact.guard.replay import record_mjcf, record_task_rollout
from simpact.guard.score import ScoredEpisode
from simpact.guard.store import Recording, load_recording, read_manifest
from simpact.tasks import load_task

__all__ = [
    "DEFAULT_MJCF_STEPS",
    "AuditError",
    "episode_from_result",
    "open_recording",
    "record_episode",
    "record_request",
    "resume_request",
    "scene_to_settle",
]

DEFAULT_MJCF_STEPS = 500
"""Physics steps of an MJCF recording when neither a step count nor controls are given."""


class AuditError(SimpactError, ValueError):
    """Bad input to a SimuGuard audit (reported in one line, exit status 2)."""


def open_recording(path: str | Path) -> Recording:
    """The recording in folder ``path``; one that cannot be read (missing, truncated or corrupt chunks) is an
    :class:`AuditError`."""
    try:
        return load_recording(path)
    except (OSError, ValueError, KeyError) as exc:
        raise AuditError(f"cannot read the recording: {exc}") from None


def _controls(path: str) -> np.ndarray:
    """The ``(N, nu)`` controls saved with ``np.save`` at ``path``, one row per physics step."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        reason = "not a NumPy .npy array (save one with numpy.save)" if "pickle" in str(exc) else str(exc)
        raise AuditError(f"--ctrl {path}: {reason}") from None


def _file(flag: str, path: str) -> str:
    """``path`` resolved, after checking that it is a readable file."""
    p = Path(path)
    if not p.is_file():
        raise AuditError(f"{flag} {path}: {'is a folder, not a file' if p.is_dir() else 'no such file'}")
    return str(p.resolve())


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def record_request(
    *,
    mjcf: str | None = None,
    task: str | None = None,
    steps: int | None = None,
    ctrl: str | None = None,
    robot_prefix: str | None = None,
    seed: int | None = None,
    plan: str | None = None,
) -> dict[str, Any]:
    """What to record, checked before any work (see :func:`record_episode`), with its files resolved: kept in
    the manifest (``meta["request"]``) so that ``--resume`` records the same episode."""
    if (mjcf is None) == (task is None):
        raise AuditError("give exactly one of --mjcf FILE or --task TASK")
    if steps is not None and steps < 1:
        raise AuditError(f"--steps {steps}: must be at least 1")
    if seed is not None and seed < 0:
        raise AuditError(f"--seed {seed}: must be 0 or more")
    request: dict[str, Any] = {"mjcf": None, "task": task, "steps": steps, "ctrl": None, "ctrl_sha256": None}
    request |= {"robot_prefix": robot_prefix, "seed": seed, "plan": plan}
    if mjcf is not None:
        request["mjcf"] = _file("--mjcf", mjcf)
        if ctrl is not None:
            request["ctrl"] = _file("--ctrl", ctrl)
            request["ctrl_sha256"] = _sha256(request["ctrl"])
    if plan not in (None, "reference"):
        assert plan is not None
        request["plan"] = _file("--plan", plan)
    return request


def resume_request(out: str | Path, given: Mapping[str, Any]) -> dict[str, Any]:
    """The request of the unfinished recording in ``out``; a setting in ``given`` (flag name -> value, None
    when not given) that differs from the recorded one is an :class:`AuditError`."""
    try:
        manifest = read_manifest(out)
    except ValueError as exc:
        raise AuditError(f"--resume: {exc}") from None
    if manifest.status == "done":
        raise AuditError(f"--resume: {out} holds a complete recording; nothing to continue")
    request = manifest.meta.get("request")
    if not isinstance(request, dict):
        raise AuditError(f"--resume: {out} was not recorded by 'simpact audit record'; cannot continue it")
    if any(v is not None for v in given.values()):
        mine = record_request(
            **{**{k: request[k] for k in given}, **{k: v for k, v in given.items() if v is not None}}
        )
        for key in given:
            if given[key] is not None and mine[key] != request[key]:
                raise AuditError(
                    f"--resume continues {out} as recorded: --{key.replace('_', '-')} {given[key]} differs "
                    f"from the recorded {request[key]}; leave it out"
                )
    if request["ctrl"] and _sha256(request["ctrl"]) != request["ctrl_sha256"]:
        raise AuditError(f"--resume: --ctrl {request['ctrl']} changed since the recording started")
    return request


def record_episode(out: str | Path, request: Mapping[str, Any], resume: bool = False) -> Recording:
    """Record every physics step of ``request`` (:func:`record_request`) into folder ``out``: exactly one of
    ``mjcf`` (a scene file run from its first keyframe for ``steps`` steps, default the rows of the ``ctrl``
    .npy file or :data:`DEFAULT_MJCF_STEPS`, with zero control unless ``ctrl`` is given) or ``task`` (its
    scene of ``seed`` running ``plan``, a plan JSON file, or its reference plan when ``plan`` is None or
    ``"reference"``). ``resume`` continues the interrupted recording in ``out`` without repeating its
    complete chunks; Ctrl-C leaves a valid partial recording (``status: interrupted``)."""
    meta = {"request": dict(request)}
    seed = request["seed"] or 0
    if request["mjcf"] is not None:
        controls = _controls(request["ctrl"]) if request["ctrl"] else None
        steps = request["steps"]
        n = steps if steps is not None else (len(controls) if controls is not None else DEFAULT_MJCF_STEPS)
        prefix = request["robot_prefix"] if request["robot_prefix"] is not None else ()
        return record_mjcf(
            request["mjcf"], n, out, robot_prefix=prefix, ctrl=controls, resume=resume, meta=meta
        )
    plan = request["plan"]
    chosen = None if plan in (None, "reference") else load_plan(plan)
    return record_task_rollout(request["task"], seed, chosen, out, resume=resume, meta=meta)


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
