"""CALVIN's long-horizon protocol (LH-MTLC) for any policy that drives the environment's action interface.

A chain starts with a reset to its ``robot_obs``/``scene_obs`` (never again between subtasks). For each of
its five subtasks the state at the subtask's start is kept; after every control step the subtask's check
compares it with the current state; the first success moves on to the next subtask; ``EP_LEN`` (360)
control steps without success end the chain. A policy is a callable ``policy(env, task, instruction)``
that steps the environment it is given; the budget and the checks live in the environment wrapper here, so
no policy can overrun or judge itself.

With ``audit=True`` (rebuild back-end) every physics step of the chain, from its reset on, is recorded and
checked by SimuGuard's detector (:mod:`simpact.calvin.audit`): each subtask record carries ``artifacts``
(the flagged events whose onset falls in its steps) and the chain record ``artifacts`` (their total),
``flagged`` and ``audit`` (steps, errors, the flagged events). :func:`success_range` then bounds the metrics
by what the artifacts could have changed. Auditing is off by default: it costs about a quarter more time per
chain (+27 % wall time on scripted chains 0-4: reading 23 moving bodies and the contacts at 240 Hz).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from simpact.calvin.audit import PhysicsAudit, artifacts, auditable, event_summary
from simpact.calvin.checks import Snapshot, check
from simpact.calvin.data import EP_LEN, Chain, instructions
from simpact.calvin.scripted import Mover, script_for
from simpact.core.errors import SimpactError

__all__ = [
    "PUBLISHED",
    "Judged",
    "Policy",
    "evaluate_chain",
    "scripted_policy",
    "success_range",
    "summarise",
]

#: Published LH-MTLC results (../shared/CALVIN.md): method → (training split, SR1..SR5 %, average length).
PUBLISHED: dict[str, tuple[str, tuple[float, ...] | None, float]] = {
    "HULC": ("ABC→D", (41.8, 16.5, 5.7, 1.9, 1.1), 0.67),
    "RoboFlamingo": ("ABC→D", (82.4, 61.9, 46.6, 33.1, 23.5), 2.47),
    "GR-1": ("ABC→D", (85.4, 71.2, 59.6, 49.7, 40.1), 3.06),
    "3D Diffuser Actor": ("ABC→D", (93.8, 80.3, 66.2, 53.3, 41.2), 3.35),
    "FLOWER (ABC→D)": ("ABC→D", (99.3, 95.9, 90.5, 84.8, 77.5), 4.54),
    "FLOWER (D→D)": ("D→D", (98.4, 94.0, 87.9, 81.7, 74.1), 4.36),
    "SIMPACT (paper, 40 chains)": ("none", None, 2.78),
}


class _Env(Protocol):
    backend: str

    def reset(self, robot_obs: Any = None, scene_obs: Any = None) -> None: ...
    def step(self, action: Any, relative: bool = False) -> None: ...
    def snapshot(self) -> Snapshot: ...


Policy = Callable[[Any, str, str], None]
"""``policy(env, task, instruction)``: act through ``env.step`` until done (the wrapper stops it)."""


class _Stop(Exception):
    """Raised inside a policy's ``env.step`` when its subtask succeeded or its budget is spent."""


class Judged:
    """The environment as a policy sees it: each ``step`` counts against the budget and is judged."""

    def __init__(self, env: _Env, task: str, budget: int, on_step: Callable[[], None] | None = None) -> None:
        self._env, self.task, self.budget, self._on_step = env, task, budget, on_step
        self.start = env.snapshot()
        self.steps = 0
        self.success = False
        self.notes: dict[str, Any] = {}
        """What the policy says about its attempt (how it saw the scene, what it planned): the subtask's
        record carries it as ``policy``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, action: Any, relative: bool = False) -> None:
        if self.success or self.steps >= self.budget:
            raise _Stop
        self._env.step(action, relative)
        self.steps += 1
        if self._on_step is not None:
            self._on_step()
        if check(self.task, self.start, self._env.snapshot()):
            self.success = True
            raise _Stop
        if self.steps >= self.budget:
            raise _Stop

    def settle(self, steps: int) -> None:
        raise SimpactError("a policy acts through step(); settle() would pass time outside the budget")


def _attempt(
    env: _Env, policy: Policy, task: str, budget: int, on_step: Callable[[], None] | None
) -> dict[str, Any]:
    judged = Judged(env, task, budget, on_step)
    t0 = time.perf_counter()
    error = None
    try:
        policy(judged, task, instructions()[task])
    except _Stop:
        pass
    except Exception as exc:  # a policy that fails is a failed subtask, said in the record
        error = f"{type(exc).__name__}: {exc}"
    record = {"task": task, "success": judged.success, "steps": judged.steps,
              "wall_s": round(time.perf_counter() - t0, 3)}  # fmt: skip
    if error is not None:
        record["policy_error"] = error
    if judged.notes:
        record["policy"] = dict(judged.notes)
    return record


def evaluate_chain(
    env: _Env,
    chain: Chain,
    policy: Policy,
    ep_len: int = EP_LEN,
    on_step: Callable[[], None] | None = None,
    audit: bool = False,
) -> dict[str, Any]:
    """Run one chain: reset once, then its subtasks until the first failure. ``completed`` is 0..5.
    ``on_step`` runs after every control step (e.g. to film it).

    ``audit``: record the chain's physics steps and run SimuGuard's detector on them (rebuild back-end; the
    records gain ``artifacts`` per subtask, ``artifacts``, ``flagged`` and ``audit`` per chain, see the
    module docstring). Artifacts in the reset's physics step count for the first subtask. Another back-end
    is run unaudited, its record saying so in ``audit``."""
    t0 = time.perf_counter()
    recorder = PhysicsAudit(env) if audit and auditable(env) else None
    starts: list[int] = []
    subtasks = []
    try:
        if recorder is not None:
            recorder.attach()
        env.reset(chain.robot_obs, chain.scene_obs)
        for task in chain.sequence:
            starts.append(recorder.nsteps if recorder is not None else 0)
            subtasks.append(_attempt(env, policy, task, ep_len, on_step))
            if not subtasks[-1]["success"]:
                break
    finally:
        if recorder is not None:
            recorder.detach()
    completed = sum(1 for s in subtasks if s["success"])
    extra: dict[str, Any] = {}
    if recorder is not None:
        extra = _audited(recorder, subtasks, starts)
    elif audit:
        extra = {"audit": {"unavailable": f"back-end {env.backend} cannot be audited (rebuild only)"}}
    wall = round(time.perf_counter() - t0, 3)
    return {"chain": chain.index, "sequence": list(chain.sequence), "completed": completed,
            "subtasks": subtasks, "backend": env.backend, "wall_s": wall, **extra}  # fmt: skip


def _audited(recorder: PhysicsAudit, subtasks: list[dict[str, Any]], starts: Sequence[int]) -> dict[str, Any]:
    """Run the detector on the chain's recording; count the flagged events per subtask (in place) and say
    what the chain record gets."""
    t0 = time.perf_counter()
    flagged = artifacts(recorder.detect())
    # Subtask i owns the physics steps from its start to the next one's (the first also owns the reset's).
    owner = [max(0, int(np.searchsorted(starts, e.onset_step, side="right")) - 1) for e in flagged]
    for i, subtask in enumerate(subtasks):
        subtask["artifacts"] = sum(1 for o in owner if o == i)
    events = [event_summary(e) | {"subtask": o} for e, o in zip(flagged, owner)]
    audit = {"physics_steps": recorder.nsteps, "dt": recorder.dt, "errors": recorder.errors,
             "events": events, "detect_s": round(time.perf_counter() - t0, 3)}  # fmt: skip
    return {"artifacts": len(flagged), "flagged": bool(flagged), "audit": audit}


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """SR1..SR5 (share of chains with at least i successes in a row) and the average length."""
    return {"chains": len(records), **_rates([int(r["completed"]) for r in records])}


def _rates(lengths: Sequence[int]) -> dict[str, Any]:
    n = len(lengths)
    sr = [sum(length >= i for length in lengths) / n if n else 0.0 for i in range(1, 6)]
    return {"sr": sr, "avg_len": sum(lengths) / n if n else 0.0}


def success_range(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """SR1..SR5 and the average length over chains as measured and as the audit's artifacts could have
    changed them, to report a result with the range its contact artifacts leave open.

    - ``measured``: the chains as run (:func:`summarise`).
    - ``lower``: every flagged chain fails at its first flagged subtask (a success the artifact may have
      helped is not counted): ``completed`` becomes the index of that subtask if it is lower.
    - ``upper``: every flagged subtask succeeds (a failure the artifact may have caused is counted as a
      success): a chain whose failing subtask is flagged completes one more subtask. The subtasks after it
      were never attempted and stay failed, so this is an upper bound for the subtasks that were run, not
      for a rerun that would have continued the chain.

    A subtask is flagged when its record has ``artifacts`` > 0; records without it (not audited) count as
    clean. Also returns ``chains`` and ``flagged_chains``; ``lower`` <= ``measured`` <= ``upper`` for every
    rate."""
    measured, lower, upper = [], [], []
    flagged_chains = 0
    for record in records:
        done = int(record["completed"])
        subtasks = list(record.get("subtasks", []))
        hit = [i for i, s in enumerate(subtasks) if int(s.get("artifacts") or 0) > 0]
        flagged_chains += bool(hit)
        measured.append(done)
        lower.append(min(done, hit[0]) if hit else done)
        failing = done if done < len(subtasks) and not subtasks[done].get("success") else None
        upper.append(done + 1 if failing is not None and failing in hit else done)
    return {"chains": len(measured), "flagged_chains": flagged_chains, "measured": _rates(measured),
            "lower": _rates(lower), "upper": _rates(upper)}  # fmt: skip


def scripted_policy(env: Any, task: str, instruction: str) -> None:
    """The privileged scripted motions of :mod:`simpact.calvin.scripted` (rebuild back-end only): a check
    of the environment and the protocol, not a policy to compare with published ones."""
    script_for(task)(Mover(env), task, True)
