# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The servers playbooks/router.yml gives the router, and the one playbooks/deploy.yml drains, for hosts that serve
one catalogue entry and for a host that serves several side by side (vllm_deploy_host_entries).

The tests take the playbooks' own tasks from the files (router.yml's "Publish this host's servers as router backends"
and the backend list its router play passes; deploy.yml's vllm_rollout_router_server), run them with ansible-playbook
on the controller against an inventory of such hosts (nothing is contacted) and read the result back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import printed_json, run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CATALOGUE = {
    "llama": {"repo_id": "x/llama", "lora_adapters": [{"name": "llama-sql", "repo_id": "x/llama-sql"}]},
    "moe": {"repo_id": "x/moe", "port": 8001, "served_model_name": "org/moe"},
}


def _plays(playbook):
    with open(os.path.join(ROOT, "playbooks", playbook)) as handle:
        return yaml.safe_load(handle)


def _inventory(tmp_path, hosts):
    inventory = {"all": {"children": {"vllm_hosts": {"hosts": hosts}, "vllm_router_hosts": {"hosts": {"router-01": None}}},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                                  "vllm_deploy_models": CATALOGUE, "vllm_deploy_model": "llama"}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return tmp_path / "hosts.yml"


def router_servers(tmp_path, hosts):
    """The backend list and default model router.yml would hand the role, for ``hosts`` (name -> host vars)."""
    publish, router = _plays("router.yml")[:2]
    task = next(task for task in publish["tasks"] if task["name"] == "Publish this host's servers as router backends")
    role_task = next(task for task in router["tasks"] if task["name"] == "One endpoint over the vLLM hosts")
    choose = next(task for task in router["tasks"] if task["name"] == "Choose the health check's model and key")
    show = {"name": "Show them", "ansible.builtin.debug": {"msg": "servers={{ {'backends': __backends, 'model': "
                                                                  "vllm_router_model} | to_json }}"},
            "vars": {"__backends": role_task["vars"]["vllm_router_backends"]}}
    plays = [dict(publish, tasks=[task]), dict(router, tasks=[dict(choose, no_log=False), show])]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    result = run_playbook(["-i", _inventory(tmp_path, hosts), tmp_path / "play.yml"], json_results=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return printed_json(result.stdout, "servers")


def test_a_host_per_entry_is_one_server_named_after_the_host(tmp_path):
    chosen = router_servers(tmp_path, {"gpu-01": {"vllm_router_address": "10.0.0.1"},
                                       "gpu-02": {"vllm_router_address": "10.0.0.2"}})
    assert chosen["model"] == "llama"
    assert chosen["backends"] == [
        {"name": "gpu-01", "address": "10.0.0.1", "port": 8000, "models": ["llama", "llama-sql"]},
        {"name": "gpu-02", "address": "10.0.0.2", "port": 8000, "models": ["llama", "llama-sql"]}]


def test_entries_side_by_side_are_a_server_each_on_their_own_port(tmp_path):
    chosen = router_servers(tmp_path, {"gpu-01": {"vllm_router_address": "10.0.0.1", "vllm_deploy_host_entries": ["moe", "llama"]},
                                       "gpu-02": {"vllm_router_address": "10.0.0.2"}})
    # The first host's first entry is the default model.
    assert chosen["model"] == "org/moe"
    assert chosen["backends"] == [
        {"name": "gpu-01", "address": "10.0.0.1", "port": 8001, "models": ["org/moe"]},
        {"name": "gpu-01:llama", "address": "10.0.0.1", "port": 8000, "models": ["llama", "llama-sql"]},
        {"name": "gpu-02", "address": "10.0.0.2", "port": 8000, "models": ["llama", "llama-sql"]}]


def deployed_server(tmp_path, host_vars, model):
    """The router server deploy.yml's rollout drains when it deploys catalogue key ``model`` on a host."""
    play = _plays("deploy.yml")[0]
    role_vars = play["tasks"][0]["vars"]
    show = {"name": "Show it", "ansible.builtin.debug": {"msg": "server={{ {'name': __server} | to_json }}"},
            "vars": {"__server": role_vars["vllm_rollout_router_server"]}}
    plays = [{"name": "deploy.yml's server", "hosts": "gpu-01", "gather_facts": False, "vars": {"vllm_deploy_model": model},
              "tasks": [show]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    result = run_playbook(["-i", _inventory(tmp_path, {"gpu-01": host_vars}), tmp_path / "play.yml"], json_results=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return printed_json(result.stdout, "server")["name"]


def test_deploy_drains_only_the_deployed_entrys_server(tmp_path):
    side_by_side = {"vllm_deploy_host_entries": ["llama", "moe"]}
    assert deployed_server(tmp_path, side_by_side, "llama") == "gpu-01"
    assert deployed_server(tmp_path, side_by_side, "moe") == "gpu-01:moe"
    # One entry per host, or an entry the host does not keep side by side: the host's own server.
    assert deployed_server(tmp_path, {}, "moe") == "gpu-01"
