# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for module_utils/fleet/vllm_router.py (HAProxy's runtime API).

STAT and STATE (tests/unit/fixtures/haproxy/) are the answers of a real HAProxy 2.6.12 (Debian bookworm) running the role's configuration,
gpu-01 drained with its check passing (L7OK) and gpu-02 down (nothing listening: L4CON). A fake runtime
API (a callable, and once a real UNIX socket server) replays them with the sessions and states a test sets.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import threading

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet import vllm_router as vr

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "haproxy")
with open(os.path.join(FIXTURES, "show-stat-2.6.12.csv")) as _handle:
    STAT = _handle.read()
with open(os.path.join(FIXTURES, "show-servers-state-2.6.12.txt")) as _handle:
    STATE = _handle.read()


class Api:
    """HAProxy's runtime API as a callable: per server, its status, scur, qcur and admin bits; records commands."""

    def __init__(self):
        self.servers = {"gpu-01": {"status": "UP", "scur": [0], "qcur": 0, "admin": 0, "check": "L7OK"},
                        "gpu-02": {"status": "UP", "scur": [0], "qcur": 0, "admin": 0, "check": "L7OK"}}
        self.commands = []
        self.refuse = ""

    def _stat(self):
        lines = STAT.splitlines()
        header = lines[0][2:].split(",")
        out = [lines[0]]
        for line in lines[1:]:
            if not line:
                continue
            values = line.split(",")
            server = self.servers.get(values[1]) if values[0] == "vllm" else None
            if server:
                scur = server["scur"].pop(0) if len(server["scur"]) > 1 else server["scur"][0]
                values[header.index("scur")] = str(scur)
                values[header.index("qcur")] = str(server["qcur"])
                values[header.index("status")] = server["status"]
                values[header.index("check_status")] = server["check"]
            out.append(",".join(values))
        return "\n".join(out) + "\n\n"

    def _state(self):
        lines = STATE.splitlines()
        out = lines[:2]
        for line in lines[2:]:
            if not line:
                continue
            values = line.split(" ")
            values[6] = str(self.servers[values[3]]["admin"])
            out.append(" ".join(values))
        return "\n".join(out) + "\n\n"

    def __call__(self, path, command):
        self.commands.append(command)
        if command == "show stat":
            return self._stat()
        if command.startswith("show servers state"):
            return self._state()
        if command.startswith("set server "):
            if self.refuse:
                return self.refuse
            name, state = command.split(" ")[2].split("/")[1], command.split(" ")[-1]
            self.servers[name]["admin"] = {"ready": 0, "drain": 8, "maint": 1}[state]
            if state == "drain" and self.servers[name]["status"] == "UP":
                self.servers[name]["status"] = "DRAIN"
            if state == "ready" and self.servers[name]["status"] == "DRAIN":
                self.servers[name]["status"] = "UP"
            return "\n"
        raise AssertionError(command)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def params(**kw):
    base = {"socket": "/run/haproxy/admin.sock", "backend": "vllm", "server": "gpu-01", "state": "drain", "wait": "none", "timeout": 10}
    base.update(kw)
    return base


# ---- parsing a real HAProxy's answers ---------------------------------------------------------------------

def test_parse_stat_reads_the_real_csv():
    rows = vr.parse_stat(STAT)
    servers = {(r["pxname"], r["svname"]): r for r in rows}
    assert servers[("vllm", "gpu-01")]["status"] == "DRAIN"
    assert servers[("vllm", "gpu-01")]["check_status"] == "L7OK"
    assert servers[("vllm", "gpu-02")]["status"] == "DOWN"
    assert servers[("vllm", "gpu-02")]["check_status"] == "L4CON"
    assert servers[("vllm", "gpu-01")]["scur"] == "0"


def test_parse_stat_refuses_what_is_not_show_stat():
    with pytest.raises(vr.RouterError, match="not the CSV of 'show stat'.*Unknown command"):
        vr.parse_stat("Unknown command: 'show stats'\n")


def test_parse_servers_state_reads_admin_bits():
    assert vr.parse_servers_state(STATE) == {("vllm", "gpu-01"): 8, ("vllm", "gpu-02"): 0}


@pytest.mark.parametrize("bits, state", [(0, "ready"), (0x08, "drain"), (0x10, "drain"), (0x01, "maint"), (0x09, "maint"), (0x20, "maint")])
def test_admin_state_from_bits(bits, state):
    assert vr.admin_state(bits) == state


def test_backend_servers_from_real_answers():
    answers = {"show stat": STAT, "show servers state vllm": STATE}
    servers = vr.backend_servers("/s", "vllm", lambda path, command: answers[command])
    assert sorted(servers) == ["gpu-01", "gpu-02"]
    assert servers["gpu-01"]["admin_state"] == "drain" and servers["gpu-01"]["operational_state"] == "DRAIN"
    assert servers["gpu-02"]["admin_state"] == "ready" and servers["gpu-02"]["operational_state"] == "DOWN"
    assert servers["gpu-02"]["address"] == "127.0.0.1:18002"


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(vr.RouterError, match=r"has no backend 'vlm' \(backends: vllm\)"):
        vr.router_info({"socket": "/s", "backend": "vlm"}, command=Api())


# ---- vllm_router_server -----------------------------------------------------------------------------------

def test_unknown_server_names_it_and_the_known_ones():
    api = Api()
    with pytest.raises(vr.RouterError, match=r"backend 'vllm' has no server 'gpu-09' \(servers: gpu-01, gpu-02\)"):
        vr.router_server(params(server="gpu-09"), command=api)
    assert not [c for c in api.commands if c.startswith("set ")]


def test_drain_sets_the_state_and_reports_it():
    api = Api()
    result = vr.router_server(params(), command=api)
    assert "set server vllm/gpu-01 state drain" in api.commands
    assert result["changed"] and result["state_before"] == "ready" and result["state"] == "drain"
    assert result["operational_state"] == "DRAIN"


def test_same_state_changes_nothing():
    api = Api()
    api.servers["gpu-01"]["admin"] = 8
    result = vr.router_server(params(), command=api)
    assert not result["changed"]
    assert not [c for c in api.commands if c.startswith("set ")]


def test_check_mode_predicts_and_sets_nothing():
    api = Api()
    result = vr.router_server(params(wait="idle"), check_mode=True, command=api)
    assert result["changed"] and result["state"] == "drain" and result["waited_s"] == 0
    assert not [c for c in api.commands if c.startswith("set ")]
    assert api.servers["gpu-01"]["admin"] == 0


def test_refused_set_is_an_error_with_haproxys_answer():
    api = Api()
    api.refuse = "No such server.\n"
    with pytest.raises(vr.RouterError, match=r"HAProxy refused 'set server vllm/gpu-01 state drain': No such server."):
        vr.router_server(params(), command=api)


def test_wait_idle_polls_until_no_session():
    api, clock = Api(), Clock()
    api.servers["gpu-01"]["scur"] = [3, 3, 2, 1, 0]
    result = vr.router_server(params(wait="idle"), command=api, clock=clock, sleep=clock.sleep)
    assert result["current_sessions"] == 0 and result["waited_s"] > 0


def test_wait_idle_counts_queued_requests():
    api, clock = Api(), Clock()
    api.servers["gpu-01"]["qcur"] = 2
    with pytest.raises(vr.RouterError, match=r"0 current sessions, 2 queued"):
        vr.router_server(params(wait="idle", timeout=2), command=api, clock=clock, sleep=clock.sleep)


def test_wait_idle_times_out_naming_server_and_sessions():
    api, clock = Api(), Clock()
    api.servers["gpu-01"]["scur"] = [4]
    with pytest.raises(vr.RouterError) as err:
        vr.router_server(params(wait="idle", timeout=3), command=api, clock=clock, sleep=clock.sleep)
    assert str(err.value) == ("server vllm/gpu-01 did not become idle (0 sessions) within 3s: last seen 4 current sessions, "
                              "0 queued, status DRAIN, check L7OK")
    assert 3 <= clock.now - 100.0 < 3.6


def test_wait_up_needs_status_up():
    api, clock = Api(), Clock()
    api.servers["gpu-01"].update(status="DOWN", check="L7STS", admin=8)
    with pytest.raises(vr.RouterError, match=r"server vllm/gpu-01 did not become UP \(health check passing\) within 2s: .*status DOWN, check L7STS"):
        vr.router_server(params(state="ready", wait="up", timeout=2), command=api, clock=clock, sleep=clock.sleep)
    api.servers["gpu-01"].update(status="UP", check="L7OK")
    result = vr.router_server(params(state="ready", wait="up", timeout=2), command=api, clock=clock, sleep=clock.sleep)
    assert result["operational_state"] == "UP" and result["check_status"] == "L7OK"


def test_info_reports_every_server():
    result = vr.router_info({"socket": "/s", "backend": "vllm"}, command=Api())
    assert sorted(result["servers"]) == ["gpu-01", "gpu-02"]
    wanted = {"admin_state", "operational_state", "check_status", "current_sessions", "total_sessions", "failed_checks"}
    assert set(result["servers"]["gpu-01"]) >= wanted


# ---- the UNIX socket -------------------------------------------------------------------------------------

def test_runtime_command_over_a_unix_socket(tmp_path):
    path = str(tmp_path / "admin.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    received = []

    def serve():
        conn, _address = server.accept()
        data = b""
        while not data.endswith(b"\n"):
            data += conn.recv(100)
        received.append(data)
        conn.sendall(STAT.encode())
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert vr.runtime_command(path, "show stat") == STAT
    thread.join(5)
    server.close()
    assert received == [b"show stat\n"]


def test_runtime_command_names_a_missing_socket(tmp_path):
    path = str(tmp_path / "nothing.sock")
    with pytest.raises(vr.RouterError, match="HAProxy's runtime API at %s did not answer 'show stat'" % path):
        vr.runtime_command(path, "show stat")


def test_wait_up_is_not_a_drained_server_whose_check_passes():
    api, clock = Api(), Clock()
    api.servers["gpu-01"].update(status="DRAIN", check="L7OK", admin=8)
    with pytest.raises(vr.RouterError, match=r"did not become UP .*status DRAIN, check L7OK"):
        vr.wait_for("/s", "vllm", "gpu-01", "up", 2, command=api, clock=clock, sleep=clock.sleep)


# ---- every backend holding the server (the router's per-model backends) ---------------------------------------

def test_every_backend_drain_sets_each_and_reports_them():
    api = Api()
    result = vr.router_server(params(backend=vr.ALL_BACKENDS), command=api)
    assert result["changed"] and result["backends"] == ["vllm"] and result["state"] == "drain"
    assert "set server vllm/gpu-01 state drain" in api.commands
    again = vr.router_server(params(backend=vr.ALL_BACKENDS), command=api)
    assert not again["changed"] and again["state_before"] == "drain"


def test_every_backend_check_mode_predicts_and_sets_nothing():
    api = Api()
    result = vr.router_server(params(backend=vr.ALL_BACKENDS), check_mode=True, command=api)
    assert result["changed"] and result["state"] == "drain"
    assert not [command for command in api.commands if command.startswith("set server")]


def test_every_backend_unknown_server_names_the_known_ones():
    with pytest.raises(vr.RouterError, match=r"no backend of HAProxy at .* has a server 'gpu-09' \(servers: gpu-01, gpu-02\)"):
        vr.router_server(params(backend=vr.ALL_BACKENDS, server="gpu-09"), command=Api())


def test_summary_of_a_server_in_two_backends_takes_the_worst_state_and_sums_sessions():
    up = {"admin_state": "ready", "operational_state": "UP", "current_sessions": 2, "check_status": "L7OK"}
    down = dict(up, operational_state="DOWN", admin_state="drain", current_sessions=1, check_status="L7STS")
    summary = vr._summary({"vllm": up, "vllm_model_1": down})
    assert summary["operational_state"] == "DOWN" and summary["current_sessions"] == 3
    assert summary["admin_state"] == "mixed"
