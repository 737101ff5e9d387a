# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_plan

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures")
MINIMAX = os.path.join(FIXTURES, "model_configs", "MiniMaxAI--MiniMax-M2.5.json")


def test_configured_invalid_plan_fails_with_vllm_message_and_alternatives(run_module):
    result, failed = run_module(vllm_plan.main, {"model": MINIMAX, "gpus": 8, "gpu_memory_gib": 89.4,
                                                 "vllm_version": "0.28.0", "max_model_len": 32768, "plan": {"tp": 8}})
    assert failed
    assert "weight quantization block_n = 128" in result["msg"]
    assert "TP8-EP" in result["msg"] and "TP4" in result["msg"]
    assert result["selected"]["valid"] is False


def test_valid_plan_passes_and_check_mode_is_the_same(run_module):
    args = {"model": MINIMAX, "gpus": 8, "gpu_memory_gib": 89.4, "vllm_version": "0.28.0",
            "max_model_len": 32768, "plan": {"tp": 8, "ep": True}}
    result, failed = run_module(vllm_plan.main, args)
    assert not failed, result.get("msg")
    assert result["changed"] is False
    assert result["selected"]["vllm_args"] == ["--tensor-parallel-size", "8", "--enable-expert-parallel"]
    checked, failed = run_module(vllm_plan.main, dict(args, _ansible_check_mode=True))
    assert not failed
    assert checked["plans"] == result["plans"]


def test_gpu_facts_supply_count_memory_and_link(run_module):
    with open(os.path.join(FIXTURES, "gpu", "h200-1gpu.facts.json")) as handle:
        facts = json.load(handle)
    facts = facts.get("gpus", facts)
    result, failed = run_module(vllm_plan.main, {"model": MINIMAX, "gpu_facts": facts, "vllm_version": "0.32.0",
                                                 "max_model_len": 4096})
    assert not failed, result.get("msg")
    assert result["inputs"]["gpus"] == 1
    assert abs(result["inputs"]["gpu_memory_gib"] - 150754820096 / 1024 ** 3) < 1e-6
    # One H200 cannot hold MiniMax-M2.5's 215 GiB of FP8 weights.
    assert result["recommended"] is None
    assert result["plans"][0]["estimate"]["basis"]["gpu"] == "H200"


def test_bad_config_names_the_file(run_module, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{}")
    result, failed = run_module(vllm_plan.main, {"model": str(bad), "gpus": 8, "gpu_memory_gib": 80,
                                                 "vllm_version": "0.28.0"})
    assert failed
    assert str(bad) in result["msg"]
