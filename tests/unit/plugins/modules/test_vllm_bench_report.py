# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_bench_report through run_module: real files, a real matplotlib PNG."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_report
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_bench_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sweep(scale=1.0, levels=(1, 8, 32)):
    result = []
    for concurrency in levels:
        records = []
        for index in range(concurrency):
            records.append({"ok": True, "error_class": None, "error": None, "ttft": 0.05 * scale, "itl": [0.01] * 15,
                            "latency": 0.2 * scale, "prompt_tokens": 64, "completion_tokens": 16,
                            "start": 0.0, "end": 0.2})
        result.append(vllm_bench.level_metrics(concurrency, records, duration_s=0.25 * scale))
    workload = {"model": "tiny-llama", "api": "completions", "input_len": 64, "output_len": 16,
                "ignore_eos": True, "seed": 0}
    output = {"levels": result, "workload": workload, "aborted": None}
    output.update(vllm_bench.saturation(result))
    return {"changed": False, "ansible_facts": {"vllm_bench": output}, **output}


def test_writes_json_markdown_png_and_history(run_module, tmp_path):
    out = tmp_path / "reports"
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "tiny-llama-c1-32",
                                                         "output_dir": str(out)})
    assert not failed and result["changed"] is True
    files = result["files"]
    with open(files["json"]) as handle:
        recorded = json.load(handle)
    assert [level["concurrency"] for level in recorded["levels"]] == [1, 8, 32]
    assert "ansible_facts" not in recorded and recorded["name"] == "tiny-llama-c1-32"
    with open(files["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    assert os.path.getsize(files["png"]) > 10000
    markdown = open(files["markdown"]).read()
    assert markdown == "<!-- written by gauntlet.vllm.vllm_bench_report: edits are overwritten -->\n" + result["markdown"]
    assert "Peak 2048.0 output tok/s at C=32" in markdown
    assert markdown.count("\n| ") == 4          # header + one row per level
    run_module(vllm_bench_report.main, {"result": sweep(), "name": "tiny-llama-c1-32", "output_dir": str(out)})
    history = [json.loads(line) for line in open(files["history"])]
    assert len(history) == 2 and history[0]["peak_concurrency"] == 32


def test_compares_with_a_baseline_level_by_level(run_module, tmp_path):
    first, dummy = run_module(vllm_bench_report.main, {"result": sweep(), "name": "before", "output_dir": str(tmp_path)})
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(scale=2.0, levels=(8, 32, 128)), "name": "after",
                                                         "output_dir": str(tmp_path), "baseline": first["files"]["json"]})
    assert not failed
    assert [row["concurrency"] for row in result["comparison"]] == [8, 32]
    assert result["comparison"][0]["output_tokens_per_s"]["change_pct"] == -50.0
    assert result["comparison"][0]["ttft_ms.p99"]["change_pct"] == 100.0
    assert "### Against the baseline" in result["markdown"]


def test_bad_inputs_name_the_field_and_write_nothing(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": {"msg": "x"}, "name": "n", "output_dir": str(tmp_path)})
    assert failed and result["msg"].startswith("result: not a vllm_bench result")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path),
                                                         "baseline": str(bad)})
    assert failed and result["msg"] == ("baseline: %s: it is not a vllm_bench JSON report (no 'levels' list of objects)"
                                        % bad)
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "../escape",
                                                         "output_dir": str(tmp_path)})
    assert failed and "name" in result["msg"]
    assert sorted(os.listdir(str(tmp_path))) == ["bad.json"]


def test_check_mode_writes_nothing_and_predicts_the_change(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "r"),
                                                         "_ansible_check_mode": True})
    # A real run always appends a history line, so check mode must say changed too.
    assert not failed and result["changed"] is True
    assert not os.path.exists(str(tmp_path / "r"))
    assert "| 8 |" in result["markdown"]


def test_report_files_are_0640_and_marked(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path)})
    assert not failed
    for path in result["files"].values():
        assert os.stat(path).st_mode & 0o777 == 0o640, path
        with open(path, "rb") as handle:
            assert b"gauntlet.vllm.vllm_bench_report" in handle.read(65536), path


def test_never_overwrites_or_appends_to_a_file_it_did_not_write(run_module, tmp_path):
    for suffix in (".json", ".md", ".png"):
        out = tmp_path / suffix.strip(".")
        out.mkdir()
        foreign = out / ("n" + suffix)
        foreign.write_text("somebody else's file\n")
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(out)})
        assert failed and result["msg"].startswith("refusing to overwrite %s: it was not written by" % foreign)
        assert foreign.read_text() == "somebody else's file\n"
        assert sorted(os.listdir(str(out))) == ["n" + suffix]
    history = tmp_path / "notes.txt"
    history.write_text("my notes\n")
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "h", "output_dir": str(tmp_path / "h"),
                                                         "history_file": str(history)})
    assert failed and str(history) in result["msg"] and history.read_text() == "my notes\n"
    # The refusal comes first in check mode too.
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "h", "output_dir": str(tmp_path / "h"),
                                                         "history_file": str(history), "_ansible_check_mode": True})
    assert failed and str(history) in result["msg"]


def test_replaces_its_own_files_and_appends_its_own_history(run_module, tmp_path):
    args = {"result": sweep(), "name": "n", "output_dir": str(tmp_path)}
    for dummy in range(2):
        result, failed = run_module(vllm_bench_report.main, args)
        assert not failed
    assert len(open(result["files"]["history"]).readlines()) == 2


def test_hostile_baselines_give_a_message(run_module, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps({"levels": [1, 2]}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for bad in (deep, levels, binary, tmp_path / "missing.json"):
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "o"),
                                                             "baseline": str(bad)})
        assert failed and result["msg"].startswith("baseline: %s: " % bad), result


def test_check_mode_writes_nothing_over_an_earlier_run_and_still_predicts_the_history_line(run_module, tmp_path):
    args = {"result": sweep(), "name": "n", "output_dir": str(tmp_path), "plot": False}
    first, failed = run_module(vllm_bench_report.main, args)
    assert not failed
    before = {path: open(path, "rb").read() for path in first["files"].values() if path}
    predicted, failed = run_module(vllm_bench_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and predicted["changed"] is True and predicted["files"] == first["files"]
    assert {path: open(path, "rb").read() for path in before} == before
    assert sorted(os.listdir(str(tmp_path))) == ["history.jsonl", "n.json", "n.md"]


def test_a_history_file_in_a_missing_directory_fails_in_both_modes_naming_it(run_module, tmp_path):
    history = tmp_path / "gone" / "history.jsonl"
    for check_mode in (True, False):
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "o"),
                                                             "history_file": str(history), "_ansible_check_mode": check_mode})
        assert failed and result["msg"] == "history_file: %s: its directory %s does not exist" % (history, tmp_path / "gone")
    assert os.listdir(str(tmp_path)) == []


# ---- open loop (issue 31): rate levels, goodput, the max sustainable rate -------------------------
# The levels are built by hand from the contract of vllm_bench's open-loop result, not by the module.

SLO = {"ttft_ms": 500.0, "e2el_ms": 4000.0}


def latency_ms(p50, p99):
    return {"mean": p50, "median": p50, "p50": p50, "p90": (p50 + p99) / 2.0, "p99": p99}


def rate_level(rate, achieved, ttft_p99, slo=None, searched=False, waiting=3, hit_rate=0.25):
    """One open-loop level: E2E four times TTFT, TPOT 10 / 20 ms, 40 requests, a quarter of them not good."""
    level = {"request_rate": rate, "burstiness": 1.0, "max_concurrency": None, "searched": searched,
             "requests": 40, "completed": 40, "failed": 0, "failed_by_class": {}, "abandoned": 0, "first_errors": [],
             "duration_s": 10.0, "request_throughput": achieved, "output_tokens": 640, "input_tokens": 2560,
             "output_tokens_per_s": achieved * 16, "total_tokens_per_s": achieved * 80,
             "ttft_ms": latency_ms(ttft_p99 / 2, ttft_p99), "tpot_ms": latency_ms(10.0, 20.0),
             "itl_ms": latency_ms(10.0, 20.0), "e2el_ms": latency_ms(ttft_p99 * 2, ttft_p99 * 4),
             "server_metrics": {}, "client_cpu_s": 0.5, "power": None, "joules_per_output_token": None,
             "arrivals": {"sent": 40, "window_s": 9.5, "offered_rate": achieved,
                          "gap_cv": None if rate == "inf" else 1.0, "lag_ms_p99": 0.4},
             "waiting_at_arrivals_end": {"client": waiting, "queued_by_cap": 0, "server_waiting": None},
             "goodput": None, "slo_met": None, "slo_misses": [], "prefix_cache_hit_rate": hit_rate,
             "client_cpu_ms_per_request": 12.5}
    if slo:
        level["goodput"] = {"good_requests": 30, "request_goodput": round(achieved * 0.75, 3)}
        level["slo_misses"] = ["p99 %s %.1f ms > %g ms" % (name, level[key]["p99"], slo[key])
                               for key, name in (("ttft_ms", "TTFT"), ("e2el_ms", "E2E"))
                               if key in slo and level[key]["p99"] > slo[key]]
        level["slo_met"] = not level["slo_misses"]
    return level


def open_loop_sweep(closed=(), slo="default", scale=1.0):
    """A registered vllm_bench result with rate levels 2, 4, 8, inf and a searched 6 req/s (after ``closed``
    concurrency levels); TTFT p99 100, 200, 812, 2000, 400 ms times ``scale``. At scale 1 and the default SLO,
    6 req/s is the max sustainable rate; at 0.5, 8; at 0.2 the inf level meets it too (7 req/s achieved)."""
    slo = dict(SLO) if slo == "default" else slo
    result = sweep(levels=closed)
    output = result["ansible_facts"]["vllm_bench"]
    output["rate_levels"] = [
        rate_level(2, 2.0, 100 * scale, slo, waiting=0, hit_rate=None), rate_level(4, 3.9, 200 * scale, slo),
        rate_level(8, 6.5, 812 * scale, slo, waiting=9), rate_level("inf", 7.0, 2000 * scale, slo, waiting=0),
        rate_level(6, 5.8, 400 * scale, slo, searched=True)]
    output["slo"] = slo
    met = [level for level in output["rate_levels"] if level["slo_met"]]
    if not slo:
        rate, reason = None, "no SLO given (goodput): nothing to sustain"
    elif [level for level in met if level["request_rate"] == "inf"]:
        rate, reason = 7.0, "every request sent at once (rate inf) met the SLO, and no finite rate missed it: 7.000 req/s achieved"
    else:
        rate = float(max(level["request_rate"] for level in met))
        reason = "the highest of 5 level(s) that met the SLO"
    output.update(max_sustainable_rate=rate, max_sustainable_rate_reason=reason)
    output["workload"] = dict(output["workload"], request_rate=[2, 4, 8, "inf"], burstiness=1.0, max_concurrency=0,
                              range_ratio=0.0, prefix_len=0, dataset={"type": "random"}, goodput=slo,
                              rate_search_steps=1)
    result.update(output)
    return result


def open_loop_rows(markdown):
    """The Open loop table of a report, each row a dict by the header's names."""
    lines = markdown.split("### Open loop\n", 1)[1].splitlines()
    table = [line for line in lines if line.startswith("|") and not line.startswith("|---")]
    names = [cell.strip() for cell in table[0].strip("|").split("|")]
    return [dict(zip(names, (cell.strip() for cell in line.strip("|").split("|")))) for line in table[1:]]


def test_the_open_loop_table_has_a_row_per_rate_level_with_its_goodput_and_slo(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": open_loop_sweep(closed=(1, 8)), "name": "n",
                                                         "output_dir": str(tmp_path)})
    assert not failed
    rows = open_loop_rows(result["markdown"])
    assert [row["target req/s"] for row in rows] == ["2", "4", "8", "inf", "6 (searched)"]
    assert rows[2] == {"target req/s": "8", "burstiness": "1", "achieved req/s": "6.50", "done": "40", "failed": "0",
                       "good req/s": "4.88", "TTFT p50 / p99 ms": "406.0 / 812.0", "TPOT p50 / p99 ms": "10.0 / 20.0",
                       "E2E p50 / p99 ms": "1624.0 / 3248.0", "waiting at arrivals end": "9",
                       "prefix cache hit %": "25.0", "SLO met": "no"}
    assert (rows[0]["prefix cache hit %"], rows[0]["SLO met"], rows[0]["waiting at arrivals end"]) == ("-", "yes", "0")
    assert rows[3]["achieved req/s"] == "7.00" and rows[3]["SLO met"] == "no"
    # The closed-loop table stays, above the open loop.
    assert result["markdown"].index("| C | done |") < result["markdown"].index("### Open loop")
    assert ("- 8 req/s: p99 TTFT 812.0 ms > 500 ms\n"
            "- rate inf: p99 TTFT 2000.0 ms > 500 ms; p99 E2E 8000.0 ms > 4000 ms\n") in result["markdown"]
    assert result["markdown"].endswith(
        "SLO: TTFT <= 500 ms, E2E <= 4000 ms (a level meets it when the p99 of each is within it and no request "
        "failed). Max sustainable rate: **6 req/s** (the highest of 5 level(s) that met the SLO).\n")


def test_without_an_slo_goodput_and_slo_met_are_dashes_and_the_reason_says_why(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": open_loop_sweep(slo=None), "name": "n",
                                                         "output_dir": str(tmp_path)})
    assert not failed
    rows = open_loop_rows(result["markdown"])
    assert {(row["good req/s"], row["SLO met"]) for row in rows} == {("-", "-")}
    assert "SLO missed at" not in result["markdown"]
    assert result["markdown"].endswith("SLO: none given. Max sustainable rate: none (no SLO given (goodput): nothing "
                                       "to sustain).\n")


def test_an_open_loop_only_sweep_has_no_concurrency_table_nor_peak(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": open_loop_sweep(), "name": "n",
                                                         "output_dir": str(tmp_path)})
    assert not failed
    assert "| C |" not in result["markdown"] and "Peak" not in result["markdown"]
    assert len(open_loop_rows(result["markdown"])) == 5
    with open(result["files"]["json"]) as handle:
        assert json.load(handle)["rate_levels"][4]["searched"] is True
    with open(result["files"]["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC


def test_a_sweep_without_rate_levels_has_no_open_loop_section():
    report = bench_report.build_report({"result": sweep(), "name": "n", "output_dir": "/nowhere", "plot": False,
                                        "baseline": None, "history_file": None})
    assert "Open loop" not in report["markdown"] and "| 32 |" in report["markdown"]


def test_the_history_line_keeps_each_rate_level_and_the_max_sustainable_rate():
    line = json.loads(bench_report.history_line("n", "t", open_loop_sweep(closed=(1,))))
    assert line["max_sustainable_rate"] == 6.0
    assert [level["concurrency"] for level in line["levels"]] == [1]
    assert [level["request_rate"] for level in line["rate_levels"]] == [2, 4, 8, "inf", 6]
    assert line["rate_levels"][2] == {"request_rate": 8, "completed": 40, "failed": 0, "request_throughput": 6.5,
                                      "goodput": {"good_requests": 30, "request_goodput": 4.875},
                                      "ttft_ms": latency_ms(406.0, 812.0), "tpot_ms": latency_ms(10.0, 20.0),
                                      "e2el_ms": latency_ms(1624.0, 3248.0)}
    closed_only = json.loads(bench_report.history_line("n", "t", sweep()))
    assert (closed_only["rate_levels"], closed_only["max_sustainable_rate"]) == ([], None)


def test_the_workload_line_names_the_dataset_the_shared_prefix_and_the_length_spread():
    workload = open_loop_sweep()["workload"]
    assert bench_report.workload_line(workload) == (
        "tiny-llama via completions, 64 tokens in, 16 out (ignore_eos), seed 0.")
    spread = dict(workload, range_ratio=0.25, prefix_len=512)
    assert bench_report.workload_line(spread) == (
        "tiny-llama via completions, 64 tokens in, 16 out (each within 25% of that), after a prefix of 512 tokens "
        "shared by every prompt (ignore_eos), seed 0.")
    custom = dict(workload, dataset={"type": "custom", "path": "/data/chat.jsonl"})
    assert bench_report.workload_line(custom) == (
        "tiny-llama via completions, prompts of the custom dataset /data/chat.jsonl, 16 tokens out unless it says "
        "(ignore_eos), seed 0.")


def test_a_level_without_p50_shows_its_median():
    level = rate_level(2, 2.0, 100.0)
    del level["ttft_ms"]["p50"]
    level["ttft_ms"]["median"] = 42.0
    assert "| 42.0 / 100.0 |" in bench_report.open_loop_row(level)


class Line(object):
    def get_color(self):
        return "C7"


class Recorder(object):
    """A matplotlib axis stand-in that records every call; ``plot`` returns a line of colour C7."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return [Line()] if name == "plot" else None
        return record

    def named(self, name):
        return [(args, kwargs) for call, args, kwargs in self.calls if call == name]

    def series(self, label):
        """The (xs, ys) of the plot labelled ``label``."""
        return [args[:2] for args, kwargs in self.named("plot") if kwargs.get("label") == label][0]


def test_the_open_loop_plot_puts_inf_at_its_achieved_rate_and_marks_the_max_sustainable_rate():
    latency, rates = Recorder(), Recorder()
    bench_report.draw_open_loop(latency, rates, open_loop_sweep())
    # Target rates in order (the searched 6 among them); the inf level is a lone star at the 7 req/s it achieved.
    assert rates.series("achieved") == ([2.0, 4.0, 6.0, 8.0], [2.0, 3.9, 5.8, 6.5])
    assert rates.series("goodput") == ([2.0, 4.0, 6.0, 8.0], [1.5, 2.925, 4.35, 4.875])
    assert rates.series("target") == ([2.0, 4.0, 6.0, 8.0], [2.0, 4.0, 6.0, 8.0])
    assert latency.series("p99 TTFT") == ([2.0, 4.0, 6.0, 8.0], [100.0, 200.0, 400.0, 812.0])
    assert latency.series("p50 E2E") == ([2.0, 4.0, 6.0, 8.0], [200.0, 400.0, 800.0, 1624.0])
    stars = [(args[:2], kwargs["color"]) for args, kwargs in rates.named("plot") if args[2] == "*"]
    assert stars == [(([7.0], [7.0]), "C7"), (([7.0], [5.25]), "C7")]
    assert [args for args, kwargs in rates.named("annotate")] == [("inf", (7.0, 7.0)), ("inf", (7.0, 5.25))]
    for axis in (latency, rates):
        assert [(args, kwargs["label"]) for args, kwargs in axis.named("axvline")] == [
            ((6.0,), "max sustainable 6 req/s")]
    assert latency.named("set_yscale") == [(("log",), {})]
    # 2 to 8 req/s: a linear rate axis.
    assert rates.named("set_xscale") == [] and rates.named("set_xlabel") == [(("target request rate (req/s)",), {})]


def test_the_open_loop_plot_without_an_slo_has_no_goodput_nor_max_rate_and_a_wide_ladder_is_log2():
    latency, rates = Recorder(), Recorder()
    result = open_loop_sweep(slo=None)
    result["rate_levels"][0]["request_rate"] = 0.5
    bench_report.draw_open_loop(latency, rates, result)
    assert [kwargs.get("label") for args, kwargs in rates.named("plot")] == ["target", "achieved", None]
    assert latency.named("axvline") == [] and rates.named("axvline") == []
    assert rates.named("set_xscale") == [(("log",), {"base": 2})]


def rendered_titles(monkeypatch, result):
    """The titles of the plots the report's PNG has, drawn by matplotlib but not saved."""
    figures = []
    monkeypatch.setattr(report_files, "save_figure", lambda figure, *args: figures.append(figure))
    report = bench_report.build_report({"result": result, "name": "n", "output_dir": "/nowhere", "plot": True,
                                        "baseline": None, "history_file": None})
    report["png"]("/nowhere/n.png")
    titles = [axis.get_title() for axis in figures[0].axes]
    report_files.pyplot().close(figures[0])
    return titles


def test_the_png_has_the_closed_loop_pair_the_open_loop_pair_or_both(monkeypatch):
    closed = ["Output throughput", "p99 TTFT"]
    opened = ["Latency against request rate", "Request rate achieved and good"]
    assert rendered_titles(monkeypatch, sweep()) == closed
    assert rendered_titles(monkeypatch, open_loop_sweep()) == opened
    assert rendered_titles(monkeypatch, open_loop_sweep(closed=(1, 8))) == closed + opened
