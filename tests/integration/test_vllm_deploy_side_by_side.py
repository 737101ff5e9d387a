# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Catalogue entries a host serves side by side (vllm_deploy_host_entries), as the vllm_deploy role's entry point
`entry` resolves them on the controller: the units the deployment must leave serving, and the lists it refuses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import printed_json, run_playbook

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Resolve the entry
      ansible.builtin.include_role:
        name: gauntlet.vllm.vllm_deploy
        tasks_from: entry
      vars:
        vllm_deploy_vllm_version: "0.28.0"
    - name: Show it
      ansible.builtin.debug:
        msg: "ENTRY={{ vllm_deploy_entry | to_json }}"
"""
CATALOGUE = {"llama": {"repo_id": "x/llama", "service_name": "llama-8b"},
             "moe": {"repo_id": "x/moe", "port": 8001},
             "dense": {"repo_id": "x/dense", "port": 8002}}


def resolved(tmp_path, model, host_entries, catalogue=None, **more):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    extra = dict({"vllm_deploy_models": catalogue or CATALOGUE, "vllm_deploy_model": model,
                  "vllm_deploy_host_entries": host_entries}, **more)
    result = run_playbook([tmp_path / "play.yml", "-e", json.dumps(extra)], json_results=True)
    return result, (printed_json(result.stdout, "ENTRY") if result.returncode == 0 else None)


def test_the_other_entries_units_are_left_serving(tmp_path):
    result, entry = resolved(tmp_path, "moe", ["llama", "moe", "dense"])
    assert result.returncode == 0, result.stdout[-3000:]
    # Their own service names (llama's is llama-8b), never the deployed entry's.
    assert entry["side_by_side_units"] == ["vllm-llama-8b.service", "vllm-dense.service"]


def test_one_entry_per_host_or_an_entry_not_kept_leaves_nothing_serving(tmp_path):
    # The last: a gauntlet's candidate runs as a unit of its own name, which takes the host over.
    for model, host_entries, more in (("moe", [], {}), ("dense", ["llama", "moe"], {}),
                                      ("moe", ["llama", "moe"], {"vllm_deploy_service_name": "gauntlet"})):
        result, entry = resolved(tmp_path, model, host_entries, **more)
        assert result.returncode == 0, result.stdout[-3000:]
        assert entry["side_by_side_units"] == []


def test_an_unknown_key_is_refused_naming_it(tmp_path):
    result, _entry = resolved(tmp_path, "moe", ["moe", "lama"])
    assert result.returncode != 0
    assert "vllm_deploy_host_entries" in result.stdout and '["lama"]' in result.stdout


def test_two_entries_on_one_port_are_refused(tmp_path):
    catalogue = dict(CATALOGUE, dense={"repo_id": "x/dense"})
    result, _entry = resolved(tmp_path, "moe", ["llama", "moe", "dense"], catalogue)
    assert result.returncode != 0
    assert "a port of its own" in result.stdout and "[8000, 8001, 8000]" in result.stdout
