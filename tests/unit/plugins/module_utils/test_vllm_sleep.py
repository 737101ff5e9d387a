# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/serving/vllm_sleep: the URLs it builds, how it reads vLLM's answers, the errors it gives (each naming
the URL and the fix), and what check mode predicts. No test pretends to be vLLM: where HTTP is needed it is a closed
port or a plain http.server that answers one status to everything. The calls against a real vLLM 0.24 on a GPU are
scripts/sleep_mode_eval.py's, recorded in tests/unit/fixtures/perf/sleep-mode-0.24.json."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_sleep
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_sleep import SleepModeError

RECORDING = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "fixtures", "perf", "sleep-mode-0.24.json")


def closed_port():
    """A port nothing listens on (bound, then released)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def answering(status, headers=None):
    """A plain http.server on 127.0.0.1 that answers every GET and POST with ``status`` and a short text body."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            self.server.paths.append((self.command, self.path))
            body = b"plain status page"
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer  # noqa: N815 (http.server's names)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_port, server.paths
    finally:
        server.shutdown()
        server.server_close()


# URLs


def test_endpoint_joins_the_base_url_and_the_route_without_a_double_slash():
    assert vllm_sleep.endpoint("http://10.0.0.5:8001/", "/is_sleeping") == "http://10.0.0.5:8001/is_sleeping"
    assert vllm_sleep.endpoint("https://gpu-01:8443", "/sleep", {"level": 2}) == "https://gpu-01:8443/sleep?level=2"


def test_endpoint_repeats_the_tags_key_as_vllm_reads_it():
    url = vllm_sleep.endpoint("http://h:8000", "/wake_up", {"tags": ["weights", "kv_cache"]})
    assert url == "http://h:8000/wake_up?tags=weights&tags=kv_cache"
    assert vllm_sleep.endpoint("http://h:8000", "/wake_up", None) == "http://h:8000/wake_up"


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000", "ftp://h/", "http://", "", None])
def test_endpoint_refuses_what_is_not_an_http_url_naming_it(base_url):
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.endpoint(base_url, "/sleep")
    assert "base_url %r" % (base_url,) in str(caught.value)


def test_sleep_refuses_an_unknown_level_or_mode_before_any_request():
    # The port is closed: a request would fail with "cannot connect", not with the level's message.
    url = "http://127.0.0.1:%d" % closed_port()
    with pytest.raises(SleepModeError, match="sleep level 3: vLLM knows 1 .* and 2"):
        vllm_sleep.sleep(url, 3)
    with pytest.raises(SleepModeError, match="sleep mode 'drain': vLLM knows abort, wait, keep"):
        vllm_sleep.sleep(url, 1, mode="drain")


def test_completion_payload_keeps_token_id_prompts_and_is_greedy():
    payload = vllm_sleep.completion_payload("a", [1, 2, 3], 8, {"return_token_ids": True})
    assert payload == {"model": "a", "prompt": [1, 2, 3], "max_tokens": 8, "temperature": 0, "return_token_ids": True}


# Reading vLLM's answers


@pytest.mark.parametrize("body, expected", [(b'{"is_sleeping": true}', True), (b'{"is_sleeping": false}', False),
                                            ('{"is_sleeping": false}', False)])
def test_parse_is_sleeping_reads_vllm_s_answer(body, expected):
    assert vllm_sleep.parse_is_sleeping("http://h/is_sleeping", body) is expected


def test_parse_is_sleeping_names_the_url_for_an_answer_that_is_not_json():
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.parse_is_sleeping("http://h:8001/is_sleeping", b"<html>proxy login</html>")
    assert str(caught.value).startswith("http://h:8001/is_sleeping answered something that is not JSON")
    assert "<html>proxy login</html>" in str(caught.value)


@pytest.mark.parametrize("body", [b'{"is_sleeping": "yes"}', b"{}", b"[true]", b'{"sleeping": true}', b"true"])
def test_parse_is_sleeping_refuses_json_without_a_boolean(body):
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.parse_is_sleeping("http://h:8001/is_sleeping", body)
    assert 'http://h:8001/is_sleeping answered' in str(caught.value)
    assert '{"is_sleeping": true|false}' in str(caught.value)


def test_parse_sleep_mode_flag_reads_the_model_config_of_server_info():
    answer = {"vllm_config": {"model_config": {"enable_sleep_mode": True, "model": "x"}}, "vllm_env": {}}
    assert vllm_sleep.parse_sleep_mode_flag("u", json.dumps(answer).encode()) is True
    answer["vllm_config"]["model_config"]["enable_sleep_mode"] = False
    assert vllm_sleep.parse_sleep_mode_flag("u", json.dumps(answer).encode()) is False
    # The text form (config_format=text) or an older layout says nothing either way.
    assert vllm_sleep.parse_sleep_mode_flag("u", b'{"vllm_config": "model=x, enable_sleep_mode=True"}') is None
    assert vllm_sleep.parse_sleep_mode_flag("u", b"{}") is None


# Errors


def test_a_404_from_a_sleep_route_names_the_url_and_both_settings():
    error = vllm_sleep.explain("POST", "http://h:8002/sleep?level=1", 404, b'{"detail":"Not Found"}')
    assert error.status == 404
    assert str(error).startswith("POST http://h:8002/sleep?level=1 answered 404: the server has no sleep endpoints")
    assert "VLLM_SERVER_DEV_MODE=1" in str(error) and "--enable-sleep-mode" in str(error)


def test_other_answers_carry_the_server_s_own_message_or_the_fix():
    error = vllm_sleep.explain("POST", "http://h/wake_up", 500, b'{"error": "CUDA error:\\n out of memory"}')
    assert str(error) == 'POST http://h/wake_up answered HTTP 500: {"error": "CUDA error:\\n out of memory"}'
    assert "api_key" in str(vllm_sleep.explain("POST", "http://h/v1/completions", 401, b""))
    assert "not followed" in str(vllm_sleep.explain("GET", "http://h/is_sleeping", 307, b""))
    # A completion's 404 is vLLM's "model does not exist": no advice about the sleep routes then.
    error = vllm_sleep.explain("POST", "http://h/v1/completions", 404, b"The model `c` does not exist.", fix_404=None)
    assert "VLLM_SERVER_DEV_MODE" not in str(error) and "The model `c` does not exist." in str(error)


def test_snippet_keeps_long_bodies_short_and_on_one_line():
    assert vllm_sleep.snippet(b"a\n  b\tc") == "a b c"
    assert vllm_sleep.snippet(b"x" * 400, 10) == "x" * 10 + "..."


def test_a_closed_port_names_the_url():
    url = "http://127.0.0.1:%d" % closed_port()
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.is_sleeping(url, timeout=5)
    assert caught.value.status is None
    assert str(caught.value).startswith("GET %s/is_sleeping: cannot connect" % url)
    assert "is the server running and listening there?" in str(caught.value)


def test_a_closed_port_ends_the_completion_wait_at_its_timeout_naming_the_url():
    url = "http://127.0.0.1:%d" % closed_port()
    started = time.monotonic()
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.wait_for_completion(url, "a", timeout=2)
    assert time.monotonic() - started < 10
    assert "no completion within 2 s: POST %s/v1/completions: cannot connect" % url in str(caught.value)


@pytest.mark.parametrize("call, method, route", [
    (vllm_sleep.is_sleeping, "GET", "/is_sleeping"),
    (lambda url: vllm_sleep.sleep(url, 2), "POST", "/sleep?level=2"),
    (lambda url: vllm_sleep.wake_up(url, ["weights"]), "POST", "/wake_up?tags=weights"),
    (vllm_sleep.sleep_mode_enabled, "GET", "/server_info?config_format=json"),
])
def test_a_server_without_the_sleep_routes_gets_the_dev_mode_advice(call, method, route):
    with answering(404) as (url, paths):
        with pytest.raises(SleepModeError) as caught:
            call(url)
    assert paths == [(method, route)]
    assert str(caught.value) == "%s %s%s answered 404: %s" % (method, url, route, vllm_sleep.NO_DEV_ROUTES)


def test_a_refused_completion_fails_at_once_rather_than_waiting():
    with answering(404) as (url, paths):
        started = time.monotonic()
        with pytest.raises(SleepModeError) as caught:
            vllm_sleep.wait_for_completion(url, "a", timeout=60)
    assert time.monotonic() - started < 10 and len(paths) == 1
    assert str(caught.value) == "POST %s/v1/completions answered HTTP 404: plain status page" % url


def test_a_redirect_is_not_followed_so_the_key_stays_with_the_server():
    with answering(302, {"Location": "http://127.0.0.1:%d/v1/completions" % closed_port()}) as (url, paths):
        with pytest.raises(SleepModeError) as caught:
            vllm_sleep.completion(url, "a", api_key="secret")
    assert caught.value.status == 302 and "not followed" in str(caught.value)
    assert paths == [("POST", "/v1/completions")]


# What the module does with what it reads


@pytest.mark.parametrize("state, sleeping, expected", [
    ("asleep", False, True), ("asleep", True, False), ("awake", True, True), ("awake", False, False)])
def test_needs_change(state, sleeping, expected):
    assert vllm_sleep.needs_change(state, sleeping) is expected


def test_needs_change_refuses_an_unknown_state():
    with pytest.raises(SleepModeError, match="state 'off': use one of asleep, awake"):
        vllm_sleep.needs_change("off", False)


def no_call(name):
    def fail(*args, **kwargs):
        raise AssertionError("%s was called" % name)
    return fail


@pytest.fixture
def server_state(monkeypatch):
    """vllm_sleep's reads and writes replaced: ``state["sleeping"]`` is what /is_sleeping says; writes are recorded."""
    state = {"sleeping": False, "calls": [], "flag": True}
    monkeypatch.setattr(vllm_sleep, "is_sleeping", lambda url, timeout=30: state["sleeping"])
    monkeypatch.setattr(vllm_sleep, "sleep_mode_enabled", lambda url, timeout=60: state["flag"])

    def sleep(url, level=1, timeout=120, mode=None):
        state["calls"].append(("sleep", level, mode))
        state["sleeping"] = True

    def wake_up(url, tags=None, timeout=120):
        state["calls"].append(("wake_up", tags))
        state["sleeping"] = False
    monkeypatch.setattr(vllm_sleep, "sleep", sleep)
    monkeypatch.setattr(vllm_sleep, "wake_up", wake_up)
    monkeypatch.setattr(vllm_sleep, "wait_for_completion", lambda *args: {"completion_tokens": 8})
    return state


@pytest.mark.parametrize("state, sleeping, changed", [
    ("asleep", False, True), ("asleep", True, False), ("awake", True, True), ("awake", False, False)])
def test_check_mode_predicts_from_is_sleeping_and_sends_nothing(monkeypatch, server_state, state, sleeping, changed):
    server_state["sleeping"] = sleeping
    monkeypatch.setattr(vllm_sleep, "sleep", no_call("sleep"))
    monkeypatch.setattr(vllm_sleep, "wake_up", no_call("wake_up"))
    result = vllm_sleep.reach_state({"base_url": "http://h:8001", "state": state}, check_mode=True)
    assert result["changed"] is changed
    assert result["was_sleeping"] is sleeping
    assert result["is_sleeping"] is (state == "asleep")
    assert result["seconds"] == {"sleep_s": None, "wake_s": None, "first_completion_s": None, "total_s": None}


def test_reach_state_sleeps_with_the_level_and_mode_asked_and_reads_the_state_back(server_state):
    result = vllm_sleep.reach_state({"base_url": "http://h", "state": "asleep", "level": 2, "mode": "wait"})
    assert server_state["calls"] == [("sleep", 2, "wait")]
    assert (result["changed"], result["was_sleeping"], result["is_sleeping"]) == (True, False, True)
    assert result["seconds"]["sleep_s"] is not None and result["seconds"]["wake_s"] is None


def test_reach_state_wakes_and_waits_for_a_completion_only_when_a_model_is_given(server_state):
    server_state["sleeping"] = True
    result = vllm_sleep.reach_state({"base_url": "http://h", "state": "awake", "model": "a"})
    assert server_state["calls"] == [("wake_up", None)]
    assert result["completion"] == {"completion_tokens": 8} and result["seconds"]["first_completion_s"] is not None
    server_state["sleeping"] = True
    result = vllm_sleep.reach_state({"base_url": "http://h", "state": "awake"})
    assert result["completion"] is None and result["seconds"]["first_completion_s"] is None


def test_reach_state_leaves_a_server_already_in_state_alone(monkeypatch, server_state):
    server_state["sleeping"] = True
    monkeypatch.setattr(vllm_sleep, "sleep", no_call("sleep"))
    result = vllm_sleep.reach_state({"base_url": "http://h", "state": "asleep", "level": 2})
    assert (result["changed"], result["is_sleeping"]) == (False, True)


def test_a_server_without_enable_sleep_mode_is_not_put_to_sleep(monkeypatch, server_state):
    server_state["flag"] = False
    monkeypatch.setattr(vllm_sleep, "sleep", no_call("sleep"))
    with pytest.raises(SleepModeError) as caught:
        vllm_sleep.reach_state({"base_url": "http://h:8001/", "state": "asleep"})
    assert str(caught.value).startswith("http://h:8001 runs without --enable-sleep-mode")
    assert "restart it with --enable-sleep-mode" in str(caught.value)


def test_a_server_info_that_does_not_say_is_no_refusal(server_state):
    server_state["flag"] = None  # an older vLLM's /server_info, or its text form
    vllm_sleep.reach_state({"base_url": "http://h:8001", "state": "asleep"})
    assert server_state["calls"] == [("sleep", 1, None)]


def test_an_unreadable_server_info_leaves_the_flag_open_but_a_missing_route_fails(monkeypatch):
    def answer(status):
        def sleep_mode_enabled(url, timeout=60):
            raise SleepModeError("GET %s/server_info answered HTTP %s" % (url, status), status)
        return sleep_mode_enabled
    monkeypatch.setattr(vllm_sleep, "sleep_mode_enabled", answer(500))
    vllm_sleep.refuse_without_sleep_mode("http://h", 5)
    monkeypatch.setattr(vllm_sleep, "sleep_mode_enabled", answer(404))
    with pytest.raises(SleepModeError, match="answered HTTP 404"):
        vllm_sleep.refuse_without_sleep_mode("http://h", 5)


# The recording


def test_the_gpu_recording_shows_switches_of_seconds_with_the_weights_intact():
    """The facts docs/sleep-mode.md states, as recorded (sleep_mode_eval.py, vLLM 0.24.0 on an H100)."""
    with open(RECORDING) as handle:
        record = json.load(handle)
    assert record["versions"]["vllm"] == "0.24.0" and not record.get("error") and not record["skipped"]
    switches = record["switches"]
    assert len(switches) == 6 and all(switch["same_ids_as_cold_start"] for switch in switches)
    assert all(switch["before"] == {"sleep_url": False, "wake_url": True} for switch in switches)
    assert all(switch["after"] == {"sleep_url": True, "wake_url": False} for switch in switches)
    steps = {step["step"]: step for step in record["steps"]}
    assert min(steps["cold_start_a"]["seconds"], steps["cold_start_b"]["seconds"]) > 20 * max(
        switch["seconds"]["total_s"] for switch in switches)
    # A sleeping server holds a request until it is woken, then answers it.
    assert steps["request_to_sleeping_b"]["pending_after_5s"] is True
    assert steps["request_to_sleeping_b"]["result"]["answer"]["status"] == 200
    # The default sleep ends a running request with HTTP 200 and finish_reason "abort"; mode=wait lets it finish.
    assert steps["sleep_a_mode_default_with_request_running"]["running_request"]["answer"]["finish_reason"] == "abort"
    assert steps["sleep_a_mode_wait_with_request_running"]["running_request"]["answer"]["finish_reason"] == "length"
