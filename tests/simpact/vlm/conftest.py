"""A local HTTP server on 127.0.0.1 that records requests and plays queued responses."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    """Answers each request with the next queued (status, JSON body, extra headers); records every request
    and the time it arrived (``times``, ``time.monotonic()`` s)."""

    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    queue: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)

    def push(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, body, dict(headers or {})))


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    state = FakeServer()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state.requests.append(
                    Recorded(
                        "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                    )
                )
                state.times.append(time.monotonic())
                status, body, headers = (
                    state.queue.pop(0) if state.queue else (500, {"error": {"message": "no reply"}}, {})
                )
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
