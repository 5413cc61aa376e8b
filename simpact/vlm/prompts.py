"""Prompt templates: one Markdown file per role in ``prompts/`` (installed as ``simpact.prompts``).

Templates use ``string.Template`` placeholders (``$task``, ``$context``...). ``$actions`` and
``$plan_schema`` fill themselves from ``simpact.core.actions.ACTION_SPECS``; every other placeholder must be
given, and a value no placeholder uses is an error too (it is usually a typo).
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from simpact.core.errors import SimpactError
from simpact.vlm.answers import describe_actions, plan_schema

__all__ = ["ROLES", "PromptError", "PromptTemplate", "load_prompt", "render_prompt"]

ROLES = ("sample", "optimize", "evaluate", "object_labels", "assign_labels", "physics", "repair")
"""Template names: the file is ``prompts/<role>.md``."""

_DEFAULTS: dict[str, Callable[[], str]] = {
    "actions": describe_actions,
    "plan_schema": lambda: json.dumps(plan_schema()),
}


class PromptError(SimpactError, ValueError):
    """A prompt template is missing, malformed, or was filled with missing or unknown values."""


@dataclass(frozen=True)
class PromptTemplate:
    """One role's template text and the placeholders it uses."""

    role: str
    text: str

    @property
    def placeholders(self) -> frozenset[str]:
        names = set()
        for m in string.Template.pattern.finditer(self.text):
            if m.group("invalid") is not None:
                line = self.text.count("\n", 0, m.start()) + 1
                raise PromptError(
                    f"prompt {self.role}.md line {line}: a lone '$' (write '$$' for a dollar sign)"
                )
            name = m.group("named") or m.group("braced")
            if name:
                names.add(name)
        return frozenset(names)

    def fill(self, **values: Any) -> str:
        """Substitute every placeholder; lists and dicts become indented JSON, other values ``str()``."""
        needed = self.placeholders
        values = {**{k: f() for k, f in _DEFAULTS.items() if k in needed and k not in values}, **values}
        missing = sorted(needed - values.keys())
        unknown = sorted(values.keys() - needed)
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"no value for {', '.join('$' + n for n in missing)}")
            if unknown:
                parts.append(f"no placeholder for {', '.join(unknown)}")
            raise PromptError(
                f"prompt {self.role}.md: {'; '.join(parts)} (it uses {', '.join(sorted(needed)) or 'none'})"
            )
        return string.Template(self.text).substitute({k: _as_text(v) for k, v in values.items()})


def _as_text(value: Any) -> str:
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return str(value)


@functools.cache
def load_prompt(role: str) -> PromptTemplate:
    """Read ``prompts/<role>.md`` from the installed package."""
    if role not in ROLES:
        raise PromptError(f"unknown prompt role {role!r}; choose one of {', '.join(ROLES)}")
    try:
        text = resources.files("simpact.prompts").joinpath(f"{role}.md").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise PromptError(
            f"prompt template {role}.md is not installed with simpact.prompts ({exc})"
        ) from None
    template = PromptTemplate(role, text)
    template.placeholders  # noqa: B018  # malformed templates fail on load, not mid-run
    return template


def render_prompt(role: str, /, **values: Any) -> str:
    """Load a role's template and fill it."""
    return load_prompt(role).fill(**values)
