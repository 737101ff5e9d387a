# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM units' watchdog (roles/vllm_watchdog/files/vllm_watchdog.py), one run per test step, against a
real local HTTP server that answers, hangs past the request timeout, or serves /metrics with rising or flat
generation tokens, and a fake ``systemctl`` on PATH that records its argv and reports the ActiveState set."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FILES = os.path.join(ROOT, "roles", "vllm_watchdog", "files")
# The readiness probe a look runs is vllm_service's.
READY = os.path.join(ROOT, "roles", "vllm_service", "files", "vllm_ready.py")
UNIT = "vllm-tiny-llama.service"
KEY = "gauntlet-watchdog-key-7f3e91ab"
TIMEOUT = 0.5


def _load():
    spec = importlib.util.spec_from_file_location("gauntlet_vllm_watchdog", os.path.join(FILES, "vllm_watchdog.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WATCHDOG = _load()


class Server:
    """What the fake vLLM does: ``mode`` ok or hang for completions; /metrics with ``tokens`` (None: no series)."""

    def __init__(self):
        self.mode = "ok"
        self.tokens = 0.0
        self.step = 0.0
        self.completions = 0
        self.keys = []


def _handler(server):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, body, kind="application/json"):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/metrics":
                return self._send(404, "{}")
            server.tokens = None if server.tokens is None else server.tokens + server.step
            lines = ["# TYPE vllm:generation_tokens_total counter"]
            if server.tokens is not None:
                lines.append('vllm:generation_tokens_total{engine="0",model_name="tiny-llama"} %s' % server.tokens)
            return self._send(200, "\n".join(lines) + "\n", "text/plain")

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            server.completions += 1
            server.keys.append(self.headers.get("Authorization"))
            if server.mode == "hang":
                time.sleep(TIMEOUT * 4)
                return None
            return self._send(200, json.dumps({"choices": [{"text": "!"}], "usage": {"completion_tokens": 1}}))
    return Handler


@pytest.fixture
def vllm():
    server = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server.url = "http://127.0.0.1:%d" % httpd.server_address[1]
    yield server
    httpd.shutdown()
    httpd.server_close()


FAKE_SYSTEMCTL = """#!/bin/sh
printf '%s\\n' "$*" >> "{calls}"
if [ "$1" = show ]; then cat "{state}"; fi
exit 0
"""


class Host:
    """The fake host: systemctl on PATH, hold, state, textfile and runtime unit directories under tmp_path."""

    def __init__(self, tmp_path, monkeypatch):
        self.tmp = tmp_path
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        self.calls_file = tmp_path / "systemctl.calls"
        self.state_file = tmp_path / "active-state"
        self.set_active("active")
        script = bin_dir / "systemctl"
        script.write_text(FAKE_SYSTEMCTL.format(calls=self.calls_file, state=self.state_file))
        script.chmod(0o755)
        monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
        self.hold_dir = tmp_path / "hold"
        self.textfile_dir = tmp_path / "node-exporter"
        self.runtime = tmp_path / "run-systemd"
        self.watchdog_state = tmp_path / "state" / "watchdog" / (UNIT + ".json")

    def set_active(self, state):
        self.state_file.write_text(state + "\n")

    def calls(self):
        return self.calls_file.read_text().splitlines() if self.calls_file.exists() else []

    def acts(self):
        """The systemctl calls other than the ActiveState reads."""
        return [call for call in self.calls() if not call.startswith("show ")]

    def argv(self, url, failures=3, max_restarts=3, extra=()):
        return ["--unit", UNIT, "--url", url, "--model", "tiny-llama", "--failures", str(failures),
                "--max-restarts", str(max_restarts), "--request-timeout", str(TIMEOUT),
                "--state-file", str(self.watchdog_state), "--textfile-dir", str(self.textfile_dir),
                "--hold-dir", str(self.hold_dir), "--runtime-unit-dir", str(self.runtime),
                "--ready", READY] + list(extra)

    def run(self, url, **kwargs):
        assert WATCHDOG.main(self.argv(url, **kwargs)) == 0
        return self.state()

    def state(self):
        return json.loads(self.watchdog_state.read_text())

    def seed(self, **values):
        state = WATCHDOG.fresh_state(UNIT)
        state.update(values)
        self.watchdog_state.parent.mkdir(parents=True, exist_ok=True)
        self.watchdog_state.write_text(json.dumps(state))

    def textfile(self):
        return (self.textfile_dir / "gauntlet_vllm_watchdog_vllm_tiny_llama_service.prom").read_text()

    def drop_in(self):
        return self.runtime / (UNIT + ".d") / "50-gauntlet-watchdog-gave-up.conf"


@pytest.fixture
def host(tmp_path, monkeypatch):
    return Host(tmp_path, monkeypatch)


def _metric(text, name):
    for line in text.splitlines():
        if line.startswith("gauntlet_vllm_watchdog_%s{" % name):
            return float(line.rsplit(None, 1)[1])
    return None


@pytest.mark.parametrize("active", ["activating", "inactive", "failed", "deactivating"])
def test_a_unit_that_is_not_active_is_not_probed_and_the_count_restarts(host, vllm, active, capsys):
    host.seed(consecutive_failures=2)
    vllm.mode = "hang"
    host.set_active(active)
    for dummy in range(3):
        state = host.run(vllm.url, failures=2)
    assert vllm.completions == 0
    assert host.acts() == []
    assert state["consecutive_failures"] == 0
    # The reason is logged when it changes only.
    assert capsys.readouterr().out.count("unit is %s, not active" % active) == 1


def test_a_held_unit_is_not_probed_until_the_hold_expires(host, vllm, capsys):
    host.hold_dir.mkdir()
    hold = host.hold_dir / UNIT
    hold.write_text("%d\n" % (time.time() + 600))
    host.seed(consecutive_failures=1)
    vllm.mode = "hang"
    state = host.run(vllm.url, failures=2)
    assert vllm.completions == 0 and host.acts() == [] and state["consecutive_failures"] == 0
    assert "held by a deploy" in capsys.readouterr().out
    hold.write_text("%d\n" % (time.time() - 1))
    state = host.run(vllm.url, failures=2)
    assert vllm.completions == 1 and state["consecutive_failures"] == 1


def test_a_hold_that_is_not_epoch_seconds_counts_as_held(host, vllm):
    host.hold_dir.mkdir()
    (host.hold_dir / UNIT).write_text("soon")
    state = host.run(vllm.url)
    assert vllm.completions == 0 and "not epoch seconds" in state["last_skip"]


def test_fewer_than_n_failed_looks_restart_nothing(host, vllm, capsys):
    vllm.mode = "hang"
    for dummy in range(2):
        state = host.run(vllm.url, failures=3)
    assert state["consecutive_failures"] == 2 and state["restarts_total"] == 0
    assert host.acts() == []
    assert state["last_probe"]["ok"] is False and "timed out" in state["last_probe"]["reason"]
    assert "failed look 2 of 3" in capsys.readouterr().out
    assert _metric(host.textfile(), "consecutive_failures") == 2 and _metric(host.textfile(), "probe_success") == 0


def test_n_failed_looks_restart_the_unit_and_say_why(host, vllm, capsys):
    vllm.mode = "hang"
    for dummy in range(3):
        state = host.run(vllm.url, failures=3)
    assert host.acts() == ["kill --signal=SIGKILL %s" % UNIT, "restart --no-block %s" % UNIT]
    assert state["restarts_total"] == 1 and len(state["restarts"]) == 1 and state["consecutive_failures"] == 0
    assert state["last_restart"]["reason"] == state["last_probe"]["reason"]
    out = capsys.readouterr().out
    assert "%s: restarted after 3 failed looks in a row (last: " % UNIT in out and "killed first; restart 1 of 3 this hour" in out
    assert _metric(host.textfile(), "restarts_total") == 1


def test_a_probe_that_passes_resets_the_count(host, vllm):
    vllm.mode = "hang"
    host.run(vllm.url, failures=2)
    vllm.mode = "ok"
    state = host.run(vllm.url, failures=2)
    vllm.mode = "hang"
    state = host.run(vllm.url, failures=2)
    assert state["consecutive_failures"] == 1 and host.acts() == []


def test_a_busy_server_whose_tokens_rise_is_never_restarted(host, vllm, capsys):
    vllm.mode, vllm.step = "hang", 50.0
    for dummy in range(5):
        state = host.run(vllm.url, failures=2)
    assert host.acts() == [] and state["restarts_total"] == 0 and state["consecutive_failures"] == 0
    assert state["last_probe"]["ok"] is False and "busy, not hung" in state["last_probe"]["reason"]
    assert state["generation_tokens"] == 250.0


@pytest.mark.parametrize("tokens", [0.0, None], ids=["flat", "absent"])
def test_flat_or_missing_tokens_do_not_excuse_a_failed_probe(host, vllm, tokens):
    vllm.mode, vllm.tokens, vllm.step = "hang", tokens, 0.0
    for dummy in range(2):
        state = host.run(vllm.url, failures=2)
    assert host.acts() == ["kill --signal=SIGKILL %s" % UNIT, "restart --no-block %s" % UNIT] and state["restarts_total"] == 1


def test_after_k_restarts_in_the_hour_it_gives_up_and_leaves_the_unit_failed(host, vllm, capsys):
    now = time.time()
    host.seed(restarts=[now - 600], restarts_total=4)
    vllm.mode = "hang"
    for dummy in range(2):
        state = host.run(vllm.url, failures=2, max_restarts=1)
    assert host.acts() == ["daemon-reload", "kill --signal=SIGKILL %s" % UNIT]
    drop_in = host.drop_in().read_text()
    assert "[Service]\nRestart=no\n" in drop_in and "Restart=on-failure" in drop_in
    assert state["gave_up"] is True and state["restarts_total"] == 4
    assert _metric(host.textfile(), "gave_up") == 1
    out = capsys.readouterr().out
    assert "%s: giving up: 2 failed looks in a row" % UNIT in out and "1 restart(s) within the hour (at most 1)" in out
    # Killed, the unit is failed: the watchdog leaves it be, gave_up stays.
    host.set_active("failed")
    state = host.run(vllm.url, failures=2, max_restarts=1)
    assert host.acts() == ["daemon-reload", "kill --signal=SIGKILL %s" % UNIT] and state["gave_up"] is True


def test_a_node_of_a_multi_node_group_is_killed_at_once_never_restarted(host, vllm, capsys):
    vllm.mode = "hang"
    state = host.run(vllm.url, failures=2, max_restarts=3, extra=["--group-node"])
    assert host.acts() == [] and state["consecutive_failures"] == 1
    state = host.run(vllm.url, failures=2, max_restarts=3, extra=["--group-node"])
    # No restart (the node could not rejoin) and no drop-in (its unit has Restart=no already): a kill.
    assert host.acts() == ["kill --signal=SIGKILL %s" % UNIT]
    assert state["gave_up"] is True and state["restarts_total"] == 0 and not host.drop_in().exists()
    assert _metric(host.textfile(), "gave_up") == 1
    assert "a node of a multi-node group is not restarted alone, so it is killed" in capsys.readouterr().out
    # The group started again by a re-run answers: the give-up is lifted.
    host.set_active("active")
    vllm.mode = "ok"
    state = host.run(vllm.url, failures=2, max_restarts=3, extra=["--group-node"])
    assert state["gave_up"] is False and _metric(host.textfile(), "gave_up") == 0


def test_restarts_older_than_an_hour_do_not_count(host, vllm):
    host.seed(restarts=[time.time() - 3700], restarts_total=1)
    vllm.mode = "hang"
    for dummy in range(2):
        state = host.run(vllm.url, failures=2, max_restarts=1)
    assert host.acts() == ["kill --signal=SIGKILL %s" % UNIT, "restart --no-block %s" % UNIT] and state["gave_up"] is False
    assert len(state["restarts"]) == 1 and state["restarts_total"] == 2


def test_a_unit_started_again_and_answering_lifts_the_give_up(host, vllm, capsys):
    host.seed(gave_up=True, restarts=[time.time() - 60])
    host.drop_in().parent.mkdir(parents=True)
    host.drop_in().write_text(WATCHDOG.DROP_IN.format(restarts=1))
    state = host.run(vllm.url, failures=2, max_restarts=1)
    assert state["gave_up"] is False and not host.drop_in().exists()
    assert host.acts() == ["daemon-reload"]
    assert _metric(host.textfile(), "gave_up") == 0 and _metric(host.textfile(), "probe_success") == 1
    assert "the give-up is lifted" in capsys.readouterr().out


def test_a_drop_in_the_watchdog_did_not_write_is_left_alone(host, vllm):
    host.seed(gave_up=True)
    host.drop_in().parent.mkdir(parents=True)
    host.drop_in().write_text("[Service]\nRestart=no\n")
    host.run(vllm.url)
    assert host.drop_in().read_text() == "[Service]\nRestart=no\n" and host.acts() == []


def test_the_state_file_and_textfile_hold_the_design_fields(host, vllm):
    host.set_active("activating")
    host.run(vllm.url)
    # Before the first probe there is no probe_success series.
    assert _metric(host.textfile(), "probe_success") is None
    host.set_active("active")
    before = time.time()
    state = host.run(vllm.url)
    assert {"unit", "consecutive_failures", "restarts", "restarts_total", "gave_up", "last_probe", "last_restart",
            "generation_tokens"} <= set(state)
    assert state["unit"] == UNIT and state["last_probe"]["ok"] is True and state["last_probe"]["time"] >= before
    assert state["generation_tokens"] == 0.0 and state["last_restart"] is None
    text = host.textfile()
    for name, kind in (("restarts_total", "counter"), ("consecutive_failures", "gauge"), ("probe_success", "gauge"),
                       ("gave_up", "gauge"), ("last_run_timestamp_seconds", "gauge")):
        assert "# TYPE gauntlet_vllm_watchdog_%s %s\n" % (name, kind) in text
        assert 'gauntlet_vllm_watchdog_%s{unit="%s"} ' % (name, UNIT) in text
    assert _metric(text, "last_run_timestamp_seconds") >= before
    assert os.listdir(str(host.textfile_dir)) == ["gauntlet_vllm_watchdog_vllm_tiny_llama_service.prom"]


def test_a_write_that_fails_leaves_the_old_file_whole_and_no_temporary(host, monkeypatch):
    target = host.tmp / "out" / "metrics.prom"
    WATCHDOG.atomic_write(str(target), "old\n")

    def broken(source, dest):
        raise OSError("disk full")
    monkeypatch.setattr(WATCHDOG.os, "replace", broken)
    with pytest.raises(OSError):
        WATCHDOG.atomic_write(str(target), "new\n")
    assert target.read_text() == "old\n" and os.listdir(str(target.parent)) == ["metrics.prom"]


def test_an_unreadable_state_file_is_kept_aside_and_counting_starts_afresh(host, vllm):
    host.watchdog_state.parent.mkdir(parents=True)
    host.watchdog_state.write_text("{not json")
    state = host.run(vllm.url)
    kept = [name for name in os.listdir(str(host.watchdog_state.parent)) if ".unreadable-" in name]
    assert len(kept) == 1 and (host.watchdog_state.parent / kept[0]).read_text() == "{not json"
    assert state["restarts_total"] == 0 and state["last_probe"]["ok"] is True


def test_the_api_key_goes_through_the_environment_only(host, vllm, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    host.run(vllm.url)
    assert vllm.keys == ["Bearer " + KEY]
    assert KEY not in " ".join(host.argv(vllm.url))


@pytest.mark.parametrize("mode,status", [("ok", 0), ("hang", 1)])
def test_vllm_ready_once_makes_a_single_attempt(vllm, mode, status):
    vllm.mode = mode
    started = time.monotonic()
    done = subprocess.run([sys.executable, READY, "--once", "--url", vllm.url, "--model", "m",
                           "--request-timeout", str(TIMEOUT), "--interval", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=20)
    assert done.returncode == status, done.stdout
    assert vllm.completions == 1 and time.monotonic() - started < 10


def test_the_watchdog_role_and_its_script_name_the_same_runtime_files():
    """The role holds, resets and cleans up what the script reads and writes: the hold, the gave-up drop-in, the
    textfile."""
    with open(os.path.join(ROOT, "roles", "vllm_watchdog", "vars", "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    args = WATCHDOG.parse_args(["--unit", "vllm-x.service", "--url", "http://127.0.0.1:1", "--model", "m",
                                "--state-file", "/tmp/s.json", "--textfile-dir", "/tmp/t"])
    assert role_vars["_vllm_watchdog_hold_dir"] == args.hold_dir
    assert role_vars["_vllm_watchdog_drop_in"] == (
        args.runtime_unit_dir + "/{{ vllm_watchdog_unit }}.d/" + WATCHDOG.DROP_IN_NAME)
    # The role removes the textfile the script writes: the same name for the same unit.
    textfile = role_vars["_vllm_watchdog_textfile"].strip()
    assert textfile.startswith("{{ vllm_watchdog_textfile_dir }}/gauntlet_vllm_watchdog_")
    assert os.path.basename(WATCHDOG.textfile_path("/d", "vllm-x.service")) == "gauntlet_vllm_watchdog_vllm_x_service.prom"
    assert "regex_replace('[^A-Za-z0-9_]', '_')" in textfile and textfile.endswith(".prom")


def test_two_units_that_map_to_one_textfile_never_overwrite_each_other(host, vllm, capsys):
    # vllm-tiny-llama.service and vllm-tiny_llama.service fold into one file name (issue 34): the second unit's
    # watchdog still looks at its unit, but leaves the first one's metrics alone and says why (exit status 1).
    vllm.mode = "hang"
    host.run(vllm.url, failures=3)
    first = host.textfile()
    other = "vllm-tiny_llama.service"
    other_state = host.tmp / "state" / "watchdog" / (other + ".json")
    argv = host.argv(vllm.url, failures=3)
    argv[argv.index(UNIT)] = other
    argv[argv.index(str(host.watchdog_state))] = str(other_state)
    assert WATCHDOG.main(argv) == 1
    assert host.textfile() == first and 'unit="%s"' % UNIT in first
    out = capsys.readouterr().out
    assert "holds the metrics of %s, and %s maps to the same file name" % (UNIT, other) in out
    assert json.loads(other_state.read_text())["consecutive_failures"] == 1
    # The unit that owns the file goes on writing it.
    assert WATCHDOG.main(host.argv(vllm.url, failures=3)) == 0
    assert _metric(host.textfile(), "consecutive_failures") == 2


def test_the_role_refuses_a_unit_whose_textfile_holds_another_units_metrics(tmp_path):
    # The role's side of the same fold: refused before this unit's watchdog is installed or its textfile removed.
    from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook
    textfile = tmp_path / "gauntlet_vllm_watchdog_vllm_tiny_llama_service.prom"
    textfile.write_text('gauntlet_vllm_watchdog_gave_up{unit="vllm-tiny-llama.service"} 0\n')
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "tasks": [{"ansible.builtin.include_role": {"name": "gauntlet.vllm.vllm_watchdog"},
                   "vars": {"vllm_watchdog_unit": "vllm-tiny_llama.service", "vllm_watchdog_url": "http://127.0.0.1:9",
                            "vllm_watchdog_model": "m", "vllm_watchdog_env_file": "/nonexistent",
                            "vllm_watchdog_textfile_dir": str(tmp_path)}}]}]))
    run = run_playbook(["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable, str(play)])
    assert run.returncode != 0
    assert ('holds the watchdog metrics of another unit (unit="vllm-tiny-llama.service"), and '
            'vllm-tiny_llama.service maps to the same file name') in " ".join(run.stdout.split()), run.stdout[-2000:]
    assert "Install the watchdog script" not in run.stdout
    assert textfile.read_text().startswith('gauntlet_vllm_watchdog_gave_up{unit="vllm-tiny-llama.service"}')
