# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_perf import FilterModule, vllm_calibration
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import plan_model

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "model_configs", "meta-llama--Meta-Llama-3.1-70B.json")


def estimate():
    result = plan_model(load_model_config(CONFIG), 4, 80.0, "0.32.0", max_model_len=4096,
                        workload={"input_len": 256, "output_len": 128, "concurrency": [1, 16]})
    return [p for p in result["plans"] if p["name"] == "TP4"][0]["estimate"]


def test_the_filter_is_registered_and_returns_the_ratios():
    assert FilterModule().filters()["vllm_calibration"] is vllm_calibration
    predicted = estimate()
    # A bench level as gauntlet.vllm.vllm_bench returns it: summaries of TPOT and TTFT.
    levels = [{"concurrency": 1, "tpot_ms": {"median": 3 * predicted["ms_per_token"], "p99": 1e9},
               "ttft_ms": {"median": 1.0}}]
    calibration = vllm_calibration(predicted, levels, source="host-a TP4")
    assert calibration["ratios"]["step_fixed"] == pytest.approx(3.0, rel=1e-3)
    assert calibration["source"] == "host-a TP4" and calibration["points"] == 1


@pytest.mark.parametrize("bad_estimate, bad_levels, message", [
    ("TP4", [], "takes a plan's estimate"),
    ({}, {"concurrency": 1}, "takes the levels of gauntlet.vllm.vllm_bench"),
    ({"levels": []}, [{"concurrency": 1, "tpot_ms": 5.0}], "no measured level matches"),
])
def test_bad_inputs_are_filter_errors(bad_estimate, bad_levels, message):
    with pytest.raises(AnsibleFilterError, match=message):
        vllm_calibration(bad_estimate, bad_levels)


def test_prediction_errors_per_level_and_their_median():
    from ansible_collections.gauntlet.vllm.plugins.filter.vllm_perf import vllm_prediction_errors
    predicted = estimate()
    one, sixteen = predicted["levels"]
    # The planner simulated this plan's levels: the prediction is the simulation's, as a bench's closed loop runs.
    one, sixteen = [figures["simulated"] for figures in (one, sixteen)]
    levels = [{"concurrency": 1, "output_tokens_per_s": one["output_throughput"] / 2,
               "tpot_ms": {"median": one["tpot_ms"]["p50"]}},
              {"concurrency": 16, "output_tokens_per_s": sixteen["output_throughput"],
               "tpot_ms": {"median": sixteen["tpot_ms"]["p50"] * 2}},
              {"concurrency": 3, "output_tokens_per_s": 1.0, "tpot_ms": 1.0}]
    errors = vllm_prediction_errors(predicted, levels)
    assert [row["concurrency"] for row in errors["levels"]] == [1, 16]
    assert [row["predicted_by"] for row in errors["levels"]] == ["scheduler simulation"] * 2
    assert errors["levels"][0]["output_tokens_per_s"]["error_pct"] == pytest.approx(100.0, abs=0.2)
    assert errors["levels"][1]["tpot_ms"]["error_pct"] == pytest.approx(-50.0, abs=0.2)
    assert errors["median_abs_error_pct"] == pytest.approx(25.0, abs=0.2)  # 100, 0, 0, 50
    with pytest.raises(AnsibleFilterError, match="vllm_prediction_errors takes"):
        vllm_prediction_errors([], levels)
    # A level the planner did not simulate is judged by its closed form.
    closed = dict(predicted["levels"][1])
    del closed["simulated"]
    row = vllm_prediction_errors({"levels": [closed]}, levels)["levels"][0]
    assert row["predicted_by"] == "closed form" and row["tpot_ms"]["predicted"] == closed["tpot_ms"]
