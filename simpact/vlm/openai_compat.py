"""Any OpenAI-compatible chat server: OpenAI, vLLM, Ollama, llama.cpp (``pip install 'simpact[vlm]'``).

Images travel as ``data:`` URLs. With a schema the request asks for ``response_format = json_schema``; a
server that rejects that (HTTP 400/422) is asked again with ``json_object``, then with no format, and the
back-end remembers what worked.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Mapping
from typing import Any

from simpact.vlm import ImagePart, MissingKeyError, MissingPackageError, RemoteVLM, Reply, RetryPolicy
from simpact.vlm.urls import is_connect_failure

__all__ = ["DEFAULT_MODEL", "FORMAT_MODES", "OpenAIVLM"]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o"
FORMAT_MODES = ("json_schema", "json_object", "none")
_NO_KEY = "not-needed"  # local servers ignore the key, but the client wants one


class OpenAIVLM(RemoteVLM):
    """Chat completions at ``base_url`` (default: OpenAI's own API, which needs a key).

    For a local server pass its URL (e.g. ``http://127.0.0.1:8000/v1``) and served model name (e.g.
    ``Qwen/Qwen2.5-VL-7B-Instruct``); the key variable may then be unset. ``timeout_s`` bounds each request.
    """

    name = "openai"
    default_url = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        max_tokens: int | None = None,
        format_mode: str = "json_schema",
        seed: int | None = None,
    ):
        super().__init__(model, timeout_s=timeout_s, retry=retry, seed=seed, base_url=base_url)
        self.key_env_vars = (api_key_env,)
        if format_mode not in FORMAT_MODES:
            raise ValueError(f"format_mode must be one of {', '.join(FORMAT_MODES)}, got {format_mode!r}")
        key = os.environ.get(api_key_env) or None
        if key is None and base_url is None:
            raise MissingKeyError(self.name, [api_key_env])
        try:
            import openai
        except ImportError:
            raise MissingPackageError(self.name, "openai") from None
        self._openai = openai
        self._secrets = (key,) if key else ()
        self.max_tokens = max_tokens
        self.format_mode = format_mode
        self._client = openai.OpenAI(
            api_key=key or _NO_KEY, base_url=base_url, timeout=self.timeout_s, max_retries=0
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url}

    def _send(
        self, parts: list[str | ImagePart], schema: Mapping[str, Any] | None, temperature: float | None
    ) -> Reply:
        content: list[dict[str, Any]] = []
        for p in parts:
            if isinstance(p, str):
                content.append({"type": "text", "text": p})
            else:
                url = f"data:{p.mime_type};base64,{base64.b64encode(p.data).decode('ascii')}"
                content.append({"type": "image_url", "image_url": {"url": url}})
        request: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": content}]}
        if temperature is not None:
            request["temperature"] = temperature
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        while True:
            mode = self.format_mode if schema is not None else "none"
            if mode == "json_schema":
                request["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": dict(schema or {})},
                }
            elif mode == "json_object":
                request["response_format"] = {"type": "json_object"}
            else:
                request.pop("response_format", None)
            try:
                response = self._client.chat.completions.create(**request)
                break
            except (self._openai.BadRequestError, self._openai.UnprocessableEntityError) as exc:
                if mode == "none":
                    raise
                self.format_mode = FORMAT_MODES[FORMAT_MODES.index(mode) + 1]
                log.warning(
                    "openai %s at %s rejected response_format %s (HTTP %s); trying %s",
                    self.model,
                    self.base_url or "api.openai.com",
                    mode,
                    exc.status_code,
                    self.format_mode,
                )
        text, finish = "", None
        if response.choices:
            choice = response.choices[0]
            finish = choice.finish_reason
            message = choice.message
            refusal = getattr(message, "refusal", None)
            text = message.content or refusal or ""
            if refusal and not message.content:
                finish = "refusal"
        usage = response.usage
        return Reply(
            text,
            input_tokens=usage.prompt_tokens if usage is not None else None,
            output_tokens=usage.completion_tokens if usage is not None else None,
            finish_reason=finish,
            model=response.model or None,
        )

    def _status(self, exc: Exception) -> tuple[int | None, bool]:
        openai = self._openai
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code, RetryPolicy.retryable(exc.status_code)
        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            return None, True
        return None, False

    def _unreachable(self, exc: Exception) -> bool:
        openai = self._openai
        return (
            isinstance(exc, openai.APIConnectionError)
            and not isinstance(exc, openai.APITimeoutError)
            and is_connect_failure(exc)
        )
