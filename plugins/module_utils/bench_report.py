# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report of one ``vllm_bench`` sweep (the ``vllm_bench_report`` module): the Markdown table, the
comparison with a baseline run, the PNG, the JSON document and the history line. ``build_report`` turns the
module's options into what ``report_files.write_report`` writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils import vllm_bench as bench
from ansible_collections.gauntlet.vllm.plugins.module_utils.model_config import parse_json, read_text

MODULE_NAME = "vllm_bench_report"
MARKER = report_files.marker_of(MODULE_NAME)
BASELINE_MAX_BYTES = 64 * 1024 * 1024
# The figures of each level a history line keeps.
HISTORY_LEVEL_KEYS = ("concurrency", "completed", "failed", "output_tokens_per_s", "request_throughput", "ttft_ms",
                      "tpot_ms", "e2el_ms", "joules_per_output_token")


class BenchReportError(ValueError):
    """An option the report cannot be made from; the message names it."""


def sweep_of(result):
    """The sweep in a registered ``vllm_bench`` result (or its ``ansible_facts.vllm_bench``)."""
    if "levels" not in result and "vllm_bench" in (result.get("ansible_facts") or {}):
        result = result["ansible_facts"]["vllm_bench"]
    if not isinstance(result.get("levels"), list):
        raise BenchReportError("result: not a vllm_bench result (it has no 'levels' list); pass the registered result")
    return result


def comparison_table(rows):
    lines = ["", "### Against the baseline", "",
             "| C | " + " | ".join(label for dummy, label in bench.COMPARED) + " |",
             "|---:|" + "---:|" * len(bench.COMPARED)]
    for row in rows:
        cells = []
        for key, dummy in bench.COMPARED:
            item = row[key]
            change = "" if item["change_pct"] is None else " (%+.1f%%)" % item["change_pct"]
            cells.append("%s%s" % ("-" if item["value"] is None else "%.1f" % item["value"], change))
        lines.append("| %d | %s |" % (row["concurrency"], " | ".join(cells)))
    return "\n".join(lines) + "\n"


def render_markdown(name, result, rows):
    workload = result.get("workload") or {}
    head = ["## %s" % name, "",
            "%s via %s, %s tokens in, %s out%s, seed %s." % (
                workload.get("model"), workload.get("api"), workload.get("input_len"), workload.get("output_len"),
                " (ignore_eos)" if workload.get("ignore_eos") else "", workload.get("seed")),
            "Peak %.1f output tok/s at C=%s; saturation at C=%s." % (
                result.get("peak_output_tokens_per_s") or 0.0, result.get("peak_concurrency"),
                result.get("saturation_concurrency")), ""]
    if result.get("aborted"):
        head += ["**Sweep stopped early:** %s" % result["aborted"], ""]
    text = "\n".join(head) + bench.markdown_table(result.get("levels") or [])
    if rows is not None:
        text += comparison_table(rows)
    return text


def png_renderer(name, levels, baseline_levels):
    """A function drawing output tok/s and p99 TTFT against concurrency (the baseline dashed) at a path."""

    def render(path):
        figure, (throughput, ttft) = report_files.two_panel_figure()
        for data, style, label in ((levels, "-o", name), (baseline_levels or [], "--s", "baseline")):
            if not data:
                continue
            xs = [level["concurrency"] for level in data]
            throughput.plot(xs, [level["output_tokens_per_s"] for level in data], style, label=label)
            ttft.plot(xs, [level["ttft_ms"]["p99"] for level in data], style, label=label)
        report_files.finish_axis(throughput, "Output throughput", "tok/s")
        report_files.finish_axis(ttft, "p99 TTFT", "ms")
        report_files.save_figure(figure, name, path, MODULE_NAME)

    return render


def read_baseline(path):
    """The levels of a baseline report, or raise ValueError naming the file and what is wrong."""
    baseline = parse_json(read_text(path, ValueError, BASELINE_MAX_BYTES), path, ValueError)
    levels = baseline.get("levels") if isinstance(baseline, dict) else None
    if not isinstance(levels, list) or not all(isinstance(level, dict) for level in levels):
        raise ValueError("%s: it is not a vllm_bench JSON report (no 'levels' list of objects)" % path)
    return levels


def history_line(name, recorded_at, result):
    return json.dumps({
        "generator": MARKER, "name": name, "recorded_at": recorded_at, "workload": result.get("workload"),
        "peak_output_tokens_per_s": result.get("peak_output_tokens_per_s"),
        "peak_concurrency": result.get("peak_concurrency"),
        "saturation_concurrency": result.get("saturation_concurrency"),
        "levels": [{key: level.get(key) for key in HISTORY_LEVEL_KEYS} for level in result["levels"]]},
        sort_keys=True) + "\n"


def recorded_document(name, result, recorded_at):
    """The JSON report: the whole sweep with its name and time, without the registered result's ansible_facts."""
    recorded = dict(result, name=name, recorded_at=recorded_at)
    recorded.pop("ansible_facts", None)
    return recorded


def build_report(params, now=None):
    """What the module writes for its ``params``: ``files``, ``json_doc``, ``markdown``, ``png`` (a renderer or
    None), ``history`` (the line) and ``rows`` (the comparison, None without a baseline). Raises
    BenchReportError naming the option that is wrong."""
    result = sweep_of(params["result"])
    problem = report_files.prologue_problem(params["name"], params["plot"])
    if problem:
        raise BenchReportError(problem)
    rows = None
    baseline_levels = None
    if params["baseline"]:
        try:
            baseline_levels = read_baseline(params["baseline"])
        except ValueError as exc:
            raise BenchReportError("baseline: %s" % exc)
        rows = bench.compare_with_baseline(result["levels"], baseline_levels)
    name = params["name"]
    recorded_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {"files": report_files.report_paths(params["output_dir"], name, params["plot"], params["history_file"]),
            "json_doc": recorded_document(name, result, recorded_at), "markdown": render_markdown(name, result, rows),
            "png": png_renderer(name, result["levels"], baseline_levels) if params["plot"] else None,
            "history": history_line(name, recorded_at, result), "rows": rows}
