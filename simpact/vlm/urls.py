"""Small HTTP helpers of the remote back-ends: is a server URL well formed, a URL fit to print (any key in it
redacted), a client failure in one line, did it connect at all, and how long a ``Retry-After`` header asks a
client to wait. Standard library only."""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "failure_detail",
    "is_connect_failure",
    "parse_retry_after",
    "redact_url",
    "retry_after",
    "url_problem",
]

_CONNECT_FAILURES = ("ConnectError", "UnsupportedProtocol", "InvalidURL")
_SECRET_WORDS = ("key", "token", "secret", "password", "auth", "sig")


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a server URL (no ``http://``/``https://``, no host, a bad port), or None."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises ValueError on a port that is not a number in 0..65535
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "it needs to start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 is not a server port"
    if any(c.isspace() for c in url.strip()):
        return "it contains white space"
    return None


def redact_url(url: str) -> str:
    """``url`` with a password and the values of key-like query parameters replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", ":***@", 1)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in pairs], safe="*"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """The wait (s) a ``Retry-After`` header asks for: delay seconds or an HTTP date (``now``: Unix time, s,
    default the clock). None when absent or unreadable; never negative."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT ("-0000" parses without a zone)
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def is_connect_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or the error it was raised from) is httpx's "no connection was made": refused, an
    unknown host, a URL it cannot use. Timeouts and dropped connections are not (they are worth a retry)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for cls in type(current).__mro__:
            if cls.__module__.split(".")[0] in ("httpx", "httpx2") and cls.__name__ in _CONNECT_FAILURES:
                return True
        current = current.__cause__
    return isinstance(exc, ConnectionRefusedError)


def failure_detail(exc: BaseException, redact: Callable[[str], str]) -> str:
    """One line: the error's type and message, and the error it was raised from (say, "Connection refused"
    behind the client's "Connection error.")."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return " ".join(redact(text).split())


def retry_after(exc: Exception) -> float | None:
    """The wait (s) a failed response's ``Retry-After`` header asks for, if the client kept the response."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
    except Exception:  # a client's odd header type: no advice
        return None
    return parse_retry_after(value if isinstance(value, str) else None)
