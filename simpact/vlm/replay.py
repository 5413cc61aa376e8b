"""Record a session's VLM answers and replay them exactly.

:class:`RecordingVLM` wraps any back-end and writes one JSON line per request to a file (flushed at once, so
a killed run keeps what it had). It refuses a file that already holds a recording unless told to append
(a session appended to an earlier one no longer replays exactly), and a line it cannot write stops the
session (:class:`RecordingError`) rather than leave a recording with a hole.

:class:`ReplayVLM` reads that file and answers each request with what was recorded for it, keyed by a stable
hash of the request: its text parts, a digest of each image, the schema, the temperature and the caller's
``role``. Identical requests are answered in the order they were recorded; a recorded failure is raised
again. Images may be ignored in the key (``match_images=False``) when renders differ by a bit between
machines.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simpact.core.errors import EXIT_SERVICE_FAILED, ServiceError
from simpact.vlm import (
    VLM,
    ImagePart,
    Part,
    ReplayMissError,
    VLMAnswer,
    VLMError,
    VLMRequestError,
    VLMServiceError,
    VLMSettingError,
    normalize_parts,
)

__all__ = [
    "RecordingError",
    "RecordingVLM",
    "ReplayVLM",
    "check_record_path",
    "request_key",
    "request_record",
    "request_summary",
]

log = logging.getLogger(__name__)

_FORMAT = 1


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(
    parts: Sequence[str | ImagePart],
    schema: Mapping[str, Any] | None,
    *,
    temperature: float | None,
    role: str | None,
    match_images: bool = True,
) -> str:
    """SHA-256 (hex) of the request's canonical JSON form; images count by digest, or only by position when
    ``match_images`` is False."""
    items = [
        {"text": p} if isinstance(p, str) else {"image": p.digest if match_images else "*"} for p in parts
    ]
    body = {"v": _FORMAT, "parts": items, "schema": schema, "temperature": temperature, "role": role}
    return hashlib.sha256(_canonical(body).encode()).hexdigest()


def request_summary(
    parts: Sequence[str | ImagePart],
    schema: Mapping[str, Any] | None,
    *,
    temperature: float | None,
    role: str | None,
) -> dict[str, Any]:
    """A readable record of a request: full texts, image digests and shapes, the schema."""
    return {
        "role": role,
        "temperature": temperature,
        "schema": schema,
        "parts": [
            {"text": p}
            if isinstance(p, str)
            else {"image": p.digest, "mime_type": p.mime_type, "shape": list(p.shape) if p.shape else None}
            for p in parts
        ],
    }


def request_record(
    parts: Sequence[str | ImagePart],
    schema: Mapping[str, Any] | None,
    *,
    temperature: float | None,
    role: str | None,
) -> dict[str, Any]:
    """The start of a recorded exchange: the request's ``key``, its image-blind ``key_text`` and its
    readable ``request`` summary."""
    return {
        "key": request_key(parts, schema, temperature=temperature, role=role),
        "key_text": request_key(parts, schema, temperature=temperature, role=role, match_images=False),
        "request": request_summary(parts, schema, temperature=temperature, role=role),
    }


def _describe(
    parts: Sequence[str | ImagePart], role: str | None, schema: Any, temperature: float | None
) -> str:
    texts = [p for p in parts if isinstance(p, str)]
    images = [p.digest[:12] for p in parts if isinstance(p, ImagePart)]
    first = texts[0] if texts else ""
    first = first if len(first) <= 80 else first[:77] + "..."
    return (
        f"role={role!r}, {len(texts)} text part(s) (first: {first!r}), {len(images)} image(s) {images}, "
        f"schema={'yes' if schema is not None else 'no'}, temperature={temperature}"
    )


class RecordingError(VLMError, ServiceError):
    """A request's record could not be written: the session stops (exit status 4) so that the recording
    stays a faithful replay of it."""

    exit_code = EXIT_SERVICE_FAILED


def check_record_path(path: str | Path, *, append: bool = False) -> None:
    """Raise :class:`VLMSettingError` (one line) unless ``path`` can take a recording: not a folder, not an
    earlier recording (an existing non-empty file) unless ``append``, and writable. Creates nothing."""
    p = Path(path)
    if p.is_dir():
        raise VLMSettingError(f"--record {p}: is a folder; give a file name (e.g. {p / 'vlm.jsonl'})")
    if p.exists():
        if p.stat().st_size > 0 and not append:
            raise VLMSettingError(
                f"--record {p}: the file exists; pass --append to add to it, or choose a new file "
                "(a session added to an earlier recording no longer replays exactly)"
            )
        if not os.access(p, os.W_OK):
            raise VLMSettingError(f"--record {p}: the file is not writable")
        return
    folder = next((q for q in p.absolute().parents if q.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise VLMSettingError(
            f"--record {p}: cannot create the file there ({folder} is not a writable folder)"
        )


class RecordingVLM(VLM):
    """Pass requests to ``inner`` and write each request with its answer (or error) to ``path`` (JSONL).

    ``path`` must be new (or empty) unless ``append``; appending first drops a torn last line that a killed
    writer may have left, so every line of the file stays a whole record.
    """

    def __init__(self, inner: VLM, path: str | Path, *, append: bool = False):
        check_record_path(path, append=append)
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # records under the wrapped back-end's name
        self.model = inner.model
        self.path = Path(path)
        self.append = append
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch()
            if append:
                _drop_torn_line(self.path)
        except OSError as exc:
            raise VLMSettingError(f"--record {self.path}: cannot write it ({exc.strerror or exc})") from None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "recording": str(self.path)}

    def generate(
        self,
        parts: Sequence[Part] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        items = normalize_parts(parts)
        record = request_record(items, schema, temperature=temperature, role=role)
        try:
            answer = self.inner.generate(items, schema, temperature=temperature, role=role)
        except VLMError as exc:
            record["error"] = {
                "type": type(exc).__name__,
                "message": str(exc),
                "status": getattr(exc, "status", None),
            }
            self._write(record)
            raise
        record["answer"] = answer.to_dict()
        self._write(record)
        return answer

    def _write(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                with self.path.open("ab") as f:
                    f.write(line)
                    f.flush()
            except OSError as exc:
                raise RecordingError(
                    f"--record {self.path}: cannot write the answer to {record['request'].get('role')!r} "
                    f"({exc.strerror or exc}); stopping so the recording stays replayable"
                ) from None


def _drop_torn_line(path: Path) -> None:
    """Cut a last line without its newline (a writer killed mid-line) off ``path``."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning("--record %s: dropping a torn last line (%d bytes) before appending", path, len(data) - keep)
    with path.open("r+b") as f:
        f.truncate(keep)


class ReplayVLM(VLM):
    """Answer from a file written by :class:`RecordingVLM`; an unrecorded request raises
    :class:`~simpact.vlm.ReplayMissError` describing it."""

    name = "replay"

    def __init__(self, path: str | Path, *, match_images: bool = True):
        self.path = Path(path)
        self.match_images = match_images
        if not self.path.is_file():
            raise VLMError(
                f"replay: no recording at {self.path} (write one with RecordingVLM, or pass path=...)"
            )
        self._records: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._served: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        field = "key" if match_images else "key_text"
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise VLMSettingError(f"replay: cannot read {self.path} ({exc})") from None
        lines = text.splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                self._records[record[field]].append(record)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                if n == len(lines) and not text.endswith("\n"):  # a writer killed mid-line: that one is lost
                    log.warning("replay: %s ends in a torn line (%d); ignoring it", self.path, n)
                    break
                raise VLMError(f"replay: {self.path} line {n} is not a recorded request ({exc})") from None
        models = [r["answer"].get("model") for rs in self._records.values() for r in rs if "answer" in r]
        self.model = next((m for m in models if m), "replay")

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "path": str(self.path)}

    def __len__(self) -> int:
        return sum(len(v) for v in self._records.values())

    def generate(
        self,
        parts: Sequence[Part] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        items = normalize_parts(parts)
        key = request_key(items, schema, temperature=temperature, role=role, match_images=self.match_images)
        with self._lock:
            recorded = self._records.get(key, [])
            n = self._served[key]
            if n >= len(recorded):
                what = _describe(items, role, schema, temperature)
                if recorded:
                    why = f"it was recorded {len(recorded)} time(s) and this is request {n + 1} like it"
                else:
                    roles = sorted(
                        {str(r["request"].get("role")) for rs in self._records.values() for r in rs}
                    )
                    why = f"{len(self)} requests are recorded, with roles {roles[:10]}"
                raise ReplayMissError(
                    f"replay: no recorded answer in {self.path} for {what} (key {key[:16]}); {why}"
                )
            self._served[key] = n + 1
        record = recorded[n]
        if "error" in record:
            err = record["error"]
            message = f"replayed {err.get('type', 'error')}: {err.get('message', '')}"
            if err.get("type") == "VLMServiceError":
                raise VLMServiceError(message, status=err.get("status"))
            if err.get("type") == "VLMRequestError":
                raise VLMRequestError(message, status=err.get("status"))
            raise VLMError(message)
        return VLMAnswer.from_dict(record["answer"])
