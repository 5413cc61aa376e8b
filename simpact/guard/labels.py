"""Run a suite episode (:mod:`simpact.guard.suite`) and label it without the detector.

:func:`simulate` builds the episode's task world, applies its changes, and steps it under the SimuGuard
:class:`~simpact.guard.recorder.Recorder` with an :class:`~simpact.guard.energy.EnergyAudit` alongside,
keeping the state before each step for the screen. :func:`label` decides from energies, never from the
detector's speeds:

- ``clean``: the unexplained energy never rises by :data:`LABEL_SPEED` (as ``v^2 / 2`` per kg of the body
  that gains it, and at least :data:`LABEL_FLOOR_J`);
- ``artifact``: it does, and a rerun with the suspected cause removed (no initial overlap, equal masses,
  or a 10x smaller step) does not;
- ``ambiguous``: it does, and so does the rerun: the criteria disagree, the episode is reported, not scored;
- ``external``: the ``kick`` family (an external impulse, not a contact artifact), reported apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from simpact.core.actions import Plan
from simpact.guard.detector import Event, detect
from simpact.guard.energy import EnergyAudit, EnergyGain
from simpact.guard.recorder import Recorder, body_roles
from simpact.guard.screen import ScreenResult, screen
from simpact.guard.store import Recording
from simpact.guard.suite import EXTERNAL, FIX_SUBSTEPS, SuiteEpisode, fixed_episode
from solvers.mujoco.world import mujoco_access
from solvers.world import make_world

__all__ = ["LABEL_FLOOR_J", "LABEL_SPEED", "Run", "label", "simulate"]

LABEL_SPEED = 1.0
"""An unexplained energy rise counts when it would give the body gaining it this speed alone, m/s
(0.5 J/kg: enough to lift it 5 cm; a slow pop-up of a few centimetres out of an overlap stays below)."""
LABEL_FLOOR_J = 5e-4
"""...and is at least this much energy, J."""


@dataclass
class Run:
    """One simulated episode."""

    episode: SuiteEpisode
    energy: EnergyAudit
    gain: EnergyGain
    recording: Recording | None = None
    events: list[Event] = field(default_factory=list)
    screen: ScreenResult | None = None
    substeps: int = 1

    @property
    def energetic(self) -> bool:
        """The unexplained energy rose by the labelling threshold."""
        return self.gain.gain >= LABEL_FLOOR_J and self.gain.speed >= LABEL_SPEED


def _prepare(ep: SuiteEpisode, substeps: int) -> tuple[mujoco.MjModel, mujoco.MjData, np.ndarray, Any]:
    world = make_world(ep.scene)
    mj = mujoco_access(world)
    model = mj.model
    for name, tc in ep.solref.items():
        body = mj.objects[name]
        model.geom_solref[model.geom_bodyid == body] = (tc, 1.0)
    data = mj.new_data(mj.initial_snapshot)
    if ep.created:
        for name, adr in mj.object_qpos.items():
            data.qpos[adr : adr + 7] = model.qpos0[adr : adr + 7]
            dof = mj.object_dof[name]
            data.qvel[dof : dof + 6] = 0.0
    for name, v in ep.qvel.items():
        dof = mj.object_dof[name]
        data.qvel[dof : dof + len(v)] = v
    if ep.actions:
        plan = Plan.from_actions(list(ep.actions))
        ctrl = mj.controls(plan, mj.initial_snapshot, ep.seconds)[1]
    else:
        ctrl = np.tile(data.ctrl, (round(ep.seconds / model.opt.timestep), 1))
    if substeps > 1:
        model.opt.timestep = model.opt.timestep / substeps
        ctrl = np.repeat(ctrl, substeps, axis=0)
    return model, data, ctrl, mj


def simulate(ep: SuiteEpisode, substeps: int = 1, record: bool = True) -> Run:
    """Step ``ep`` (its step divided by ``substeps``); with ``record``, under the recorder (and the detector
    and the screen run on it), else with the energy audit only."""
    model, data, ctrl, mj = _prepare(ep, substeps)
    roles = body_roles(model, mj.robot_bodies)
    energy = EnergyAudit(model, roles)
    kicks = {k.step * substeps: (mj.objects[k.body], k.force) for k in ep.kicks}
    recorder = None
    if record:
        recorder = Recorder(
            model, data, robot_bodies=mj.robot_bodies, model_hash=f"suite:{ep.name}", seed=ep.seed
        )
    qpos, qvel = [], []
    for k, u in enumerate(ctrl):
        data.ctrl[:] = u
        if kicks:
            data.xfrc_applied[:] = 0.0
            if k in kicks:
                data.xfrc_applied[kicks[k][0], :3] = kicks[k][1]
        if recorder is not None:
            qpos.append(data.qpos.copy())
            qvel.append(data.qvel.copy())
            recorder.step()
        else:
            mujoco.mj_step(model, data)
        energy.after_step(data)
    run = Run(ep, energy, energy.gain(), substeps=substeps)
    if recorder is not None:
        run.recording = recorder.close()
        run.events = detect(run.recording)
        robots = [b for b, role in enumerate(roles) if role == "robot"]
        run.screen = screen(model, np.array(qpos), np.array(qvel), robot_bodies=robots)
    return run


def label(run: Run) -> dict[str, Any]:
    """The label of a recorded run and what it rests on (see the module docstring); runs the rerun when the
    energy rose."""
    ep = run.episode
    out: dict[str, Any] = {"energy": run.gain.to_dict()}
    if ep.family in EXTERNAL:
        out["label"] = "external"
        return out
    if not run.energetic:
        out["label"] = "clean"
        return out
    fixed = fixed_episode(ep)
    substeps = FIX_SUBSTEPS if ep.substep_fix else 1
    again = simulate(fixed, substeps=substeps, record=False)
    out["rerun"] = {
        "change": f"step / {substeps}" if ep.substep_fix else "cause removed (fixed draw)",
        "energy": again.gain.to_dict(),
    }
    out["label"] = "ambiguous" if again.energetic else "artifact"
    return out
