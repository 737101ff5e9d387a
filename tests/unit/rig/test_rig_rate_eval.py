# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/rig_rate_eval.py's reading of a recording: the max rate with the levels that missed the SLO only outside
the engine (vLLM's own TTFT histogram within it) counted as met, printed beside the goal, never as it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import rig_rate_eval  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic  # noqa: E402  pylint: disable=wrong-import-position

RECORDING = os.path.join(ROOT, "tests", "unit", "fixtures", "perf", "rig-rate-vllm-cpu-moe-ttft.json")


def rate_level(rate, p99_ttft=50.0, own=40.0):
    """A judged open-loop level of the rig's sweep (SLO: p99 TTFT 200 ms, TPOT 20 ms) with vLLM's own p99 TTFT bound."""
    level = {"request_rate": rate, "completed": 80, "failed": 0, "abandoned": 0, "request_throughput": rate,
             "ttft_ms": {"p99": p99_ttft}, "tpot_ms": {"p99": 5.0}, "e2el_ms": {"p99": 300.0},
             "server_ttft_ms": None if own is None else {"requests": 80, "p99_ms_at_most": own}}
    return bench_traffic.judge(level, rig_rate_eval.SWEEP["goodput"])


def test_the_engine_side_rate_counts_those_levels_as_met_and_needs_the_histogram():
    ladder = [rate_level(10.0), rate_level(20.0, p99_ttft=348.6), rate_level(40.0, p99_ttft=605.0, own=250.0)]
    assert rig_rate_eval.engine_side_rate({"rate_levels": ladder}) == (20.0, 1)
    older = [dict(level, server_ttft_ms=None) for level in ladder]
    assert rig_rate_eval.engine_side_rate({"rate_levels": older}) == (None, 0)


def test_the_recorded_moe_repeats_read_as_the_docs_say():
    with open(RECORDING) as handle:
        repeats = json.load(handle)["repeats"]
    assert [rig_rate_eval.engine_side_rate(sweep) for sweep in repeats] == [
        (75.0, 0), (90.0, 0), (70.0, 1), (20.0, 3)]


def test_the_server_takes_the_last_cores_and_the_client_the_rest():
    assert rig_rate_eval.split_cores(1, {0, 1}) == ([1], [0])
    assert rig_rate_eval.split_cores(2, [0, 1, 2, 3]) == ([2, 3], [0, 1])
    # Nothing left for the client, or no confinement asked: both share every core.
    assert rig_rate_eval.split_cores(2, [0, 1]) == (None, None)
    assert rig_rate_eval.split_cores(0, [0, 1]) == (None, None)
