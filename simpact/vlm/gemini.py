"""Google Gemini through google-genai (``pip install 'simpact[vlm]'``).

The key comes from ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) and travels in a request header, never in a
URL, log line or error. With a schema, the answer is constrained with ``response_mime_type =
"application/json"`` and ``response_json_schema``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from simpact.vlm import ImagePart, MissingKeyError, MissingPackageError, RemoteVLM, Reply, RetryPolicy
from simpact.vlm.urls import is_connect_failure

__all__ = ["DEFAULT_MODEL", "KEY_ENV_VARS", "GeminiVLM"]

DEFAULT_MODEL = "gemini-2.5-pro"
KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


class GeminiVLM(RemoteVLM):
    """Gemini's ``generateContent``.

    ``base_url`` points the client elsewhere (a proxy, or a local test server); ``timeout_s`` bounds each
    request (s); ``max_output_tokens`` caps the answer (thinking included).
    """

    name = "gemini"
    default_url = "https://generativelanguage.googleapis.com"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key_env: str | Sequence[str] = KEY_ENV_VARS,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        max_output_tokens: int | None = None,
        seed: int | None = None,
    ):
        super().__init__(model, timeout_s=timeout_s, retry=retry, seed=seed, base_url=base_url)
        env_vars = (api_key_env,) if isinstance(api_key_env, str) else tuple(api_key_env)
        self.key_env_vars = env_vars
        key = next((os.environ[v] for v in env_vars if os.environ.get(v)), None)
        if key is None:
            raise MissingKeyError(self.name, env_vars)
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise MissingPackageError(self.name, "google-genai") from None
        self._types = types
        self._secrets = (key,)
        self.max_output_tokens = max_output_tokens
        http = types.HttpOptions(base_url=base_url, timeout=max(1, int(self.timeout_s * 1000)))
        self._client = genai.Client(api_key=key, vertexai=False, http_options=http)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url}

    def _send(
        self, parts: list[str | ImagePart], schema: Mapping[str, Any] | None, temperature: float | None
    ) -> Reply:
        types = self._types
        contents = [
            types.Part.from_text(text=p)
            if isinstance(p, str)
            else types.Part.from_bytes(data=p.data, mime_type=p.mime_type)
            for p in parts
        ]
        config = types.GenerateContentConfig(
            temperature=temperature,
            max_output_tokens=self.max_output_tokens,
            response_mime_type="application/json" if schema is not None else None,
            response_json_schema=dict(schema) if schema is not None else None,
        )
        response = self._client.models.generate_content(model=self.model, contents=contents, config=config)
        text, finish = "", None
        if response.candidates:
            candidate = response.candidates[0]
            finish = _name(candidate.finish_reason)
            if candidate.content and candidate.content.parts:
                text = "".join(p.text for p in candidate.content.parts if p.text and not p.thought)
        elif response.prompt_feedback is not None and response.prompt_feedback.block_reason is not None:
            finish = f"BLOCKED_{_name(response.prompt_feedback.block_reason)}"
        usage = response.usage_metadata
        out_tokens = None
        if usage is not None and usage.candidates_token_count is not None:
            out_tokens = usage.candidates_token_count + (usage.thoughts_token_count or 0)
        return Reply(
            text,
            input_tokens=usage.prompt_token_count if usage is not None else None,
            output_tokens=out_tokens,
            finish_reason=finish,
            model=response.model_version,
        )

    def _status(self, exc: Exception) -> tuple[int | None, bool]:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            status = int(exc.code) if exc.code else None
            return status, status is not None and RetryPolicy.retryable(status)
        if _is_transport_error(exc):
            return None, True
        return None, False

    def _unreachable(self, exc: Exception) -> bool:
        return is_connect_failure(exc)


def _name(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "name", value))


def _is_transport_error(exc: Exception) -> bool:
    """Timeouts and connection failures from httpx (or httpx2, which google-genai may use)."""
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] in ("httpx", "httpx2") and cls.__name__ in (
            "TransportError",
            "TimeoutException",
        ):
            return True
    return isinstance(exc, (TimeoutError, ConnectionError))
