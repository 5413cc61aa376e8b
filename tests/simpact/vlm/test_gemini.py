"""The gemini back-end speaks Gemini's REST wire format to a local server (google-genai, not patched)."""

from __future__ import annotations

import base64
import logging
import re

import numpy as np
import pytest

pytest.importorskip("google.genai")

from simpact.vlm import (  # noqa: E402
    MissingKeyError,
    MissingPackageError,
    RetryPolicy,
    VLMRequestError,
    VLMServiceError,
    get_vlm,
)
from simpact.vlm.answers import plan_schema  # noqa: E402

KEY = "gm-test-KEY-0123456789"
FAST = RetryPolicy(attempts=3, base_delay_s=0.01, jitter=0.0)


def reply(text: str) -> dict:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 30,
            "thoughtsTokenCount": 12,
            "totalTokenCount": 162,
        },
        "modelVersion": "gemini-2.5-pro-001",
    }


def error(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


@pytest.fixture
def vlm(fake_server, monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    return get_vlm("gemini", base_url=fake_server.url, timeout_s=5, retry=FAST)


def test_request_carries_model_schema_image_and_temperature(vlm, fake_server):
    fake_server.push(200, reply('{"description": "d", "actions": [{"type": "RELEASE"}]}'))
    image = np.zeros((4, 6, 3), np.uint8)
    image[1, 2] = (255, 0, 0)
    answer = vlm.generate(["Plan the task.", image], plan_schema(), temperature=0.7, role="sample/0")

    (req,) = fake_server.requests
    assert re.fullmatch(r"/v1(beta)?/models/gemini-2\.5-pro:generateContent", req.path)
    assert req.headers["x-goog-api-key"] == KEY
    (content,) = req.body["contents"]
    text, img = content["parts"]
    assert text == {"text": "Plan the task."}
    blob = img["inlineData"]
    assert blob.get("mimeType", blob.get("mime_type")) == "image/png"  # the REST API takes either spelling
    assert base64.urlsafe_b64decode(blob["data"]).startswith(b"\x89PNG")
    config = req.body["generationConfig"]
    assert config["temperature"] == pytest.approx(0.7)
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == plan_schema()

    assert answer.data == {"description": "d", "actions": [{"type": "RELEASE"}]}
    assert answer.backend == "gemini" and answer.model == "gemini-2.5-pro-001"
    assert (answer.input_tokens, answer.output_tokens) == (120, 42)
    assert answer.finish_reason == "STOP" and answer.attempts == 1 and answer.latency_s > 0


def test_plain_text_request_has_no_schema(vlm, fake_server):
    fake_server.push(200, reply("A bowl and a carton."))
    answer = vlm.generate("What is on the table?")
    config = fake_server.requests[0].body.get("generationConfig", {})
    assert "responseMimeType" not in config and "temperature" not in config
    assert answer.text == "A bowl and a carton." and answer.data is None


def test_model_and_key_variable_are_configurable(fake_server, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    fake_server.push(200, reply("{}"))
    get_vlm("gemini", model="gemini-2.5-flash", base_url=fake_server.url, retry=FAST).generate("hi")
    assert fake_server.requests[0].path.endswith("/models/gemini-2.5-flash:generateContent")
    assert fake_server.requests[0].headers["x-goog-api-key"] == KEY


def test_retries_rate_limits_and_server_errors_then_succeeds(vlm, fake_server, caplog):
    fake_server.push(429, error(429, "RESOURCE_EXHAUSTED", "quota"))
    fake_server.push(503, error(503, "UNAVAILABLE", "overloaded"))
    fake_server.push(200, reply('{"ok": true}'))
    with caplog.at_level(logging.WARNING, logger="simpact.vlm"):
        answer = vlm.generate("hi")
    assert len(fake_server.requests) == 3
    assert answer.data == {"ok": True} and answer.attempts == 3
    assert "HTTP 429" in caplog.text and "HTTP 503" in caplog.text


def test_gives_up_after_the_last_attempt(vlm, fake_server):
    for _ in range(3):
        fake_server.push(500, error(500, "INTERNAL", "boom"))
    with pytest.raises(VLMServiceError) as info:  # a VLMRequestError that stops the session (exit 4)
        vlm.generate("hi")
    assert info.value.status == 500 and info.value.attempts == 3
    assert len(fake_server.requests) == 3


def test_no_retry_on_client_errors_and_the_key_never_leaks(vlm, fake_server, caplog):
    # The worst case: a server that echoes the key back in its error message.
    fake_server.push(400, error(400, "INVALID_ARGUMENT", f"API key {KEY} not valid"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(VLMRequestError) as info:
        vlm.generate("hi")
    assert len(fake_server.requests) == 1
    assert info.value.status == 400 and "HTTP 400" in str(info.value)
    assert KEY not in str(info.value) and "***" in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None  # the client's error is not kept
    assert all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in repr(vlm) and KEY not in str(vlm.describe())


def test_answer_objects_and_logs_hold_no_key(vlm, fake_server, caplog):
    fake_server.push(200, reply('{"a": 1}'))
    caplog.set_level(logging.DEBUG)
    answer = vlm.generate("hi")
    assert KEY not in str(answer.to_dict())
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_a_refused_connection_is_not_retried(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    # A port nobody listens on: connection refused, a service error at once (see test_failures.py).
    vlm = get_vlm("gemini", base_url="http://127.0.0.1:9", timeout_s=2, retry=FAST)
    with pytest.raises(VLMServiceError) as info:
        vlm.generate("hi")
    assert info.value.status is None and info.value.attempts == 1


def test_missing_key_names_the_variables(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        get_vlm("gemini")


def test_missing_package_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(MissingPackageError, match=r"pip install 'simpact\[vlm\]'"):
        get_vlm("gemini")
