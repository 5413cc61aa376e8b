"""SimuGuard in the planner: every rollout is audited, a flagged one is rerun with a repair setting, and a
plan is accepted only on an artifact-free rollout.

1. Screen (:func:`simpact.guard.screen.screen_rollout`): the rollout's own trace, vectorised, nearly free. A
   clean screen proves the detector would find no event.
2. Otherwise the rollout is re-executed under the SimuGuard recorder from the same snapshot with the same
   controls (bit-identical to the unmonitored rollout, which is checked) and the detector judges it.
3. A flagged rollout is rerun with :data:`REPAIR` on the flagged body (a limit on the speed at which its
   overlaps are removed), switched on 0.1 s before the first artifact; the steps before the switch are
   verified bit for bit against the recording. If the rerun is artifact-free, its outcome (rollout, task
   check) is what the planner uses; otherwise the proposal stays flagged and cannot be accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from simpact.core.rollout import Rollout
from simpact.core.scene import Scene
from simpact.guard import Recorder, detect
from simpact.guard.replay import Built, Collector, compare, task_rollout
from simpact.guard.rerun import Change, rerun_controls
from simpact.guard.screen import ScreenResult, screen_rollout
from simpact.guard.store import Recording
from simpact.tasks import Evaluation, Task
from solvers.mujoco.world import Snapshot, mujoco_access
from solvers.world import World

__all__ = [
    "clean",
    "LEAD_S",
    "REPAIR",
    "Audit",
    "AuditMismatch",
    "artifact_free",
    "audit_and_repair",
    "audit_rollout",
    "audit_summary",
    "describe_events",
]

REPAIR = Change("depenetration", 0.3)
"""The repair setting: the flagged body's overlaps are removed at no more than 0.3 m/s (MuJoCo's way: its
geoms get a critically damped contact time constant sized for the overlap), below the detector's 0.5 m/s
candidate speed; of the rerun changes it is the one aimed at overlap-driven ejections and it leaves every
other body's contacts as they were."""
LEAD_S = 0.1
"""The repair is switched on this long before the first artifact, s."""


class AuditMismatch(RuntimeError):
    """The monitored re-execution did not reproduce the rollout: determinism is broken."""


@dataclass
class Audit:
    """One rollout's audit. ``rollout``/``evaluation`` are what the planner should use: the repaired rerun's
    when the repair made it artifact-free, else the original's."""

    screen: ScreenResult
    recorded: bool
    """Re-executed under the full recorder (the screen could not rule an event out)."""
    events: list[dict[str, Any]]
    """Flagged events of the rollout as planned."""
    rollout: Rollout
    evaluation: Evaluation
    repair: dict[str, Any] | None = None
    """The rerun with :data:`REPAIR`: change, switch time, prefix check, its flagged events, task check."""
    recording: Recording | None = field(default=None, repr=False)

    @property
    def artifact_free(self) -> bool:
        return not self.events or bool(self.repair and self.repair["artifact_free"])

    def notes(self) -> dict[str, Any]:
        """What a proposal's notes keep: ``audit`` (events), ``audit_repair``, ``flags`` (for the VLM)."""
        out: dict[str, Any] = {"audit": self.events, "audit_recorded": self.recorded}
        if self.events:
            out["flags"] = [describe_events(self.events, self.repair)]
        if self.repair is not None:
            out["audit_repair"] = self.repair
        return out


def record_rollout(world: World, rollout: Rollout, ctrl: np.ndarray, snapshot: Snapshot) -> Recording:
    """``rollout`` re-executed under the recorder (its controls ``ctrl`` from ``snapshot``), checked equal."""
    data = mujoco_access(world).new_data(snapshot)
    recorder = Recorder.for_world(world, data)
    recorder.run(ctrl)
    if rollout.trace is not None and not np.array_equal(data.qpos, rollout.trace.qpos[-1]):
        raise AuditMismatch("the monitored re-execution of a plan diverged from its rollout")
    return recorder.close()


def audit_rollout(
    world: World, rollout: Rollout, tail_s: float, snapshot: Snapshot | None = None
) -> list[dict[str, Any]]:
    """Flagged SimuGuard events (dicts) of ``rollout`` from ``snapshot`` (default: the world's initial one)
    with ``tail_s`` s of hold, as the rollout was: screened, and recorded and detected unless the screen
    is clean."""
    snapshot = world.initial_snapshot if snapshot is None else snapshot
    if not screen_rollout(world, rollout, snapshot).suspicious:
        return []
    ctrl = mujoco_access(world).controls(rollout.plan, snapshot, tail_s)[1]
    recording = record_rollout(world, rollout, ctrl, snapshot)
    return [event.to_dict() for event in detect(recording) if event.flagged]


def audit_and_repair(
    world: World,
    task: Task,
    scene: Scene,
    seed: int,
    rollout: Rollout,
    evaluation: Evaluation,
    snapshot: Snapshot | None = None,
    repair: Change | None = REPAIR,
) -> Audit:
    """Audit ``rollout`` (of ``task`` in ``scene``, judged ``evaluation``) and rerun it with ``repair``
    when it is flagged (None: no rerun). See the module docstring."""
    snapshot = world.initial_snapshot if snapshot is None else snapshot
    screened = screen_rollout(world, rollout, snapshot)
    if not screened.suspicious:
        return Audit(screened, False, [], rollout, evaluation)
    mj = mujoco_access(world)
    _, ctrl, action_end, _ = mj.controls(rollout.plan, snapshot, task.tail_s)
    recording = record_rollout(world, rollout, ctrl, snapshot)
    flagged = [e for e in detect(recording) if e.flagged]
    result = Audit(screened, True, [e.to_dict() for e in flagged], rollout, evaluation, recording=recording)
    if not flagged or repair is None:
        return result
    t0 = time.perf_counter()
    first = flagged[0]
    body_name = repair.body or first.body
    body = mj.model.body(body_name).id
    change = Change(repair.param, repair.value, body_name)
    switch = max(0, first.onset_step - int(round(LEAD_S / mj.timestep)))
    collector = Collector()
    rerun, model = rerun_controls(
        world,
        snapshot,
        ctrl,
        change,
        body=body,
        depth=first.contact_depth,
        switch=switch,
        hooks=[collector],
    )
    divergence = compare(recording, rerun, stop=switch) if switch else None
    events = [e.to_dict() for e in detect(rerun) if e.flagged]
    built = Built(model, mujoco.MjData(model), world, task, scene)
    repaired = task_rollout(
        built,
        rollout.plan,
        [int(i) for i in action_end],
        collector,
        ctrl,
        snapshot,
        rollout.ik_residual_max,
        time.perf_counter() - t0,
    )
    repaired_evaluation = task.evaluate(repaired, scene, seed)
    prefix_exact = None if not switch else divergence is None
    clean = not events and prefix_exact is not False
    result.repair = {
        "change": str(change),
        "switch_step": switch,
        "switch_s": switch * mj.timestep,
        "prefix_exact": prefix_exact,
        "events": events,
        "artifact_free": clean,
        "success": bool(repaired_evaluation.success),
        "score": float(repaired_evaluation.score),
        "original_success": bool(evaluation.success),
        "original_score": float(evaluation.score),
        "wall_s": round(time.perf_counter() - t0, 4),
    }
    if clean:
        result.rollout, result.evaluation = repaired, repaired_evaluation
    return result


def artifact_free(notes: dict[str, Any]) -> bool:
    """A proposal's rollout (as the planner uses it) has no flagged artifact: none was found, or the rerun
    with the repair setting removed it. A failed audit proves nothing: not artifact-free."""
    if "audit_error" in notes:
        return False
    return not notes.get("audit") or bool(notes.get("audit_repair", {}).get("artifact_free"))


def clean(notes: dict[str, Any]) -> bool:
    """A proposal's rollout had no SimuGuard artifact at all: not flagged (so not repaired either), and the
    audit did not fail. Only such rollouts count as successes."""
    return not notes.get("audit") and "audit_error" not in notes


def describe_events(events: list[dict[str, Any]], repair: dict[str, Any] | None = None) -> str:
    """One sentence per event for a VLM or a report, and one on the repair rerun."""
    text = " ".join(
        f"{e['body']} was ejected at {e['peak_speed']:.1f} m/s at t = {e['onset_s']:.2f} s by a contact "
        f"no robot link made; this outcome is not trustworthy."
        for e in events
    )
    if repair is not None:
        if repair["artifact_free"]:
            verdict = "succeeded" if repair["success"] else "failed"
            text += (
                f" Rerun with {repair['change']} m/s from {repair['switch_s']:.2f} s into the rollout, it is "
                f"artifact-free and the task {verdict} (score {repair['score']:.3f}); that outcome is used."
            )
        else:
            text += f" A rerun with {repair['change']} m/s did not remove the artifact."
    return text


def audit_summary(proposals: list[Any]) -> dict[str, Any]:
    """``result.json``'s ``audit``: how many rollouts were audited, recorded in full, flagged, rerun with the
    repair setting and repaired (artifact-free rerun), and the events."""
    audited = [p for p in proposals if "audit" in p.notes]
    flagged = [p for p in audited if p.notes["audit"]]
    rerun = [p for p in flagged if "audit_repair" in p.notes]
    return {
        "audited": len(audited),
        "recorded": sum(bool(p.notes.get("audit_recorded")) for p in audited),
        "flagged": len(flagged),
        "rerun": len(rerun),
        "repaired": sum(bool(p.notes["audit_repair"]["artifact_free"]) for p in rerun),
        "events": [{"proposal": p.source, **e} for p in flagged for e in p.notes["audit"]],
        "repairs": [{"proposal": p.source, **p.notes["audit_repair"]} for p in rerun],
    }
