# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_probe

PARAMS = dict((key, spec.get("default")) for key, spec in vllm_probe.ARGUMENT_SPEC.items())
PARAMS.update(unit="vllm-tiny-llama.service", model="tiny-llama")


class _OpenAIHandler(BaseHTTPRequestHandler):
    """Answers like vLLM's OpenAI server: /health, and /v1/completions behind an API key."""

    api_key = "k-123"
    completion_tokens = 3

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {}) if self.path == "/health" else self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != "Bearer %s" % self.api_key:
            return self._send(401, {"error": "Unauthorized"})
        if request["model"] != "tiny-llama":
            return self._send(404, {"error": {"message": "The model `%s` does not exist." % request["model"],
                                              "type": "NotFoundError", "code": 404}})
        self._send(200, {"choices": [{"text": " Paris", "index": 0}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": self.completion_tokens}})


@pytest.fixture
def server():
    httpd = HTTPServer(("127.0.0.1", 0), _OpenAIHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def params(**overrides):
    result = dict(PARAMS)
    result.update(overrides)
    return result


def test_completion_with_the_key_is_ready(server):
    answer = vllm_probe.try_completion(params(base_url=server, api_key="k-123"))
    assert answer["ok"] is True
    assert answer["status"] == 200
    assert answer["text"] == " Paris"
    assert answer["completion_tokens"] == 3
    assert answer["latency_s"] >= 0


def test_completion_failures_say_why(server):
    unauthorised = vllm_probe.try_completion(params(base_url=server, api_key="wrong"))
    assert unauthorised["ok"] is False and unauthorised["error"] == "HTTP 401: Unauthorized"
    wrong_model = vllm_probe.try_completion(params(base_url=server, api_key="k-123", model="nope"))
    assert wrong_model["error"] == "HTTP 404: The model `nope` does not exist."
    refused = vllm_probe.try_completion(params(base_url="http://127.0.0.1:9", request_timeout=2))
    assert refused["ok"] is False and refused["status"] is None and refused["error"]


def test_completion_without_tokens_is_not_ready(server, monkeypatch):
    monkeypatch.setattr(_OpenAIHandler, "completion_tokens", 0)
    answer = vllm_probe.try_completion(params(base_url=server, api_key="k-123"))
    assert answer["ok"] is False
    assert answer["error"] == "the completion came back without tokens"


def test_timeout_scales_with_the_checkpoint():
    assert vllm_probe.scaled_timeout(params()) == 600
    # Kimi-K2.5 INT4: about 547 GiB on disk at 8 s/GiB on top of 600 s.
    assert vllm_probe.scaled_timeout(params(checkpoint_bytes=547 * 1024 ** 3)) == 600 + 547 * 8
    assert vllm_probe.scaled_timeout(params(timeout=90, checkpoint_bytes=10 ** 12)) == 90


def state(active="activating", sub="start", restarts=0, job=False, result="success", status=0, code=0):
    return {"active_state": active, "sub_state": sub, "result": result, "n_restarts": restarts,
            "main_pid": 7, "job_pending": job, "invocation_id": "x", "main_started_monotonic": 1.0,
            "active_entered_monotonic": 0.0, "exec_main_status": status, "exec_main_code": code}


def look(unit_state, completion=None, phase=None, tail=None, ready_after=None):
    return {"unit_state": unit_state, "completion": completion, "phase": phase,
            "journal_tail": tail or [], "health": None, "running_s": 12.5, "ready_after_s": ready_after}


@pytest.mark.parametrize("one_look, outcome", [
    (look(state()), "waiting"),
    (look(state("inactive", "dead", job=True)), "waiting"),
    (look(state("active", "running"), completion={"ok": True}), "ready"),
    (look(state("failed", "failed", result="exit-code", status=1)), "failed"),
    (look(state("activating", "auto-restart", restarts=1)), "failed"),
    (look(state("inactive", "dead")), "failed"),
    # The server died while its ExecStartPost probe still ran (recorded: activating/start-post, Result exit-code).
    (look(state("activating", "start-post", result="exit-code", status=1, code=1)), "failed"),
    # A restart queued with --no-block that systemd has not acted on yet.
    (look(state("failed", "failed", job=True, result="exit-code")), "waiting"),
    (look(state("activating", "auto-restart", restarts=1, job=True)), "waiting"),
])
def test_verdict(one_look, outcome):
    assert vllm_probe.verdict(one_look, 0)[0] == outcome


def test_restarts_from_before_the_wait_are_not_a_failure():
    assert vllm_probe.verdict(look(state(restarts=3)), 3)[0] == "waiting"
    assert vllm_probe.verdict(look(state(restarts=4)), 3)[0] == "failed"


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_wait(looks, **overrides):
    clock = FakeClock()
    lines = []
    sequence = iter(looks)
    result = vllm_probe.wait_until_ready(lambda: next(sequence), params(**overrides), lines.append,
                                         sleep=clock.sleep, clock=clock)
    return result, lines, clock


def test_wait_reports_timings_and_phases():
    looks = [
        look(state(), phase="loading weights"),
        look(state(), phase="loading weights (shards 1/2, 50%)"),
        look(state("active", "running"), phase="API server up",
             completion={"ok": True, "latency_s": 0.25, "text": "x", "completion_tokens": 8}, ready_after=41.0),
    ]
    result, lines, clock = run_wait(looks)
    assert result["ready"] is True and not result.get("failed")
    assert result["time_to_ready_s"] == 41.0
    assert result["first_completion_latency_s"] == 0.25
    assert [item["phase"] for item in result["phases"]] == [
        "loading weights", "loading weights (shards 1/2, 50%)", "API server up"]
    assert result["waited_s"] == 10.0
    assert len(lines) == 2 and "loading weights (shards 1/2, 50%)" in lines[1]


def test_wait_fails_fast_with_the_journal_when_the_server_exits():
    tail = ["vllm[9]: ValueError: User-specified max_model_len (1000000) is greater than the derived max_model_len",
            "systemd[1]: vllm-tiny-llama.service: Main process exited, code=exited, status=1/FAILURE"]
    result, dummy, clock = run_wait([look(state()), look(state("activating", "auto-restart", restarts=1), tail=tail)])
    assert result["failed"] is True and result["ready"] is False
    assert "restarting it" in result["msg"]
    assert tail[0] in result["msg"] and tail[1] in result["msg"]
    assert clock.now == 5.0


def test_wait_never_outlasts_its_limit():
    forever = iter(lambda: look(state(), phase="loading weights"), None)
    clock = FakeClock()
    result = vllm_probe.wait_until_ready(lambda: next(forever), params(timeout=62, poll_interval=5), lambda line: None,
                                         sleep=clock.sleep, clock=clock)
    assert result["failed"] is True
    assert "not ready after 1m02s (limit 62 s" in result["msg"]
    assert clock.now == 62.0


def test_a_failed_look_ends_the_wait():
    result, dummy, dummy2 = run_wait([{"failed": True, "msg": "vllm-nope.service: no such unit"}])
    assert result == {"failed": True, "msg": "vllm-nope.service: no such unit", "ready": False}


def test_the_poll_interval_sets_the_time_between_looks():
    looks = [look(state()), look(state()),
             look(state("active", "running"), completion={"ok": True, "latency_s": 0.1, "text": "x",
                                                          "completion_tokens": 8}, ready_after=2.0)]
    result, dummy, clock = run_wait(looks, poll_interval=1)
    assert result["ready"] is True
    assert clock.now == 2.0


@pytest.mark.parametrize("interval", [0, -1])
def test_a_poll_interval_below_one_second_is_refused_before_any_look(interval):
    def look_once():
        raise AssertionError("looked at the host")
    result = vllm_probe.wait_until_ready(look_once, params(poll_interval=interval), lambda line: None,
                                         sleep=lambda seconds: None, clock=FakeClock())
    assert result["failed"] is True and result["ready"] is False
    assert "poll_interval must be at least 1 second, got %d" % interval in result["msg"]
