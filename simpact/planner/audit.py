"""SimuGuard in the planner: a plan is accepted only on a rollout with no contact artifact.

A rollout is re-executed under the SimuGuard recorder from the same snapshot with the same controls
(bit-identical to the unmonitored rollout, which is checked), and the detector's flagged events are
returned as plain dicts for the context, the proposal record and ``result.json``.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from simpact.guard import Recorder, detect
from solvers.mujoco.world import MujocoWorld, Snapshot
from solvers.rollout import Rollout

__all__ = ["AuditMismatch", "audit_rollout", "audit_summary", "describe_events"]


class AuditMismatch(RuntimeError):
    """The monitored re-execution did not reproduce the rollout: determinism is broken."""


def audit_rollout(
    world: MujocoWorld, rollout: Rollout, tail_s: float, snapshot: Snapshot | None = None
) -> list[dict[str, Any]]:
    """Flagged SimuGuard events (dicts) of ``rollout``, re-executed under the recorder from ``snapshot``
    (default: the world's initial one) with ``tail_s`` s of hold, as the rollout was."""
    snapshot = world.initial_snapshot if snapshot is None else snapshot
    _, ctrl, _, _ = world.controls(rollout.plan, snapshot, tail_s)
    data = mujoco.MjData(world.model)
    world.restore(snapshot, data)
    recorder = Recorder.for_world(world, data)
    recorder.run(ctrl)
    if rollout.trace is not None and not np.array_equal(data.qpos, rollout.trace.qpos[-1]):
        raise AuditMismatch("the monitored re-execution of a plan diverged from its rollout")
    return [event.to_dict() for event in detect(recorder.recording()) if event.flagged]


def describe_events(events: list[dict[str, Any]]) -> str:
    """One sentence per event for a VLM or a report."""
    return " ".join(
        f"{e['body']} was ejected at {e['peak_speed']:.1f} m/s at t = {e['onset_s']:.2f} s by a contact "
        f"no robot link made; this outcome is not trustworthy."
        for e in events
    )


def audit_summary(proposals: list[Any]) -> dict[str, Any]:
    """``result.json``'s ``audit``: how many rollouts were audited and flagged, and the events."""
    audited = [p for p in proposals if "audit" in p.notes]
    flagged = [p for p in audited if p.notes["audit"]]
    return {
        "audited": len(audited),
        "flagged": len(flagged),
        "events": [{"proposal": p.source, **e} for p in flagged for e in p.notes["audit"]],
    }
