"""What several command groups share: the VLM flags and the VLM they ask for."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from simpact.vlm import VLM
from simpact.vlm.settings import build_vlm

__all__ = ["VLM_ARGUMENTS", "add_vlm_arguments", "vlm_from_args"]

VLM_ARGUMENTS = ("vlm", "model", "base_url", "replay", "record", "k", "k_max")
"""Destinations of the flags of :func:`add_vlm_arguments`."""


def add_vlm_arguments(
    p: argparse.ArgumentParser,
    choices: Sequence[str],
    default: str | None,
    vlm_help: str,
    *,
    loop: bool = True,
) -> None:
    """Add the VLM flags to ``p``: ``--vlm`` (``choices``, ``default``), ``--model``, ``--base-url``,
    ``--replay``, ``--record``, and (with ``loop``) Algorithm 1's ``--k`` and ``--k-max``."""
    p.add_argument("--vlm", choices=choices, default=default, help=vlm_help)
    p.add_argument("--model", help="VLM model name (back-end default otherwise)")
    p.add_argument("--base-url", help="server URL for an OpenAI-compatible or Gemini endpoint")
    p.add_argument("--replay", help="JSONL of recorded answers (with --vlm replay)")
    p.add_argument("--record", help="append every VLM request and answer to this JSONL file")
    if loop:
        p.add_argument("--k", type=int, default=10, help="plans sampled in the first round")
        p.add_argument("--k-max", type=int, default=13, help="most rollouts in all")


def vlm_from_args(args: argparse.Namespace, name: str | None = None) -> VLM | None:
    """The VLM the flags of :func:`add_vlm_arguments` ask for (``name`` overrides ``--vlm``)."""
    settings: dict[str, Any] = {
        key: getattr(args, key, None) for key in ("model", "base_url", "replay", "record")
    }
    return build_vlm(name or args.vlm or "none", **settings)
