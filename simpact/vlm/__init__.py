"""Vision-language models behind one call: ``VLM.generate(parts, schema) -> VLMAnswer``.

Back-ends are registered by name and imported only when asked for (``get_vlm``):

- ``gemini`` (:mod:`simpact.vlm.gemini`): Google Gemini through google-genai; key from ``GEMINI_API_KEY`` or
  ``GOOGLE_API_KEY``.
- ``openai`` (:mod:`simpact.vlm.openai_compat`): any OpenAI-compatible server (OpenAI, vLLM, Ollama,
  llama.cpp); key from ``OPENAI_API_KEY``, optional for local servers.
- ``replay`` (:mod:`simpact.vlm.replay`): answers recorded by :class:`~simpact.vlm.replay.RecordingVLM`.

A request is a list of parts: text strings and images (numpy ``uint8`` arrays ``(H, W, 3)`` or encoded
PNG/JPEG bytes). Parsing and validating an answer lives in :mod:`simpact.vlm.answers`; prompt templates in
:mod:`simpact.vlm.prompts`; asking with validation and one repair round in :mod:`simpact.vlm.ask`. API keys
stay inside the back-end: they never appear in answers, logs or errors.

Failures: a server that cannot be reached (closed port, unknown host) or refuses the key (HTTP 401/403), or
an endpoint or model it does not have (404), raises :class:`VLMServiceError` after the first request, with
the URL and, for a refused key, the variable to set; rate limits (429), server errors (5xx), timeouts and
dropped connections are retried (``RetryPolicy``; a server's ``Retry-After`` is honoured) and raise
:class:`VLMServiceError` when the attempts run out; any other refusal (e.g. 400) raises
:class:`VLMRequestError` for that request alone. A malformed server URL is a :class:`VLMSettingError` when the
back-end is built.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import importlib
import inspect
import io
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from simpact.core.errors import EXIT_SERVICE_FAILED, ServiceError, SimpactError
from simpact.vlm.urls import failure_detail, redact_url, retry_after, url_problem

__all__ = [
    "ImagePart",
    "MissingKeyError",
    "MissingPackageError",
    "Part",
    "RemoteVLM",
    "ReplayMissError",
    "Reply",
    "RetryPolicy",
    "UnknownVLMError",
    "VLM",
    "VLMAnswer",
    "VLMError",
    "VLMRequestError",
    "VLMServiceError",
    "VLMSettingError",
    "available_vlms",
    "get_vlm",
    "normalize_parts",
    "register_vlm",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'simpact[vlm]'"


# --- errors -------------------------------------------------------------------------------------------------


class VLMError(SimpactError, RuntimeError):
    """Anything that keeps a VLM from answering; the message says what to change."""


class UnknownVLMError(VLMError):
    """``get_vlm`` was asked for a back-end that is not registered, or given a setting it does not take."""


class MissingKeyError(VLMError):
    """No API key: the message names the environment variable(s) to set."""

    def __init__(self, backend: str, env_vars: Sequence[str]):
        names = " or ".join(env_vars)
        super().__init__(f"the {backend} VLM back-end needs an API key: set the environment variable {names}")
        self.env_vars = tuple(env_vars)


class MissingPackageError(VLMError):
    """The back-end's client package is not installed."""

    def __init__(self, backend: str, package: str):
        super().__init__(f"the {backend} VLM back-end needs the '{package}' package: {INSTALL_HINT}")
        self.package = package


class VLMRequestError(VLMError):
    """The server refused or failed the request (after any retries). ``status`` is the HTTP status, or None
    for network errors and timeouts."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class VLMServiceError(VLMRequestError, ServiceError):
    """The VLM service failed as a whole, not this one request: unreachable, the key refused, no such endpoint
    or model, or still failing when the retries ran out. Exit status 4; a planner stops on it."""

    exit_code = EXIT_SERVICE_FAILED


class VLMSettingError(VLMError):
    """Settings that do not make a VLM (a malformed server URL, a replay file missing, a record file that
    exists, a model given without a back-end): exit status 2, before any request."""


class ReplayMissError(VLMError, ServiceError):
    """The replay back-end has no recorded answer for this request; the message describes the request.
    Exit status 4: the replayed session cannot go on."""

    exit_code = EXIT_SERVICE_FAILED


def check_base_url(base_url: str | None, backend: str) -> None:
    """Raise :class:`VLMSettingError` (one line) when ``base_url`` is given but is not a server URL."""
    if base_url is None:
        return
    problem = url_problem(base_url)
    if problem:
        raise VLMSettingError(
            f"--base-url {redact_url(base_url)!r} for the {backend} VLM is not a server URL: {problem} "
            "(e.g. http://127.0.0.1:8000/v1)"
        )


# --- request parts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImagePart:
    """An encoded image ready to send: file bytes, MIME type, and a digest of its content.

    ``digest`` is the SHA-256 of the pixels (shape + bytes) for arrays and of the file bytes otherwise, so a
    request's identity does not depend on the PNG encoder's version.
    """

    data: bytes
    mime_type: str
    digest: str
    shape: tuple[int, ...] | None = None

    @classmethod
    def from_array(cls, image: np.ndarray) -> ImagePart:
        """Encode a ``uint8`` RGB ``(H, W, 3)`` (or RGBA ``(H, W, 4)``) array as PNG."""
        arr = np.asarray(image)
        if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] not in (3, 4) or 0 in arr.shape:
            raise ValueError(f"an image must be a uint8 array (H, W, 3), got {arr.dtype} {arr.shape}")
        arr = np.ascontiguousarray(arr)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        digest = hashlib.sha256(repr(arr.shape).encode() + arr.tobytes()).hexdigest()
        return cls(buf.getvalue(), "image/png", digest, tuple(arr.shape))

    @classmethod
    def from_bytes(cls, data: bytes) -> ImagePart:
        """Wrap encoded PNG or JPEG bytes."""
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            mime = "image/png"
        elif data.startswith(b"\xff\xd8\xff"):
            mime = "image/jpeg"
        else:
            raise ValueError("image bytes must be PNG or JPEG (pass pixels as a uint8 (H, W, 3) array)")
        return cls(bytes(data), mime, hashlib.sha256(data).hexdigest())


Part = str | bytes | np.ndarray | ImagePart
"""One piece of a request: text, an image array ``uint8 (H, W, 3)``, encoded PNG/JPEG bytes, or an
:class:`ImagePart`."""


def normalize_parts(parts: Sequence[Part] | str) -> list[str | ImagePart]:
    """Text stays text; every image becomes an :class:`ImagePart`. Errors name the offending part."""
    if isinstance(parts, str):
        parts = [parts]
    out: list[str | ImagePart] = []
    for i, part in enumerate(parts):
        try:
            if isinstance(part, (str, ImagePart)):
                out.append(part)
            elif isinstance(part, (bytes, bytearray, memoryview)):
                out.append(ImagePart.from_bytes(bytes(part)))
            elif isinstance(part, np.ndarray):
                out.append(ImagePart.from_array(part))
            else:
                raise ValueError(f"expected text, image bytes or a uint8 array, got {type(part).__name__}")
        except ValueError as exc:
            raise ValueError(f"request part {i}: {exc}") from None
    if not out:
        raise ValueError("a VLM request needs at least one part")
    return out


# --- answers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VLMAnswer:
    """What a VLM said, with accounting.

    ``text`` is the raw answer; ``data`` the parsed JSON when ``text`` is plain JSON (optionally fenced), else
    None (use :mod:`simpact.vlm.answers` for lenient parsing). ``latency_s`` is the wall time of the whole
    call, retries included (s). Token counts are None when the server does not report them; output tokens
    include any thinking tokens.
    """

    text: str
    data: Any = None
    model: str = ""
    backend: str = ""
    latency_s: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    attempts: int = 1

    @classmethod
    def from_text(cls, text: str, **kw: Any) -> VLMAnswer:
        """Build an answer, filling ``data`` when the text is plain JSON."""
        return cls(text, _plain_json(text), **kw)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VLMAnswer:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n?```\s*$", re.S)


def _plain_json(text: str) -> Any:
    match = _FENCE.match(text)
    body = match.group(1) if match else text
    try:
        return json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return None


# --- the interface ------------------------------------------------------------------------------------------


class VLM(abc.ABC):
    """A vision-language model: one call, :meth:`generate`."""

    name: ClassVar[str] = "vlm"
    model: str = ""

    @abc.abstractmethod
    def generate(
        self,
        parts: Sequence[Part] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        """Answer a request.

        ``schema`` (a JSON schema) asks for structured JSON output; ``temperature`` None keeps the server's
        default; ``role`` names the request for records and replay (e.g. ``"sample/3"``, ``"evaluate"``) so
        identical prompts issued concurrently still replay in the same slots. Raises :class:`VLMError`.
        """

    def describe(self) -> dict[str, Any]:
        """The settings worth recording with a result (never a key)."""
        return {"backend": self.name, "model": self.model}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "backend")
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on rate limits (429), server errors (5xx), timeouts and dropped connections; never on other
    4xx. Delays grow as ``base_delay_s * 2**(attempt - 1)`` up to ``max_delay_s`` (s), with up to ``jitter``
    (a fraction) added so concurrent callers spread out."""

    attempts: int = 5
    base_delay_s: float = 2.0
    max_delay_s: float = 60.0
    jitter: float = 0.25
    max_retry_after_s: float = 300.0
    """The longest wait a server's ``Retry-After`` may ask for (s); a longer one is cut to this."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise VLMSettingError(
                f"a VLM request needs at least 1 attempt (retries >= 0), got {self.attempts}"
            )

    def delay(self, attempt: int, rng: random.Random) -> float:
        base = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return base * (1.0 + self.jitter * rng.random())

    @staticmethod
    def retryable(status: int | None) -> bool:
        """Network failures (None), 429 and 5xx are worth another try."""
        return status is None or status == 429 or 500 <= status <= 599


@dataclass(frozen=True)
class Reply:
    """What a remote back-end's single request returned, before accounting."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    model: str | None = None


class RemoteVLM(VLM):
    """A VLM behind an HTTP API: subclasses send one request (:meth:`_send`) and classify its failures
    (:meth:`_status`, :meth:`_unreachable`); this class times, retries, accounts, tells a failed service from
    a failed request, and keeps the key out of every message.
    """

    default_url: ClassVar[str] = ""
    """Where the client sends requests when no ``base_url`` is given (for messages)."""
    key_env_vars: tuple[str, ...] = ()
    """The environment variables the key is read from (named when the key is refused)."""

    def __init__(
        self,
        model: str,
        *,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        base_url: str | None = None,
    ):
        if not timeout_s > 0 or timeout_s == float("inf"):
            raise VLMSettingError(f"the VLM timeout must be a positive number of seconds, got {timeout_s}")
        check_base_url(base_url, self.name)
        self.model = model
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._secrets: tuple[str, ...] = ()

    @abc.abstractmethod
    def _send(
        self, parts: list[str | ImagePart], schema: Mapping[str, Any] | None, temperature: float | None
    ) -> Reply:
        """Send one request; raise the client's exception on failure."""

    @abc.abstractmethod
    def _status(self, exc: Exception) -> tuple[int | None, bool]:
        """The HTTP status of a failure (None for network errors) and whether it is transient."""

    def _unreachable(self, exc: Exception) -> bool:
        """Whether ``exc`` says the server cannot be reached at all (refused, unknown host, bad URL)."""
        return False

    def endpoint(self) -> str:
        """The server URL requests go to, fit to print (any key in it redacted)."""
        return self._redact(redact_url(self.base_url or self.default_url or "(the client's default)"))

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def generate(
        self,
        parts: Sequence[Part] | str,
        schema: Mapping[str, Any] | None = None,
        *,
        temperature: float | None = None,
        role: str | None = None,
    ) -> VLMAnswer:
        items = normalize_parts(parts)
        start = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = self._send(items, schema, temperature)
                break
            except Exception as exc:  # the client's own errors: classified and redacted below
                status, transient = self._status(exc)
                unreachable = self._unreachable(exc)
                detail = failure_detail(exc, self._redact)
                asked_wait = retry_after(exc)
            # Raised outside the handler so the client's exception (which may quote the key) is not chained.
            self._raise_if_final(status, transient, unreachable, detail, attempt, role)
            wait = self.retry.delay(attempt, self._rng)
            if asked_wait is not None:
                wait = min(asked_wait, self.retry.max_retry_after_s)
            log.warning(
                "%s %s at %s: %s (attempt %d of %d); retrying in %.1f s%s",
                self.name,
                self.model,
                self.endpoint(),
                f"HTTP {status}" if status is not None else "no HTTP response",
                attempt,
                self.retry.attempts,
                wait,
                " (the server's Retry-After)" if asked_wait is not None else "",
            )
            time.sleep(wait)
        answer = VLMAnswer.from_text(
            reply.text,
            model=reply.model or self.model,
            backend=self.name,
            latency_s=time.monotonic() - start,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            finish_reason=reply.finish_reason,
            attempts=attempt,
        )
        log.debug(
            "%s %s role=%s: %.2f s, %s in / %s out tokens, finish=%s",
            self.name,
            answer.model,
            role,
            answer.latency_s,
            answer.input_tokens,
            answer.output_tokens,
            answer.finish_reason,
        )
        return answer

    def _raise_if_final(
        self,
        status: int | None,
        transient: bool,
        unreachable: bool,
        detail: str,
        attempt: int,
        role: str | None,
    ) -> None:
        """Raise the error a failed attempt ends with; return when it is worth another try."""
        where = f"{self.name} VLM at {self.endpoint()}"
        if unreachable:
            raise VLMServiceError(
                f"{where} cannot be reached ({detail}): check --base-url and that the server is running",
                status=status,
                attempts=attempt,
            )
        if status in (401, 403):
            names = " or ".join(self.key_env_vars) or "the key variable"
            raise VLMServiceError(
                f"{where} refused the API key, HTTP {status} ({detail}): set {names} to a valid key",
                status=status,
                attempts=attempt,
            )
        if status == 404:
            raise VLMServiceError(
                f"{where} has no such endpoint or model (model {self.model}), HTTP 404 ({detail}): "
                "check --base-url and --model",
                status=status,
                attempts=attempt,
            )
        code = f"HTTP {status}" if status is not None else "no HTTP response"
        if transient and attempt < self.retry.attempts:
            return
        cls = VLMServiceError if transient else VLMRequestError
        raise cls(
            f"{self.name} request (model {self.model}, role {role or '-'}) to {self.endpoint()} failed after "
            f"{attempt} attempt(s), {code}: {detail}",
            status=status,
            attempts=attempt,
        )


# --- registry -----------------------------------------------------------------------------------------------

_BACKENDS: dict[str, str | Callable[..., VLM]] = {
    "gemini": "simpact.vlm.gemini:GeminiVLM",
    "openai": "simpact.vlm.openai_compat:OpenAIVLM",
    "replay": "simpact.vlm.replay:ReplayVLM",
}


def register_vlm(name: str, factory: str | Callable[..., VLM]) -> None:
    """Register a back-end: a callable returning a :class:`VLM`, or ``"module:attribute"`` imported on use."""
    _BACKENDS[name] = factory


def available_vlms() -> list[str]:
    return sorted(_BACKENDS)


def get_vlm(name: str, **config: Any) -> VLM:
    """Build the back-end registered as ``name`` with its settings (e.g. ``model=``, ``base_url=``)."""
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise UnknownVLMError(
            f"unknown VLM back-end {name!r}; choose one of {', '.join(available_vlms())}"
        ) from None
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    try:
        inspect.signature(factory).bind(**config)
    except TypeError as exc:
        params = [p for p in inspect.signature(factory).parameters if p not in ("self", "args", "kwargs")]
        raise UnknownVLMError(
            f"VLM back-end {name!r}: {exc}; its settings are {', '.join(params) or 'none'}"
        ) from None
    return factory(**config)
