# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_error_bands as bands
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import close_call, plan_model

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks")
MODEL_CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "model_configs")


def load(stem):
    return load_model_config(os.path.join(MODEL_CONFIGS, stem + ".json"), discover_hf_quant=False)


def test_the_error_bands_are_the_validation_datas():
    # ERROR_BANDS is kept in the module so that planning reads no fixture; it must be what the validation data
    # gives (regenerate with perf_points_eval.error_band_table() when the model or the data change).
    sys.path.insert(0, BENCHMARKS)
    from perf_points_eval import error_band_table  # pylint: disable=import-error
    assert error_band_table() == bands.ERROR_BANDS


def test_a_band_is_the_quantile_of_the_absolute_errors_by_nearest_rank():
    errors = [("dense", "ttft", "closed", e) for e in (-50.0, -10.0, 5.0, 20.0, 30.0)]
    table = bands.bands_from_errors(errors + [("moe", "ttft", "closed", 90.0)])
    assert table["dense/ttft/closed"] == {"pct": 30.0, "median_pct": 5.0, "points": 5}   # 4th of 5 |errors|
    assert table["moe/ttft/closed"] == {"pct": 90.0, "median_pct": 90.0, "points": 1}
    assert table["any/ttft/closed"]["points"] == 6 and table["any/ttft/closed"]["pct"] == 50.0


def test_a_regime_with_too_few_points_takes_the_band_of_every_kind(monkeypatch):
    monkeypatch.setattr(bands, "ERROR_BANDS", {
        "moe/tpot/closed": {"pct": 5.0, "median_pct": 1.0, "points": bands.MIN_POINTS - 1},
        "any/tpot/closed": {"pct": 20.0, "median_pct": 2.0, "points": 10},
        "dense/tpot/closed": {"pct": 30.0, "median_pct": 2.0, "points": bands.MIN_POINTS}})
    assert bands.band("moe", "tpot")["regime"] == "any/tpot/closed"
    assert bands.band("dense", "tpot") == {"pct": 30.0, "median_pct": 2.0, "points": bands.MIN_POINTS,
                                           "regime": "dense/tpot/closed"}
    assert bands.band("dense", "ttft") is None


def test_a_models_kind_is_moe_when_it_routes_to_experts():
    assert bands.model_kind(load("MiniMaxAI--MiniMax-M2.5")) == "moe"
    assert bands.model_kind(load("nvidia--Llama-3.1-70B-Instruct-FP8")) == "dense"
    assert bands.plan_bands(load("MiniMaxAI--MiniMax-M2.5"))["throughput_closed"]["regime"] == "moe/throughput/closed"


@pytest.mark.parametrize("best, second, pct, close", [
    (110.0, 100.0, 5.0, True),     # 104.5 against 105
    (111.0, 100.0, 5.0, False),    # 105.45 against 105
    (100.0, 100.0, 0.0, True),
    (100.0, None, 50.0, False),
    (100.0, 90.0, None, False),
])
def test_two_scores_are_too_close_when_their_bands_overlap(best, second, pct, close):
    assert bands.too_close(best, second, pct) is close


def _ranked(*scores):
    return [{"name": "P%d" % index, "valid": True, "fits": True, "meets_constraints": True, "score": score,
             "tp": 1, "pp": 1, "dp": index + 1, "ep": False, "nodes": 1} for index, score in enumerate(scores)]


def test_a_close_call_names_both_plans_the_margin_and_the_band():
    throughput = {"throughput_closed": {"pct": 10.0, "median_pct": 1.0, "points": 20, "regime": "moe/throughput/closed"}}
    close = close_call(_ranked(107.0, 100.0), "throughput", throughput)
    assert close == {"winner": "P0", "runner_up": "P1", "runner_up_plan": {"tp": 1, "pp": 1, "dp": 2, "ep": False},
                     "margin_pct": 7.0, "band_pct": 10.0, "band_regime": "moe/throughput/closed", "band_points": 20}
    assert close_call(_ranked(130.0, 100.0), "throughput", throughput) is None    # 117 against 110
    assert close_call(_ranked(107.0), "throughput", throughput) is None           # one usable plan
    assert close_call(_ranked(107.0, 100.0), "latency", throughput) is None       # no TPOT band: no call to judge


def test_the_planner_says_a_close_call_is_too_close_and_a_clear_one_is_not():
    # The reference box (8x RTX PRO 6000, input 1000 / output 1000): MiniMax-M2.5's best plans are within a few
    # per cent of each other, well inside the MoE throughput band.
    result = plan_model(load("MiniMaxAI--MiniMax-M2.5"), 8, 96.0, "0.32.0", max_model_len=8192,
                        gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
                        workload={"input_len": 1000, "output_len": 1000, "concurrency": [1, 64, 1024]})
    close = result["too_close_to_call"]
    assert close["winner"] == result["recommended"]["name"] and close["runner_up"] == result["ranking"][1]
    assert "; too close to call: %s leads %s by" % (close["winner"], close["runner_up"]) in result["why"]
    assert result["error_bands"]["kind"] == "moe"
    # Two GPUs of 96 GiB: one plan of MiniMax-M2.5 fits at most, so there is no call to make.
    alone = plan_model(load("MiniMaxAI--MiniMax-M2.5"), 2, 96.0, "0.32.0", max_model_len=8192,
                       gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
                       workload={"input_len": 1000, "output_len": 1000, "concurrency": [1, 64]})
    assert len(alone["ranking"]) <= 1 and alone["too_close_to_call"] is None and "too close" not in alone["why"]
