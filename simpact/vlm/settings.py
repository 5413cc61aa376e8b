"""The VLM a user's settings ask for: a back-end by name with its model, server, timeout, retries and replay
file, optionally recording every exchange. Every setting is checked here, before any request."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simpact.vlm import VLM, RetryPolicy, VLMSettingError, get_vlm
from simpact.vlm.replay import RecordingVLM, check_record_path

__all__ = ["REMOTE_VLMS", "VLMSettingError", "build_vlm"]

REMOTE_VLMS = ("gemini", "openai")
"""The back-ends that send requests to a server (and so take a timeout and retries)."""


def build_vlm(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    replay: str | None = None,
    record: str | None = None,
    append: bool = False,
    timeout_s: float | None = None,
    retries: int | None = None,
) -> VLM | None:
    """The back-end ``name`` (``none`` gives None) configured with ``model``, ``base_url``, ``timeout_s`` per
    request (s), ``retries`` after a rate limit, server error or timeout, and (for ``replay``) the recorded
    ``replay`` JSONL file; wrapped to write every exchange to ``record``, which must not exist (or be empty)
    unless ``append``. Raises :class:`VLMSettingError` (one line) for settings that do not make a VLM."""
    if name == "none":
        if replay or record or model or base_url or timeout_s is not None or retries is not None:
            raise VLMSettingError(
                "--model, --base-url, --timeout, --retries, --replay and --record need a VLM (--vlm ...)"
            )
        return None
    if append and not record:
        raise VLMSettingError("--append goes with --record FILE")
    if record:
        check_record_path(record, append=append)
    config: dict[str, Any] = {}
    if name == "replay":
        if not replay:
            raise VLMSettingError("--vlm replay needs --replay FILE (a JSONL file written with --record)")
        if not Path(replay).is_file():
            raise VLMSettingError(f"--replay {replay}: no such file")
        config["path"] = replay
    elif replay:
        raise VLMSettingError("--replay FILE goes with --vlm replay")
    config.update(_network_settings(name, timeout_s, retries))
    if model:
        config["model"] = model
    if base_url:
        config["base_url"] = base_url
    vlm = get_vlm(name, **config)
    return RecordingVLM(vlm, record, append=append) if record else vlm


def _network_settings(name: str, timeout_s: float | None, retries: int | None) -> dict[str, Any]:
    """``timeout_s`` and ``retry`` for a remote back-end, checked; nothing for one that sends no request."""
    if timeout_s is None and retries is None:
        return {}
    if name not in REMOTE_VLMS:
        raise VLMSettingError(f"--timeout and --retries go with a VLM server ({', '.join(REMOTE_VLMS)})")
    config: dict[str, Any] = {}
    if timeout_s is not None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise VLMSettingError(f"--timeout {timeout_s}: a request's time limit must be positive seconds")
        config["timeout_s"] = float(timeout_s)
    if retries is not None:
        if retries < 0:
            raise VLMSettingError(f"--retries {retries}: must be 0 (no retry) or more")
        config["retry"] = RetryPolicy(attempts=retries + 1)
    return config
