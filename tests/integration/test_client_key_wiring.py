# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's health-check key, as playbooks/router.yml and playbooks/serve_multinode.yml choose it, for a vLLM
host that gives its key the documented way (only VLLM_API_KEY in vllm_service_secret_env). Both playbooks once
read only vllm_service_api_key, so such a router sent no key and marked every server down.

Each test takes the playbook's own "Choose the health check's model and key" task and its play's vars from the
file, runs them with ansible-playbook on the controller against an inventory of the roles' hosts (nothing is
contacted), and reads back the key the task chose."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import printed_json, run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TASK = "Choose the health check's model and key"
KEY = "k-from-secret-env-81f3"


def _find_task(tasks):
    for task in tasks:
        if task.get("name") == TASK:
            return task
        found = _find_task(task.get("block") or [])
        if found:
            return found
    return None


def the_choice(playbook):
    """(the play's vars, the task) of the play in ``playbook`` that chooses the router's key."""
    with open(os.path.join(ROOT, "playbooks", playbook)) as handle:
        plays = yaml.safe_load(handle)
    for play in plays:
        task = _find_task(play.get("tasks") or [])
        if task:
            return play.get("vars") or {}, dict(task, no_log=False)
    raise AssertionError("%s has no task named %r" % (playbook, TASK))


def chosen_key(tmp_path, playbook, vllm_host_vars):
    play_vars, task = the_choice(playbook)
    inventory = {"all": {"children": {
        "vllm_hosts": {"hosts": {"gpu-01": dict(vllm_host_vars)}},
        "vllm_multinode_hosts": {"hosts": {"gpu-01": None}},
        "vllm_router_hosts": {"hosts": {"router-01": None}},
        "vllm_multinode_router_hosts": {"hosts": {"router-01": None}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}
    play = [{"name": "The router's choice of key", "hosts": "router-01", "gather_facts": False, "vars": play_vars,
             "tasks": [task, {"name": "Show it", "ansible.builtin.debug": {
                 "msg": "chosen={{ {'key': vllm_router_api_key, 'model': vllm_router_model} | to_json }}"}}]}]
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    result = run_playbook(["-i", tmp_path / "hosts.yml", tmp_path / "play.yml"], json_results=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return printed_json(result.stdout, "chosen")["key"]


# The head's facts that serve_multinode.yml's choice also reads (its model name).
HEAD = {"vllm_service_report": {"served_model_name": "tiny-llama"}, "vllm_deploy_model": "tiny-llama",
        "vllm_deploy_models": {"tiny-llama": {"repo_id": "x/y"}}}


@pytest.mark.parametrize("playbook", ["router.yml", "serve_multinode.yml"])
def test_a_key_given_only_in_secret_env_reaches_the_routers_health_check(tmp_path, playbook):
    host = dict(HEAD, vllm_service_secret_env={"VLLM_API_KEY": KEY})
    assert chosen_key(tmp_path, playbook, host) == KEY


@pytest.mark.parametrize("playbook", ["router.yml", "serve_multinode.yml"])
def test_the_direct_key_and_no_key_still_work(tmp_path, playbook):
    assert chosen_key(tmp_path, playbook, dict(HEAD, vllm_service_api_key="k-direct")) == "k-direct"
    assert chosen_key(tmp_path, playbook, HEAD) == ""
