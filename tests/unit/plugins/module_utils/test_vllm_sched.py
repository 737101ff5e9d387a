# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler simulation (vllm_sched.py), one behaviour per test, over a step model of round numbers.

Accuracy against real vLLM is printed by tests/benchmarks/bench_perf_model.py, never asserted here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_sched as sched

LIMITS = {"max_num_seqs": 256, "max_num_batched_tokens": 1024}
ROOMY_KV = 10 ** 7


class LinearSteps(object):
    """A step costs 10 ms, 0.1 ms per decode and 0.01 ms per prompt token: a prompt of 1024 tokens takes
    20.24 ms alone, a decode step of one sequence 10.1 ms."""
    extra_overhead_s = 0.0

    def __init__(self):
        self.calls = []

    def mixed_step_s(self, decodes, decode_context, tokens, context, prompts, engines=1):
        self.calls.append((decodes, tokens, prompts, engines))
        return 0.010 + 0.0001 * decodes + 0.00001 * tokens

    def mixed_step_split(self, decodes, decode_context, tokens, context, prompts, engines=1):
        return self.mixed_step_s(decodes, decode_context, tokens, context, prompts, engines), False


class AsyncSteps(LinearSteps):
    """LinearSteps on an engine that schedules a step while the one before it runs (vLLM's async scheduling)."""
    async_scheduling = True


class LaunchBoundPrompts(LinearSteps):
    """LinearSteps whose steps with more than 512 tokens take at least 40 ms: the CPU's launches set them."""

    def mixed_step_split(self, decodes, decode_context, tokens, context, prompts, engines=1):
        seconds = self.mixed_step_s(decodes, decode_context, tokens, context, prompts, engines)
        if decodes + tokens > 512 and seconds < 0.040:
            return 0.040, True
        return seconds, False


def simulate(concurrency=None, rate=None, limits=None, kv=ROOMY_KV, engines=1, slo=None, step=None, **workload):
    settled = {"input_len": 1024, "output_len": 11}
    settled.update(workload)
    return sched.simulate_level(step or LinearSteps(), limits or LIMITS, kv, settled, engines,
                                concurrency=concurrency, rate=rate, slo=slo)


def test_one_client_waits_for_its_prompt_and_then_one_step_a_token():
    level = simulate(concurrency=1, requests_per_level=3)
    # Overhead 8 ms, then one step of 1024 prompt tokens (20.24 ms), first token at its end.
    assert level["ttft_ms"]["p50"] == pytest.approx(28.24)
    assert level["tpot_ms"]["p50"] == pytest.approx(10.1)
    assert level["e2el_ms"]["p50"] == pytest.approx(28.24 + 10 * 10.1)
    assert level["completed"] == 3 and level["failed"] == 0


def test_a_closed_loop_wave_is_prefilled_in_budget_chunks_and_the_last_prompt_waits_for_the_others():
    level = simulate(concurrency=4, requests_per_level=4)
    # Four prompts of 1024 tokens, 1024 tokens a step: each step completes one prompt, so the first token
    # of the last one comes after four steps, not one.
    single = simulate(concurrency=1, requests_per_level=4)
    assert level["ttft_ms"]["p99"] > 3 * single["ttft_ms"]["p50"]
    assert level["ttft_ms"]["p50"] > 2 * single["ttft_ms"]["p50"]


def test_a_larger_budget_prefills_the_wave_in_fewer_steps():
    small = simulate(concurrency=8, requests_per_level=8)
    large = simulate(concurrency=8, requests_per_level=8, limits={"max_num_seqs": 256, "max_num_batched_tokens": 8192})
    assert large["ttft_ms"]["p99"] < small["ttft_ms"]["p99"]


def test_max_num_seqs_caps_the_running_requests_and_the_rest_queue():
    capped = simulate(concurrency=8, requests_per_level=8, limits={"max_num_seqs": 2, "max_num_batched_tokens": 8192})
    free = simulate(concurrency=8, requests_per_level=8, limits={"max_num_seqs": 8, "max_num_batched_tokens": 8192})
    assert capped["ttft_ms"]["p99"] > 3 * free["ttft_ms"]["p99"]
    assert capped["completed"] == free["completed"] == 8


def test_a_kv_cache_too_small_for_every_sequence_preempts_and_still_finishes_them_all():
    # Three prompts of 1024 tokens fit 3200 tokens of KV and are admitted in one step; as they decode, the
    # third is preempted (recomputed later) to make room for the first two.
    big_budget = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    level = simulate(concurrency=3, requests_per_level=6, kv=3200, output_len=200, limits=big_budget)
    assert level["preemptions"] > 0
    assert level["completed"] == 6 and level["failed"] == 0
    roomy = simulate(concurrency=3, requests_per_level=6, output_len=200, limits=big_budget)
    assert roomy["preemptions"] == 0
    assert level["duration_s"] > roomy["duration_s"]


def test_a_request_the_kv_cache_cannot_hold_alone_fails():
    level = simulate(concurrency=1, requests_per_level=2, kv=512)
    assert level["completed"] == 0 and level["failed"] == 2


def test_a_shared_prefix_found_in_the_cache_is_not_prefilled_again():
    # 768 shared + 256 own tokens: the cached prefix's 48 blocks are skipped (the bench's warm-up put them
    # in the cache), only the 256 own tokens are prefilled: 8 + 10 + 2.56 ms.
    with_prefix = simulate(concurrency=1, requests_per_level=2, input_len=256, prefix_len=768)
    without = simulate(concurrency=1, requests_per_level=2, input_len=1024)
    assert with_prefix["ttft_ms"]["p50"] == pytest.approx(20.56)
    assert without["ttft_ms"]["p50"] == pytest.approx(28.24)


def test_an_open_loop_below_capacity_serves_at_its_rate_with_short_waits():
    level = simulate(rate=2.0, requests_per_level=20, burstiness=1.0)
    assert level["request_rate"] == 2.0
    assert level["request_throughput"] == pytest.approx(2.0, rel=0.35)
    assert level["ttft_ms"]["p50"] < 60.0


def test_an_open_loop_past_capacity_queues_and_its_ttft_grows_with_the_rate():
    slow = simulate(rate=5.0, requests_per_level=40)
    fast = simulate(rate=500.0, requests_per_level=40)
    assert fast["ttft_ms"]["p99"] > 5 * slow["ttft_ms"]["p99"]
    assert fast["request_throughput"] < 500.0 / 4


def test_an_infinite_rate_sends_everything_at_once():
    level = simulate(rate=float("inf"), requests_per_level=16)
    assert level["request_rate"] == "inf"
    assert level["requests"] == 16 and level["completed"] == 16


def test_max_concurrency_holds_requests_back_and_their_ttft_counts_from_the_send():
    capped = simulate(rate=float("inf"), requests_per_level=16, max_concurrency=2)
    free = simulate(rate=float("inf"), requests_per_level=16)
    assert capped["ttft_ms"]["p99"] < free["ttft_ms"]["p99"]
    assert capped["duration_s"] > free["duration_s"]


class SerialFrontEnd(LinearSteps):
    """LinearSteps behind an API server that takes 5 ms of its own per request, one request at a time."""
    frontend_s = 0.005


class SharedCoreFrontEnd(SerialFrontEnd):
    """SerialFrontEnd on the engine's own cores (a CPU device): its 5 ms per request are the engine's time too."""

    def request_host_s(self, requests):
        return 0.005 * requests


def test_the_api_server_hands_requests_sent_together_to_the_engine_one_at_a_time():
    traffic = sched.Traffic([(16, 4)] * 4, [0.0, 0.0, 0.0, 0.020], None, 0, 0.008, service=0.005)
    traffic.release(0.0, sched.Engine(LIMITS, ROOMY_KV, False), cutoff=-1.0)
    # Sent together: 3 ms of latency, then 5 ms each in turn. Sent alone later: the whole overhead, 8 ms.
    assert [request.visible for request in traffic.requests] == pytest.approx([0.008, 0.013, 0.018])
    assert traffic.next_visible() == pytest.approx(0.008)
    traffic.release(0.020, sched.Engine(LIMITS, ROOMY_KV, False), cutoff=-1.0)
    assert traffic.requests[-1].visible == pytest.approx(0.028)


def test_the_api_servers_time_varies_around_its_mean_with_a_random_source():
    import random
    traffic = sched.Traffic([(16, 4)] * 2000, [0.0] * 2000, None, 0, 0.008, service=0.005, rng=random.Random(0))
    traffic.release(0.0, sched.Engine(LIMITS, ROOMY_KV, False), cutoff=-1.0)
    gaps = [b.visible - a.visible for a, b in zip(traffic.requests, traffic.requests[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(0.005, rel=0.1)
    assert max(gaps) > 3 * 0.005 and min(gaps) < 0.005 / 3


def test_a_serial_front_end_spreads_a_wave():
    wave = simulate(concurrency=8, requests_per_level=8, input_len=64, step=SerialFrontEnd())
    together = simulate(concurrency=8, requests_per_level=8, input_len=64)
    # All eight prompts fit one step when they come together; about 5 ms apart, the last comes some 35 ms later.
    assert wave["ttft_ms"]["p99"] > together["ttft_ms"]["p99"] + 20.0


def test_a_front_end_on_the_engines_cores_slows_a_busy_engine_and_not_an_idle_one():
    lone = simulate(concurrency=1, requests_per_level=20, step=SharedCoreFrontEnd())
    apart = simulate(concurrency=1, requests_per_level=20, step=SerialFrontEnd())
    # One client: the API server works while the engine waits, so a request costs the engine nothing more.
    assert lone["ttft_ms"]["p50"] == pytest.approx(apart["ttft_ms"]["p50"])
    assert lone["tpot_ms"]["p50"] == pytest.approx(apart["tpot_ms"]["p50"])
    # Many: every request that reaches a busy engine lengthens its next step by the API server's 5 ms.
    busy = simulate(rate=40.0, requests_per_level=200, input_len=64, step=SharedCoreFrontEnd())
    free = simulate(rate=40.0, requests_per_level=200, input_len=64, step=SerialFrontEnd())
    assert busy["tpot_ms"]["p50"] > free["tpot_ms"]["p50"] + 1.0
    assert busy["e2el_ms"]["p50"] > free["e2el_ms"]["p50"] + 10.0


def test_data_parallel_engines_split_the_clients_and_add_their_throughput():
    step = LinearSteps()
    one = simulate(concurrency=4, requests_per_level=8)
    two = simulate(concurrency=8, requests_per_level=16, engines=2, step=step)
    # Each of two engines runs what one engine runs alone.
    assert two["request_throughput"] == pytest.approx(2 * one["request_throughput"], rel=0.01)
    assert two["ttft_ms"]["p99"] == pytest.approx(one["ttft_ms"]["p99"], rel=0.01)
    assert two["requests"] == 16
    assert {engines for dummy, dummy2, dummy3, engines in step.calls} == {2}


def test_lengths_spread_by_the_range_ratio():
    fixed = simulate(concurrency=4, requests_per_level=32, output_len=40)
    spread = simulate(concurrency=4, requests_per_level=32, output_len=40, range_ratio=0.5)
    assert fixed["e2el_ms"]["p99"] == pytest.approx(fixed["e2el_ms"]["p50"], rel=0.2)
    assert spread["e2el_ms"]["p99"] > 1.3 * spread["e2el_ms"]["p50"]


def test_decode_steps_taken_together_give_what_one_at_a_time_gives(monkeypatch):
    """Many decode steps at once (Engine.quiet_steps) is only a shortcut: the same figures one by one."""
    workloads = [dict(concurrency=8, requests_per_level=24, output_len=60, range_ratio=0.3),
                 dict(rate=40.0, requests_per_level=30, output_len=50, burstiness=0.5),
                 dict(concurrency=6, requests_per_level=12, output_len=120, kv=4000)]
    batched = [simulate(**workload) for workload in workloads]
    monkeypatch.setattr(sched.Engine, "quiet_steps", lambda self, next_visible, now, seconds_of: 0)
    single = [simulate(**workload) for workload in workloads]
    for fast, slow in zip(batched, single):
        for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
            for pct in ("p50", "p99"):
                assert fast[key][pct] == pytest.approx(slow[key][pct], rel=0.02), (key, pct)
        assert fast["completed"] == slow["completed"]


def test_goodput_counts_the_requests_within_every_slo_and_judges_the_level():
    slo = {"ttft_ms": 100.0}
    calm = simulate(rate=2.0, requests_per_level=10, slo=slo)
    busy = simulate(rate=500.0, requests_per_level=40, slo=slo)
    assert calm["slo_met"] is True and calm["goodput"]["good_requests"] == 10
    assert busy["slo_met"] is False
    assert any("TTFT" in miss for miss in busy["slo_misses"])
    assert busy["goodput"]["good_requests"] < 40


def test_without_an_slo_there_is_no_goodput_and_no_verdict():
    level = simulate(concurrency=2, requests_per_level=4)
    assert "goodput" not in level and level["slo_met"] is None


# A closed loop's waves and an open loop's arrivals, each long enough for the median request to ride other steps.
CLOSED_AND_OPEN = [dict(concurrency=8, requests_per_level=32, output_len=40),
                   dict(rate=30.0, requests_per_level=40, output_len=40)]


@pytest.mark.parametrize("workload", CLOSED_AND_OPEN)
def test_the_median_requests_wait_is_split_into_decode_steps_and_prompts_that_add_up_to_its_ttft(workload):
    level = simulate(**workload)
    wait = level["ttft_wait_ms"]
    assert wait["prefill"] > 0 and wait["launch"] == 0
    # 8 ms before the engine sees it, then the steps it waited for, its own prompt's among them.
    assert wait["frontend"] == pytest.approx(8.0)
    assert 8.0 + wait["decode"] + wait["prefill"] == pytest.approx(level["ttft_ms"]["p50"], rel=0.01)


def test_the_median_requests_turn_at_a_serial_api_server_is_part_of_its_wait():
    # One burst of eight behind an API server of 5 ms a request (on average; the draws vary): the median request
    # reaches the engine after the 3 ms of latency, its own turn and others' before it, not after 8 ms as alone.
    # Calibration takes that time off its TTFT as no ratio's.
    level = simulate(concurrency=8, requests_per_level=8, input_len=64, step=SerialFrontEnd())
    wait = level["ttft_wait_ms"]
    assert wait["frontend"] > 8.0 + 5.0
    assert wait["frontend"] + wait["decode"] + wait["prefill"] == pytest.approx(level["ttft_ms"]["p50"], rel=0.01)


@pytest.mark.parametrize("workload", CLOSED_AND_OPEN)
def test_the_median_requests_tokens_are_split_into_the_steps_they_rode(workload):
    level = simulate(**workload)
    split = level["tpot_split_ms"]
    assert split["decode"] > 0 and split["launch"] == 0
    assert split["decode"] + split["prefill"] + split["launch"] == pytest.approx(level["tpot_ms"]["p50"], rel=0.01)
    if "rate" in workload:
        assert split["prefill"] > 0  # in an open loop other prompts arrive while it decodes


@pytest.mark.parametrize("workload", [dict(concurrency=1, requests_per_level=3),
                                      dict(rate=30.0, requests_per_level=40, output_len=40)])
def test_a_step_the_launches_set_is_waited_for_as_launches(workload):
    # A lone 1024-token prompt takes 20.24 ms of GPU work here, but its step lasts 40 ms of launches: calibration
    # must see that time as the host's launch pace, not as a slow prefill.
    level = simulate(step=LaunchBoundPrompts(), **workload)
    wait = level["ttft_wait_ms"]
    assert wait["launch"] >= 40.0
    assert 8.0 + wait["decode"] + wait["prefill"] + wait["launch"] == pytest.approx(level["ttft_ms"]["p50"], rel=0.01)
    if workload.get("concurrency") == 1:
        assert level["ttft_ms"]["p50"] == pytest.approx(48.0) and wait["prefill"] == 0


def test_with_async_scheduling_a_request_that_comes_during_a_step_also_waits_for_the_next():
    # Two requests 5 ms apart (rate 200/s, no jitter): the first finds the engine idle and is scheduled at once
    # (8 + 20.24 ms); the second comes 5 ms into the first's prompt step. Scheduled synchronously it is in the next
    # step; with async scheduling that step was built when the prompt step began, so it waits for it too (the first
    # request's decode step, 10.1 ms) and shares none of it.
    roomy = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    synchronous = simulate(rate=200.0, burstiness=float("inf"), requests_per_level=2, output_len=4, limits=roomy)
    overlapped = simulate(rate=200.0, burstiness=float("inf"), requests_per_level=2, output_len=4, limits=roomy,
                          step=AsyncSteps())
    first = 8.0 + 20.24
    # Synchronous: it waits for the rest of the first prompt's step (15.24 ms) and then its own (with one decode).
    second = 8.0 + 15.24 + 20.34
    assert synchronous["ttft_ms"]["p50"] == pytest.approx((first + second) / 2.0, rel=1e-3)
    # Async: also for the step built before it came, the first request's lone decode step.
    second = 8.0 + 15.24 + 10.1 + 20.34
    assert overlapped["ttft_ms"]["p50"] == pytest.approx((first + second) / 2.0, rel=1e-3)


def test_the_levels_of_one_plan_cost_each_step_shape_once_and_alike():
    step, shared = LinearSteps(), {}
    settled = {"input_len": 1024, "output_len": 11}
    first = sched.simulate_level(step, LIMITS, ROOMY_KV, settled, 1, concurrency=4, step_costs=shared)
    costed = len(step.calls)
    again = sched.simulate_level(step, LIMITS, ROOMY_KV, settled, 1, concurrency=4, step_costs=shared)
    assert costed and len(step.calls) == costed and again == first
    alone = sched.simulate_level(step, LIMITS, ROOMY_KV, settled, 1, concurrency=4)
    assert len(step.calls) > costed and alone == first
