"""A VLM for tests that answers each request with the next scripted text."""

from __future__ import annotations

import json
from typing import Any

from simpact.vlm import VLM, VLMAnswer


class ScriptedVLM(VLM):
    """Answers each request with the next scripted text (dicts as JSON); records the roles and parts sent."""

    name = "scripted"

    def __init__(self, *answers: Any) -> None:
        self.answers = [a if isinstance(a, str) else json.dumps(a) for a in answers]
        self.requests: list[tuple[str | None, list[Any]]] = []

    def generate(
        self, parts: Any, schema: Any = None, *, temperature: Any = None, role: Any = None
    ) -> VLMAnswer:
        self.requests.append((role, list(parts)))
        return VLMAnswer.from_text(self.answers.pop(0), backend=self.name)
