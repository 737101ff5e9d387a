# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one streamed request measures and when it counts as a success, through the real aiohttp
path (``one_request`` via ``run_level``) against a server that plays a script of timed SSE events.

These pin the rules the module_utils docstring states: TTFT at the first chunk with a choice, E2E
at the last one (not at the usage chunk, not at [DONE]), and success only with a choice chunk,
[DONE] and no error event. Changing any of them turns a test here red."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench


def data(payload):
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"


CHOICE = {"choices": [{"index": 0, "text": "x"}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 16, "completion_tokens": 3}}
DONE = data(b"[DONE]")


class _ScriptHandler(BaseHTTPRequestHandler):
    """Plays ``self.server.script``: (seconds to wait, bytes) steps, framed as ``self.server.framing``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        framing = self.server.framing
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if framing == "close":
            self.send_header("Connection", "close")
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for delay, payload in self.server.script:
            time.sleep(delay)
            if payload is None:         # cut: close the connection mid-body
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if framing == "close":
                self.wfile.write(payload)
            else:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()
        if framing == "chunked":
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()


@pytest.fixture
def scripted():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def play(script, framing="close", timeout=10.0):
        httpd.script, httpd.framing = script, framing
        loop = asyncio.new_event_loop()
        try:
            records, dummy = loop.run_until_complete(vllm_bench.run_level(
                "http://127.0.0.1:%d" % httpd.server_address[1], "completions", "tiny", [[1, 2, 3]], [3], 1, 3,
                True, timeout))
        finally:
            loop.close()
        assert len(records) == 1
        return records[0]

    yield play
    httpd.shutdown()
    httpd.server_close()


# ---- when the clock stops ----------------------------------------------------------------

def test_e2e_ends_at_the_last_chunk_with_a_choice_not_at_usage_or_done(scripted):
    record = scripted([(0.1, data(CHOICE)), (0.1, data(CHOICE)), (0.1, data(CHOICE)),
                       (0.5, data(USAGE)), (0.5, DONE)])
    assert record["ok"], record["error"]
    assert record["end"] - record["start"] >= 1.2               # the request itself lasted until [DONE]
    assert record["ttft"] == pytest.approx(0.1, abs=0.08)
    assert record["latency"] == pytest.approx(0.3, abs=0.1)     # to [DONE] would be ~1.3 s, to usage ~0.8 s
    assert record["itl"] == pytest.approx([0.1, 0.1], abs=0.08)
    level = vllm_bench.level_metrics(1, [record], 1.3)
    assert level["e2el_ms"]["mean"] == pytest.approx(record["latency"] * 1000, abs=1e-3)
    assert level["tpot_ms"]["mean"] == pytest.approx((record["latency"] - record["ttft"]) / 2 * 1000, abs=1e-3)


def test_ttft_waits_for_a_chunk_with_a_choice(scripted):
    # A comment, an event with an empty choice list and one without choices come first, as some servers send.
    record = scripted([(0.05, b": ping\n\n"), (0.05, data({"choices": []})), (0.05, data({"id": "cmpl-1"})),
                       (0.4, data(CHOICE)), (0.05, data(CHOICE)), (0.05, data(USAGE)), (0.0, DONE)])
    assert record["ok"], record["error"]
    assert record["ttft"] == pytest.approx(0.55, abs=0.1)
    assert len(record["itl"]) == 1


# ---- what counts as a success ----------------------------------------------------------

@pytest.mark.parametrize("name, script, framing, ok, error_class, words", [
    ("chunks, usage, [DONE]", [(0, data(CHOICE)), (0, data(CHOICE)), (0, data(USAGE)), (0, DONE)],
     "close", True, None, None),
    ("the same, chunked", [(0, data(CHOICE)), (0, data(USAGE)), (0, DONE)], "chunked", True, None, None),
    # vLLM's benchmark counts this a success (the transport ended cleanly); [DONE] is required here.
    ("chunks, then a clean close without [DONE]", [(0, data(CHOICE)), (0, data(CHOICE)), (0, data(USAGE))],
     "close", False, "stream", "broke off before [DONE] after 2 chunk(s)"),
    # A failure in both: aiohttp raises on a chunked body cut off.
    ("chunks, then a chunked body cut off", [(0, data(CHOICE)), (0.05, None)], "chunked", False, "stream", "the stream broke off: "),
    # vLLM's server sends an error event then [DONE] when generation fails mid-answer; vLLM's benchmark
    # ignores the event and counts a success.
    ("chunks, an error event, [DONE]",
     [(0, data(CHOICE)), (0, data({"error": {"message": "EngineDeadError", "code": 500}})), (0, DONE)],
     "close", False, "stream", "the server reported an error in the stream after 1 chunk(s) with a choice: EngineDeadError"),
    ("only an error event and [DONE]", [(0, data({"error": {"message": "prompt too long", "code": 400}})), (0, DONE)],
     "close", False, "stream", "after 0 chunk(s) with a choice: prompt too long"),
    ("[DONE] without any chunk with a choice", [(0, data({"choices": []})), (0, data(USAGE)), (0, DONE)],
     "close", False, "no_tokens", "no chunk with a choice"),
    ("an event that is not a JSON object", [(0, data(CHOICE)), (0, data(b"[1, 2]")), (0, DONE)],
     "close", False, "stream", "unreadable event: an event is list, not a JSON object"),
    ("an event that is not JSON", [(0, data(CHOICE)), (0, data(b"<html>")), (0, DONE)],
     "close", False, "stream", "unreadable event"),
    ("choices that are not a list", [(0, data({"choices": {"text": "x"}})), (0, DONE)],
     "close", False, "stream", "'choices' is dict, not a list"),
    ("a token count that is not a number", [(0, data(CHOICE)), (0, data({"usage": {"completion_tokens": "3"}})), (0, DONE)],
     "close", False, "stream", "usage.completion_tokens is '3', not a token count"),
])
def test_the_success_rule(scripted, name, script, framing, ok, error_class, words):
    record = scripted(script, framing=framing)
    assert record["ok"] is ok, record["error"]
    assert record["error_class"] == error_class
    if words:
        assert words in record["error"]
    level = vllm_bench.level_metrics(1, [record], 1.0)
    assert (level["completed"], level["failed"]) == ((1, 0) if ok else (0, 1))


def test_output_tokens_are_the_servers_usage_or_else_one_per_chunk(scripted):
    with_usage = scripted([(0, data(CHOICE)), (0, data(CHOICE)), (0, data({"choices": [], "usage": {
        "prompt_tokens": 17, "completion_tokens": 5}})), (0, DONE)])
    assert (with_usage["completion_tokens"], with_usage["prompt_tokens"]) == (5, 17)
    without = scripted([(0, data(CHOICE)), (0.02, data(CHOICE)), (0.02, data(CHOICE)), (0, DONE)])
    assert (without["completion_tokens"], without["prompt_tokens"]) == (3, 3)


def test_a_silent_server_is_a_timeout_within_request_timeout(scripted):
    started = time.monotonic()
    record = scripted([(0, data(CHOICE)), (3.0, DONE)], timeout=0.5)
    assert time.monotonic() - started < 2
    assert record["error_class"] == "timeout" and record["error"] == "no complete answer within 0.5 s"
