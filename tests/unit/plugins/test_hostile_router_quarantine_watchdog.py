# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 34, hostile input on the router (role vllm_router and its modules), venv_quarantine's restore and the
watchdog's state file: a line break in an option that would become a working haproxy.cfg or environment line, a
port HAProxy refuses without a word, a NaN timeout that polls forever, a FIFO that blocks a restore or the watchdog,
a restore that stops halfway, a state file that stops the watchdog on every run.

The role's checks run through a real ``ansible-playbook`` (the role's validate tasks on localhost); a test that
could block on a FIFO runs its call in a thread and opens the FIFO for writing when it blocks, so a regression
fails the test instead of hanging the suite."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import threading

import pytest
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet import vllm_router as vr
from ansible_collections.gauntlet.vllm.plugins.module_utils.install import venv_quarantine
from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_quarantine import (
    VenvQuarantineError,
    quarantine_venv,
    restore_quarantine,
)
from ansible_collections.gauntlet.vllm.plugins.modules import venv_quarantine as venv_quarantine_module
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_router_server
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import skip_under_mutation
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_venv_integrity import (
    base_venv,
    clone_venv,
    site_packages,
)
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_vllm_router import Api, Clock, params
from ansible_collections.gauntlet.vllm.tests.unit.roles.test_vllm_router_role import haproxy, write_config
from ansible_collections.gauntlet.vllm.tests.unit.roles import test_vllm_watchdog as watchdog_tests
from ansible_collections.gauntlet.vllm.tests.unit.roles.test_vllm_watchdog import UNIT, WATCHDOG, Host

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROUTER_ROLE = os.path.join(ROOT, "roles", "vllm_router")
EVIL_SERVER = "\n    server evil 10.0.0.66:8000"
STRAYS = ("vllm/model_executor/models/local_hack.py", "vllm/model_executor/models/local_hack_2.py")
# The watchdog tests' fake vLLM server (a fixture): it answers completions and serves /metrics.
vllm = watchdog_tests.vllm


# ---- helpers -------------------------------------------------------------------------------------------------

def run_router_validate(tmp_path, **overrides):
    """Run the role vllm_router's validate tasks on localhost with the given variables (JSON extra vars, so a line
    break arrives as it is); returns (exit status, output)."""
    values = {"vllm_router_backends": [{"name": "gpu-01", "address": "10.0.0.11", "port": 8000}],
              "vllm_router_model": "tiny-llama"}
    values.update(overrides)
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(values))
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "tasks": [{"ansible.builtin.include_role": {"name": "gauntlet.vllm.vllm_router", "tasks_from": "validate"}}]}]))
    collections = os.path.join(ROOT, ".rig", "collections")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
        [collections] + [p for p in [os.environ.get("ANSIBLE_COLLECTIONS_PATH")] if p]),
        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    skip_under_mutation()
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(playbook),
               "-e", "@%s" % extra]
    done = subprocess.run(command, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def without_hanging(call, fifos, seconds=10):
    """``call()``'s result; when it is still running after ``seconds`` (blocked in an open of a FIFO), each FIFO is
    opened for writing, which lets the blocked reader go on, and the test fails."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # pylint: disable=broad-except
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(str(fifo), os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(10)
        pytest.fail("blocked for more than %ss, waiting on a FIFO" % seconds)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def venv(tmp_path_factory, tmp_path):
    return clone_venv(base_venv(tmp_path_factory), tmp_path / "venv")


def quarantined_strays(venv):
    """Two stray modules moved into a new quarantine folder; returns (result, [original paths])."""
    site = site_packages(venv)
    originals = []
    for relative in STRAYS:
        path = os.path.join(site, relative)
        with open(path, "w") as handle:
            handle.write("# %s, not from any wheel\n" % relative)
        originals.append(path)
    result = quarantine_venv(venv, ["vllm"], backup_modified=False)
    assert [entry["original"] for entry in result["entries"]] == originals
    return result, originals


def edit_manifest(result, edit):
    with open(result["manifest"]) as handle:
        manifest = json.load(handle)
    edit(manifest)
    with open(result["manifest"], "w") as handle:
        json.dump(manifest, handle)


class BoundedSleep(Clock):
    """The fake clock, but a wait that would never end fails after 10,000 sleeps instead of spinning forever."""

    def __init__(self):
        super(BoundedSleep, self).__init__()
        self.sleeps = 0

    def sleep(self, seconds):
        self.sleeps += 1
        assert self.sleeps < 10000, "the wait never ends"
        super(BoundedSleep, self).sleep(seconds)


# ---- 1. line breaks in the router role's plain strings ------------------------------------------------------

@pytest.mark.parametrize("variable,value", [
    ("vllm_router_check_interval", "1s" + EVIL_SERVER),
    ("vllm_router_check_timeout", "10s" + EVIL_SERVER),
    ("vllm_router_timeout_server", "600s" + EVIL_SERVER),
    ("vllm_router_retry_on", ["conn-failure", "503" + EVIL_SERVER]),
    ("vllm_router_bind_address", "127.0.0.1:9999\n    bind 0.0.0.0"),
    ("vllm_router_stats_bind_address", "127.0.0.1:9998\n    bind 0.0.0.0"),
    ("vllm_router_bind_address", "0.0.0.0 # everything"),
    ("vllm_router_backends", [{"name": "gpu-01\n", "address": "10.0.0.11", "port": 8000}]),
    ("vllm_router_backends", [{"name": "gpu-01", "address": "10.0.0.11\n", "port": 8000}]),
    ("vllm_router_model", "tiny-llama\r"),
    ("vllm_router_backends", [{"name": "gpu-01", "address": "10.0.0.11", "port": 8000, "models": ["tiny\nx y"]}]),
    ("vllm_router_session_header", "X-Session-ID\r\nX-Evil: 1"),
], ids=["check_interval", "check_timeout", "timeout_server", "retry_on", "bind_address", "stats_bind_address",
        "bind_comment", "backend_name", "backend_address", "model", "backend_models", "session_header"])
def test_a_line_break_in_a_router_option_is_refused_naming_it(tmp_path, variable, value):
    status, output = run_router_validate(tmp_path, **{variable: value})
    assert status != 0, output
    assert variable in output and "failed=1" in output, output


def test_a_router_api_key_with_a_line_break_is_refused_and_never_shown(tmp_path):
    key = "gauntlet-key-9f1c\nLD_PRELOAD=/tmp/evil.so"
    status, output = run_router_validate(tmp_path, vllm_router_api_key=key)
    assert status != 0 and "vllm_router_api_key" in output, output
    assert "gauntlet-key-9f1c" not in output and "evil.so" not in output


def test_router_defaults_pass_the_role_checks(tmp_path):
    status, output = run_router_validate(tmp_path, vllm_router_bind_address="", vllm_router_retry_on=["conn-failure", 503],
                                         vllm_router_api_key="abc-DEF_1.2~3+4/5=6:7")
    assert status == 0, output


def test_a_router_server_name_with_a_line_break_is_refused_before_any_command():
    api = Api()
    for option, value in (("server", "gpu-01\n"), ("backend", "vllm\nshow sess")):
        with pytest.raises(vr.RouterError, match="^%s must be" % option):
            vr.router_server(params(**{option: value}), command=api)
    with pytest.raises(vr.RouterError, match="^backend must be"):
        vr.router_info({"socket": "/run/haproxy/admin.sock", "backend": "vllm;show sess"}, command=api)
    assert api.commands == []


# ---- 2. a port HAProxy refuses, refused with a reason -------------------------------------------------------

@pytest.mark.parametrize("port", [70000, 0, -1, "8000\n", True])
def test_a_backend_port_out_of_range_is_refused_naming_the_backend(tmp_path, port):
    backends = [{"name": "gpu-01", "address": "10.0.0.11", "port": 8000},
                {"name": "gpu-02", "address": "10.0.0.12", "port": port}]
    status, output = run_router_validate(tmp_path, vllm_router_backends=backends)
    assert status != 0, output
    assert "gpu-02" in output and "port" in output, output


def test_haproxy_check_in_the_install_task_prints_haproxys_reason(tmp_path):
    """The template task's ``validate:`` command, run as Ansible runs it on a configuration HAProxy refuses: its
    output must say why (``-q`` would leave Ansible's failure without a word)."""
    with open(os.path.join(ROUTER_ROLE, "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    command = [task["ansible.builtin.template"]["validate"] for task in tasks
               if task.get("ansible.builtin.template", {}).get("src") == "haproxy.cfg.j2"][0]
    config = write_config(tmp_path, vllm_router_backends=[{"name": "gpu-01", "address": "127.0.0.1", "port": 70000}])
    words = [haproxy() if word == "/usr/sbin/haproxy" else word.replace("%s", str(config)) for word in command.split()]
    done = subprocess.run(words, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "invalid port '70000'" in done.stdout + done.stderr


# ---- 3. vllm_router_server: a timeout that never runs out ---------------------------------------------------

@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "-1"])
def test_a_non_finite_router_timeout_fails_naming_it(run_module, tmp_path, timeout):
    result, failed = run_module(vllm_router_server.main, {
        "socket": str(tmp_path / "admin.sock"), "server": "gpu-01", "state": "drain", "wait": "idle", "timeout": timeout})
    assert failed and result["msg"].startswith("timeout must be"), result
    assert timeout.lstrip("-") in result["msg"]


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), "300", True, None])
def test_router_server_refuses_a_timeout_it_could_never_reach_before_acting(timeout):
    api = Api()
    api.servers["gpu-01"]["scur"] = [3]  # never idle
    clock = BoundedSleep()
    with pytest.raises(vr.RouterError, match="^timeout must be"):
        vr.router_server(params(wait="idle", timeout=timeout), command=api, clock=clock, sleep=clock.sleep)
    with pytest.raises(vr.RouterError, match="^timeout must be"):
        vr.wait_for("/run/haproxy/admin.sock", "vllm", "gpu-01", "idle", timeout, command=api, clock=clock, sleep=clock.sleep)
    assert api.commands == [] and clock.sleeps == 0


# ---- 4. venv_quarantine restore -----------------------------------------------------------------------------

def test_a_fifo_in_the_quarantine_is_refused_naming_it_without_blocking(venv):
    result, originals = quarantined_strays(venv)
    fifo = result["entries"][1]["quarantined"]
    os.remove(fifo)
    os.mkfifo(fifo)
    with pytest.raises(VenvQuarantineError, match=r"entries\[1\].*%s.*not a regular file" % fifo):
        without_hanging(lambda: restore_quarantine(venv, result["quarantine"]), [fifo])
    # Nothing was moved back: the whole manifest is checked before the first move.
    assert not os.path.lexists(originals[0]) and os.path.isfile(result["entries"][0]["quarantined"])


@pytest.mark.parametrize("kind,message", [("fifo", "not a regular file"), ("nested", "invalid JSON: nested too deeply"),
                                          ("not_utf8", "not UTF-8 text")])
def test_a_quarantine_manifest_that_is_no_regular_json_file_is_refused_without_blocking(venv, kind, message):
    result, originals = quarantined_strays(venv)
    os.remove(result["manifest"])
    if kind == "fifo":
        os.mkfifo(result["manifest"])
    else:
        with open(result["manifest"], "wb") as handle:
            handle.write(b"[" * 100000 + b"]" * 100000 if kind == "nested" else b'{"entries": ["\xff"]}')
    with pytest.raises(VenvQuarantineError, match=r"manifest.json: %s" % message):
        without_hanging(lambda: restore_quarantine(venv, result["quarantine"]), [result["manifest"]])
    assert not any(os.path.lexists(path) for path in originals)


@pytest.mark.parametrize("bad", ["outside", "directory", "size", "duplicate"])
def test_restore_checks_every_entry_before_moving_any(venv, tmp_path, bad):
    result, originals = quarantined_strays(venv)
    second = result["entries"][1]
    if bad == "outside":
        edit_manifest(result, lambda m: m["entries"][1].update(quarantined=str(tmp_path / "elsewhere.py")))
    elif bad == "directory":
        os.remove(second["quarantined"])
        os.mkdir(second["quarantined"])
    elif bad == "size":
        edit_manifest(result, lambda m: m["entries"][1].update(size="12"))
    else:
        edit_manifest(result, lambda m: m["entries"][1].update(original=originals[0]))
    with pytest.raises(VenvQuarantineError, match=r"entries\[1\]"):
        restore_quarantine(venv, result["quarantine"])
    assert not any(os.path.lexists(path) for path in originals)
    assert os.path.isfile(result["entries"][0]["quarantined"])


def test_a_restore_that_fails_midway_says_what_it_restored(venv, monkeypatch):
    result, originals = quarantined_strays(venv)
    real_move = venv_quarantine.move_file
    calls = []

    def failing_second(source, destination, digest, folder_mode=0o700):
        calls.append(destination)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_move(source, destination, digest, folder_mode)

    monkeypatch.setattr(venv_quarantine, "move_file", failing_second)
    with pytest.raises(VenvQuarantineError) as caught:
        restore_quarantine(venv, result["quarantine"])
    message = str(caught.value)
    assert "No space left on device" in message and originals[1] in message
    assert "restored before it stopped: %s" % originals[0] in message
    assert os.path.isfile(originals[0]) and not os.path.lexists(originals[1])


@pytest.mark.parametrize("field", ["original", "quarantined"])
def test_a_nul_byte_in_a_restore_path_fails_naming_the_entry(run_module, venv, field):
    result, originals = quarantined_strays(venv)
    edit_manifest(result, lambda m: m["entries"][0].update({field: m["entries"][0][field].replace("models/", "mod\x00els/")}))
    answer, failed = run_module(venv_quarantine_module.main, {"venv": venv, "restore": result["quarantine"]})
    assert failed and "entries[0]" in answer["msg"] and field in answer["msg"] and "NUL" in answer["msg"], answer
    assert not any(os.path.lexists(path) for path in originals)


# ---- 5. the watchdog's state file ---------------------------------------------------------------------------

@pytest.fixture
def host(tmp_path, monkeypatch):
    return Host(tmp_path, monkeypatch)


def _set_aside(host):
    folder = host.watchdog_state.parent
    return [folder / name for name in os.listdir(str(folder)) if name.startswith(UNIT + ".json.unreadable-")]


@pytest.mark.parametrize("field,value", [
    ("consecutive_failures", "x"), ("consecutive_failures", -1), ("consecutive_failures", True),
    ("restarts_total", None), ("restarts", "x"), ("restarts", [float("nan")]), ("gave_up", "yes"),
    ("last_probe", 5), ("last_probe", {"time": 1.0, "ok": True}), ("last_restart", []),
    ("generation_tokens", "12"), ("last_skip", 3),
])
def test_a_watchdog_state_it_cannot_use_is_set_aside_and_watching_goes_on(host, vllm, capsys, field, value):
    host.seed(**{field: value})
    text = host.watchdog_state.read_text()
    for dummy in range(2):
        state = host.run(vllm.url)
    kept = _set_aside(host)
    assert len(kept) == 1 and kept[0].read_text() == text
    assert state["consecutive_failures"] == 0 and state["restarts_total"] == 0 and state["last_probe"]["ok"] is True
    out = capsys.readouterr().out
    assert "state file %s" % host.watchdog_state in out and field in out and "starting afresh" in out


@pytest.mark.parametrize("kind", ["fifo", "directory", "not_utf8", "nested", "huge"])
def test_a_watchdog_state_that_is_no_regular_json_file_is_set_aside_without_blocking(host, vllm, capsys, kind):
    path = host.watchdog_state
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "directory":
        path.mkdir()
    elif kind == "not_utf8":
        path.write_bytes(b'{"unit": "\xff\xfe"}')
    elif kind == "nested":
        path.write_text("[" * 100000 + "]" * 100000)
    else:
        path.write_text('{"unit": "%s", "pad": "%s"}' % (UNIT, "x" * (WATCHDOG.MAX_STATE_BYTES + 1)))
    assert without_hanging(lambda: WATCHDOG.main(host.argv(vllm.url)), [path]) == 0
    assert len(_set_aside(host)) == 1
    assert host.state()["last_probe"]["ok"] is True
    assert "starting afresh" in capsys.readouterr().out


def test_two_unusable_state_files_in_one_second_are_both_kept(host, vllm):
    for number in range(2):
        host.seed(restarts_total=None, reason=number)
        assert WATCHDOG.run(WATCHDOG.parse_args(host.argv(vllm.url)), 1700000000.5) == 0
    kept = _set_aside(host)
    assert sorted(json.loads(path.read_text())["reason"] for path in kept) == [0, 1]


@pytest.mark.parametrize("timeout", ["nan", "inf"])
def test_a_watchdog_request_timeout_that_never_runs_out_is_refused_naming_it(host, capsys, timeout):
    argv = host.argv("http://127.0.0.1:9")
    argv[argv.index("--request-timeout") + 1] = timeout
    with pytest.raises(SystemExit):
        WATCHDOG.parse_args(argv)
    assert "--request-timeout" in capsys.readouterr().err
