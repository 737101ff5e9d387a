# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The terms of real traffic (bench_traffic): rates, gamma arrivals, length mixes, shared prefixes, the
custom dataset, goodput, the SLO verdict, the prefix-cache hit rate, the max sustainable rate and its search."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import random

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic as traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench


@pytest.mark.parametrize("value, rate", [("inf", math.inf), ("INF", math.inf), (2, 2.0), ("2.5", 2.5), (0.25, 0.25)])
def test_a_rate_is_a_positive_number_or_inf(value, rate):
    assert traffic.parse_rate(value) == rate


@pytest.mark.parametrize("value", [0, -1, "fast", True, float("nan"), None, [2]])
def test_a_rate_that_is_not_one_is_refused_saying_what_it_got(value):
    with pytest.raises(ValueError) as caught:
        traffic.parse_rate(value)
    assert repr(value) in str(caught.value)


def test_inf_is_carried_as_a_string_in_results():
    assert traffic.rate_label(math.inf) == "inf" and traffic.rate_label(2.5) == 2.5


def test_arrivals_end_exactly_at_requests_over_rate_as_vllm_scales_them():
    offsets = traffic.arrival_offsets(50, 20.0, 1.0, random.Random(3))
    assert len(offsets) == 50 and offsets == sorted(offsets) and offsets[0] > 0
    assert offsets[-1] == pytest.approx(50 / 20.0)
    assert offsets == traffic.arrival_offsets(50, 20.0, 1.0, random.Random(3))       # seeded


def test_an_inf_rate_sends_everything_at_once():
    assert traffic.arrival_offsets(5, math.inf, 1.0, random.Random(0)) == [0.0] * 5


@pytest.mark.parametrize("burstiness, cv", [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0)])
def test_gamma_gaps_have_the_coefficient_of_variation_of_their_shape(burstiness, cv):
    offsets = traffic.arrival_offsets(20000, 10.0, burstiness, random.Random(7))
    assert traffic.gap_cv([0.0] + offsets) == pytest.approx(cv, rel=0.06)


def test_an_infinite_burstiness_sends_evenly():
    offsets = traffic.arrival_offsets(10, 5.0, math.inf, random.Random(0))
    assert traffic.gap_cv(offsets) == pytest.approx(0.0, abs=1e-9)


def test_gap_cv_needs_three_times():
    assert traffic.gap_cv([0.0, 1.0]) is None and traffic.gap_cv([1.0, 1.0, 1.0]) is None


@pytest.mark.parametrize("rate, count, duration, cap, expected", [
    (5.0, 0, 0, 0, 50), (0.5, 0, 0, 0, 16), (5.0, 12, 0, 0, 12), (5.0, 0, 3.0, 0, 15),
    (math.inf, 0, 0, 0, 16), (math.inf, 0, 0, 8, 32), (math.inf, 10, 0, 8, 10),
])
def test_how_many_requests_an_open_loop_level_sends(rate, count, duration, cap, expected):
    assert traffic.requests_for_rate(rate, count, duration, cap) == expected


def test_lengths_are_exact_without_a_range_ratio():
    assert traffic.sample_lengths(4, 100, 20, 0.0, random.Random(0)) == ([100] * 4, [20] * 4)


def test_lengths_mix_uniformly_within_the_range_ratio_as_vllm_rounds_it():
    inputs, outputs = traffic.sample_lengths(4000, 101, 10, 0.5, random.Random(1))
    # floor(101 * 0.5) = 50, ceil(101 * 1.5) = 152; floor(5) = 5, ceil(15) = 15: both ends are drawn.
    assert (min(inputs), max(inputs)) == (50, 152) and (min(outputs), max(outputs)) == (5, 15)
    assert sum(inputs) / len(inputs) == pytest.approx(101, rel=0.03)


def test_an_output_length_never_falls_below_one():
    dummy, outputs = traffic.sample_lengths(500, 10, 1, 0.9, random.Random(2))
    assert set(outputs) == {1, 2}


def test_every_prompt_starts_with_the_shared_prefix_and_then_differs():
    prefix = traffic.shared_prefix(8, 512, 16, random.Random(0))
    prompts = traffic.token_prompts([5, 6, 7], prefix, 512, 16, random.Random(1))
    assert [len(prompt) for prompt in prompts] == [13, 14, 15]
    assert all(prompt[:8] == prefix for prompt in prompts)
    assert len({tuple(prompt[8:10]) for prompt in prompts}) == 3
    assert min(min(prompt) for prompt in prompts) >= 16 and max(max(prompt) for prompt in prompts) < 512


def test_without_a_prefix_the_prompts_are_those_of_the_closed_loop():
    assert traffic.token_prompts([16] * 4, [], 512, 16, random.Random(0)) == vllm_bench.random_token_prompts(
        4, 16, 512, 0, reserved_ids=16)


def write(tmp_path, text, name="traffic.jsonl"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def test_a_custom_dataset_is_read_as_vllm_bench_serve_reads_it(tmp_path):
    path = write(tmp_path, '{"prompt": "What is the capital of India?", "output_tokens": 10}\n\n'
                           '{"prompt": "Tell me a story"}\n')
    assert traffic.read_custom_dataset(path, 64) == [
        {"prompt": "What is the capital of India?", "output_tokens": 10},
        {"prompt": "Tell me a story", "output_tokens": 64}]


@pytest.mark.parametrize("text, words", [
    ('{"prompt": "a"}\n{"prompt": "b"\n', "line 2: not JSON"),
    ('["a"]\n', "line 1: a JSON object with 'prompt' is expected, not list"),
    ('{"text": "a"}\n', "line 1: 'prompt' must be a non-empty string (got null)"),
    ('{"prompt": ""}\n', "line 1: 'prompt' must be a non-empty string"),
    ('{"prompt": "a", "output_tokens": 0}\n', "line 1: 'output_tokens' must be a whole number of 1 or more (got 0)"),
    ('{"prompt": "a", "output_tokens": "ten"}\n', "line 1: 'output_tokens' must be a whole number of 1 or more (got \"ten\")"),
    ('{"prompt": "a", "output_tokens": true}\n', "line 1: 'output_tokens' must be a whole number of 1 or more (got true)"),
    ("\n  \n", "no requests"),
    (b'{"prompt": "\xff"}\n', "not UTF-8 text"),
])
def test_a_bad_dataset_names_the_file_the_line_and_the_field(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(traffic.DatasetError) as caught:
        traffic.read_custom_dataset(path, 64)
    assert str(caught.value).startswith(path + (": " if "line" not in words else " ")) and words in str(caught.value)


def test_a_missing_or_oversized_dataset_is_refused(tmp_path):
    with pytest.raises(traffic.DatasetError, match="cannot read the dataset"):
        traffic.read_custom_dataset(str(tmp_path / "none.jsonl"), 64)
    path = write(tmp_path, json.dumps({"prompt": "x" * 200}) + "\n")
    with pytest.raises(traffic.DatasetError, match="larger than 100 bytes"):
        traffic.read_custom_dataset(path, 64, max_bytes=100)


def record(ttft, latency, tokens):
    return {"ttft": ttft, "latency": latency, "completion_tokens": tokens}


def test_a_request_is_good_when_every_slo_given_holds_at_or_below_its_limit():
    slo = {"ttft_ms": 100.0, "tpot_ms": 10.0}
    assert traffic.is_good(record(0.1, 0.19, 10), slo)               # TTFT and TPOT exactly at their limits
    assert not traffic.is_good(record(0.1001, 0.19, 10), slo)
    assert not traffic.is_good(record(0.05, 0.2, 10), slo)           # TPOT 16.7 ms
    assert traffic.is_good(record(0.05, 9.0, 1000), slo)             # E2E is not limited here
    assert not traffic.is_good(record(0.05, 9.0, 1000), dict(slo, e2el_ms=1000))


def test_one_output_token_has_a_tpot_of_zero_for_goodput():
    assert traffic.request_tpot(record(0.5, 0.5, 1)) == 0.0
    assert traffic.is_good(record(0.05, 0.05, 1), {"tpot_ms": 0.001})


def test_goodput_is_good_requests_per_second_of_the_level():
    done = [record(0.1, 0.2, 2), record(0.3, 0.4, 2), record(0.1, 0.2, 2), record(0.1, 0.2, 2)]
    assert traffic.goodput(done, {"ttft_ms": 200}, 2.0) == {"good_requests": 3, "request_goodput": 1.5}
    assert traffic.goodput(done, None, 2.0) is None


def level(p99_ttft=100.0, p99_tpot=10.0, p99_e2el=500.0, completed=10, failed=0, rate=1.0, throughput=1.0):
    return {"request_rate": rate, "completed": completed, "failed": failed, "abandoned": 0,
            "request_throughput": throughput, "ttft_ms": {"p99": p99_ttft}, "tpot_ms": {"p99": p99_tpot},
            "e2el_ms": {"p99": p99_e2el}}


def test_a_level_meets_the_slo_when_its_p99s_hold_and_nothing_failed():
    slo = {"ttft_ms": 200.0, "tpot_ms": 10.0}
    assert traffic.judge(level(), slo)["slo_met"] is True
    missed = traffic.judge(level(p99_ttft=812.0, p99_tpot=10.5), slo)
    assert missed["slo_met"] is False and missed["slo_misses"] == ["p99 TTFT 812.0 ms > 200 ms", "p99 TPOT 10.5 ms > 10 ms"]
    assert traffic.judge(level(failed=1), slo)["slo_misses"] == ["1 request(s) failed"]
    assert traffic.judge(level(), None)["slo_met"] is None


HISTOGRAM = traffic.SERVER_TTFT_HISTOGRAM


def ttft_buckets(**counts):
    """le -> cumulative count, from keyword names like le_0_1=5 (0.1 s) and inf=9."""
    return {float("inf") if name == "inf" else float(name[3:].replace("_", ".")): value for name, value in counts.items()}


def test_vllms_own_ttft_percentiles_are_the_bounds_of_the_buckets_that_hold_them_over_the_level():
    before = {HISTOGRAM: ttft_buckets(le_0_01=10.0, le_0_1=20.0, le_0_25=20.0, le_1_0=20.0, inf=20.0)}
    # 100 requests over the level: 60 under 10 ms, 39 more under 100 ms, one between 250 ms and 1 s.
    after = {HISTOGRAM: ttft_buckets(le_0_01=70.0, le_0_1=119.0, le_0_25=119.0, le_1_0=120.0, inf=120.0)}
    assert traffic.server_ttft(before, after) == {"requests": 100, "p50_ms_at_most": 10.0, "p99_ms_at_most": 100.0}
    # Two requests over a second: the p99 falls past the last finite bucket, which bounds nothing.
    beyond = {HISTOGRAM: ttft_buckets(le_0_01=70.0, le_0_1=118.0, le_0_25=118.0, le_1_0=118.0, inf=120.0)}
    assert traffic.server_ttft(before, beyond)["p99_ms_at_most"] is None


def test_without_the_histogram_before_and_after_or_requests_vllms_own_ttft_is_none():
    after = {HISTOGRAM: ttft_buckets(le_0_1=5.0, inf=5.0)}
    assert traffic.server_ttft(None, after) is None
    assert traffic.server_ttft({}, after) is None
    assert traffic.server_ttft(after, {HISTOGRAM: {}}) is None
    assert traffic.server_ttft(after, after) is None


def test_a_ttft_miss_that_vllm_did_not_see_is_said_to_have_passed_outside_the_engine():
    slo = {"ttft_ms": 200.0, "tpot_ms": 10.0}
    outside = dict(level(p99_ttft=432.5, p99_tpot=12.0), server_ttft_ms={"requests": 80, "p99_ms_at_most": 100.0})
    assert traffic.judge(outside, slo)["slo_misses"] == [
        "p99 TTFT 432.5 ms > 200 ms (vLLM's own p99 TTFT was at most 100 ms: the rest passed outside the engine, in "
        "the network, the HTTP front end or the client)", "p99 TPOT 12.0 ms > 10 ms"]
    for own in (250.0, None):
        inside = dict(level(p99_ttft=432.5), server_ttft_ms={"requests": 80, "p99_ms_at_most": own})
        assert traffic.judge(inside, slo)["slo_misses"] == ["p99 TTFT 432.5 ms > 200 ms"]


def test_a_level_missed_only_outside_the_engine_when_vllms_own_p99_ttft_would_have_met_every_slo():
    slo = {"ttft_ms": 200.0, "tpot_ms": 20.0}

    def judged(p99_ttft, p99_tpot=10.0, own=40.0):
        return traffic.judge(dict(level(p99_ttft=p99_ttft, p99_tpot=p99_tpot),
                                  server_ttft_ms=None if own is None else {"p99_ms_at_most": own}), slo)

    assert traffic.missed_only_outside_engine(judged(348.6), slo)
    assert not traffic.missed_only_outside_engine(judged(348.6, p99_tpot=21.3), slo)
    assert not traffic.missed_only_outside_engine(judged(605.0, own=250.0), slo)
    assert not traffic.missed_only_outside_engine(judged(150.0), slo)
    assert not traffic.missed_only_outside_engine(judged(348.6, own=None), slo)


def test_the_prefix_cache_hit_rate_is_hits_over_queries_of_the_level():
    assert traffic.prefix_hit_rate({"vllm:prefix_cache_queries_total": 800.0, "vllm:prefix_cache_hits_total": 200.0}) == 0.25
    assert traffic.prefix_hit_rate({"vllm:prefix_cache_queries_total": 0.0, "vllm:prefix_cache_hits_total": 0.0}) is None
    assert traffic.prefix_hit_rate({}) is None


def ladder(*met_by_rate):
    return [dict(level(rate=rate), slo_met=met, slo_misses=[] if met else ["p99 TTFT 900.0 ms > 500 ms"])
            for rate, met in met_by_rate]


def test_the_max_sustainable_rate_is_the_highest_rate_that_met_the_slo():
    rate, how = traffic.max_sustainable(ladder((1.0, True), (2.0, True), (4.0, False), (8.0, False)), {"ttft_ms": 500})
    assert rate == 2.0 and "the next above, 4 req/s, did not" in how


def test_no_max_sustainable_rate_without_an_slo_or_a_level_that_met_it():
    assert traffic.max_sustainable(ladder((1.0, True)), None)[0] is None
    assert traffic.max_sustainable([], {"ttft_ms": 500}) == (None, "no open-loop level was measured (request_rate)")
    rate, why = traffic.max_sustainable(ladder((2.0, False), (1.0, False)), {"ttft_ms": 500})
    assert rate is None and why == "no level met the SLO; the lowest, 1 req/s, missed it: p99 TTFT 900.0 ms > 500 ms"


def test_an_inf_level_that_met_the_slo_gives_its_achieved_rate():
    levels = ladder((1.0, True)) + [dict(level(rate="inf", throughput=37.5), slo_met=True)]
    rate, how = traffic.max_sustainable(levels, {"ttft_ms": 500})
    assert rate == 37.5 and "rate inf" in how


def test_an_inf_burst_that_met_the_slo_beside_a_finite_rate_that_missed_it_is_no_sustained_rate():
    # The H100 recording of Llama-3.1-8B (tests/unit/fixtures/perf/h100-serve-0.24.json): 16 requests at once met
    # the SLO at 11.8 req/s achieved, 28 req/s met it, 40 and 64 did not.
    levels = ladder((4.0, True), (16.0, True), (64.0, False), (40.0, False), (28.0, True))
    levels.append(dict(level(rate="inf", throughput=11.8), slo_met=True))
    rate, how = traffic.max_sustainable(levels, {"ttft_ms": 500})
    assert rate == 28.0 and "the next above, 40 req/s, did not" in how
    rate, why = traffic.max_sustainable(ladder((4.0, False)) + [dict(level(rate="inf"), slo_met=True)], {"ttft_ms": 500})
    assert rate is None and why.startswith("no finite level met the SLO; the lowest, 4 req/s, missed it")


def test_the_search_bisects_between_the_last_rate_met_and_the_first_missed():
    slo = {"ttft_ms": 500}
    assert traffic.next_search_rate(ladder((2.0, True), (4.0, False), (8.0, False)), slo) == 3.0
    assert traffic.next_search_rate(ladder((4.0, False)), slo) == 2.0                 # none met: halve
    assert traffic.next_search_rate(ladder((2.0, True), (4.0, True)), slo) is None    # all met
    assert traffic.next_search_rate(ladder((3.0, True), (3.05, False)), slo) is None  # bracket under 2%
    assert traffic.next_search_rate(ladder((2.0, True), (4.0, False)), None) is None
