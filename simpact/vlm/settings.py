"""The VLM a user's settings ask for: a back-end by name with its model, server and replay file, optionally
recording every exchange."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simpact.vlm import VLM, VLMError, get_vlm
from simpact.vlm.replay import RecordingVLM

__all__ = ["VLMSettingError", "build_vlm"]


class VLMSettingError(VLMError):
    """Settings that do not make a VLM (a replay file missing, a model given without a back-end)."""


def build_vlm(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    replay: str | None = None,
    record: str | None = None,
) -> VLM | None:
    """The back-end ``name`` (``none`` gives None) configured with ``model``, ``base_url`` and (for
    ``replay``) the recorded ``replay`` JSONL file; wrapped to append every exchange to ``record``."""
    if name == "none":
        if replay or record or model or base_url:
            raise VLMSettingError("--model, --base-url, --replay and --record need a VLM (--vlm ...)")
        return None
    config: dict[str, Any] = {}
    if name == "replay":
        if not replay:
            raise VLMSettingError("--vlm replay needs --replay FILE (a JSONL file written with --record)")
        if not Path(replay).is_file():
            raise VLMSettingError(f"--replay {replay}: no such file")
        config["path"] = replay
    elif replay:
        raise VLMSettingError("--replay FILE goes with --vlm replay")
    if model:
        config["model"] = model
    if base_url:
        config["base_url"] = base_url
    vlm = get_vlm(name, **config)
    return RecordingVLM(vlm, record) if record else vlm
