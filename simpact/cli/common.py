"""What several command groups share: the VLM flags and the VLM they ask for."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from simpact.vlm import VLM
from simpact.vlm.settings import build_vlm

__all__ = ["VLM_ARGUMENTS", "add_vlm_arguments", "vlm_from_args"]

VLM_ARGUMENTS = (
    "vlm",
    "model",
    "base_url",
    "timeout_s",
    "retries",
    "replay",
    "record",
    "append",
    "k",
    "k_max",
)
"""Destinations of the flags of :func:`add_vlm_arguments`; all but ``vlm``, ``k`` and ``k_max`` are keyword
arguments of :func:`simpact.vlm.settings.build_vlm`."""


def add_vlm_arguments(
    p: argparse.ArgumentParser,
    choices: Sequence[str],
    default: str | None,
    vlm_help: str,
    *,
    loop: bool = True,
) -> None:
    """Add the VLM flags to ``p``: ``--vlm`` (``choices``, ``default``), ``--model``, ``--base-url``,
    ``--timeout``, ``--retries``, ``--replay``, ``--record``, ``--append``, and (with ``loop``) Algorithm 1's
    ``--k`` and ``--k-max``."""
    p.add_argument("--vlm", choices=choices, default=default, help=vlm_help)
    p.add_argument("--model", help="VLM model name (back-end default otherwise)")
    p.add_argument("--base-url", help="server URL for an OpenAI-compatible or Gemini endpoint")
    p.add_argument(
        "--timeout",
        dest="timeout_s",
        type=float,
        metavar="S",
        help="time limit of one VLM request, s (default 120; gemini and openai)",
    )
    p.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="retries of a VLM request after a rate limit, server error or timeout (default 4; 0: none); "
        "an unreachable server or a refused key fails at once",
    )
    p.add_argument("--replay", help="JSONL of recorded answers (with --vlm replay)")
    p.add_argument(
        "--record",
        metavar="FILE",
        help="write every VLM request and answer to this JSONL file (a new file, unless --append)",
    )
    p.add_argument(
        "--append",
        action="store_true",
        help="let --record add to an existing recording (it then replays only with the earlier session)",
    )
    if loop:
        p.add_argument("--k", type=int, default=10, help="plans sampled in the first round")
        p.add_argument("--k-max", type=int, default=13, help="most rollouts in all")


def vlm_from_args(args: argparse.Namespace, name: str | None = None) -> VLM | None:
    """The VLM the flags of :func:`add_vlm_arguments` ask for (``name`` overrides ``--vlm``)."""
    settings: dict[str, Any] = {
        key: getattr(args, key, None)
        for key in ("model", "base_url", "timeout_s", "retries", "replay", "record")
    }
    settings["append"] = bool(getattr(args, "append", False))
    return build_vlm(name or args.vlm or "none", **settings)
