# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_plan.run, the vllm_plan module's work from its options to its result, with a recording model loader:
where the GPU count comes from, which check wins when several inputs are wrong, that nothing is read before the
numbers are checked, the result's keys and the failure message of a configured plan that is not usable."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import ModelConfigError, load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import (
    PlanError,
    PlanFailed,
    gpus_from_facts,
    plan_model,
    run,
)

MINIMAX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "model_configs",
                       "MiniMaxAI--MiniMax-M2.5.json")
# Every option of the module, as AnsibleModule hands them over (unset ones None, defaults applied).
PARAMS = {"model": "MiniMaxAI/MiniMax-M2.5", "revision": "main", "hf_endpoint": None, "hf_token": None, "gpus": 8,
          "gpu_memory_gib": 89.4, "gpu_name": None, "link": None, "gpu_facts": None, "allreduce_probe": None,
          "vllm_version": "0.32.0", "gpu_memory_utilization": None, "max_model_len": 32768, "kv_cache_dtype": None,
          "plan": None, "fail_on_invalid": True, "objective": "throughput", "workload": None, "ttft_p99_ms": None,
          "min_user_tokens_per_s": None, "calibration": None, "device_spec": None, "enforce_eager": False,
          "visible_devices": [], "extra_args": []}


class Loader(object):
    """Stands in for hub.load_any_model_config: the MiniMax fixture, each call recorded."""

    def __init__(self, error=None):
        self.calls = []
        self.error = error

    def __call__(self, model, revision, endpoint, token):
        self.calls.append((model, revision, endpoint, token))
        if self.error:
            raise self.error
        return load_model_config(MINIMAX), {"kind": "local", "path": MINIMAX}


def params(**changes):
    return dict(PARAMS, **changes)


def test_the_result_keys_and_their_order():
    loader = Loader()
    output = run(params(vllm_version="0.34.0", plan={"tp": 8, "pp": 1, "dp": 1, "ep": True}), loader)
    planned = plan_model(load_model_config(MINIMAX), 8, 89.4, "0.34.0", max_model_len=32768)
    expected = ["changed", "model", "model_source", "recipe", "serving", "serving_origin"] + [key for key in planned if key != "warnings"]
    assert list(output) == expected + ["warnings", "selected", "verdict"]
    assert output["changed"] is False and output["warnings"] == [output["version_warning"]]
    assert output["verdict"]["usable"] and output["verdict"]["plan_name"] == output["selected"]["name"] == "TP8-EP"
    assert loader.calls == [("MiniMaxAI/MiniMax-M2.5", "main", None, None)]


def test_without_a_configured_plan_the_verdict_is_on_the_recommendation_and_nothing_fails():
    output = run(params(gpus=1, gpu_memory_gib=24.0), Loader())
    assert "selected" not in output and "warnings" not in output
    assert output["recommended"] is None and not output["verdict"]["usable"]


def test_a_configured_plan_that_is_not_usable_fails_with_the_result():
    with pytest.raises(PlanFailed) as caught:
        run(params(vllm_version="0.28.0", plan={"tp": 8, "pp": 1, "dp": 1, "ep": False}), Loader())
    output = caught.value.output
    assert str(caught.value) == "Plan TP8 of MiniMaxAI/MiniMax-M2.5 is not usable: %s" % output["verdict"]["message"]
    assert output["verdict"]["message"].startswith("vLLM would raise ValueError at weight creation")
    assert output["selected"]["valid"] is False and output["plans"]


def test_fail_on_invalid_off_returns_the_unusable_verdict():
    output = run(params(vllm_version="0.28.0", plan={"tp": 8, "pp": 1, "dp": 1, "ep": False}, fail_on_invalid=False), Loader())
    assert output["verdict"]["plan_name"] == "TP8" and not output["verdict"]["usable"]


def test_visible_devices_narrow_the_gpu_count():
    output = run(params(visible_devices=["0", "1", "2", "3"]), Loader())
    assert output["inputs"]["gpus"] == 4
    blank = run(params(visible_devices=[" "]), Loader())
    assert blank["inputs"]["gpus"] == 8


def test_bad_visible_devices_are_named_before_a_missing_gpu_count_and_before_anything_is_read():
    loader = Loader()
    with pytest.raises(PlanFailed) as caught:
        run(params(gpus=None, visible_devices=["1", "1"]), loader)
    assert str(caught.value) == "visible_devices '1,1' names GPU 1 twice" and caught.value.output == {}
    with pytest.raises(PlanFailed) as caught:
        run(params(gpus=None, gpu_facts={"count": 0, "devices": []}), loader)
    assert str(caught.value) == "gpus is not set and gpu_facts reports no GPUs (count 0)"
    assert loader.calls == []


def test_visible_devices_alone_give_the_gpu_count_and_blank_ones_do_not():
    output = run(params(gpus=None, visible_devices=["0", "1"]), Loader())
    assert output["inputs"]["gpus"] == 2
    with pytest.raises(PlanFailed) as caught:
        run(params(gpus=None, visible_devices=[" "]), Loader())
    assert str(caught.value) == "gpus is not set and gpu_facts reports no GPUs (count 0)"


def test_bad_numbers_are_refused_before_the_model_is_read_then_perf_inputs_then_the_model():
    loader = Loader()
    with pytest.raises(PlanFailed) as caught:
        run(params(max_model_len=0, ttft_p99_ms=-5), loader)
    assert str(caught.value).startswith("max_model_len")
    with pytest.raises(PlanFailed) as caught:
        run(params(ttft_p99_ms=-5), loader)
    assert "ttft_p99_ms" in str(caught.value) and caught.value.output == {}
    assert loader.calls == []
    with pytest.raises(PlanFailed) as caught:
        run(params(), Loader(error=ModelConfigError("/x/config.json: not JSON")))
    assert str(caught.value) == "/x/config.json: not JSON" and caught.value.output == {}


def test_plan_failed_is_a_plan_error():
    assert issubclass(PlanFailed, PlanError)


@pytest.mark.parametrize("given, facts, expected", [
    ({"gpus": 0, "gpu_memory_gib": None},
     {"count": 8, "devices": [{"memory_total_bytes": 2 * 1024 ** 3, "name": "A"}, {"memory_total_bytes": 1024 ** 3, "name": "B"}],
      "topology": {"nvlink": False}},
     (0, 1.0, "A", "pcie")),
    ({"gpus": None, "gpu_memory_gib": 40.0, "gpu_name": "L40S", "link": "nvlink"},
     {"count": 2, "devices": [{"memory_total_bytes": 1024 ** 3, "name": "A"}], "topology": {"nvlink": False}},
     (2, 40.0, "L40S", "nvlink")),
    ({"gpus": None, "gpu_memory_gib": None}, None, (None, None, None, None)),
])
def test_gpu_inputs_from_the_options_over_gpu_facts(given, facts, expected):
    assert gpus_from_facts(params(gpu_facts=facts, **given)) == expected


# The serving recipe: resolved from the model read for the plan, reported beside it, and feeding what changes
# the plan (KV cache dtype, memory share, batch limits) where the options leave it unset.

def test_the_models_recipe_is_reported_with_the_serving_settings():
    output = run(params(vllm_version="0.28.0"), Loader())
    assert output["recipe"]["name"] == "minimax-m2" and output["recipe"]["applied"]
    assert output["serving"]["tool_call_parser"] == "minimax_m2"
    assert output["serving"]["enable_auto_tool_choice"] is True
    assert output["serving_origin"]["tool_call_parser"] == "recipe"


def test_the_entrys_fields_override_the_recipe_and_none_turns_it_off():
    output = run(params(vllm_version="0.28.0", serving={"reasoning_parser": "minimax_m2"}), Loader())
    assert output["serving"]["reasoning_parser"] == "minimax_m2" and output["serving_origin"]["reasoning_parser"] == "entry"
    output = run(params(vllm_version="0.28.0", recipe="none"), Loader())
    assert not output["recipe"]["applied"] and output["serving"]["tool_call_parser"] is None


def test_a_bad_recipe_or_field_fails_naming_it():
    with pytest.raises(PlanFailed, match="unknown recipe 'minimax-m3'"):
        run(params(vllm_version="0.28.0", recipe="minimax-m3"), Loader())
    with pytest.raises(PlanFailed, match="max_num_seqs"):
        run(params(vllm_version="0.28.0", serving={"max_num_seqs": "many"}), Loader())
    with pytest.raises(PlanFailed, match=r"recipes\[0\]"):
        run(params(vllm_version="0.28.0", recipes=[{"name": "mine", "match": {}, "fields": {}}]), Loader())


def test_the_recipes_kv_cache_dtype_and_batch_limit_size_the_plan():
    mine = {"name": "fp8-kv", "match": {"architectures": ["MiniMaxM2ForCausalLM"]},
            "fields": {"kv_cache_dtype": "fp8", "max_num_seqs": 32}}
    plan = {"tp": 8, "pp": 1, "dp": 1, "ep": True}
    plain = run(params(vllm_version="0.28.0", plan=plan,
                       workload={"input_len": 1024, "output_len": 1024, "concurrency": [1, 64],
                                 "max_num_seqs": None, "max_num_batched_tokens": None}), Loader())
    fp8 = run(params(vllm_version="0.28.0", plan=plan, recipes=[mine],
                     workload={"input_len": 1024, "output_len": 1024, "concurrency": [1, 64],
                               "max_num_seqs": None, "max_num_batched_tokens": None}), Loader())
    assert fp8["recipe"]["name"] == "fp8-kv"
    assert plain["inputs"]["kv_cache_dtype"] != "fp8" and fp8["inputs"]["kv_cache_dtype"] == "fp8"
    assert fp8["selected"]["kv_cache_tokens"] > plain["selected"]["kv_cache_tokens"]
    assert fp8["inputs"]["workload"]["max_num_seqs"] == 32 and plain["inputs"]["workload"].get("max_num_seqs") != 32
    # An option given explicitly wins over the recipe's.
    explicit = run(params(vllm_version="0.28.0", recipes=[mine], kv_cache_dtype="auto"), Loader())
    assert explicit["inputs"]["kv_cache_dtype"] != "fp8"


# The server's extra arguments: the flags among them that change the prediction, read as vLLM's parser reads them.

WORKLOAD = {"input_len": 1024, "output_len": 1024, "concurrency": [1, 64], "max_num_seqs": None,
            "max_num_batched_tokens": None}


def test_batch_limits_in_extra_args_are_the_servers_and_win_over_the_fields():
    plan = {"tp": 8, "pp": 1, "dp": 1, "ep": True}
    given = run(params(vllm_version="0.28.0", plan=plan, workload=WORKLOAD,
                       extra_args=["--max-num-seqs", "8", "--max_num_batched_tokens=2048", "--disable-log-requests"]),
                Loader())
    assert given["inputs"]["workload"]["max_num_seqs"] == 8
    assert given["inputs"]["workload"]["max_num_batched_tokens"] == 2048
    # Eight sequences at most: the level of 64 clients runs no more, so it delivers no more than eight can.
    plain = run(params(vllm_version="0.28.0", plan=plan, workload=WORKLOAD), Loader())
    assert given["selected"]["estimate"]["levels"][-1]["running"] == 8
    assert plain["selected"]["estimate"]["levels"][-1]["running"] > 8
    # extra_args come after the fields on the command line, and the last occurrence wins there too.
    later = run(params(vllm_version="0.28.0", plan=plan, workload=WORKLOAD, serving={"max_num_seqs": 32},
                       extra_args=["--max-num-seqs=16", "--max-num-seqs", "4"]), Loader())
    assert later["inputs"]["workload"]["max_num_seqs"] == 4
    # The workload's own limit is what was asked to be predicted: it stays.
    own = run(params(vllm_version="0.28.0", plan=plan, workload=dict(WORKLOAD, max_num_seqs=64),
                     extra_args=["--max-num-seqs", "4"]), Loader())
    assert own["inputs"]["workload"]["max_num_seqs"] == 64


def test_enforce_eager_in_extra_args_plans_an_eager_server():
    plan = {"tp": 8, "pp": 1, "dp": 1, "ep": True}
    eager = run(params(vllm_version="0.28.0", plan=plan, extra_args=["--enforce_eager"]), Loader())
    graphs = run(params(vllm_version="0.28.0", plan=plan), Loader())
    assert eager["inputs"]["enforce_eager"] is True and graphs["inputs"]["enforce_eager"] is False
    assert eager["selected"]["estimate"]["ms_per_token"] > graphs["selected"]["estimate"]["ms_per_token"]


@pytest.mark.parametrize("extra_args, shown", [
    (["--max-num-seqs", "many"], "--max-num-seqs needs a positive whole number, got 'many'"),
    (["--max-num-batched-tokens=0"], "--max-num-batched-tokens needs a positive whole number, got '0'"),
    (["--max-num-seqs"], "--max-num-seqs needs a positive whole number, got ''"),
])
def test_a_bad_batch_limit_in_extra_args_fails_naming_it(extra_args, shown):
    loader = Loader()
    with pytest.raises(PlanFailed, match="extra_args: " + shown):
        run(params(vllm_version="0.28.0", workload=WORKLOAD, extra_args=extra_args), loader)
