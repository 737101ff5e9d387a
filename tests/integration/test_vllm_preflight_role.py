# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_preflight role, run by ansible-playbook: a plan vLLM would crash on stops the play
before anything else runs, with vLLM's message and the plans that work."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MINIMAX = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs", "MiniMaxAI--MiniMax-M2.5.json")

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gauntlet.vllm.vllm_preflight
      vars:
        vllm_preflight_model: {model}
        vllm_preflight_vllm_version: "0.28.0"
        vllm_preflight_gpus: 8
        vllm_preflight_gpu_memory_gib: 89.4
        vllm_preflight_max_model_len: 32768
        vllm_preflight_plan: {plan}
  post_tasks:
    - name: Reached only when the plan passed
      ansible.builtin.copy:
        content: "{{{{ vllm_preflight_vllm_args | to_json }}}}"
        dest: {marker}
        mode: "0644"
"""


def run_play(tmp_path, plan):
    marker = tmp_path / "args.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(model=MINIMAX, plan=json.dumps(plan), marker=marker))
    command = [shutil.which("ansible-playbook"), str(playbook)]
    assert command[0], "ansible-playbook is not on PATH: run through scripts/test.sh"
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")))
    return result, marker


def test_invalid_plan_stops_the_play_with_vllms_message(tmp_path):
    result, marker = run_play(tmp_path, {"tp": 8})
    assert result.returncode != 0
    assert "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128." in result.stdout
    assert "TP8-EP" in result.stdout and "TP4" in result.stdout
    assert not marker.exists()


def test_valid_plan_passes_its_vllm_args_on(tmp_path):
    result, marker = run_play(tmp_path, {"tp": 8, "ep": True})
    assert result.returncode == 0, result.stdout[-3000:]
    assert json.loads(marker.read_text()) == ["--tensor-parallel-size", "8", "--enable-expert-parallel"]


def test_no_plan_takes_the_recommendation(tmp_path):
    result, marker = run_play(tmp_path, {})
    assert result.returncode == 0, result.stdout[-3000:]
    args = json.loads(marker.read_text())
    assert args[:1] == ["--tensor-parallel-size"]
