# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report of one ``vllm_bench`` sweep (the ``vllm_bench_report`` module): the Markdown tables (closed-loop
concurrency levels, open-loop request-rate levels with their goodput and the max sustainable rate), the
comparison with a baseline run, the PNG, the JSON document and the history line. ``build_report`` turns the
module's options into what ``report_files.write_report`` writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench as bench
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import parse_json, read_text

MODULE_NAME = "vllm_bench_report"
MARKER = report_files.marker_of(MODULE_NAME)
BASELINE_MAX_BYTES = 64 * 1024 * 1024
# The figures of each level a history line keeps.
HISTORY_LEVEL_KEYS = ("concurrency", "completed", "failed", "output_tokens_per_s", "request_throughput", "ttft_ms",
                      "tpot_ms", "e2el_ms", "joules_per_output_token")
# The figures of each open-loop (request rate) level a history line keeps.
HISTORY_RATE_LEVEL_KEYS = ("request_rate", "completed", "failed", "request_throughput", "goodput", "ttft_ms",
                           "tpot_ms", "e2el_ms")
SLO_MET = {True: "yes", False: "no", None: "-"}


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


def _number(value, fmt="%.1f"):
    return "-" if value is None else fmt % value


def _statistic(level, metric, statistic):
    """A latency statistic of a level; p50 is the median of results written before p50 was recorded."""
    stats = level.get(metric) or {}
    if statistic == "p50" and stats.get("p50") is None:
        return stats.get("median")
    return stats.get(statistic)


def _p50_p99(level, metric):
    return "%s / %s" % (_number(_statistic(level, metric, "p50")), _number(_statistic(level, metric, "p99")))


def rate_name(rate):
    """An open-loop level in a sentence: ``8 req/s``, ``rate inf``."""
    text = report_files.rate_text(rate)
    return "rate inf" if text == "inf" else "%s req/s" % text


def open_loop_row(level):
    """One open-loop level as a row of the "Open loop" table."""
    goodput = level.get("goodput") or {}
    hit_rate = level.get("prefix_cache_hit_rate")
    return "| %s%s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
        report_files.rate_text(level.get("request_rate")), " (searched)" if level.get("searched") else "",
        _number(level.get("burstiness"), "%g"), _number(level.get("request_throughput"), "%.2f"),
        level.get("completed") or 0, level.get("failed") or 0, _number(goodput.get("request_goodput"), "%.2f"),
        _p50_p99(level, "ttft_ms"), _p50_p99(level, "tpot_ms"), _p50_p99(level, "e2el_ms"),
        _number((level.get("waiting_at_arrivals_end") or {}).get("client"), "%d"),
        _number(None if hit_rate is None else hit_rate * 100), SLO_MET.get(level.get("slo_met"), "-"))


def open_loop_section(result):
    """The "Open loop" table, one row per request-rate level, the SLO misses, the SLO and the max sustainable rate."""
    lines = ["", "### Open loop", "",
             "| target req/s | burstiness | achieved req/s | done | failed | good req/s | TTFT p50 / p99 ms "
             "| TPOT p50 / p99 ms | E2E p50 / p99 ms | waiting at arrivals end | prefix cache hit % | SLO met |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [open_loop_row(level) for level in result["rate_levels"]]
    misses = ["- %s: %s" % (rate_name(level.get("request_rate")), "; ".join(level["slo_misses"]))
              for level in result["rate_levels"] if level.get("slo_misses")]
    if misses:
        lines += ["", "SLO missed at:"] + misses
    lines += bench.unstreamed_note(result["rate_levels"])
    slo = report_files.slo_text(result.get("slo"))
    rate = result.get("max_sustainable_rate")
    reason = result.get("max_sustainable_rate_reason")
    lines += ["", "SLO: %s. Max sustainable rate: %s%s." % (
        "%s (a level meets it when the p99 of each is within it and no request failed)" % slo if slo else "none given",
        "none" if rate is None else "**%s req/s**" % report_files.rate_text(rate), " (%s)" % reason if reason else "")]
    return "\n".join(lines) + "\n"


def workload_line(workload):
    """What was sent: model, API, lengths (or the custom dataset), shared prefix, length spread, seed."""
    dataset = workload.get("dataset") or {}
    if dataset.get("type") == "custom":
        lengths = "prompts of the custom dataset %s, %s tokens out unless it says" % (
            dataset.get("path"), workload.get("output_len"))
    else:
        lengths = "%s tokens in, %s out" % (workload.get("input_len"), workload.get("output_len"))
        if workload.get("range_ratio"):
            lengths += " (each within %g%% of that)" % (workload["range_ratio"] * 100)
    if workload.get("prefix_len"):
        lengths += ", after a prefix of %d tokens shared by every prompt" % workload["prefix_len"]
    return "%s via %s, %s%s, seed %s." % (workload.get("model"), workload.get("api"), lengths,
                                          " (ignore_eos)" if workload.get("ignore_eos") else "", workload.get("seed"))


def render_markdown(name, result, rows):
    head = ["## %s" % name, "", workload_line(result.get("workload") or {})]
    if result.get("levels"):
        head.append("Peak %.1f output tok/s at C=%s; saturation at C=%s." % (
            result.get("peak_output_tokens_per_s") or 0.0, result.get("peak_concurrency"),
            result.get("saturation_concurrency")))
    head.append("")
    if result.get("aborted"):
        head += ["**Sweep stopped early:** %s" % result["aborted"], ""]
    text = "\n".join(head)
    if result.get("levels") or not result.get("rate_levels"):
        text += bench.markdown_table(result.get("levels") or [])
    if rows is not None:
        text += comparison_table(rows)
    if result.get("rate_levels"):
        text += open_loop_section(result)
    return text


def draw_closed_loop(throughput, ttft, name, levels, baseline_levels):
    """Output tok/s and p99 TTFT against concurrency, the baseline dashed."""
    for data, style, label in ((levels, "-o", name), (baseline_levels or [], "--s", "baseline")):
        if not data:
            continue
        xs = [level["concurrency"] for level in data]
        throughput.plot(xs, [level["output_tokens_per_s"] for level in data], style, label=label)
        ttft.plot(xs, [level["ttft_ms"]["p99"] for level in data], style, label=label)
    report_files.finish_axis(throughput, "Output throughput", "tok/s")
    report_files.finish_axis(ttft, "p99 TTFT", "ms")


def draw_open_loop(latency, rates, result):
    """p50 and p99 TTFT and E2E (log ms) against the target request rate, and the achieved and good req/s
    against it (an ``inf`` level a labelled star at the rate it achieved); the max sustainable rate a red line."""
    points = report_files.rate_points(result.get("rate_levels"))
    xs = [x for x, dummy, dummy in points]
    for metric, name in (("ttft_ms", "TTFT"), ("e2el_ms", "E2E")):
        for statistic, style in (("p50", "--o"), ("p99", "-o")):
            report_files.plot_rate_series(latency, points, lambda level, m=metric, s=statistic: _statistic(level, m, s),
                                          style, "%s %s" % (statistic, name))
    finite = [x for x, dummy, is_inf in points if not is_inf]
    rates.plot(finite, finite, ":", color="grey", label="target")
    report_files.plot_rate_series(rates, points, lambda level: level.get("request_throughput"), "-o", "achieved")
    if any(level.get("goodput") for dummy, level, dummy in points):
        report_files.plot_rate_series(rates, points, lambda level: (level.get("goodput") or {}).get("request_goodput"),
                                      "-s", "goodput")
    if result.get("max_sustainable_rate") is not None:
        label = "max sustainable %s req/s" % report_files.rate_text(result["max_sustainable_rate"])
        for axis in (latency, rates):
            axis.axvline(result["max_sustainable_rate"], color="red", linestyle="--", label=label)
    latency.set_yscale("log")
    report_files.finish_rate_axis(latency, "Latency against request rate", "ms", xs, fontsize="small")
    report_files.finish_rate_axis(rates, "Request rate achieved and good", "req/s", xs, fontsize="small")


def png_renderer(name, result, baseline_levels):
    """A function drawing the sweep at a path: output tok/s and p99 TTFT against concurrency (the baseline
    dashed) for the closed-loop levels, latency and achieved / good req/s against the request rate for the
    open-loop ones; both pairs, one above the other, when the sweep has both."""
    levels, rate_levels = result["levels"], result.get("rate_levels") or []

    def render(path):
        closed = opened = None
        if levels and rate_levels:
            figure, (closed, opened) = report_files.four_panel_figure()
        elif rate_levels:
            figure, opened = report_files.two_panel_figure()
        else:
            figure, closed = report_files.two_panel_figure()
        if closed is not None:
            draw_closed_loop(closed[0], closed[1], name, levels, baseline_levels)
        if opened is not None:
            draw_open_loop(opened[0], opened[1], result)
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
        "levels": [{key: level.get(key) for key in HISTORY_LEVEL_KEYS} for level in result["levels"]],
        "rate_levels": [{key: level.get(key) for key in HISTORY_RATE_LEVEL_KEYS}
                        for level in result.get("rate_levels") or []],
        "max_sustainable_rate": result.get("max_sustainable_rate")},
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
            "png": png_renderer(name, result, baseline_levels) if params["plot"] else None,
            "history": history_line(name, recorded_at, result), "rows": rows}
