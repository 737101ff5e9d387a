# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_gauntlet_report through run_module: real files, a real PNG, no change on a re-run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import gauntlet
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_gauntlet_report
from ansible_collections.gauntlet.vllm.tests.unit.plugins.modules.test_vllm_bench_report import (
    PNG_MAGIC, Recorder, open_loop_sweep, sweep)


def candidates():
    return [
        {"name": "llama", "model": "tiny-llama", "plan": "TP1", "status": "measured", "result": sweep(),
         "time_to_ready_s": 61.5},
        {"name": "moe", "model": "tiny-qwen3-moe", "plan": "TP1", "status": "measured", "result": sweep(scale=0.5),
         "time_to_ready_s": 70.1},
        {"name": "llama-ep", "model": "tiny-llama", "plan": "TP1-EP", "status": "skipped",
         "reason": "vLLM would raise ValueError at config validation: Number of experts in the model must be "
                   "greater than 0 when expert parallelism is enabled."},
    ]


def test_ranks_writes_the_table_and_the_plot_then_changes_nothing(run_module, tmp_path):
    args = {"candidates": candidates(), "name": "tiny-models", "output_dir": str(tmp_path / "out")}
    result, failed = run_module(vllm_gauntlet_report.main, args)
    assert not failed and result["changed"] is True
    # Half the time per level: twice the tok/s.
    assert result["winner"]["name"] == "moe" and result["winner"]["score"] == 4096.0
    assert [row["name"] for row in result["ranking"]] == ["moe", "llama", "llama-ep"]
    assert "result" not in result["ranking"][0]
    with open(result["files"]["json"]) as handle:
        recorded = json.load(handle)
    assert recorded["winner"] == "moe" and len(recorded["ranking"][0]["result"]["levels"]) == 3
    with open(result["files"]["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    markdown = open(result["files"]["markdown"]).read()
    assert markdown == "<!-- written by gauntlet.vllm.vllm_gauntlet_report: edits are overwritten -->\n" + result["markdown"]
    assert "| skipped |" in markdown and "expert parallelism" in markdown
    stamps = {key: os.stat(path).st_mtime_ns for key, path in result["files"].items()}

    again, failed = run_module(vllm_gauntlet_report.main, args)
    assert not failed and again["changed"] is False
    assert {key: os.stat(path).st_mtime_ns for key, path in again["files"].items()} == stamps


def test_check_mode_ranks_without_writing_and_predicts_changed(run_module, tmp_path):
    out = tmp_path / "out"
    args = {"candidates": candidates(), "output_dir": str(out)}
    result, failed = run_module(vllm_gauntlet_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and result["changed"] is True and result["winner"]["name"] == "moe"
    assert not out.exists()
    real, failed = run_module(vllm_gauntlet_report.main, args)
    assert not failed and real["changed"] is True
    predicted, failed = run_module(vllm_gauntlet_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and predicted["changed"] is False
    args["candidates"][0]["time_to_ready_s"] = 99.0
    predicted, failed = run_module(vllm_gauntlet_report.main, dict(args, _ansible_check_mode=True))
    real, failed = run_module(vllm_gauntlet_report.main, args)
    assert predicted["changed"] is True and real["changed"] is True


def test_never_overwrites_a_file_it_did_not_write(run_module, tmp_path):
    for suffix in (".json", ".md", ".png"):
        out = tmp_path / suffix.strip(".")
        out.mkdir()
        foreign = out / ("g" + suffix)
        foreign.write_text("{}")
        for check_mode in (True, False):
            result, failed = run_module(vllm_gauntlet_report.main, {"candidates": candidates(), "output_dir": str(out),
                                                                    "name": "g", "_ansible_check_mode": check_mode})
            assert failed and result["msg"].startswith("refusing to overwrite %s" % foreign)
        assert foreign.read_text() == "{}" and os.listdir(str(out)) == ["g" + suffix]


def test_report_files_are_0640(run_module, tmp_path):
    result, failed = run_module(vllm_gauntlet_report.main, {"candidates": candidates(), "output_dir": str(tmp_path)})
    assert not failed
    for path in result["files"].values():
        assert os.stat(path).st_mode & 0o777 == 0o640, path


def test_budget_ranking_needs_a_budget_and_names_bad_input(run_module, tmp_path):
    result, failed = run_module(vllm_gauntlet_report.main, {
        "candidates": candidates(), "output_dir": str(tmp_path),
        "rank_by": "output_tokens_per_s_within_latency_budget"})
    assert failed and "latency_budget" in result["msg"]
    result, failed = run_module(vllm_gauntlet_report.main, {
        "candidates": [{"name": "x", "status": "finished"}], "output_dir": str(tmp_path)})
    assert failed and result["msg"] == "candidates[0] (x): status 'finished' is not one of measured, skipped, failed"
    assert os.listdir(str(tmp_path)) == []


def test_budget_ranking_draws_the_budget(run_module, tmp_path):
    result, failed = run_module(vllm_gauntlet_report.main, {
        "candidates": candidates(), "output_dir": str(tmp_path), "name": "budget",
        "rank_by": "output_tokens_per_s_within_latency_budget",
        "latency_budget": {"metric": "ttft_ms", "statistic": "p99", "max_ms": 40}})
    assert not failed
    # Only the faster model keeps 40 ms (its TTFT is 25 ms, the other's 50 ms).
    assert [(row["name"], row["rank"]) for row in result["ranking"]] == [("moe", 1), ("llama", None), ("llama-ep", None)]
    assert result["ranking"][1]["reason"] == "no level keeps p99 TTFT within 40 ms (lowest: 50.0 ms)"
    assert "output tok/s with p99 TTFT <= 40 ms" in result["markdown"]


def with_estimates():
    rows = candidates()
    rows[0]["estimate"] = {"decode_tokens_per_s": 70.0, "peak_output_tokens_per_s": 2500.0,
                           "levels": [{"concurrency": 1, "output_tokens_per_s": 60.0, "ttft_ms": 20.0, "tpot_ms": 15.0},
                                      {"concurrency": 64, "output_tokens_per_s": 2500.0, "ttft_ms": 80.0, "tpot_ms": 25.0}],
                           "basis": {"calibration": None}}
    return rows


def test_predicted_figures_reach_the_table_and_the_ranking_but_not_the_estimate_itself(run_module, tmp_path):
    result, failed = run_module(vllm_gauntlet_report.main, {"candidates": with_estimates(), "output_dir": str(tmp_path)})
    assert not failed
    llama = [row for row in result["ranking"] if row["name"] == "llama"][0]
    assert llama["predicted_peak_output_tokens_per_s"] == 2500.0 and llama["predicted_c1_output_tokens_per_s"] == 60.0
    assert "estimate" not in llama and "result" not in llama
    moe = [row for row in result["ranking"] if row["name"] == "moe"][0]
    assert moe["predicted_peak_output_tokens_per_s"] is None and moe["peak_ratio"] is None
    with open(result["files"]["json"]) as handle:
        recorded = json.load(handle)
    recorded_llama = [row for row in recorded["ranking"] if row["name"] == "llama"][0]
    assert recorded_llama["estimate"]["peak_output_tokens_per_s"] == 2500.0
    assert llama["peak_ratio"] == round(recorded_llama["result"]["peak_output_tokens_per_s"] / 2500.0, 3)
    assert llama["peak_ratio"] is not None
    assert "| predicted peak | measured/predicted |" in result["markdown"]


class FakeAxis(object):
    def __init__(self):
        self.calls = []

    def plot(self, xs, ys, **style):
        self.calls.append((xs, ys, style))


def test_the_plot_draws_the_prediction_dashed_in_the_candidates_colour():
    throughput, latency = FakeAxis(), FakeAxis()
    vllm_gauntlet_report.draw_predicted(throughput, latency, with_estimates()[0], "ttft_ms", "C3")
    assert [(xs, ys) for xs, ys, style in throughput.calls] == [([1, 64], [60.0, 2500.0])]
    assert [(xs, ys) for xs, ys, style in latency.calls] == [([1, 64], [20.0, 80.0])]
    style = throughput.calls[0][2]
    assert (style["color"], style["linestyle"], style["markerfacecolor"], style["label"]) == ("C3", "--", "none", "llama predicted")
    # No estimate, nothing drawn; a latency the planner does not predict (ITL) is left out.
    vllm_gauntlet_report.draw_predicted(throughput, latency, candidates()[1], "ttft_ms", "C1")
    vllm_gauntlet_report.draw_predicted(throughput, FakeAxis(), with_estimates()[0], "itl_ms", "C1")
    assert len(throughput.calls) == 2 and len(latency.calls) == 1


def test_check_mode_predicts_a_missing_png_and_writes_nothing(run_module, tmp_path):
    args = {"candidates": candidates(), "output_dir": str(tmp_path / "out")}
    first, failed = run_module(vllm_gauntlet_report.main, args)
    assert not failed and first["changed"] is True
    os.remove(first["files"]["png"])
    stamps = {key: os.stat(path).st_mtime_ns for key, path in first["files"].items() if key != "png"}
    predicted, failed = run_module(vllm_gauntlet_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and predicted["changed"] is True
    assert not os.path.exists(first["files"]["png"])
    real, failed = run_module(vllm_gauntlet_report.main, args)
    assert not failed and real["changed"] is True
    with open(real["files"]["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    assert os.stat(real["files"]["png"]).st_mode & 0o777 == 0o640
    # The JSON and Markdown held the same bytes: left alone.
    assert {key: os.stat(path).st_mtime_ns for key, path in real["files"].items() if key != "png"} == stamps
    again, failed = run_module(vllm_gauntlet_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and again["changed"] is False
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["gauntlet.json", "gauntlet.md", "gauntlet.png"]


def test_an_output_dir_that_is_a_file_fails_in_both_modes_naming_it(run_module, tmp_path):
    out = tmp_path / "out"
    out.write_text("a file\n")
    for check_mode in (True, False):
        result, failed = run_module(vllm_gauntlet_report.main, {"candidates": candidates(), "output_dir": str(out),
                                                                "_ansible_check_mode": check_mode})
        assert failed and result["msg"] == "output_dir: %s exists and is not a directory" % out
        assert result["files"]["json"] == str(out / "gauntlet.json")
    assert out.read_text() == "a file\n"


# ---- rank_by max_rate_within_slo (issue 31) ------------------------------------------------------

def rate_candidates():
    """Two open-loop candidates: "llama" sustains 6 req/s, "moe" (half the TTFT) 8 req/s; one closed-loop only."""
    return [
        {"name": "llama", "model": "tiny-llama", "plan": "TP1", "status": "measured", "result": open_loop_sweep()},
        {"name": "moe", "model": "tiny-qwen3-moe", "plan": "TP1", "status": "measured",
         "result": open_loop_sweep(closed=(1, 8), scale=0.5)},
        {"name": "closed", "model": "tiny-llama", "plan": "TP1", "status": "measured", "result": sweep()},
    ]


def test_rate_ranking_through_the_module(run_module, tmp_path):
    result, failed = run_module(vllm_gauntlet_report.main, {
        "candidates": rate_candidates(), "output_dir": str(tmp_path), "name": "rates",
        "rank_by": "max_rate_within_slo"})
    assert not failed
    assert [(row["name"], row["rank"], row["score"], row["request_rate"], row["concurrency"])
            for row in result["ranking"]] == [("moe", 1, 8.0, 8, None), ("llama", 2, 6.0, 6, None),
                                              ("closed", None, None, None, None)]
    assert result["ranking"][2]["reason"] == "no open-loop levels"
    assert ("Ranked by max request rate within the SLO. Winner: **moe** (tiny-qwen3-moe, TP1) with 8 req/s. "
            "SLO: TTFT <= 500 ms, E2E <= 4000 ms") in result["markdown"]
    with open(result["files"]["json"]) as handle:
        assert json.load(handle)["rank_by"] == "max_rate_within_slo"
    with open(result["files"]["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC


def test_the_rate_plot_draws_achieved_rate_and_p99_ttft_against_the_target_with_the_max_rate():
    throughput, latency = Recorder(), Recorder()
    row = dict(rate_candidates()[0], rank=2, score=6.0)
    assert gauntlet.draw_rate_candidate(throughput, latency, row) == [2.0, 4.0, 6.0, 7.0, 8.0]
    assert throughput.series("llama") == ([2.0, 4.0, 6.0, 8.0], [2.0, 3.9, 5.8, 6.5])
    assert latency.series("llama") == ([2.0, 4.0, 6.0, 8.0], [100.0, 200.0, 400.0, 812.0])
    assert [kwargs["color"] for args, kwargs in latency.named("plot")] == ["C7", "C7"]
    assert [args[:2] for args, kwargs in latency.named("plot") if args[2] == "*"] == [([7.0], [2000.0])]
    for axis in (throughput, latency):
        assert [(args, kwargs["color"], kwargs["label"]) for args, kwargs in axis.named("axvline")] == [
            ((6.0,), "C7", "llama max 6 req/s")]
    # A closed-loop sweep draws nothing; an unranked candidate has no max rate line.
    closed = dict(rate_candidates()[2], rank=None, score=None)
    assert gauntlet.draw_rate_candidate(Recorder(), Recorder(), closed) == []
    unranked = Recorder()
    gauntlet.draw_rate_candidate(Recorder(), unranked, dict(row, score=None, rank=None))
    assert unranked.named("axvline") == []


def test_the_rate_png_has_each_candidate_its_max_rate_and_the_slo(monkeypatch):
    figures = []
    monkeypatch.setattr(report_files, "save_figure", lambda figure, *args: figures.append(figure))
    ranking = gauntlet.rank(rate_candidates(), "max_rate_within_slo")
    gauntlet.png_renderer("rates", ranking, "max_rate_within_slo", None)("/nowhere/rates.png")
    throughput, latency = figures[0].axes
    labels = [line.get_label() for line in latency.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["moe (winner)", "moe max 8 req/s", "llama", "llama max 6 req/s", "SLO TTFT 500 ms"]
    assert (throughput.get_title(), latency.get_title(), latency.get_xlabel()) == (
        "Achieved request rate", "p99 TTFT", "target request rate (req/s)")
    report_files.pyplot().close(figures[0])
