# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_service_info through run_module, with systemctl answering from output recorded
in the rig's bookworm container (systemd 252) while vllm-tiny-llama.service was starting. The
module's real systemd run is the molecule scenario vllm_service."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_service_info

SYSTEMD_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "fixtures", "systemd")


def recorded(name):
    with open(os.path.join(SYSTEMD_FIXTURES, name)) as handle:
        return handle.read()


@pytest.fixture
def systemctl(monkeypatch):
    """Answer systemctl from the recordings; keep the calls for the assertions."""
    calls = []

    def run_command(self, args, **kwargs):
        calls.append(list(args))
        verb = args[1]
        if verb == "list-unit-files":
            return 0, recorded("list-unit-files.txt"), ""
        if verb == "list-units":
            return 0, recorded("list-units.txt"), ""
        if verb == "show":
            wanted = set(args[5:])
            blocks = [block for block in recorded("show.txt").split("\n\n")
                      if any(line == "Id=%s" % name for line in block.splitlines() for name in wanted)]
            return 0, "\n\n".join(blocks) + "\n", ""
        raise AssertionError("unexpected command %s" % args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)
    return calls


def test_finds_the_vllm_unit_among_all_units(run_module, systemctl):
    result, failed = run_module(vllm_service_info.main, {})
    assert not failed and result["changed"] is False
    assert [unit["name"] for unit in result["units"]] == ["vllm-tiny-llama.service"]
    unit = result["units"][0]
    assert unit["active_state"] == "activating" and unit["running"] is True
    assert unit["enabled"] is True
    assert unit["port"] == 8000
    assert unit["model"] == "/opt/models/tiny-llama"
    assert unit["devices"] == "all"
    assert unit["main_pid"] > 0
    # Every unit systemd knows was read (templates left out), in one show call.
    shows = [call for call in systemctl if call[1] == "show"]
    assert len(shows) == 1 and len(shows[0]) - 5 > 90
    assert not any(name.endswith("@.service") for name in shows[0][5:])


def test_a_second_model_on_a_gpu_less_host_must_take_over(run_module, systemctl):
    result, failed = run_module(vllm_service_info.main, {"name": "vllm-tiny-qwen3-moe.service", "port": 8001})
    assert not failed
    assert result["conflicts"] == [{"name": "vllm-tiny-llama.service", "running": True, "enabled": True,
                                    "reasons": ["shares GPUs (one of the two units sees every GPU)"]}]


def test_the_unit_itself_is_never_its_own_conflict(run_module, systemctl):
    args = {"name": "vllm-tiny-llama.service", "port": 8000, "devices": ["0"]}
    result, failed = run_module(vllm_service_info.main, args)
    assert not failed and result["conflicts"] == []


def test_systemctl_failure_is_reported(run_module, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command",
                        lambda self, args, **kwargs: (1, "", "System has not been booted with systemd as init system (PID 1)."))
    result, failed = run_module(vllm_service_info.main, {})
    assert failed
    assert result["msg"] == ("systemctl list-unit-files --type=service failed: "
                             "System has not been booted with systemd as init system (PID 1).")
