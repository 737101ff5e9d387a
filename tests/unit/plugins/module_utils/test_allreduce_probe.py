# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The all-reduce probe's figures, and the planner taking measured all-reduce times over its table.

``h200-1gpu.allreduce.json`` is what the probe measured with NCCL on one H200 (world size 1: the launch
floor, nothing crosses a link). Multi-GPU probes are not recorded yet; the 8-GPU probe below is made up
to exercise the planner's measured path and says so."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import allreduce_probe as probe
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_hardware import gpu_spec
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import evaluate_plan_for, plan_model

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def load(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return json.load(handle)


def made_up_8gpu_probe(decode_us):
    """A synthetic probe: decode_us for the smallest message, growing with size."""
    rows = [{"bytes": 14336 * 4 ** step, "time_us": decode_us * (1 + step), "algbw_gbs": None, "busbw_gbs": None}
            for step in range(4)]
    return {"backend": "nccl", "hidden_size": 7168, "by_gpu_count": {"8": {"world_size": 8, "sizes": rows}}}


def test_message_sizes_start_at_one_decode_step_and_end_at_the_limit():
    assert probe.message_sizes(7168, max_bytes=1 << 20) == [14336, 57344, 229376, 917504, 1048576]
    assert probe.message_sizes(4096, max_bytes=8192) == [8192]
    with pytest.raises(probe.ProbeError):
        probe.message_sizes(0)


def test_bus_bandwidth_follows_nccl_tests():
    # 1 GB in 10 ms on 8 GPUs: algbw 100 GB/s, busbw 100 * 2 * 7 / 8 = 175 GB/s.
    assert probe.bus_bandwidth_gbs(1e9, 0.01, 8) == (100.0, 175.0)
    assert probe.bus_bandwidth_gbs(1e9, 0.01, 1) == (100.0, 0.0)


def test_the_recorded_h200_run_is_the_launch_floor():
    facts = load("gpu", "h200-1gpu.allreduce.json")
    single = facts["by_gpu_count"]["1"]
    assert facts["backend"] == "nccl" and facts["nccl"]
    assert single["sizes"][0]["bytes"] == 7168 * 2
    assert all(row["busbw_gbs"] == 0.0 for row in single["sizes"])
    assert 1 < single["latency_us"] < 200
    # Nothing to compare a table figure with: the planner only costs all-reduces of 2 or more GPUs.
    assert probe.compare(facts, 7168) == []


def test_measured_time_is_interpolated_between_sizes_and_clamped():
    facts = made_up_8gpu_probe(40.0)
    assert probe.measured_us(facts, 8, 14336) == 40.0
    assert probe.measured_us(facts, 8, 1000) == 40.0
    assert probe.measured_us(facts, 8, 28672) == pytest.approx(60.0)  # halfway in log size between 40 and 80
    assert probe.measured_us(facts, 8, 917504 * 2) == pytest.approx(320.0)  # past the largest: scales with size
    assert probe.measured_us(facts, 4, 14336) is None


def test_compare_reports_the_planners_table_figure_against_the_measured_one():
    rows = probe.compare(made_up_8gpu_probe(40.0), 7168, gpu_name="NVIDIA RTX PRO 6000 Blackwell", link="pcie")
    spec = gpu_spec("NVIDIA RTX PRO 6000 Blackwell")[1]
    # Table: NCCL on 8 PCIe GPUs (vLLM has no custom all-reduce there), aiconfigurator's profiled RTX PRO 6000 curve
    # between its 8 KiB and 16 KiB points (26.67 and 27.04 us), log-log at 14336 B.
    curve = spec["allreduce"]["curves_us"]["nccl"][8]
    share = math.log(14336 / 8192.0) / math.log(2.0)
    table = math.exp(math.log(curve[2]) + share * (math.log(curve[3]) - math.log(curve[2])))
    assert (curve[2], curve[3]) == (26.67, 27.04)
    assert rows == [{"gpus": 8, "bytes": 14336, "predicted_us": round(table, 3), "measured_us": 40.0,
                     "ratio": round(table / 40.0, 3)}]


def test_the_planner_uses_a_measured_all_reduce_for_the_tp_size_probed(model_configs_dir):
    model = load_model_config(os.path.join(model_configs_dir, "moonshotai--Kimi-K2.5.json"))
    table = plan_model(model, 8, 89.4, "0.28.0", max_model_len=65536)
    facts = made_up_8gpu_probe(100.0)
    measured = plan_model(model, 8, 89.4, "0.28.0", max_model_len=65536,
                          measured_allreduce_us=lambda world, size: probe.measured_us(facts, world, size))
    tp8 = {"tp": 8, "pp": 1, "dp": 1, "ep": False}
    before = evaluate_plan_for(model, tp8, table["inputs"])["estimate"]
    after = evaluate_plan_for(model, tp8, measured["inputs"],
                              measured_allreduce_us=lambda world, size: probe.measured_us(facts, world, size))["estimate"]
    assert before["basis"]["allreduce_source"] == "table"
    assert after["basis"]["allreduce_source"] == "measured on 8 GPUs"
    assert after["basis"]["tp_allreduce_us"] == 100.0
    # 61 layers x 2 all-reduces x (100 us - the table's figure) more per token.
    layers = model["num_hidden_layers"]
    table_us = before["basis"]["tp_allreduce_us"]
    assert table_us < 100.0
    assert after["ms_per_token"] - before["ms_per_token"] == pytest.approx(2 * layers * (100.0 - table_us) / 1000, abs=0.01)
    # TP4 was not probed: it keeps the table.
    tp4 = [plan for plan in measured["plans"] if plan["name"] == "TP4-PP2"][0]
    assert tp4["estimate"]["basis"]["allreduce_source"] == "table"
