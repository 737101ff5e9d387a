# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

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


def _read(name):
    with open(os.path.join(FIXTURES, "model_configs", name), "rb") as handle:
        return handle.read()


def test_hub_repo_id_fetches_only_the_config_files(run_module):
    from tests.fakehub.fakehub import FakeHub
    files = {"config.json": _read("nvidia--MiniMax-M2.5-NVFP4.json"),
             "hf_quant_config.json": _read("nvidia--MiniMax-M2.5-NVFP4_hf_quant.json"),
             "model-00001-of-00099.safetensors": b"\0" * 1024}
    with FakeHub({"nvidia/MiniMax-M2.5-NVFP4": files}) as hub:
        result, failed = run_module(vllm_plan.main, {"model": "nvidia/MiniMax-M2.5-NVFP4", "hf_endpoint": hub.endpoint,
                                                     "gpus": 8, "gpu_memory_gib": 89.4, "vllm_version": "0.32.0",
                                                     "max_model_len": 32768})
        fetched = [request[1] for request in hub.requests]
        commit = hub.repos["nvidia/MiniMax-M2.5-NVFP4"].sha
    assert not failed, result.get("msg")
    assert result["model_source"] == {"kind": "hub", "repo_id": "nvidia/MiniMax-M2.5-NVFP4", "revision": "main",
                                      "commit": commit, "endpoint": hub.endpoint}
    assert result["model"]["quantization"]["method"] == "modelopt_fp4"
    assert not [p for p in fetched if "safetensors" in p]
    assert sorted(p.rsplit("/", 1)[1] for p in fetched) == ["config.json", "hf_quant_config.json"]


def test_gated_hub_repo_needs_the_token_and_never_shows_it(run_module):
    from tests.fakehub.fakehub import FakeHub
    with FakeHub() as hub:
        hub.add_repo("meta-llama/Meta-Llama-3.1-70B", {"config.json": _read("meta-llama--Meta-Llama-3.1-70B.json")},
                     gated_token="hf_sekrit_token")
        base = {"model": "meta-llama/Meta-Llama-3.1-70B", "hf_endpoint": hub.endpoint, "gpus": 8,
                "gpu_memory_gib": 80, "vllm_version": "0.28.0", "max_model_len": 8192}
        denied, failed = run_module(vllm_plan.main, base)
        assert failed
        assert "gated repository" in denied["msg"] and "meta-llama/Meta-Llama-3.1-70B" in denied["msg"]
        granted, failed = run_module(vllm_plan.main, dict(base, hf_token="hf_sekrit_token"))
        assert not failed, granted.get("msg")
        assert "hf_sekrit_token" not in json.dumps(granted)
        missing, failed = run_module(vllm_plan.main, dict(base, model="nobody/nothing"))
        assert failed and "repository not found" in missing["msg"]
        bad_rev, failed = run_module(vllm_plan.main, dict(base, hf_token="hf_sekrit_token", revision="v0"))
        assert failed and "revision 'v0' not found" in bad_rev["msg"]


BASE = {"model": MINIMAX, "gpus": 8, "gpu_memory_gib": 89.4, "vllm_version": "0.32.0", "max_model_len": 32768}


@pytest.mark.parametrize("changes, named, value", [
    ({"plan": {"tp": -2}}, "plan.tp", "-2"),
    ({"plan": {"tp": 0}}, "plan.tp", "0"),
    ({"plan": {"pp": -1}}, "plan.pp", "-1"),
    ({"plan": {"dp": -1}}, "plan.dp", "-1"),
    ({"plan": {"tp": True}}, "plan.tp", "True"),
    ({"gpus": 0}, "gpus", "0"),
    ({"gpus": -8}, "gpus", "-8"),
    ({"gpus": 1000}, "gpus", "1000"),
    ({"gpu_memory_gib": 0}, "gpu_memory_gib", "0.0"),
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization", "0.0"),
    ({"max_model_len": 0}, "max_model_len", "0"),
    ({"max_model_len": -1}, "max_model_len", "-1"),
    ({"kv_cache_dtype": "banana"}, "kv_cache_dtype", "'banana'"),
    ({"vllm_version": "banana"}, "vllm_version", "'banana'"),
    ({"workload": {"input_len": 0}}, "workload.input_len", "0"),
    ({"workload": {"concurrency": [4, -1]}}, "workload.concurrency[]", "-1"),
    ({"ttft_p99_ms": -5}, "ttft_p99_ms", "-5"),
    ({"calibration": {"ratios": {"prefill": 500}}}, "calibration.ratios.prefill", "500"),
    ({"device_spec": {"memory_bandwidth_gbs": -1}}, "device_spec.memory_bandwidth_gbs", "-1"),
])
def test_hostile_numbers_fail_naming_the_option(run_module, changes, named, value):
    # fail_on_invalid is off: a bad input is an error of the task, not a plan vLLM would reject.
    result, failed = run_module(vllm_plan.main, dict(BASE, fail_on_invalid=False, **changes))
    assert failed
    assert named in result["msg"] and value in result["msg"], result["msg"]
    assert "plans" not in result


def test_bad_numbers_fail_before_the_model_is_read(run_module, tmp_path):
    result, failed = run_module(vllm_plan.main, dict(BASE, model=str(tmp_path / "missing"), plan={"tp": -2}))
    assert failed and "plan.tp" in result["msg"]


def test_gpus_from_gpu_facts_with_no_gpus_says_not_set(run_module):
    result, failed = run_module(vllm_plan.main, {"model": MINIMAX, "vllm_version": "0.32.0",
                                                 "gpu_facts": {"count": 0, "devices": []}})
    assert failed and "gpus is not set" in result["msg"]


def test_a_release_outside_the_rules_range_warns(run_module):
    result, failed = run_module(vllm_plan.main, dict(BASE, vllm_version="0.34.0"))
    assert not failed, result.get("msg")
    assert "0.34.0" in result["version_warning"] and "0.28.0 to 0.32.0" in result["version_warning"]
    assert result["warnings"] == [result["version_warning"]]
    inside, failed = run_module(vllm_plan.main, BASE)
    assert not failed
    assert inside["version_warning"] is None and "warnings" not in inside


def test_gpus_zero_is_a_bad_value_not_a_missing_one(run_module):
    result, failed = run_module(vllm_plan.main, dict(BASE, gpus=0))
    assert failed
    assert "not set" not in result["msg"]
    assert result["msg"].startswith("gpus must be an integer from 1 to 64") and "got 0" in result["msg"]


def test_objective_workload_and_constraints_reach_the_planner(run_module):
    args = dict(BASE, objective="throughput", workload={"input_len": 2000, "output_len": 500, "concurrency": [1, 64]})
    result, failed = run_module(vllm_plan.main, args)
    assert not failed, result.get("msg")
    assert result["objective"] == "throughput" and result["ranking"][0] == result["recommended"]["name"]
    assert [level["concurrency"] for level in result["recommended"]["estimate"]["levels"]] == [1, 64]
    assert result["recommended"]["score"] == result["recommended"]["estimate"]["peak_output_tokens_per_s"]
    assert result["why"].startswith(result["recommended"]["name"] + " beats")
    latency, failed = run_module(vllm_plan.main, dict(args, objective="latency"))
    assert not failed
    assert latency["recommended"]["score"] == latency["recommended"]["estimate"]["decode_tokens_per_s"]
    strict, failed = run_module(vllm_plan.main, dict(args, ttft_p99_ms=1.0))
    assert not failed and strict["recommended"] is None


def test_the_default_workload_and_objective_are_documented_values(run_module):
    result, failed = run_module(vllm_plan.main, dict(BASE))
    assert not failed, result.get("msg")
    assert result["objective"] == "throughput"
    assert result["inputs"]["workload"]["concurrency"] == [1, 4, 16, 64, 256, 1024]
    assert result["inputs"]["workload"]["input_len"] == 1024 and result["inputs"]["workload"]["output_len"] == 1024


def test_calibration_and_a_selected_plan_share_the_settled_inputs(run_module):
    calibration = {"ratios": {"step_fixed": 2.0, "step_per_seq": 2.0, "prefill": 1.0}, "points": 1, "source": "test"}
    plain, failed = run_module(vllm_plan.main, dict(BASE, plan={"tp": 4}))
    assert not failed, plain.get("msg")
    slower, failed = run_module(vllm_plan.main, dict(BASE, plan={"tp": 4}, calibration=calibration))
    assert not failed, slower.get("msg")
    doubled = 2 * plain["selected"]["estimate"]["ms_per_token"]
    assert slower["selected"]["estimate"]["ms_per_token"] == pytest.approx(doubled, rel=1e-3)
    assert slower["selected"]["estimate"]["basis"]["calibration"]["source"] == "test"
