"""Output folders that lose nothing: checked before any work, and a ``result.json`` that exists from the
start and always says where the run stands (``status``: ``running``, ``interrupted``, ``done``, ``failed``).

A command calls :func:`prepare_out` before its first rollout or request, then records its run with
:class:`RunRecord` (every write atomic): ``with RunRecord.start(out, "plan", settings) as run: ...``; the
context turns Ctrl-C (and SIGTERM, which the command line maps to it) into ``status: interrupted`` and an
error into ``status: failed`` before passing them on.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simpact.core.errors import SimpactError, UsageError
from simpact.core.jsonio import write_json
from simpact.core.machine import machine

__all__ = ["RESULT", "STATUSES", "RunRecord", "prepare_out"]

RESULT = "result.json"
STATUSES = ("running", "interrupted", "done", "failed")


def _is_empty(folder: Path) -> bool:
    return not any(folder.iterdir())


def prepare_out(
    path: str | os.PathLike[str], *, overwrite: bool = False, resume: bool = False, flag: str = "--out"
) -> Path:
    """Check the output folder ``path`` before any work and return it, created and writable.

    A folder holding an earlier run is refused unless ``resume`` (kept as it is, to continue) or
    ``overwrite`` (cleared first); a file, or a folder that cannot be written, is refused. ``flag`` names the
    setting in the one-line :class:`UsageError`.
    """
    if overwrite and resume:
        raise UsageError("--overwrite and --resume contradict each other: choose one")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag} {out}: is a file, not a folder")
    if out.is_dir() and not _is_empty(out):
        if overwrite:
            for child in out.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        elif not resume:
            raise UsageError(
                f"{flag} {out}: holds an earlier run; pass --resume to continue it or --overwrite to "
                "replace it"
            )
    elif resume:
        raise UsageError(f"--resume: {out} holds no earlier run to continue")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{flag} {out}: cannot write there ({exc.strerror or exc})") from None
    return out


class RunRecord:
    """``DIR/result.json`` of one run, rewritten atomically at each :meth:`update`; always valid JSON with a
    ``status``, the ``command``, its ``settings``, the ``machine`` it runs on
    (:func:`simpact.core.machine.machine`), ``started`` (Unix time, s) and ``wall_s`` so far."""

    def __init__(self, out: Path, command: str, settings: Mapping[str, Any]) -> None:
        self.out = out
        self.path = out / RESULT
        self._t0 = time.perf_counter()
        self.payload: dict[str, Any] = {
            "status": "running",
            "command": command,
            "settings": dict(settings),
            "machine": machine(),
            "started": round(time.time(), 3),
            "wall_s": 0.0,
        }

    @classmethod
    @contextmanager
    def start(cls, out: Path, command: str, settings: Mapping[str, Any]) -> Iterator[RunRecord]:
        """Write ``status: running`` now; on leaving, ``interrupted`` after Ctrl-C or SIGTERM, ``failed``
        (with the ``error``) after an exception, unless the body already called :meth:`finish`."""
        run = cls(out, command, settings)
        run.update()
        try:
            yield run
        except KeyboardInterrupt:
            run.finish("interrupted")
            raise
        except SimpactError as exc:
            run.finish("failed", error=str(exc))
            raise
        except Exception as exc:
            run.finish("failed", error=f"{type(exc).__name__}: {exc}")
            raise
        else:
            if run.payload["status"] == "running":
                run.finish("done")

    def update(self, **fields: Any) -> Path:
        """Merge ``fields`` into the record and rewrite it."""
        self.payload.update(fields)
        self.payload["wall_s"] = round(time.perf_counter() - self._t0, 3)
        return write_json(self.path, self.payload)

    def finish(self, status: str, **fields: Any) -> Path:
        """Set the final ``status`` (one of :data:`STATUSES`) with the last ``fields``."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        return self.update(status=status, **fields)
