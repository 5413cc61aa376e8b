"""The openai back-end speaks /v1/chat/completions to a local server (the openai client, not patched)."""

from __future__ import annotations

import base64
import logging

import numpy as np
import pytest

pytest.importorskip("openai")

from simpact.vlm import MissingKeyError, RetryPolicy, VLMRequestError, get_vlm  # noqa: E402
from simpact.vlm.answers import evaluation_schema  # noqa: E402

KEY = "sk-test-KEY-abcdef0123456789"
FAST = RetryPolicy(attempts=3, base_delay_s=0.01, jitter=0.0)
MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


def reply(content: str | None, *, refusal: str | None = None, finish: str = "stop") -> dict:
    message = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 80, "completion_tokens": 9, "total_tokens": 89},
    }


def error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


@pytest.fixture
def vlm(fake_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return get_vlm("openai", model=MODEL, base_url=f"{fake_server.url}/v1", timeout_s=5, retry=FAST)


def test_request_carries_model_schema_image_and_temperature(vlm, fake_server):
    fake_server.push(200, reply('{"reason": "nested", "success": true}'))
    image = np.full((5, 7, 3), 200, np.uint8)
    answer = vlm.generate(["Did it work?", image], evaluation_schema(), temperature=0.0, role="evaluate")

    (req,) = fake_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == MODEL
    assert req.body["temperature"] == 0.0
    (message,) = req.body["messages"]
    assert message["role"] == "user"
    text, img = message["content"]
    assert text == {"type": "text", "text": "Did it work?"}
    url = img["image_url"]["url"]
    assert img["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG")
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == evaluation_schema()

    assert answer.data == {"reason": "nested", "success": True}
    assert answer.backend == "openai" and answer.model == MODEL
    assert (answer.input_tokens, answer.output_tokens, answer.finish_reason) == (80, 9, "stop")


def test_without_schema_or_temperature_none_is_sent(vlm, fake_server):
    fake_server.push(200, reply("hello"))
    assert vlm.generate("hi").text == "hello"
    body = fake_server.requests[0].body
    assert "response_format" not in body and "temperature" not in body


def test_falls_back_when_the_server_rejects_json_schema(vlm, fake_server, caplog):
    fake_server.push(400, error("response_format json_schema is not supported"))
    fake_server.push(400, error("response_format json_object is not supported"))
    fake_server.push(200, reply('{"success": false, "reason": "no"}'))
    fake_server.push(200, reply('{"success": true, "reason": "yes"}'))
    with caplog.at_level(logging.WARNING, logger="simpact.vlm"):
        first = vlm.generate("judge", evaluation_schema())
        second = vlm.generate("judge", evaluation_schema())
    formats = [r.body.get("response_format", {}).get("type") for r in fake_server.requests]
    assert formats == ["json_schema", "json_object", None, None]  # and remembers what worked
    assert first.data["success"] is False and second.data["success"] is True
    assert "rejected response_format" in caplog.text


def test_retries_rate_limits_then_succeeds(vlm, fake_server):
    fake_server.push(429, error("slow down"))
    fake_server.push(502, error("bad gateway"))
    fake_server.push(200, reply("{}"))
    answer = vlm.generate("hi")
    assert len(fake_server.requests) == 3 and answer.attempts == 3 and answer.data == {}


def test_no_retry_on_client_error_and_the_key_never_leaks(vlm, fake_server, caplog):
    fake_server.push(401, error(f"Incorrect API key provided: {KEY}"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(VLMRequestError) as info:
        vlm.generate("hi")
    assert len(fake_server.requests) == 1 and info.value.status == 401
    assert KEY not in str(info.value) and "***" in str(info.value)
    assert info.value.__context__ is None
    assert all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in repr(vlm) and KEY not in str(vlm.describe())


def test_400_without_schema_is_not_retried(vlm, fake_server):
    fake_server.push(400, error("bad image"))
    with pytest.raises(VLMRequestError, match="HTTP 400"):
        vlm.generate("hi")
    assert len(fake_server.requests) == 1


def test_refusal_is_an_answer_not_an_error(vlm, fake_server):
    fake_server.push(200, reply(None, refusal="I can't help with that."))
    answer = vlm.generate("hi", evaluation_schema())
    assert answer.text == "I can't help with that." and answer.finish_reason == "refusal"


def test_local_server_needs_no_key(fake_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_server.push(200, reply("ok"))
    vlm = get_vlm("openai", model=MODEL, base_url=f"{fake_server.url}/v1", retry=FAST)
    assert vlm.generate("hi").text == "ok"


def test_openai_itself_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        get_vlm("openai")
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="MY_KEY"):
        get_vlm("openai", api_key_env="MY_KEY")
