# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ranking gauntlet candidates: by peak throughput, by throughput within a latency budget, ties, and the
candidates that never ran."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import gauntlet


def level(concurrency, tok_s, ttft_p99, failed=0, completed=16):
    stats = {"mean": ttft_p99 / 2, "median": ttft_p99 / 2, "p90": ttft_p99 * 0.9, "p99": ttft_p99}
    return {"concurrency": concurrency, "output_tokens_per_s": tok_s, "completed": completed, "failed": failed,
            "ttft_ms": stats, "tpot_ms": stats, "itl_ms": stats, "e2el_ms": stats}


def measured(name, *levels, **extra):
    result = {"levels": list(levels),
              "peak_output_tokens_per_s": max(item["output_tokens_per_s"] for item in levels)}
    return dict({"name": name, "status": "measured", "result": result}, **extra)


FAST_BUT_SLOW_TO_START = measured("fast", level(1, 50, 100), level(64, 900, 4000), level(256, 1200, 9000))
STEADY = measured("steady", level(1, 40, 80), level(64, 700, 1500), level(256, 800, 2500))


def test_peak_picks_the_highest_throughput_of_any_level():
    ranking = gauntlet.rank([STEADY, FAST_BUT_SLOW_TO_START], "peak_output_tokens_per_s")
    assert [(row["name"], row["rank"], row["score"], row["concurrency"]) for row in ranking] == [
        ("fast", 1, 1200, 256), ("steady", 2, 800, 256)]
    assert gauntlet.winner(ranking)["name"] == "fast"


def test_latency_budget_only_counts_levels_that_keep_it():
    budget = {"metric": "ttft_ms", "statistic": "p99", "max_ms": 2000}
    ranking = gauntlet.rank([FAST_BUT_SLOW_TO_START, STEADY], "output_tokens_per_s_within_latency_budget", budget)
    # fast keeps 2 s only at C=1 (50 tok/s); steady keeps it at C=64 (700 tok/s).
    assert [(row["name"], row["score"], row["concurrency"], row["latency_ms"]) for row in ranking] == [
        ("steady", 700, 64, 1500), ("fast", 50, 1, 100)]


def test_a_candidate_with_no_level_within_budget_is_not_ranked_and_says_why():
    budget = {"max_ms": 50}
    ranking = gauntlet.rank([STEADY], "output_tokens_per_s_within_latency_budget", budget)
    assert ranking[0]["rank"] is None and ranking[0]["score"] is None
    assert ranking[0]["reason"] == "no level keeps p99 TTFT within 50 ms (lowest: 80.0 ms)"
    assert gauntlet.winner(ranking) is None


def test_levels_with_failed_requests_do_not_count():
    flaky = measured("flaky", level(1, 40, 80), level(64, 5000, 100, failed=3))
    ranking = gauntlet.rank([flaky], "peak_output_tokens_per_s")
    assert (ranking[0]["score"], ranking[0]["concurrency"]) == (40, 1)


def test_ties_go_to_the_candidate_listed_first():
    first = measured("original", level(8, 500, 100))
    second = measured("ring-ll128", level(8, 500, 90))
    assert gauntlet.winner(gauntlet.rank([first, second], "peak_output_tokens_per_s"))["name"] == "original"
    assert gauntlet.winner(gauntlet.rank([second, first], "peak_output_tokens_per_s"))["name"] == "ring-ll128"


def test_skipped_and_failed_candidates_keep_their_reason_after_the_ranked_ones():
    skipped = {"name": "minimax-tp8", "status": "skipped",
               "reason": "vLLM would raise ValueError at weight creation: ... block_n = 128."}
    failed = {"name": "kimi-nvfp4", "status": "failed", "reason": "vllm-kimi.service did not become ready"}
    ranking = gauntlet.rank([skipped, failed, STEADY], "peak_output_tokens_per_s")
    assert [(row["name"], row["rank"]) for row in ranking] == [("steady", 1), ("minimax-tp8", None), ("kimi-nvfp4", None)]
    assert ranking[1]["reason"].endswith("block_n = 128.")
    text = gauntlet.markdown("reference", ranking, "peak_output_tokens_per_s")
    assert "Winner: **steady**" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    assert len(rows) == 3 and "| skipped |" in rows[1] and "block_n = 128." in rows[1]


def test_nothing_measured_means_no_winner():
    ranking = gauntlet.rank([{"name": "a", "status": "skipped", "reason": "x"}], "peak_output_tokens_per_s")
    assert gauntlet.winner(ranking) is None
    assert "Winner: none" in gauntlet.markdown("g", ranking, "peak_output_tokens_per_s")


@pytest.mark.parametrize("candidates, message", [
    ([{"status": "measured"}], "candidates[0]: has no name"),
    ([{"name": "a", "status": "skipped"}, {"name": "a", "status": "skipped"}], "candidates[1]: the name 'a' is used twice"),
    ([{"name": "a", "status": "done"}], "candidates[0] (a): status 'done' is not one of measured, skipped, failed"),
])
def test_bad_candidates_are_named(candidates, message):
    with pytest.raises(gauntlet.GauntletError) as error:
        gauntlet.rank(candidates, "peak_output_tokens_per_s")
    assert str(error.value) == message


@pytest.mark.parametrize("budget, message", [
    ({"metric": "ttfb_ms", "max_ms": 1}, "latency_budget.metric: 'ttfb_ms' is not one of ttft_ms, tpot_ms, itl_ms, e2el_ms"),
    ({"statistic": "p95", "max_ms": 1}, "latency_budget.statistic: 'p95' is not one of mean, median, p90, p99"),
    ({}, "latency_budget.max_ms: 'None' is not a number of milliseconds"),
    ({"max_ms": 0}, "latency_budget.max_ms: must be above 0 (got 0.0)"),
])
def test_bad_budgets_are_named(budget, message):
    with pytest.raises(gauntlet.GauntletError) as error:
        gauntlet.check_budget(budget)
    assert str(error.value) == message


def test_a_challenger_must_beat_the_incumbent_by_the_margin():
    original = measured("original", level(8, 1000, 100))
    close = measured("ring-ll128", level(8, 1025, 90))
    better = measured("tree-ll", level(8, 1100, 90))
    ranking = gauntlet.rank([original, close], "peak_output_tokens_per_s", incumbent="original", min_gain_pct=3)
    assert [(row["name"], row["rank"], row["score"]) for row in ranking] == [("original", 1, 1000), ("ring-ll128", 2, 1025)]
    assert ranking[1]["reason"] == "beats original by 2.5%, not more than the 3.0% a change needs"
    ranking = gauntlet.rank([original, close, better], "peak_output_tokens_per_s", incumbent="original", min_gain_pct=3)
    assert [row["name"] for row in ranking] == ["tree-ll", "ring-ll128", "original"]
    assert ranking[0]["reason"] is None


def test_the_incumbent_must_be_a_candidate():
    with pytest.raises(gauntlet.GauntletError) as error:
        gauntlet.rank([STEADY], "peak_output_tokens_per_s", incumbent="original")
    assert str(error.value) == "incumbent: 'original' is not one of the candidates (steady)"


def estimate(c1, peak, *levels):
    return {"decode_tokens_per_s": c1 * 1.1, "peak_output_tokens_per_s": peak,
            "levels": [{"concurrency": concurrency, "output_tokens_per_s": tok_s} for concurrency, tok_s in levels]}


def table_rows(text):
    header = [line for line in text.splitlines() if line.startswith("| rank")][0]
    names = [cell.strip() for cell in header.strip("|").split("|")]
    return [dict(zip(names, (cell.strip() for cell in line.strip("|").split("|"))))
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| rank")]


def test_predicted_figures_sit_beside_the_measured_ones_with_their_ratio():
    steady = dict(STEADY, estimate=estimate(50, 1000, (1, 50), (64, 900), (256, 1000)))
    ranking = gauntlet.rank([steady], "peak_output_tokens_per_s")
    row = ranking[0]
    assert (row["predicted_peak_output_tokens_per_s"], row["predicted_c1_output_tokens_per_s"]) == (1000, 50)
    assert (row["measured_c1_output_tokens_per_s"], row["peak_ratio"], row["c1_ratio"]) == (40, 0.8, 0.8)
    cells = table_rows(gauntlet.markdown("g", ranking, "peak_output_tokens_per_s"))[0]
    assert (cells["peak output tok/s"], cells["predicted peak"], cells["measured/predicted"]) == ("800.0", "1000.0", "0.80")
    assert (cells["C=1 tok/s"], cells["predicted C=1"], cells["C=1 measured/predicted"]) == ("40.0", "50.0", "0.80")


def test_the_measured_peak_has_one_column():
    # Ranked by peak tok/s, the figure column is the peak: a second "peak tok/s" column repeated it on every row.
    ranking = gauntlet.rank([STEADY], "peak_output_tokens_per_s")
    header = gauntlet.markdown("g", ranking, "peak_output_tokens_per_s").splitlines()[4]
    assert header.count("peak output tok/s") == 1 and "| peak tok/s |" not in header
    budget = {"metric": "ttft_ms", "statistic": "p99", "max_ms": 500}
    by_budget = gauntlet.markdown("g", gauntlet.rank([STEADY], "output_tokens_per_s_within_latency_budget", budget=budget),
                                  "output_tokens_per_s_within_latency_budget", budget)
    assert table_rows(by_budget)[0]["peak tok/s"] == "800.0"


def test_without_a_c1_level_the_single_stream_estimate_is_the_c1_prediction():
    row = gauntlet.prediction(dict(STEADY, estimate=estimate(40, 1000, (64, 900))))
    assert row["predicted_c1_output_tokens_per_s"] == 44.0 and row["c1_ratio"] == round(40 / 44.0, 3)


def test_a_candidate_without_an_estimate_shows_dashes_and_no_ratio():
    skipped = {"name": "minimax-tp8", "status": "skipped", "reason": "vLLM would raise ValueError",
               "estimate": estimate(30, 600, (1, 30))}
    ranking = gauntlet.rank([STEADY, skipped], "peak_output_tokens_per_s")
    assert ranking[0]["predicted_peak_output_tokens_per_s"] is None and ranking[0]["peak_ratio"] is None
    assert ranking[0]["measured_c1_output_tokens_per_s"] == 40
    steady, never_run = table_rows(gauntlet.markdown("g", ranking, "peak_output_tokens_per_s"))
    assert (steady["predicted peak"], steady["measured/predicted"], steady["predicted C=1"]) == ("-", "-", "-")
    assert steady["C=1 tok/s"] == "40.0"
    # Predicted but never measured: the prediction shows, the measured figures and ratios do not.
    assert (never_run["predicted peak"], never_run["measured/predicted"], never_run["C=1 tok/s"]) == ("600.0", "-", "-")


def test_predicted_points_follow_the_estimate_levels_in_order():
    candidate = {"estimate": {"levels": [{"concurrency": 16, "output_tokens_per_s": 400, "ttft_ms": 90.0, "tpot_ms": 30.0},
                                         {"concurrency": 1, "output_tokens_per_s": 40, "ttft_ms": 20.0, "tpot_ms": 20.0}]}}
    assert gauntlet.predicted_points(candidate, "ttft_ms") == ([1, 16], [40, 400], [20.0, 90.0])
    assert gauntlet.predicted_points(candidate, "itl_ms") == ([1, 16], [40, 400], [None, None])
    assert gauntlet.predicted_points({"name": "x"}) == ([], [], [])


# ---- max_rate_within_slo: the request rate a candidate sustained within its SLO (issue 31) ---------

SLO = {"ttft_ms": 500.0}


def rate_level(rate, achieved, ttft_p99, slo_met):
    stats = {"mean": ttft_p99 / 2, "median": ttft_p99 / 2, "p50": ttft_p99 / 2, "p90": ttft_p99 * 0.9, "p99": ttft_p99}
    return {"request_rate": rate, "request_throughput": achieved, "completed": 40, "failed": 0, "slo_met": slo_met,
            "ttft_ms": stats, "tpot_ms": stats, "e2el_ms": stats}


def open_loop(name, max_rate, *rate_levels, **extra):
    """A measured candidate of open-loop levels only (no concurrency level), its sweep's max sustainable rate."""
    result = {"levels": [], "rate_levels": list(rate_levels), "slo": extra.pop("slo", SLO),
              "max_sustainable_rate": max_rate, "peak_output_tokens_per_s": 0.0,  # vllm_bench's, of no level
              "max_sustainable_rate_reason": extra.pop("reason", "the highest of %d level(s) that met the SLO"
                                                       % len(rate_levels))}
    return dict({"name": name, "status": "measured", "result": result}, **extra)


SLOW = open_loop("slow", 4.0, rate_level(2, 2.0, 100, True), rate_level(4, 3.9, 300, True),
                 rate_level(8, 5.0, 900, False))
QUICK = open_loop("quick", 8.0, rate_level(2, 2.0, 50, True), rate_level(8, 7.9, 450, True),
                  rate_level(16, 9.0, 2000, False), model="m", plan="TP2")
SATURATED = open_loop("saturated", None, rate_level(2, 2.0, 800, False),
                      reason="no level met the SLO; the lowest, 2 req/s, missed it: p99 TTFT 800.0 ms > 500 ms")


def test_max_rate_ranks_by_the_max_sustainable_rate_and_names_the_level():
    ranking = gauntlet.rank([SLOW, QUICK], "max_rate_within_slo")
    assert [(row["name"], row["rank"], row["score"], row["request_rate"], row["concurrency"]) for row in ranking] == [
        ("quick", 1, 8.0, 8, None), ("slow", 2, 4.0, 4, None)]
    # The other rankings have no rate (and keep their concurrency).
    assert gauntlet.rank([STEADY], "peak_output_tokens_per_s")[0]["request_rate"] is None


def test_a_candidate_without_a_max_rate_is_not_ranked_and_gives_the_sweeps_reason():
    closed_only = measured("closed-only", level(8, 500, 100))
    skipped = {"name": "skipped", "status": "skipped", "reason": "does not fit"}
    ranking = gauntlet.rank([SATURATED, closed_only, skipped, SLOW], "max_rate_within_slo")
    assert [(row["name"], row["rank"], row["score"], row["request_rate"]) for row in ranking] == [
        ("slow", 1, 4.0, 4), ("saturated", None, None, None), ("closed-only", None, None, None),
        ("skipped", None, None, None)]
    assert [row["reason"] for row in ranking[1:]] == [
        "no level met the SLO; the lowest, 2 req/s, missed it: p99 TTFT 800.0 ms > 500 ms", "no open-loop levels",
        "does not fit"]


def test_an_inf_level_that_met_the_slo_ranks_by_the_rate_it_achieved():
    flood = open_loop("flood", 12.5, rate_level(4, 4.0, 100, True), rate_level("inf", 12.5, 400, True))
    ranking = gauntlet.rank([QUICK, flood], "max_rate_within_slo")
    assert [(row["name"], row["score"], row["request_rate"]) for row in ranking] == [("flood", 12.5, "inf"),
                                                                                     ("quick", 8.0, 8)]
    text = gauntlet.markdown("g", ranking, "max_rate_within_slo")
    assert "Winner: **flood** (None, None) with 12.5 req/s (every request sent at once, rate inf)." in text
    flood_row = table_rows(text)[0]
    assert (flood_row["at req/s"], flood_row["p99 TTFT ms at req/s"]) == ("inf", "400.0")


def test_the_incumbent_keeps_its_place_unless_beaten_on_rate_by_the_margin():
    ranking = gauntlet.rank([SLOW, QUICK], "max_rate_within_slo", incumbent="slow", min_gain_pct=150)
    assert [(row["name"], row["rank"]) for row in ranking] == [("slow", 1), ("quick", 2)]
    assert ranking[1]["reason"] == "beats slow by 100.0%, not more than the 150.0% a change needs"
    ranking = gauntlet.rank([SLOW, QUICK], "max_rate_within_slo", incumbent="slow", min_gain_pct=50)
    assert [row["name"] for row in ranking] == ["quick", "slow"] and ranking[0]["reason"] is None


def test_the_max_rate_table_shows_the_rate_and_the_slo_it_was_judged_by():
    ranking = gauntlet.rank([SLOW, QUICK, SATURATED], "max_rate_within_slo")
    text = gauntlet.markdown("g", ranking, "max_rate_within_slo")
    assert ("Ranked by max request rate within the SLO. Winner: **quick** (m, TP2) with 8 req/s. SLO: TTFT <= 500 ms "
            "(the p99 of each, and no failed request).") in text
    quick, slow, saturated = table_rows(text)
    assert (quick["max request rate within the SLO"], quick["at req/s"], quick["p99 TTFT ms at req/s"]) == (
        "8", "8", "450.0")
    assert quick["peak tok/s"] == "-"         # no concurrency level, no peak
    assert (slow["max request rate within the SLO"], slow["at req/s"], slow["p99 TTFT ms at req/s"]) == (
        "4", "4", "300.0")
    assert (saturated["rank"], saturated["at req/s"], saturated["peak tok/s"]) == ("-", "-", "-")
    assert saturated["note"].startswith("no level met the SLO")


def test_candidates_judged_by_different_slos_are_flagged():
    strict = open_loop("strict", 2.0, rate_level(2, 2.0, 100, True), slo={"ttft_ms": 200.0, "tpot_ms": 50.0})
    text = gauntlet.markdown("g", gauntlet.rank([SLOW, strict], "max_rate_within_slo"), "max_rate_within_slo")
    assert ("The candidates were measured against different SLOs (TTFT <= 500 ms; TTFT <= 200 ms, TPOT <= 50 ms): "
            "compare their rates with care.") in text
    # The other rankings say nothing of SLOs.
    assert "SLO" not in gauntlet.markdown("g", gauntlet.rank([STEADY], "peak_output_tokens_per_s"),
                                          "peak_output_tokens_per_s")


def test_the_rate_level_of_a_max_rate_is_one_that_met_the_slo():
    result = {"rate_levels": [rate_level(8, 7.0, 900, False), rate_level("inf", 8.0, 300, True),
                              rate_level(8.0, 7.9, 450, True)]}
    assert gauntlet.rate_level_of(result, 8.0)["request_throughput"] == 8.0
    assert gauntlet.rate_level_of({"rate_levels": result["rate_levels"][2:]}, 8.0)["request_throughput"] == 7.9
    assert gauntlet.rate_level_of(result, 7.0) is None and gauntlet.rate_level_of({}, 8.0) is None
