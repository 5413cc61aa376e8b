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

A rollout with deformables (particle records in its trace) is also screened for particle artifacts
(:mod:`simpact.guard.particles`: particles faster than the colliders and gravity explain, out of the grid,
non-finite) against the robot's and the rigid objects' collision boxes as MuJoCo moved them and each MPM
object's grid. Particle events join the rollout's events (``kind: particles``); the repair setting acts on
MuJoCo bodies only, so a rollout with particle events is not rerun and stays flagged.
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
from simpact.guard.particles import ColliderTrack, Domain, describe_particle_event, screen_trace
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
    "particle_colliders",
    "particle_domains",
    "screen_deformables",
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
    particles_screened: bool = False
    """The rollout had deformables and their particles were screened."""

    @property
    def artifact_free(self) -> bool:
        return not self.events or bool(self.repair and self.repair["artifact_free"])

    def notes(self) -> dict[str, Any]:
        """What a proposal's notes keep: ``audit`` (events), ``audit_repair``, ``flags`` (for the VLM)."""
        out: dict[str, Any] = {"audit": self.events, "audit_recorded": self.recorded}
        if self.particles_screened:
            out["audit_particles"] = True
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


def particle_colliders(world: World, trace: Any) -> ColliderTrack:
    """The boxes deformables collide with (every collidable geom not on the world body: robot links, rigid
    objects; each as its bounding box in its own frame) posed at the end of every control period of
    ``trace``, as the composite World steps its deformables."""
    mj = mujoco_access(world)
    model = mj.model
    geoms = np.array(
        [
            g
            for g in range(model.ngeom)
            if (model.geom_contype[g] or model.geom_conaffinity[g]) and model.geom_bodyid[g] != 0
        ],
        dtype=int,
    )
    rows = np.arange(mj.substeps - 1, len(trace.time), mj.substeps)
    rows = np.unique(np.r_[0, rows])
    data = mujoco.MjData(model)
    offset, half = model.geom_aabb[geoms, :3], model.geom_aabb[geoms, 3:]
    centre = np.zeros((len(rows), len(geoms), 3))
    rotation = np.zeros((len(rows), len(geoms), 3, 3))
    for i, row in enumerate(rows):
        data.qpos[:] = trace.qpos[row]
        mujoco.mj_kinematics(model, data)
        rot = data.geom_xmat[geoms].reshape(-1, 3, 3)
        rotation[i] = rot
        centre[i] = data.geom_xpos[geoms] + np.einsum("kij,kj->ki", rot, offset)
    names = tuple(str(model.body(model.geom_bodyid[g]).name) for g in geoms)
    return ColliderTrack(trace.time[rows], centre, rotation, half.copy(), names)


def particle_domains(world: World) -> dict[str, Domain]:
    """Each deformable's domain: an MPM object's grid where its particles' interpolation stencil lies on
    the grid (half a cell in from the first node, 1.5 cells in from the last), the table for all."""
    out: dict[str, Domain] = {}
    for solver in getattr(world, "deformables", ()):
        engines = getattr(solver, "engines", None)
        grid = getattr(engines[0], "grid", None) if engines else None
        if grid is None:
            out[solver.name] = Domain()
            continue
        origin, dx = np.asarray(grid.origin, dtype=float), float(grid.dx)
        top = origin + (np.asarray(grid.shape, dtype=float) - 1.5) * dx
        out[solver.name] = Domain(origin + 0.5 * dx, top)
    return out


def screen_deformables(world: World, rollout: Rollout) -> list[dict[str, Any]]:
    """Particle artifacts (event dicts, ``kind: particles``) of ``rollout``'s deformables; empty for a
    rollout without particle records."""
    trace = rollout.trace
    if trace is None or not trace.particles or trace.particle_time is None:
        return []
    colliders = particle_colliders(world, trace)
    return [e.to_dict() for e in screen_trace(trace, colliders, particle_domains(world))]


def audit_rollout(
    world: World, rollout: Rollout, tail_s: float, snapshot: Snapshot | None = None
) -> list[dict[str, Any]]:
    """Flagged SimuGuard events (dicts) of ``rollout`` from ``snapshot`` (default: the world's initial one)
    with ``tail_s`` s of hold, as the rollout was: screened, and recorded and detected unless the screen
    is clean; then its particle artifacts, if it has deformables."""
    snapshot = world.initial_snapshot if snapshot is None else snapshot
    particles = screen_deformables(world, rollout)
    if not screen_rollout(world, rollout, snapshot).suspicious:
        return particles
    ctrl = mujoco_access(world).controls(rollout.plan, snapshot, tail_s)[1]
    recording = record_rollout(world, rollout, ctrl, snapshot)
    return [event.to_dict() for event in detect(recording) if event.flagged] + particles


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
    deformable = bool(rollout.trace is not None and rollout.trace.particles)
    particles = screen_deformables(world, rollout)
    if not screened.suspicious:
        return Audit(screened, False, particles, rollout, evaluation, particles_screened=deformable)
    mj = mujoco_access(world)
    _, ctrl, action_end, _ = mj.controls(rollout.plan, snapshot, task.tail_s)
    recording = record_rollout(world, rollout, ctrl, snapshot)
    flagged = [e for e in detect(recording) if e.flagged]
    events = [e.to_dict() for e in flagged] + particles
    result = Audit(screened, True, events, rollout, evaluation, recording=recording)
    result.particles_screened = deformable
    if not flagged or repair is None or particles:  # the repair cannot act on particles
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
        describe_particle_event(e)
        if e.get("kind") == "particles"
        else f"{e['body']} was ejected at {e['peak_speed']:.1f} m/s at t = {e['onset_s']:.2f} s by a contact "
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
    repair setting and repaired (artifact-free rerun), how many had their particles screened and how many
    of those were flagged for particle artifacts, and the events."""
    audited = [p for p in proposals if "audit" in p.notes]
    flagged = [p for p in audited if p.notes["audit"]]
    rerun = [p for p in flagged if "audit_repair" in p.notes]
    particles = [p for p in audited if p.notes.get("audit_particles")]
    return {
        "audited": len(audited),
        "particles_screened": len(particles),
        "particles_flagged": sum(
            any(e.get("kind") == "particles" for e in p.notes["audit"]) for p in particles
        ),
        "recorded": sum(bool(p.notes.get("audit_recorded")) for p in audited),
        "flagged": len(flagged),
        "rerun": len(rerun),
        "repaired": sum(bool(p.notes["audit_repair"]["artifact_free"]) for p in rerun),
        "events": [{"proposal": p.source, **e} for p in flagged for e in p.notes["audit"]],
        "repairs": [{"proposal": p.source, **p.notes["audit_repair"]} for p in rerun],
    }
