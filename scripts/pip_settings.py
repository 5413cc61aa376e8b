"""pip's settings, for uv: where packages come from, as pip on this machine would take them.

uv reads neither pip's config files nor its ``PIP_*`` variables, so ``scripts/setup.sh`` asks pip
(``pip config list``, read on stdin) and passes these on to ``uv pip install``, one argument per line:
``index-url``, ``extra-index-url``, ``find-links`` and ``constraint`` (each of several values separated
by spaces) and ``no-index``; ``cert`` as a line ``SSL_CERT_FILE=PATH``. Of an option set in several places
the environment wins, then the ``[install]`` section, then ``[global]``, as in pip. With more than one
place to look, uv is told to take the best version across all of them, as pip does (by default uv takes
the first index that has the package at all: a mirror holding an old release would win).

Usage: ``python -m pip config list | python scripts/pip_settings.py``
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable

#: pip options that take values, and uv's flag for each value.
VALUE_FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
#: Where pip reads an option, most weighty first.
SCOPES = (":env:", "install", "global")
TRUE = {"1", "true", "yes", "on"}


def effective(lines: Iterable[str]) -> dict[str, str]:
    """Option name -> value from ``pip config list`` lines (``global.find-links='/opt/wheels'``)."""
    found: dict[str, dict[str, str]] = {}
    for line in lines:
        key, sep, raw = line.strip().partition("=")
        scope, dot, name = key.rpartition(".")
        if not (sep and dot) or scope not in SCOPES:
            continue
        value = ast.literal_eval(raw) if raw[:1] in ("'", '"') else raw
        found.setdefault(name, {})[scope] = str(value)
    return {name: next(by[s] for s in SCOPES if s in by) for name, by in found.items()}


def uv_arguments(settings: dict[str, str]) -> list[str]:
    """The ``uv pip install`` arguments (and ``SSL_CERT_FILE=...``) that carry ``settings`` over."""
    args: list[str] = []
    for name, flag in VALUE_FLAGS.items():
        for value in settings.get(name, "").split():
            args += [flag, value]
    if settings.get("no-index", "").lower() in TRUE:
        args.append("--no-index")
    places = sum(len(settings.get(n, "").split()) for n in ("extra-index-url", "find-links"))
    if places:
        args += ["--index-strategy", "unsafe-best-match"]
    if settings.get("cert"):
        args.append(f"SSL_CERT_FILE={settings['cert']}")
    return args


if __name__ == "__main__":
    sys.stdout.write("".join(f"{arg}\n" for arg in uv_arguments(effective(sys.stdin))))
