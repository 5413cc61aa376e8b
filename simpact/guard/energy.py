"""An energy audit of a MuJoCo episode: the labelling criterion of SimuGuard's suite, independent of the
detector (:mod:`simpact.guard.detector` compares speeds and timings; this compares energies and work).

The non-robot bodies that move (role ``object``) form one passive subsystem. Its mechanical energy
``E = sum_b (1/2 m_b |v_b|^2 + 1/2 w_b^T I_b w_b + m_b g z_b)`` can grow only by the work robot links do on it
through contacts: contacts among objects and with static bodies dissipate (MuJoCo's contacts are damped), and
gravity is inside ``E``. The robot's work in step ``k`` is ``sum_c F_c . v_R(p_c) dt`` over the contacts ``c``
between a robot link ``R`` and an object, ``F_c`` the contact force on the object and ``v_R(p_c)`` the robot
link's velocity at the contact point (what the robot delivers, not what the object receives: a link at rest
delivers nothing however hard an overlap pushes). A step's net work counts only when positive: energy the
robot takes up (a link braking an object, or pushed back by an overlap it was created in) is not credited to
the objects. The unexplained energy ``U_k = E_k - sum_{j<k} max(W_j, 0)`` then never rises, except by
contact handling that gives the objects energy (an overlap resolved, a thin wall crossed).

A soft contact stores energy while it is compressed and gives it back on rebound, so ``U`` dips and recovers
within an impact. The audit therefore measures each step's rise above the highest ``U`` of a past window that
ends ``lag`` before it (longer than a contact's compression and rebound), counting only what is still there
``hold`` later (a jolt the same contact takes back at once never becomes motion), and reports the largest
such rise (J), divided by the mass of the object whose energy grew most over it (J/kg, as ``v^2 / 2``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

__all__ = ["EnergyAudit", "EnergyGain"]


@dataclass(frozen=True)
class EnergyGain:
    """The largest unexplained energy rise of an episode (SI units)."""

    gain: float
    """Rise of the unexplained energy above its earlier maximum, J."""
    specific: float
    """``gain`` per kg of ``body``, J/kg (``v^2 / 2`` of the speed it would give the body alone)."""
    body: str
    """The object whose own energy grew most over the rise."""
    step: int
    """Step at which the rise peaks."""
    start: int
    """Step of the earlier maximum it rose from."""

    @property
    def speed(self) -> float:
        """``sqrt(2 specific)``: the speed the gain would give ``body`` alone, m/s."""
        return float(np.sqrt(2.0 * max(self.specific, 0.0)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "gain_J": round(self.gain, 6),
            "specific_J_per_kg": round(self.specific, 5),
            "speed_equivalent": round(self.speed, 4),
            "body": self.body,
            "step": self.step,
            "start": self.start,
        }


class EnergyAudit:
    """A :class:`~simpact.guard.recorder.Recorder` hook (or a function to call after each ``mj_step``) that
    keeps, per step, every object's mechanical energy and the robot's contact work.

    After ``mj_step`` MuJoCo's positions, velocities and contacts describe the start of the step just taken,
    so row ``k`` is the state at the start of step ``k`` and the work done during it.
    """

    def __init__(self, model: mujoco.MjModel, roles: Sequence[str]) -> None:
        self.model = model
        self.names = [model.body(b).name or f"body{b}" for b in range(model.nbody)]
        self.objects = [b for b, r in enumerate(roles) if r == "object" and model.body_mass[b] > 0]
        self.robot = np.array([r == "robot" for r in roles])
        self.g = -float(model.opt.gravity[2])
        self.energies: list[np.ndarray] = []
        self.work: list[float] = []
        self._v = np.zeros(6)
        self._f = np.zeros(6)

    def __call__(self, recorder: Any) -> None:
        self.after_step(recorder.data)

    def after_step(self, data: mujoco.MjData) -> None:
        """Record the step ``mj_step`` just took on ``data``."""
        m, v = self.model, self._v
        e = np.empty(len(self.objects))
        for i, b in enumerate(self.objects):
            mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_BODY, b, v, 1)  # com frame, local axes
            mass = m.body_mass[b]
            kinetic = 0.5 * mass * float(v[3:] @ v[3:]) + 0.5 * float(m.body_inertia[b] @ (v[:3] * v[:3]))
            e[i] = kinetic + mass * self.g * float(data.xipos[b, 2])
        self.energies.append(e)
        self.work.append(self._robot_work(data))

    def _robot_work(self, data: mujoco.MjData) -> float:
        m, work = self.model, 0.0
        if data.ncon == 0:
            return 0.0
        contacts = data.contact
        bodies1, bodies2 = m.geom_bodyid[contacts.geom1], m.geom_bodyid[contacts.geom2]
        for i in np.flatnonzero(self.robot[bodies1] != self.robot[bodies2]).tolist():
            c = contacts[i]
            b1, b2 = int(bodies1[i]), int(bodies2[i])
            mujoco.mj_contactForce(m, data, i, self._f)
            force = c.frame.reshape(3, 3).T @ self._f[:3]  # on body 2, world frame
            link = b1 if self.robot[b1] else b2
            on_object = force if self.robot[b1] else -force
            mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_BODY, link, self._v, 0)
            point = self._v[3:] + np.cross(self._v[:3], c.pos - data.xipos[link])
            work += float(on_object @ point) * m.opt.timestep
        return work

    def unexplained(self) -> np.ndarray:
        """(n,) ``U_k``: the objects' energy minus the robot's (positive) work before step ``k``, J."""
        total = np.array([e.sum() for e in self.energies])
        delivered = np.maximum(np.asarray(self.work), 0.0)
        work = np.concatenate([[0.0], np.cumsum(delivered)[:-1]]) if self.work else np.zeros(0)
        return total - work

    def gain(self, window_s: float = 0.2, lag_s: float = 0.05, hold_s: float = 0.02) -> EnergyGain:
        """The largest rise of ``U``, held for ``hold_s`` (the lowest ``U`` over ``[k, k + hold]``), above its
        maximum over ``[k - window, k - lag]`` (clipped at the start; before ``lag`` the first row is the
        reference). Energy a contact takes back within ``hold_s`` never became motion. See the module
        docstring."""
        u = self.unexplained()
        n = len(u)
        if n < 2 or not self.objects:
            return EnergyGain(0.0, 0.0, "", 0, 0)
        dt = float(self.model.opt.timestep)
        w, lag, hold = (max(1, round(s / dt)) for s in (window_s, lag_s, hold_s))
        best, at, ref = 0.0, 0, 0
        for k in range(1, n):
            lo, hi = max(0, k - w), max(1, k - lag + 1)
            j = lo + int(np.argmax(u[lo:hi]))
            rise = float(u[k : k + hold].min() - u[j])
            if rise > best:
                best, at, ref = rise, k, j
        if best <= 0.0:
            return EnergyGain(0.0, 0.0, "", 0, 0)
        e = np.array(self.energies)
        grew = int(np.argmax(e[at] - e[ref]))
        body = self.objects[grew]
        return EnergyGain(best, best / float(self.model.body_mass[body]), self.names[body], at, ref)
