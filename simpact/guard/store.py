"""A recorded episode in memory (:class:`Recording`) and on disk (a folder of compressed npz chunks plus
``manifest.json``).

Layout of a recording folder::

    manifest.json        bodies and roles, masses, timestep, thresholds, model hash, seed, step count, status
    chunk_00000.npz      steps [0, chunk_steps)
    chunk_00001.npz      ...
    resume.npz           while recording or after an interruption: the state to continue from (see below)

Each chunk holds the per-step arrays of its rows, the contacts of its rows (CSR: ``contact_start``), and the
sparse logs (actuation changes, state written between steps, full-state snapshots) whose steps fall in it.
Chunks are plain ``.npz`` files (``numpy.load`` reads them) written with fast deflate.

Every file is written atomically (temporary file, then rename). While a recorder writes to a folder, each
complete chunk is followed by ``resume.npz`` (the full integration state after its last step and the
recorder's carried rows) and by ``manifest.json`` listing the chunks so far with ``status: recording``; an
interruption leaves ``status: interrupted`` and a finished recording ``status: done`` (``resume.npz``
removed). A partial recording is a valid recording of its complete chunks.
"""

from __future__ import annotations

import json
import os
import threading
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.jsonio import atomic_write_text

__all__ = [
    "CHECKPOINT",
    "MANIFEST",
    "STATUSES",
    "Manifest",
    "RecordingError",
    "Recording",
    "SparseLog",
    "load_recording",
    "read_checkpoint",
    "read_chunk",
    "read_manifest",
    "save_recording",
    "write_chunk",
    "write_manifest",
]

MANIFEST = "manifest.json"
CHECKPOINT = "resume.npz"
FORMAT_VERSION = 1
STATUSES = ("recording", "interrupted", "done")
"""A recording folder's ``status``: being written, stopped early (resumable), complete."""


class RecordingError(SimpactError, ValueError):
    """A recording folder that cannot be read (missing, truncated or corrupt files): one line, exit 2."""


SparseLog = tuple[np.ndarray, np.ndarray]
"""(steps (j,), values (j, size)): a value recorded at the start of each listed step."""


@dataclass
class Manifest:
    """What a recording is of: bodies, units and settings needed to interpret and replay its arrays."""

    bodies: list[str]
    """Body names by body id (``world`` for body 0)."""
    roles: list[str]
    """Per body: ``robot`` (a robot link), ``object`` (simulated) or ``static`` (welded to the world or
    kinematic/mocap)."""
    masses: list[float]
    """Per body, kg."""
    timestep: float
    """Physics step, s."""
    gravity: list[float] = field(default_factory=lambda: [0.0, 0.0, -9.81])
    """m/s^2."""
    nsteps: int = 0
    thresholds: dict[str, Any] = field(default_factory=dict)
    """Detector thresholds (:class:`simpact.guard.detector.Thresholds` as a dict)."""
    model_hash: str = ""
    """sha256 of the compiled model (MJB bytes)."""
    seed: int | None = None
    chunk_steps: int = 250
    snapshot_every: int = 250
    state_spec: int = 0
    """``mjtState`` bits of the snapshots (``mjSTATE_INTEGRATION``)."""
    state_layout: dict[str, list[int]] = field(default_factory=dict)
    """Component name -> [offset, size] inside a snapshot row."""
    actuation_fields: list[str] = field(default_factory=list)
    write_fields: list[str] = field(default_factory=list)
    errors: int = 0
    """Exceptions caught inside the monitor."""
    chunks: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form context (task, plan, scene file, ...)."""
    version: int = FORMAT_VERSION
    status: str = "done"
    """One of :data:`STATUSES`; recordings made before it existed are complete."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Manifest:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    def body_id(self, name: str) -> int:
        return self.bodies.index(name)


@dataclass
class Recording:
    """One episode's recorded arrays. Row ``k`` is the state at the start of physics step ``k`` (as that
    step's ``mj_step`` computed it) and the contacts acting during step ``k``; ``nb`` counts all bodies.

    Only ``manifest`` and the per-step body and contact arrays are needed by the detector; the sparse logs
    serve exact replay.
    """

    manifest: Manifest
    time: np.ndarray
    """(n,) time at the start of each step, s."""
    xpos: np.ndarray
    """(n, nb, 3) body frame positions in the world, m."""
    xquat: np.ndarray
    """(n, nb, 4) body orientations (w, x, y, z)."""
    vel: np.ndarray
    """(n, nb, 3) linear velocity of each body's centre of mass in the world frame, m/s."""
    contact_start: np.ndarray
    """(n + 1,) contacts of step k are rows contact_start[k]:contact_start[k + 1]."""
    contact_bodies: np.ndarray
    """(c, 2) body ids of each pair in contact, smaller id first."""
    contact_impulse: np.ndarray
    """(c,) total normal impulse of the pair over the step, N s."""
    contact_depth: np.ndarray
    """(c,) deepest penetration of the pair (-dist, 0 if separated), m."""
    contact_count: np.ndarray | None = None
    """(c,) number of solver contacts merged into each pair."""
    valid: np.ndarray | None = None
    """(n,) False where the monitor failed while recording the row."""
    actuation: dict[str, SparseLog] = field(default_factory=dict)
    """Per field (ctrl, qfrc_applied, ...): the values at each step where they changed (all at step 0)."""
    writes: dict[str, SparseLog] = field(default_factory=dict)
    """Per state component (qpos, qvel, act, warmstart, ...): values written between steps, at the step
    they were found before."""
    snapshot_step: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    snapshots: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    """(s, nstate) full ``mjSTATE_INTEGRATION`` state at the start of each snapshot step."""

    @property
    def nsteps(self) -> int:
        return len(self.time)

    def contacts(self, step: int) -> slice:
        """The contact rows of one step."""
        return slice(int(self.contact_start[step]), int(self.contact_start[step + 1]))

    def speed(self, body: str | int) -> np.ndarray:
        """(n,) speed of one body's centre of mass, m/s."""
        b = body if isinstance(body, int) else self.manifest.body_id(body)
        return np.linalg.norm(self.vel[:, b], axis=-1)

    # --- chunks --------------------------------------------------------------------------------------
    def chunk(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """The arrays of steps [start, stop) as stored in one chunk file."""
        c0, c1 = int(self.contact_start[start]), int(self.contact_start[stop])
        out: dict[str, np.ndarray] = {
            "first_step": np.array(start, dtype=np.int64),
            "time": self.time[start:stop],
            "xpos": self.xpos[start:stop],
            "xquat": self.xquat[start:stop],
            "vel": self.vel[start:stop],
            "contact_start": self.contact_start[start : stop + 1] - c0,
            "contact_bodies": self.contact_bodies[c0:c1],
            "contact_impulse": self.contact_impulse[c0:c1],
            "contact_depth": self.contact_depth[c0:c1],
        }
        if self.contact_count is not None:
            out["contact_count"] = self.contact_count[c0:c1]
        if self.valid is not None:
            out["valid"] = self.valid[start:stop]
        for prefix, logs in (("act", self.actuation), ("write", self.writes)):
            for name, (steps, values) in logs.items():
                keep = (steps >= start) & (steps < stop)
                out[f"{prefix}.{name}.step"] = steps[keep]
                out[f"{prefix}.{name}"] = values[keep]
        keep = (self.snapshot_step >= start) & (self.snapshot_step < stop)
        out["snapshot_step"] = self.snapshot_step[keep]
        out["snapshot"] = self.snapshots[keep]
        return out

    @classmethod
    def from_chunks(cls, manifest: Manifest, chunks: Sequence[Mapping[str, np.ndarray]]) -> Recording:
        """Concatenate chunks (in step order) into one recording."""
        if not chunks:
            nb = len(manifest.bodies)
            return cls(
                manifest,
                np.zeros(0),
                np.zeros((0, nb, 3)),
                np.zeros((0, nb, 4)),
                np.zeros((0, nb, 3)),
                np.zeros(1, dtype=np.int64),
                np.zeros((0, 2), dtype=np.int32),
                np.zeros(0),
                np.zeros(0),
            )

        def cat(key: str) -> np.ndarray:
            return np.concatenate([c[key] for c in chunks])

        starts, offset = [np.zeros(1, dtype=np.int64)], 0
        for c in chunks:
            starts.append(c["contact_start"][1:].astype(np.int64) + offset)
            offset += int(c["contact_start"][-1])
        logs: dict[str, dict[str, SparseLog]] = {"act": {}, "write": {}}
        for key in chunks[0]:
            prefix, _, rest = key.partition(".")
            if prefix in logs and not rest.endswith(".step"):
                logs[prefix][rest] = (cat(f"{key}.step").astype(np.int64), cat(key))
        return cls(
            manifest=manifest,
            time=cat("time"),
            xpos=cat("xpos"),
            xquat=cat("xquat"),
            vel=cat("vel"),
            contact_start=np.concatenate(starts),
            contact_bodies=cat("contact_bodies"),
            contact_impulse=cat("contact_impulse"),
            contact_depth=cat("contact_depth"),
            contact_count=cat("contact_count") if "contact_count" in chunks[0] else None,
            valid=cat("valid").astype(bool) if "valid" in chunks[0] else None,
            actuation=logs["act"],
            writes=logs["write"],
            snapshot_step=cat("snapshot_step").astype(np.int64),
            snapshots=cat("snapshot"),
        )


def write_chunk(path: str | Path, arrays: Mapping[str, np.ndarray], level: int = 1) -> int:
    """Write ``arrays`` as a deflate-compressed ``.npz`` (``level`` 1: fast); returns its size, bytes."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
            for name, array in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.stat().st_size


def read_chunk(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of one ``.npz`` chunk; a missing, truncated or corrupt file is a :class:`RecordingError`."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise RecordingError(f"{path}: truncated or corrupt ({reason})") from None


def write_manifest(directory: str | Path, manifest: Manifest | Mapping[str, Any]) -> Path:
    """Write ``manifest`` (or its dict) as ``directory/manifest.json``, atomically."""
    raw = manifest.to_dict() if isinstance(manifest, Manifest) else manifest
    return atomic_write_text(Path(directory) / MANIFEST, json.dumps(raw, indent=1))


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest of recording folder ``directory``; a :class:`RecordingError` when absent or unreadable."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise RecordingError(f"{directory}: no such recording folder")
    if not path.is_file():
        raise RecordingError(f"{directory} is not a SimuGuard recording (no {MANIFEST})")
    try:
        raw = json.loads(path.read_text())
        manifest = Manifest.from_dict(raw)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise RecordingError(f"{path}: unreadable manifest ({exc})") from None
    if manifest.status not in STATUSES:
        raise RecordingError(f"{path}: unknown status {manifest.status!r}")
    return manifest


def read_checkpoint(directory: str | Path) -> dict[str, np.ndarray]:
    """The resume state an unfinished recording left in ``directory`` (:data:`CHECKPOINT`)."""
    path = Path(directory) / CHECKPOINT
    if not path.is_file():
        raise RecordingError(f"{directory}: no {CHECKPOINT} to continue from (no chunk was complete)")
    return read_chunk(path)


def save_recording(recording: Recording, directory: str | Path) -> Path:
    """Write ``recording`` as a recording folder (chunks of ``manifest.chunk_steps`` rows)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    manifest = recording.manifest
    size = max(1, manifest.chunk_steps)
    names = []
    for i, start in enumerate(range(0, recording.nsteps, size)):
        name = f"chunk_{i:05d}.npz"
        write_chunk(directory / name, recording.chunk(start, min(recording.nsteps, start + size)))
        names.append(name)
    manifest.chunks = names
    manifest.nsteps = recording.nsteps
    write_manifest(directory, manifest)
    return directory


def load_recording(directory: str | Path) -> Recording:
    """Read a recording folder back into memory."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    chunks = [read_chunk(directory / name) for name in manifest.chunks]
    try:
        recording = Recording.from_chunks(manifest, chunks)
    except (KeyError, ValueError, IndexError) as exc:
        raise RecordingError(f"{directory}: inconsistent chunks ({type(exc).__name__}: {exc})") from None
    if recording.nsteps != manifest.nsteps:
        raise RecordingError(
            f"{directory}: the chunks hold {recording.nsteps} steps, the manifest says {manifest.nsteps}"
        )
    return recording
