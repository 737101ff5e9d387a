# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_gauntlet role's planning (the vllm_deploy preflight for every candidate), in check mode on the
controller: the candidates are measured best predicted first, those with no usable plan last."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MINIMAX = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs", "MiniMaxAI--MiniMax-M2.5.json")

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gauntlet.vllm.vllm_gauntlet
"""

CANDIDATES = [
    {"name": "tp8", "model": "minimax", "plan": {"tp": 8}},          # vLLM 0.28 rejects it
    {"name": "tp2", "model": "minimax", "plan": {"tp": 2}},          # does not fit
    {"name": "tp4", "model": "minimax", "plan": {"tp": 4}},
    {"name": "tp1-dp8-ep", "model": "minimax", "plan": {"tp": 1, "dp": 8, "ep": True}},
    {"name": "tp8-ep", "model": "minimax", "plan": {"tp": 8, "ep": True}},
]


def plan_gauntlet(tmp_path, candidates, objective="throughput"):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    extra_vars = {
        "vllm_deploy_models": {"minimax": {"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX,
                                           "max_model_len": 32768, "objective": objective}},
        "vllm_gauntlet_candidates": candidates, "vllm_gauntlet_report_dir": str(tmp_path / "reports"),
        "vllm_install_version": "0.28.0", "vllm_deploy_gpus": 8, "vllm_deploy_gpu_memory_gib": 95.6,
        "vllm_deploy_allreduce_probe": False}
    command = [shutil.which("ansible-playbook"), str(playbook), "--check", "-e", json.dumps(extra_vars)]
    assert command[0], "ansible-playbook is not on PATH: run through scripts/test.sh"
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                                     ANSIBLE_CALLBACK_RESULT_FORMAT="json"))
    assert result.returncode == 0, result.stdout[-4000:]
    found = re.findall(r'"msg": ("Measuring in predicted order: .*")', result.stdout)
    assert found, "the gauntlet showed no predicted order: " + result.stdout[-2000:]
    message = json.loads(found[-1])
    order = re.findall(r"([a-z0-9.-]+) \(([^)]*)\)", message[len("Measuring in predicted order: "):])
    assert not (tmp_path / "reports").exists()
    return order


def score(note):
    found = re.search(r"score ([0-9.]+)", note)
    return float(found.group(1)) if found else None


def test_candidates_are_measured_best_predicted_first_and_unusable_ones_last(tmp_path):
    order = plan_gauntlet(tmp_path, CANDIDATES)
    assert [name for name, note in order][-2:] == ["tp8", "tp2"]
    assert [note for name, note in order][-2:] == ["no usable plan", "no usable plan"]
    usable = [(name, score(note)) for name, note in order[:-2]]
    assert sorted(name for name, dummy in usable) == ["tp1-dp8-ep", "tp4", "tp8-ep"]
    assert all(value is not None for name, value in usable)
    assert [value for name, value in usable] == sorted((value for name, value in usable), reverse=True)
    assert all(note.startswith("throughput score ") for name, note in order[:-2])


def test_the_entrys_objective_decides_the_order(tmp_path):
    order = plan_gauntlet(tmp_path, CANDIDATES[2:], objective="latency")
    assert all(note.startswith("latency score ") for name, note in order)
    values = [score(note) for name, note in order]
    assert values == sorted(values, reverse=True)
