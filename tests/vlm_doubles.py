"""The one scripted VLM for tests: answers come from a script, every request is kept.

An answer (an *entry*) is a text, a dict or list (sent as its JSON), an exception (raised, e.g.
``VLMRequestError``), or a callable ``(parts, role) -> entry`` that reads the request. Entries are taken, in
this order, from ``roles`` (a role exactly, or a prefix ending in ``*``; a list there gives one entry per
call, the last repeated), then from the positional answers in order, then ``default``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from simpact.vlm import VLM, VLMAnswer

__all__ = ["Request", "ScriptedVLM"]

_NONE = object()


class Request(NamedTuple):
    """One request as the double received it."""

    role: str | None
    parts: list[Any]


class ScriptedVLM(VLM):
    """Answers from a script and records every request in :attr:`calls`, in order (thread-safe).

    Each answer carries accounting that changes per call (``latency_s`` 0.25 s x the call's number, 10 input
    tokens, the call's number as output tokens), so records of it can be told apart.
    """

    name = "scripted"
    model = "scripted-1"

    def __init__(
        self, *answers: Any, roles: Mapping[str, Any] | None = None, default: Any = _NONE, name: str = ""
    ) -> None:
        self.queue = list(answers)
        self.script = dict(roles or {})
        self.default = default
        if name:
            self.name = name  # type: ignore[misc]
        self.calls: list[Request] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def requests(self) -> list[Request]:
        return self.calls

    @property
    def roles(self) -> list[str | None]:
        """The role of every request so far, in order."""
        return [r.role for r in self.calls]

    def _entry(self, role: str, n: int) -> Any:
        key = role if role in self.script else None
        if key is None:
            key = next((k for k in self.script if k.endswith("*") and role.startswith(k[:-1])), None)
        if key is not None:
            entry = self.script[key]
            if isinstance(entry, list):
                entry = entry[min(n - 1, len(entry) - 1)]
            return entry
        if self.queue:
            return self.queue.pop(0)
        if self.default is not _NONE:
            return self.default
        raise AssertionError(f"ScriptedVLM: nothing scripted for request {len(self.calls)} (role {role!r})")

    def generate(
        self,
        parts: Sequence[Any] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        items = [parts] if isinstance(parts, str) else list(parts)
        with self._lock:
            self.calls.append(Request(role, items))
            number = len(self.calls)
            n = self._counts[role or ""] = self._counts.get(role or "", 0) + 1
            entry = self._entry(role or "", n)
        if callable(entry):
            entry = entry(parts, role)
        if isinstance(entry, BaseException):
            raise entry
        text = entry if isinstance(entry, str) else json.dumps(entry)
        return VLMAnswer.from_text(
            text,
            model=self.model,
            backend=self.name,
            latency_s=0.25 * number,
            input_tokens=10,
            output_tokens=number,
        )
