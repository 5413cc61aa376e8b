"""Remote back-ends fail fast and clearly (closed port, unknown host, refused key, malformed URL), retry what
is worth retrying (429 with Retry-After, 5xx) and take --timeout / --retries; all offline, on 127.0.0.1."""

from __future__ import annotations

import socket
import time

import pytest

pytest.importorskip("openai")
pytest.importorskip("google.genai")

from simpact.core.errors import EXIT_BAD_INPUT, EXIT_SERVICE_FAILED, ServiceError  # noqa: E402
from simpact.vlm import (  # noqa: E402
    ReplayMissError,
    RetryPolicy,
    VLMError,
    VLMRequestError,
    VLMServiceError,
    VLMSettingError,
    get_vlm,
)
from simpact.vlm.settings import build_vlm  # noqa: E402
from simpact.vlm.urls import parse_retry_after, redact_url, url_problem  # noqa: E402

KEY = "sk-test-KEY-0123456789abcdef"
FAST = RetryPolicy(attempts=3, base_delay_s=0.01, jitter=0.0)
BACKENDS = ("openai", "gemini")


def ok(backend: str) -> dict:
    if backend == "openai":
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}
            ],
        }
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": "{}"}]}, "finishReason": "STOP"}]}


def error(code: int, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": "X", "type": "x"}}


def remote(backend: str, base: str, **kw):
    url = f"{base}/v1" if backend == "openai" else base
    return get_vlm(backend, model="m", base_url=url, **{"timeout_s": 5, "retry": FAST, **kw})


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


@pytest.fixture
def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_the_error_classes_carry_the_exit_codes():
    assert issubclass(VLMServiceError, VLMError) and issubclass(VLMServiceError, ServiceError)
    assert issubclass(VLMServiceError, VLMRequestError)  # callers catching request errors still do
    assert VLMServiceError("x").exit_code == EXIT_SERVICE_FAILED == 4
    assert issubclass(ReplayMissError, ServiceError) and ReplayMissError("x").exit_code == 4
    assert VLMRequestError("x").exit_code == VLMSettingError("x").exit_code == EXIT_BAD_INPUT


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closed_port_fails_at_once_naming_the_url(backend, closed_port):
    vlm = get_vlm(backend, model="m", base_url=f"http://127.0.0.1:{closed_port}", retry=RetryPolicy())
    start = time.monotonic()
    with pytest.raises(VLMServiceError) as info:
        vlm.generate("hi")
    assert time.monotonic() - start < 5.0  # the issue measured 147 s and 65 attempts
    assert info.value.attempts == 1 and info.value.exit_code == 4
    message = str(info.value)
    assert f"127.0.0.1:{closed_port}" in message and "cannot be reached" in message
    assert "refused" in message.lower() and "--base-url" in message and "\n" not in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_host_fails_at_once(backend):
    vlm = get_vlm(backend, model="m", base_url="http://no-such-host.invalid:8000", retry=RetryPolicy())
    start = time.monotonic()
    with pytest.raises(VLMServiceError, match="no-such-host.invalid:8000.*cannot be reached") as info:
        vlm.generate("hi")
    assert info.value.attempts == 1 and time.monotonic() - start < 5.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_fails_at_once_naming_the_variable(backend, status, fake_server):
    fake_server.push(status, error(status, f"API key {KEY} not valid"))
    with pytest.raises(VLMServiceError) as info:
        remote(backend, fake_server.url).generate("hi")
    message = str(info.value)
    assert len(fake_server.requests) == 1 and info.value.status == status
    assert ("OPENAI_API_KEY" if backend == "openai" else "GEMINI_API_KEY") in message
    assert fake_server.url in message and f"HTTP {status}" in message
    assert KEY not in message and "***" in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_missing_model_or_endpoint_fails_at_once(backend, fake_server):
    fake_server.push(404, error(404, "model m not found"))
    with pytest.raises(VLMServiceError, match="HTTP 404.*--model"):
        remote(backend, fake_server.url).generate("hi")
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rate_limit_waits_as_long_as_retry_after_says(backend, fake_server):
    fake_server.push(429, error(429, "slow down"), {"Retry-After": "1"})
    fake_server.push(200, ok(backend))
    answer = remote(backend, fake_server.url).generate("hi")  # FAST alone would wait 0.01 s
    assert answer.attempts == 2 and answer.data == {}
    gap = fake_server.times[1] - fake_server.times[0]
    assert 0.9 <= gap < 3.0


def test_retry_after_is_capped(fake_server):
    fake_server.push(503, error(503, "busy"), {"Retry-After": "3600"})
    fake_server.push(200, ok("openai"))
    policy = RetryPolicy(attempts=2, base_delay_s=0.01, jitter=0.0, max_retry_after_s=0.2)
    start = time.monotonic()
    assert remote("openai", fake_server.url, retry=policy).generate("hi").attempts == 2
    assert time.monotonic() - start < 2.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_server_errors_are_retried_then_the_service_has_failed(backend, fake_server):
    for _ in range(3):
        fake_server.push(500, error(500, "boom"))
    with pytest.raises(VLMServiceError, match="after 3 attempt") as info:
        remote(backend, fake_server.url).generate("hi")
    assert len(fake_server.requests) == 3 and info.value.status == 500 and info.value.exit_code == 4


def test_a_bad_request_fails_that_request_only(fake_server):
    fake_server.push(400, error(400, "bad image"))
    with pytest.raises(VLMRequestError) as info:
        remote("gemini", fake_server.url).generate("hi")
    assert not isinstance(info.value, ServiceError) and info.value.exit_code == 2


def test_a_timeout_is_retried_then_fails(closed_port):
    # A listening socket that never answers: each attempt ends at the time limit.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        vlm = build_vlm(
            "openai", base_url=f"http://127.0.0.1:{server.getsockname()[1]}/v1", timeout_s=0.3, retries=1
        )
        assert vlm is not None
        start = time.monotonic()
        with pytest.raises(VLMServiceError, match="after 2 attempt") as info:
            vlm.generate("hi")
    assert info.value.status is None and 0.5 < time.monotonic() - start < 6.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("url", ["localhost:8000", "htp://x", "http://", "http://host:99999/v1", "127.0.0.1"])
def test_a_malformed_base_url_is_refused_when_built(backend, url):
    with pytest.raises(VLMSettingError, match="--base-url .* is not a server URL") as info:
        get_vlm(backend, model="m", base_url=url)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_build_vlm_passes_timeout_and_retries_through():
    vlm = build_vlm("openai", base_url="http://127.0.0.1:8000/v1", timeout_s=7.5, retries=0)
    assert vlm.timeout_s == 7.5 and vlm.retry.attempts == 1  # type: ignore[union-attr]
    vlm = build_vlm("gemini", retries=2)
    assert vlm.timeout_s == 120.0 and vlm.retry.attempts == 3  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"timeout_s": 0.0}, "--timeout 0.0"),
        ({"timeout_s": float("nan")}, "--timeout nan"),
        ({"timeout_s": -1.0}, "--timeout"),
        ({"timeout_s": float("inf")}, "--timeout inf"),
        ({"retries": -1}, "--retries -1"),
    ],
)
def test_bad_timeout_and_retries_are_one_line(settings, match):
    with pytest.raises(VLMSettingError, match=match):
        build_vlm("openai", base_url="http://127.0.0.1:8000/v1", **settings)


def test_timeout_and_retries_need_a_server(tmp_path):
    with pytest.raises(VLMSettingError, match="need a VLM"):
        build_vlm("none", timeout_s=5.0)
    (tmp_path / "r.jsonl").write_text("")
    with pytest.raises(VLMSettingError, match="VLM server"):
        build_vlm("replay", replay=str(tmp_path / "r.jsonl"), retries=2)


def test_url_helpers():
    assert url_problem("http://127.0.0.1:8000/v1") is None and url_problem("https://api.openai.com") is None
    assert "http://" in (url_problem("localhost:8000") or "")
    redacted = redact_url("https://me:pw123@host/v1?key=abc&model=m&access_token=t")
    assert "pw123" not in redacted and "abc" not in redacted and "=t" not in redacted
    assert "model=m" in redacted and "host/v1" in redacted
    assert parse_retry_after("2") == 2.0 and parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0 and parse_retry_after(None) is None
    assert parse_retry_after("soon") is None and parse_retry_after("nan") is None
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=now) == 0.0


def test_a_key_in_the_url_is_redacted_in_errors(closed_port):
    url = f"http://127.0.0.1:{closed_port}/v1?key=SECRET123"
    with pytest.raises(VLMServiceError) as info:
        get_vlm("openai", model="m", base_url=url).generate("hi")
    assert "SECRET123" not in str(info.value) and "key=***" in str(info.value)
