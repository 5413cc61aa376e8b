"""The SimuGuard recorder: wraps ``mj_step`` and records every physics step without changing it.

This is MuJoCo's recorder (a recorder per engine, MuJoCo today): it reads ``mjModel`` / ``mjData``, and a
World's through its one MuJoCo accessor (:func:`solvers.mujoco.world.mujoco_access`). What it writes (a
:class:`~simpact.guard.store.Recording` of per-step arrays) is engine-free, and so is the detector.

Before each step it takes the full integration state (``mjSTATE_INTEGRATION``: one C call); after each step
it copies the body poses, the com-based spatial velocities and the contacts (geoms, distance, solver rows and
forces). Everything else is done once per chunk (default 250 steps), vectorised over the chunk:

- actuation (ctrl, qfrc_applied, xfrc_applied, eq_active, mocap poses) kept only where it changed;
- state written between steps (time, qpos, qvel, act, warm start, ...): a step's starting state compared
  bit for bit with what the previous step left;
- the linear velocity of every body's centre of mass in the world frame, from ``cvel``;
- contacts merged per body pair: total normal impulse (normal force x timestep) and deepest penetration;
- a full-state snapshot every ``snapshot_every`` steps.

The recorder only reads ``mjData``: monitoring on or off gives bit-identical trajectories. Any exception in
the monitor (including user hooks) is caught, counted and logged; the physics step always happens.

Nothing recorded is lost: recording to a folder, each complete chunk is followed by a checkpoint
(``resume.npz``: the full integration state after the chunk's last step, the recorder's carried rows) and the
manifest (``status: recording``); :meth:`Recorder.abort` after Ctrl-C marks it ``interrupted`` and
:meth:`Recorder.restore` continues it bit for bit like an uninterrupted recording.

Size: about 680 lines, kept whole because the per-step capture and the per-chunk vectorised reduction share
the recorder's buffers (split them and each half would reach into the other's state).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simpact.guard.detector import Thresholds
from simpact.guard.store import (
    CHECKPOINT,
    Manifest,
    Recording,
    RecordingError,
    read_checkpoint,
    read_chunk,
    read_manifest,
    write_chunk,
    write_manifest,
)
from solvers.mujoco.robot import ROBOT_PREFIX
from solvers.mujoco.world import mujoco_access
from solvers.world import World

__all__ = [
    "ACTUATION_FIELDS",
    "Hook",
    "Recorder",
    "body_roles",
    "com_velocity",
    "model_hash",
    "state_layout",
]

logger = logging.getLogger(__name__)

_S = mujoco.mjtState
_INTEGRATION = int(_S.mjSTATE_INTEGRATION)
_BIT_NAMES = {
    int(v): k.removeprefix("mjSTATE_").lower()
    for k, v in _S.__members__.items()
    if int(v) > 0 and int(v) & (int(v) - 1) == 0 and k != "mjNSTATE"
}
ACTUATION_FIELDS = ("ctrl", "qfrc_applied", "xfrc_applied", "eq_active", "mocap_pos", "mocap_quat")
"""Inputs set before a step (recorded when they change)."""
_ACTUATION_BITS = sum(b for b, n in _BIT_NAMES.items() if n in ACTUATION_FIELDS)
_POST_SPEC = _INTEGRATION & ~_ACTUATION_BITS
"""What a step leaves that code between steps may overwrite (time, qpos, qvel, act, warm start, ...)."""
_MAX_LOGGED = 10

Hook = Callable[["Recorder"], None]
"""Called after each recorded step (``recorder.nsteps`` already counts it); must not write the state."""
Extras = Callable[[], Mapping[str, np.ndarray]]
"""Arrays a caller needs to continue an interrupted recording (kept in each checkpoint as ``extra.NAME``)."""


def state_layout(model: mujoco.MjModel, spec: int = _INTEGRATION) -> dict[str, tuple[int, int]]:
    """Component name -> (offset, size) inside a state vector of ``spec`` (``mj_getState`` order)."""
    out, offset = {}, 0
    for bit in sorted(_BIT_NAMES):
        if spec & bit:
            size = mujoco.mj_stateSize(model, bit)
            out[_BIT_NAMES[bit]] = (offset, size)
            offset += size
    return out


def model_hash(model: mujoco.MjModel) -> str:
    """sha256 of the compiled model's MJB bytes (identical for identical models)."""
    buf = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return hashlib.sha256(buf.data).hexdigest()


def body_roles(
    model: mujoco.MjModel,
    robot_bodies: Iterable[int] | None = None,
    robot_prefix: str | Sequence[str] | None = None,
) -> list[str]:
    """Per body: ``robot`` (in ``robot_bodies``, else named with ``robot_prefix``), ``static`` (welded to
    the world, or kinematic: mocap) or ``object``."""
    if robot_prefix is None:
        robot_prefix = ROBOT_PREFIX
    prefix = (robot_prefix,) if isinstance(robot_prefix, str) else tuple(robot_prefix)
    robots = set(robot_bodies) if robot_bodies is not None else None
    roles = []
    for b in range(model.nbody):
        name = model.body(b).name
        if b > 0 and (b in robots if robots is not None else bool(prefix) and name.startswith(prefix)):
            roles.append("robot")
        elif model.body_weldid[b] == 0 or model.body_mocapid[b] >= 0:
            roles.append("static")
        else:
            roles.append("object")
    return roles


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of (..., 3) arrays (cheaper than ``np.cross`` on small batches)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def _rotate(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``quat`` (..., 4; w, x, y, z)."""
    w, q = quat[..., :1], quat[..., 1:]
    t = 2.0 * _cross(q, v)
    return v + w * t + _cross(q, t)


def com_velocity(model: mujoco.MjModel, xpos: np.ndarray, xquat: np.ndarray, cvel: np.ndarray) -> np.ndarray:
    """Linear velocity of every body's centre of mass in the world frame, m/s, from ``cvel``.

    ``cvel`` (n, nb, 6) is the com-based spatial velocity (angular, linear) of each body at the subtree centre
    of mass of its root body; this moves it to the body's own centre of mass ``xipos`` (what
    ``mj_objectVelocity(..., mjOBJ_BODY, ...)`` returns in its linear part), for all steps at once.
    """
    xipos = xpos + _rotate(xquat, model.body_ipos)
    root = model.body_rootid
    mass = model.body_mass
    weight = np.zeros((model.nbody, model.nbody))
    weight[root, np.arange(model.nbody)] = mass
    total = weight.sum(axis=1)
    com = np.matmul(weight, xipos) / np.where(total > 1e-15, total, 1.0)[:, None]
    light = total <= 1e-15
    com[:, light] = xipos[:, light]
    offset = xipos - com[:, root]
    return cvel[..., 3:] + _cross(cvel[..., :3], offset)


_CONTACT_FIELDS = {
    "dist": (np.float64, 1),
    "geom": (np.int32, 2),
    "efc_address": (np.int32, 1),
    "dim": (np.int32, 1),
}
"""The ``mjContact`` members the recorder keeps (dtype and count, for chunks without contacts)."""


class _ContactBuffer:
    """Raw contacts of the rows of one chunk, copied from mjData after each step.

    MuJoCo keeps the contacts as an array of ``mjContact`` structs at the start of mjData's arena
    (``d->contact == d->arena`` always), so one copy of ``ncon`` struct rows per step takes them all; the
    members are read out of the bytes once per chunk. Member offsets and the struct size come from the
    bindings' own views of the first contact seen."""

    def __init__(self, capacity: int = 2048) -> None:
        self.rows: list[tuple[int, int, int]] = []
        """(row, number of contacts, offset of the row's solver forces in ``efc``) per row with contacts."""
        self.raw = np.zeros((0, 0), dtype=np.uint8)
        self.efc = np.zeros(4 * capacity)
        self.ncon = 0
        self.nefc = 0
        self._capacity = capacity
        self._src: np.ndarray | None = None
        """The arena's contact structs as bytes, (rows, span): a view into mjData's memory."""
        self._data: mujoco.MjData | None = None  # keeps the viewed memory alive
        self._fields: dict[str, tuple[int, np.dtype[Any], int]] = {}
        """Member -> (byte offset in a row of ``raw``, dtype, count)."""

    def clear(self) -> None:
        self.rows = []
        self.ncon = self.nefc = 0

    def _bind(self, d: mujoco.MjData) -> None:
        c = d.contact
        views = {name: getattr(c, name) for name in _CONTACT_FIELDS}
        stride = int(views["dist"].strides[0])
        start = {name: int(v.__array_interface__["data"][0]) for name, v in views.items()}
        base = min(start.values())
        end = max(start[n] + v.itemsize * int(np.prod(v.shape[1:])) for n, v in views.items())
        self._fields = {n: (start[n] - base, v.dtype, int(np.prod(v.shape[1:]))) for n, v in views.items()}
        span = end - base
        rows = int(d.narena) // stride - 1  # the contacts that fit in the arena, from the first
        flat = np.ctypeslib.as_array((ctypes.c_uint8 * ((rows - 1) * stride + span)).from_address(base))
        self._src = np.lib.stride_tricks.as_strided(flat, shape=(rows, span), strides=(stride, 1))
        self._data = d
        self.raw = np.zeros((self._capacity, span), dtype=np.uint8)

    def add(self, row: int, d: mujoco.MjData) -> None:
        if self._data is not d:
            self._bind(d)
        p, q = self.ncon, self.nefc
        k, e = d.ncon, d.nefc
        pk, qe = p + k, q + e
        if pk > len(self.raw) or qe > len(self.efc):
            self._grow(pk, qe)
        assert self._src is not None
        self.raw[p:pk] = self._src[:k]
        self.efc[q:qe] = d.efc_force
        self.rows.append((row, k, q))
        self.ncon, self.nefc = pk, qe

    def field(self, name: str) -> np.ndarray:
        """One member of the buffered contacts, (ncon,) or (ncon, count)."""
        k = self.ncon
        if not k:
            empty, width = _CONTACT_FIELDS[name]
            return np.zeros((0, width) if width > 1 else 0, dtype=empty)
        offset, dtype, count = self._fields[name]
        out = np.ascontiguousarray(self.raw[:k, offset : offset + dtype.itemsize * count]).view(dtype)
        return out if count > 1 else out[:, 0]

    def counts(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Contacts per row and each row's offset in ``efc``, for the first ``n`` rows."""
        count, start = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        if self.rows:
            rows, k, q = np.array(self.rows, dtype=np.int64).T
            count[rows], start[rows] = k, q
        return count, start

    def _grow(self, ncon: int, nefc: int) -> None:
        def bigger(a: np.ndarray, need: int) -> np.ndarray:
            if need <= len(a):
                return a
            out = np.zeros((max(need, 2 * len(a)), *a.shape[1:]), dtype=a.dtype)
            out[: len(a)] = a
            return out

        self.raw, self.efc = bigger(self.raw, ncon), bigger(self.efc, nefc)


class Recorder:
    """Records a MuJoCo ``(model, data)`` pair step by step; see the module docstring.

    Step with :meth:`step` (one step, optional control row) or :meth:`run` (a control array, one
    ``mj_step`` per row: bit-identical to ``mujoco.rollout`` and to a plain loop). Code between
    :meth:`step` calls may set controls, forces and even the state; those writes are recorded.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        *,
        robot_bodies: Iterable[int] | None = None,
        robot_prefix: str | Sequence[str] | None = None,
        out: str | Path | None = None,
        seed: int | None = None,
        thresholds: Thresholds | None = None,
        chunk_steps: int = 250,
        snapshot_every: int = 250,
        hooks: Sequence[Hook] = (),
        model_hash: str | None = None,
        meta: Mapping[str, Any] | None = None,
        background_write: bool = True,
        checkpoint_extras: Extras | None = None,
    ) -> None:
        if chunk_steps < 1 or snapshot_every < 1:
            raise ValueError("chunk_steps and snapshot_every must be >= 1")
        self.model, self.data = model, data
        self.out = Path(out) if out is not None else None
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        self.hooks = list(hooks)
        self.errors = 0
        """Exceptions caught inside the monitor."""
        self.nsteps = 0
        """Physics steps taken through this recorder."""
        self._hash = model_hash
        nb = model.nbody
        self.layout = state_layout(model)
        self._post_layout = state_layout(model, _POST_SPEC)
        self.manifest = Manifest(
            bodies=[model.body(b).name or ("world" if b == 0 else f"body{b}") for b in range(nb)],
            roles=body_roles(model, robot_bodies, robot_prefix),
            masses=[float(x) for x in model.body_mass],
            timestep=float(model.opt.timestep),
            gravity=[float(x) for x in model.opt.gravity],
            thresholds=(thresholds or Thresholds()).to_dict(),
            seed=seed,
            chunk_steps=chunk_steps,
            snapshot_every=snapshot_every,
            state_spec=_INTEGRATION,
            state_layout={k: list(v) for k, v in self.layout.items()},
            actuation_fields=[f for f in ACTUATION_FIELDS if f in self.layout],
            write_fields=list(self._post_layout),
            meta=dict(meta or {}),
            status="recording",
        )
        self._act_fields = [(f, *self.layout[f]) for f in self.manifest.actuation_fields if self.layout[f][1]]
        self._act_offsets = np.array([o for _, o, _ in self._act_fields], dtype=np.intp)
        post = [(f, *self.layout[f]) for f in self._post_layout if self.layout[f][1]]
        self._write_fields = post
        self._post_cols = np.concatenate([np.arange(o, o + s) for _, o, s in post])
        self._write_offsets = np.cumsum([0] + [s for _, _, s in post[:-1]]).astype(np.intp)
        self._elliptic = model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
        n = chunk_steps
        self._pre = np.zeros((n, mujoco.mj_stateSize(model, _INTEGRATION)))
        self._post = np.zeros((n, mujoco.mj_stateSize(model, _POST_SPEC)))
        self._check = [False] * n
        self._valid = [False] * n
        self._took_pre = False
        self._size = n
        self._kin = np.zeros((n, nb, 13))
        """Per row and body: xpos (3), xquat (4), cvel (6)."""
        self._pre_rows, self._post_rows, self._kin_rows = list(self._pre), list(self._post), list(self._kin)
        self._kin_src = (data.xpos, data.xquat, data.cvel)  # views into mjData's fixed buffer
        self._contacts = _ContactBuffer()
        self._row = 0
        self._have_post = False
        self._carry_pre: np.ndarray | None = None
        self._carry_post: np.ndarray | None = None
        self._chunks: list[dict[str, np.ndarray]] = []
        self._nchunks = 0
        self._extras = checkpoint_extras
        self._saved: dict[str, Any] | None = None
        """The manifest of the last checkpoint whose chunk, checkpoint and manifest are all on disk."""
        self.resumed_extras: dict[str, np.ndarray] = {}
        """The ``checkpoint_extras`` of the checkpoint :meth:`restore` continued from."""
        self.background_write = background_write
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future[int]] = []
        self._write_failed = False
        self.bytes_written = 0
        """Compressed bytes written to ``out`` (complete after :meth:`close`)."""

    @classmethod
    def for_world(
        cls,
        world: World,
        data: mujoco.MjData | None = None,
        model: mujoco.MjModel | None = None,
        **kwargs: Any,
    ) -> Recorder:
        """A recorder on a MuJoCo World (its own data unless ``data``; its own model unless ``model``, e.g.
        a changed copy), with the world's robot links; a SceneError for a world of another engine."""
        mj = mujoco_access(world)
        meta = {"objects": dict(mj.objects), **(kwargs.pop("meta", None) or {})}
        return cls(
            mj.model if model is None else model,
            mj.data if data is None else data,
            robot_bodies=mj.robot_bodies,
            meta=meta,
            **kwargs,
        )

    # --- stepping ----------------------------------------------------------------------------------------
    def step(self, ctrl: np.ndarray | Sequence[float] | None = None) -> None:
        """One recorded ``mj_step``, after setting ``data.ctrl`` to ``ctrl`` when given."""
        if ctrl is not None:
            self.data.ctrl[:] = ctrl
        self._before(True)
        mujoco.mj_step(self.model, self.data)
        self._after(True)

    def run(self, ctrl: np.ndarray) -> None:
        """One recorded ``mj_step`` per row of ``ctrl`` (N, nu). Nothing but the controls changes between
        these steps, so only the first is checked for state written before it."""
        ctrl = np.asarray(ctrl, dtype=float)
        if ctrl.ndim != 2 or ctrl.shape[1] != self.model.nu:
            raise ValueError(f"ctrl must have shape (N, {self.model.nu}), got {ctrl.shape}")
        m, d = self.model, self.data
        last = len(ctrl) - 1
        for k, u in enumerate(ctrl):
            d.ctrl[:] = u
            self._before(k == 0)
            mujoco.mj_step(m, d)
            self._after(k == last)

    def _before(self, check: bool) -> None:
        i = self._row
        self._check[i] = check and self._have_post
        try:
            mujoco.mj_getState(self.model, self.data, self._pre_rows[i], _INTEGRATION)
            self._took_pre = True
        except Exception as exc:  # the monitor must never stop the simulation
            self._took_pre = False
            self._pre_rows[i][:] = np.nan  # marks the row's inputs as unknown
            self._fail(exc, "before the step")

    def _after(self, post: bool) -> None:
        i, d = self._row, self.data
        valid = False
        self._have_post = False
        try:
            np.concatenate(self._kin_src, axis=1, out=self._kin_rows[i])
            if d.ncon:
                self._contacts.add(i, d)
            if post:
                mujoco.mj_getState(self.model, d, self._post_rows[i], _POST_SPEC)
                self._have_post = True
            valid = self._took_pre
        except Exception as exc:
            self._fail(exc, "after the step")
        self._valid[i] = valid
        self.nsteps += 1
        self._row += 1
        for hook in self.hooks:
            try:
                hook(self)
            except Exception as exc:
                self._fail(exc, f"in hook {getattr(hook, '__name__', hook)!r}")
        if self._row == self._size:
            self._flush()

    def _fail(self, exc: BaseException, where: str) -> None:
        self.errors += 1
        if self.errors <= _MAX_LOGGED:
            logger.warning(
                "SimuGuard monitor error %s at step %d (the simulation continues): %r",
                where,
                self.nsteps,
                exc,
                exc_info=exc,
            )
            if self.errors == _MAX_LOGGED:
                logger.warning("SimuGuard: further monitor errors are counted, not logged")

    # --- chunks ------------------------------------------------------------------------------------------
    def _flush(self) -> None:
        try:
            n = self._row
            if n == 0:
                return
            chunk = self._process(n)
            name = f"chunk_{self._nchunks:05d}.npz"
            self._nchunks += 1
            self._chunks.append(chunk)
            self._carry_pre = self._pre[n - 1].copy()
            self._carry_post = self._post[n - 1].copy() if self._have_post else None
            if self.out is not None:
                self.manifest.chunks.append(name)
                self._write(name, chunk)
        except Exception as exc:
            self._fail(exc, "while storing a chunk")
        finally:
            self._row = 0
            self._contacts.clear()

    def _checkpoint(self) -> dict[str, np.ndarray]:
        """What continuing after the last buffered step needs: the full integration state now, the rows the
        next chunk compares with, the error count and the caller's extras."""
        state = np.empty(self._pre.shape[1])
        mujoco.mj_getState(self.model, self.data, state, _INTEGRATION)
        assert self._carry_pre is not None
        ck = {
            "next_step": np.array(self.nsteps, dtype=np.int64),
            "state": state,
            "carry_pre": self._carry_pre,
            "carry_post": np.zeros(0) if self._carry_post is None else self._carry_post,
            "have_post": np.array(self._have_post),
            "errors": np.array(self.errors, dtype=np.int64),
        }
        if self._extras is not None:
            ck.update({f"extra.{k}": np.asarray(v) for k, v in self._extras().items()})
        return ck

    def _write(self, name: str, chunk: dict[str, np.ndarray]) -> None:
        """Compress and write a chunk, then its checkpoint and the manifest listing it, in a background thread
        unless ``background_write`` is off (zlib releases the GIL, so compression overlaps the stepping)."""
        assert self.out is not None
        self._finish_manifest()
        manifest = self.manifest.to_dict()
        job = functools.partial(_store, self.out, name, chunk, self._checkpoint(), manifest)
        if not self.background_write:
            self.bytes_written += job()
            self._saved = manifest
            return
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="simuguard-writer")
        self._pending.append(self._writer.submit(self._stored, job, manifest))

    def _stored(self, job: Callable[[], int], manifest: dict[str, Any]) -> int:
        """Run one write (in the writer thread, in submission order); the manifest it wrote becomes the saved
        one here, not when the main thread collects it: an interruption between submitting a write and
        noting it had left the checkpoint on disk a chunk ahead of the saved manifest."""
        if self._write_failed:  # a later manifest would list the chunk that failed
            raise RecordingError("an earlier chunk could not be written")
        try:
            size = job()
        except Exception:
            self._write_failed = True
            raise
        self._saved = manifest
        return size

    def _wait_writes(self) -> None:
        """Wait for the writes under way (each sets the saved manifest as it completes, :meth:`_stored`)."""
        while self._pending:
            try:
                self.bytes_written += self._pending[0].result()
            except Exception as exc:
                self._fail(exc, "while writing a chunk")
            self._pending.pop(0)
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None

    def _process(self, n: int) -> dict[str, np.ndarray]:
        """The chunk of the first ``n`` buffered rows, as stored (see :meth:`Recording.chunk`)."""
        m = self.model
        first = self.nsteps - n
        pre = self._pre[:n]
        bits = pre.view(np.uint64)
        kin = self._kin[:n]
        xpos, xquat = kin[..., :3].copy(), kin[..., 3:7].copy()
        out: dict[str, np.ndarray] = {
            "first_step": np.array(first, dtype=np.int64),
            "time": pre[:, self.layout["time"][0]].copy(),
            "xpos": xpos,
            "xquat": xquat,
            "vel": com_velocity(m, xpos, xquat, kin[..., 7:]),
            "valid": np.array(self._valid[:n], dtype=bool),
        }
        out.update(self._merge_contacts(n))
        steps = first + np.arange(n)
        # Actuation: rows that differ from the previous step's (all of step 0).
        prev = np.empty_like(bits)
        prev[1:] = bits[:-1]
        if self._carry_pre is not None:
            prev[0] = self._carry_pre.view(np.uint64)
        changed = np.logical_or.reduceat(bits != prev, self._act_offsets, axis=1)
        if self._carry_pre is None:
            changed[0] = True
        for j, (name, o, s) in enumerate(self._act_fields):
            rows = changed[:, j]
            out[f"act.{name}.step"] = steps[rows]
            out[f"act.{name}"] = pre[rows, o : o + s]
        # State written between steps: a step's start differs from what the previous step left.
        left = np.zeros((n, self._post.shape[1]), dtype=np.uint64)
        left[1:] = self._post[: n - 1].view(np.uint64)
        if self._carry_post is not None:
            left[0] = self._carry_post.view(np.uint64)
        written = np.logical_or.reduceat(bits[:, self._post_cols] != left, self._write_offsets, axis=1)
        written &= np.array(self._check[:n], dtype=bool)[:, None]
        for j, (name, o, s) in enumerate(self._write_fields):
            rows = written[:, j]
            out[f"write.{name}.step"] = steps[rows]
            out[f"write.{name}"] = pre[rows, o : o + s]
        snap = steps % self.manifest.snapshot_every == 0
        out["snapshot_step"] = steps[snap]
        out["snapshot"] = pre[snap].copy()
        return out

    def _merge_contacts(self, n: int) -> dict[str, np.ndarray]:
        """Contacts of the buffered rows merged per (step, body pair), vectorised."""
        nb = self.model.nbody
        buf = self._contacts
        count, efc_start = buf.counts(n)
        step = np.repeat(np.arange(n), count)
        geom_a, dist_a = buf.field("geom"), buf.field("dist")
        adr_a = buf.field("efc_address").astype(np.int64)
        efc_a = buf.efc[: buf.nefc]
        active = adr_a >= 0
        index = np.repeat(efc_start, count) + adr_a
        if self._elliptic:
            normal = np.where(active, efc_a[np.where(active, index, 0)], 0.0)
        else:
            # Pyramidal cones: the normal force is the sum of the 2 (dim - 1) edge forces (1 row if dim 1).
            dim_a = buf.field("dim")
            nrows = np.where(active, np.where(dim_a > 1, 2 * (dim_a - 1), 1), 0)
            normal = np.zeros(len(adr_a))
            for j in range(int(nrows.max(initial=0))):
                use = nrows > j
                normal[use] += efc_a[index[use] + j]
        step, geom_a, dist_a, normal = step[active], geom_a[active], dist_a[active], normal[active]
        bodies = self.model.geom_bodyid[geom_a]
        lo, hi = bodies.min(axis=1).astype(np.int64), bodies.max(axis=1).astype(np.int64)
        key = (step * nb + lo) * nb + hi
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=int)
        ukey = key[starts]
        impulse = np.add.reduceat(normal[order], starts) * self.model.opt.timestep if len(key) else normal
        depth = np.maximum.reduceat(np.maximum(-dist_a[order], 0.0), starts) if len(key) else dist_a
        return {
            "contact_start": np.searchsorted(ukey // (nb * nb), np.arange(n + 1)).astype(np.int64),
            "contact_bodies": np.column_stack([(ukey // nb) % nb, ukey % nb]).astype(np.int32),
            "contact_impulse": impulse,
            "contact_depth": depth,
            "contact_count": np.diff(np.r_[starts, len(key)]).astype(np.int32),
        }

    # --- results -----------------------------------------------------------------------------------------
    def recording(self) -> Recording:
        """Everything recorded so far (the partial chunk included), in memory."""
        chunks = list(self._chunks)
        if self._row:
            try:
                chunks.append(self._process(self._row))
            except Exception as exc:
                self._fail(exc, "while assembling the recording")
        self._finish_manifest()
        return Recording.from_chunks(self.manifest, chunks)

    def close(self) -> Recording:
        """Store the partial chunk and the manifest (``status: done``, when recording to ``out``); return the
        recording."""
        self._flush()
        self._wait_writes()
        self._finish_manifest()
        self.manifest.status = "done"
        if self.out is not None:
            write_manifest(self.out, self.manifest)
            (self.out / CHECKPOINT).unlink(missing_ok=True)
        return Recording.from_chunks(self.manifest, self._chunks)

    def abort(self) -> Manifest:
        """After an interruption (Ctrl-C, SIGTERM): finish the writes under way and mark the recording in
        ``out`` ``interrupted``, with its complete chunks and the checkpoint to continue from; the steps of
        the unfinished chunk are dropped (a resumed recording takes them again). Returns that manifest."""
        self._wait_writes()
        if self._saved is None:
            self._finish_manifest()
            self._saved = {**self.manifest.to_dict(), "nsteps": 0, "chunks": []}
        saved = {**self._saved, "status": "interrupted"}
        if self.out is not None:
            write_manifest(self.out, saved)
        return Manifest.from_dict(saved)

    def restore(self) -> int:
        """Continue the unfinished recording in ``out`` (made by a recorder like this one, on the same
        model): load its complete chunks, set ``data`` to the state after the last of them and the recorder
        to what it carried then. Returns the next physics step (0 when no chunk was complete)."""
        assert self.out is not None, "restore needs the recording folder (out)"
        saved = read_manifest(self.out)
        if saved.status == "done":
            raise RecordingError(f"{self.out}: the recording is complete; nothing to resume")
        self._finish_manifest()
        if saved.model_hash and saved.model_hash != self._hash:
            raise RecordingError(f"{self.out}: recorded from another model (hash differs); cannot resume")
        if saved.meta.get("source") != self.manifest.meta.get("source") or saved.chunk_steps != self._size:
            raise RecordingError(f"{self.out}: recorded from another source or chunk size; cannot resume")
        if not saved.chunks:
            return 0
        ck = read_checkpoint(self.out)
        chunks = [read_chunk(self.out / name) for name in saved.chunks]
        nsteps = int(ck["next_step"])
        if nsteps != saved.nsteps or sum(len(c["time"]) for c in chunks) != nsteps:
            raise RecordingError(f"{self.out}: the checkpoint and the chunks disagree; cannot resume")
        mujoco.mj_setState(self.model, self.data, np.ascontiguousarray(ck["state"]), _INTEGRATION)
        self._chunks, self._nchunks, self.nsteps = chunks, len(chunks), nsteps
        self.manifest.chunks = list(saved.chunks)
        self.errors = int(ck["errors"])
        self._carry_pre = ck["carry_pre"]
        self._carry_post = ck["carry_post"] if ck["carry_post"].size else None
        self._have_post = bool(ck["have_post"])
        self._saved = {**saved.to_dict(), "status": "recording"}
        self.resumed_extras = {k.removeprefix("extra."): v for k, v in ck.items() if k.startswith("extra.")}
        return nsteps

    def _finish_manifest(self) -> None:
        if self._hash is None:
            self._hash = model_hash(self.model)
        self.manifest.model_hash = self._hash
        self.manifest.nsteps = self.nsteps
        self.manifest.errors = self.errors

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.abort()
        else:
            self.close()


def _store(
    out: Path,
    name: str,
    chunk: dict[str, np.ndarray],
    checkpoint: dict[str, np.ndarray],
    manifest: dict[str, Any],
) -> int:
    """Write a chunk, then the checkpoint after it, then the manifest listing it (each atomically): a folder
    always holds a valid recording of its listed chunks. Returns the chunk's size, bytes."""
    size = write_chunk(out / name, chunk)
    write_chunk(out / CHECKPOINT, checkpoint)
    write_manifest(out, manifest)
    return size
