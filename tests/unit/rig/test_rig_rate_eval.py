# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/rig_rate_eval.py's reading of a recording: which levels missed the SLO only outside the engine (vLLM's
own TTFT histogram within it), and the max rate with those counted as met, printed beside the goal, never as it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import rig_rate_eval  # noqa: E402  pylint: disable=wrong-import-position

RECORDING = os.path.join(ROOT, "tests", "unit", "fixtures", "perf", "rig-rate-vllm-cpu-moe-ttft.json")
OUTSIDE = ("p99 TTFT 348.6 ms > 200 ms (vLLM's own p99 TTFT was at most 40 ms: the rest passed outside the engine, in "
           "the network, the HTTP front end or the client)")


def rate_level(rate, misses, server=True):
    return {"request_rate": rate, "slo_met": not misses, "slo_misses": misses, "request_throughput": rate,
            "server_ttft_ms": {"requests": 80, "p99_ms_at_most": 40.0} if server else None}


def test_a_level_is_outside_the_engine_only_when_every_miss_says_so():
    assert rig_rate_eval.outside_engine(rate_level(20.0, [OUTSIDE]))
    assert not rig_rate_eval.outside_engine(rate_level(20.0, [OUTSIDE, "p99 TPOT 21.3 ms > 20 ms"]))
    assert not rig_rate_eval.outside_engine(rate_level(20.0, ["p99 TTFT 605.0 ms > 200 ms"]))
    assert not rig_rate_eval.outside_engine(rate_level(20.0, []))


def test_the_engine_side_rate_counts_those_levels_as_met_and_needs_the_histogram():
    ladder = [rate_level(10.0, []), rate_level(20.0, [OUTSIDE]), rate_level(40.0, ["p99 TTFT 605.0 ms > 200 ms"])]
    assert rig_rate_eval.engine_side_rate({"rate_levels": ladder}) == (20.0, 1)
    older = [dict(level, server_ttft_ms=None) for level in ladder]
    assert rig_rate_eval.engine_side_rate({"rate_levels": older}) == (None, 0)


def test_the_recorded_moe_repeats_read_as_the_docs_say():
    with open(RECORDING) as handle:
        repeats = json.load(handle)["repeats"]
    assert [rig_rate_eval.engine_side_rate(sweep) for sweep in repeats] == [
        (75.0, 0), (90.0, 0), (70.0, 1), (20.0, 3)]
