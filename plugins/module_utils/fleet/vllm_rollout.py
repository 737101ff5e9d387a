# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet rollout's decisions and its report, without Ansible.

``gate_verdict`` judges a host's short sweep after a deployment against the baseline it recorded:
the role vllm_rollout rolls the host back when it fails. ``fleet_report`` turns every host's
``vllm_rollout_host_report`` into the controller's JSON document and Markdown table.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MODULE_NAME = "vllm_rollout_report"

# What a host's rollout ended as (vllm_rollout_host_report.outcome).
OUTCOMES = ("updated", "unchanged", "rolled_back", "failed", "not_reached")


class GateError(ValueError):
    """A sweep or baseline that is not a vllm_bench level."""


def _levels(sweep, concurrency, what):
    """Every level of ``sweep`` (a vllm_bench result, or one level) at ``concurrency``: the gate sweeps its level
    several times, for a median."""
    if not isinstance(sweep, dict):
        raise GateError("%s: expected a vllm_bench result, got %s" % (what, type(sweep).__name__))
    levels = sweep.get("levels") if "levels" in sweep else [sweep]
    found = [level for level in levels or [] if isinstance(level, dict) and level.get("concurrency") == concurrency]
    if not found:
        raise GateError("%s: no level at concurrency %s (levels: %s)"
                        % (what, concurrency, [lv.get("concurrency") for lv in levels or [] if isinstance(lv, dict)]))
    return found


def _median_tokens(levels, what):
    values = sorted(_figure(level, "output_tokens_per_s", what) for level in levels)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _pooled(levels, what):
    """The repeats of one level as one for the error rate: their requests, failed and abandoned added up."""
    return {"requests": sum(_figure(level, "requests", what) for level in levels),
            "failed": sum(_figure(level, "failed", what) for level in levels),
            "abandoned": sum(float(level.get("abandoned") or 0) for level in levels)}


def _figure(level, field, what):
    value = level.get(field)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise GateError("%s: %s is %r, not a number" % (what, field, value))
    return float(value)


def error_rate(level, what="sweep"):
    """Failed and abandoned requests over the requests sent at one level."""
    requests = _figure(level, "requests", what)
    failed = _figure(level, "failed", what) + float(level.get("abandoned") or 0)
    return failed / requests if requests else 1.0


def gate_verdict(measured, baseline, concurrency, max_regression, max_error_rate):
    """``{passed, reasons, output_tokens_per_s, baseline_output_tokens_per_s, ratio, error_rate, repeats}``.

    ``measured`` and ``baseline`` are vllm_bench results (or single levels); ``baseline`` None means
    the host has none recorded yet: only the error rate is judged, and the reasons say so.
    A host fails when its error rate passes ``max_error_rate`` or its output tok/s fell more than
    ``max_regression`` (a fraction) below the baseline's at the same concurrency. A sweep with the level
    repeated counts its median output tok/s and all its requests' errors.
    """
    if not 0 <= max_regression < 1:
        raise GateError("max_regression: %r must be a fraction in [0, 1)" % (max_regression,))
    levels = _levels(measured, concurrency, "the gate's sweep")
    tokens = _median_tokens(levels, "the gate's sweep")
    pooled = _pooled(levels, "the gate's sweep")
    errors = error_rate(pooled, "the gate's sweep")
    verdict = {"passed": True, "reasons": [], "concurrency": concurrency, "output_tokens_per_s": tokens,
               "error_rate": round(errors, 4), "baseline_output_tokens_per_s": None, "ratio": None,
               "repeats": len(levels)}
    if errors > max_error_rate:
        verdict["passed"] = False
        verdict["reasons"].append("error rate %.1f%% at C=%s is above the limit %.1f%% (%d of %d requests failed)"
                                  % (100 * errors, concurrency, 100 * max_error_rate,
                                     int(pooled["failed"] + pooled["abandoned"]), int(pooled["requests"])))
    if baseline is None:
        verdict["reasons"].append("no baseline recorded for this server and workload: this sweep becomes the baseline")
        return verdict
    base_tokens = _median_tokens(_levels(baseline, concurrency, "the baseline"), "the baseline")
    verdict["baseline_output_tokens_per_s"] = base_tokens
    ratio = tokens / base_tokens if base_tokens > 0 else None
    verdict["ratio"] = round(ratio, 3) if ratio is not None else None
    if ratio is not None and ratio < 1 - max_regression:
        verdict["passed"] = False
        verdict["reasons"].append("output %.1f tok/s at C=%s is %.0f%% of the baseline's %.1f tok/s; the gate allows a drop of %.0f%%"
                                  % (tokens, concurrency, 100 * ratio, base_tokens, 100 * max_regression))
    elif ratio is not None:
        verdict["reasons"].append("output %.1f tok/s at C=%s is %.0f%% of the baseline's %.1f tok/s"
                                  % (tokens, concurrency, 100 * ratio, base_tokens))
    return verdict


# ---- the fleet report -----------------------------------------------------------------------

def _host_entry(host, report):
    """One host's row: its report, or a 'not_reached' one when the rollout never got to it."""
    if not report:
        return {"host": host, "outcome": "not_reached", "steps": [], "error": None}
    entry = dict(report, host=host)
    if entry.get("outcome") not in OUTCOMES:
        raise GateError("hosts.%s.outcome: %r is not one of %s" % (host, entry.get("outcome"), ", ".join(OUTCOMES)))
    return entry


def _seconds(steps, name):
    return sum(float(step.get("seconds") or 0) for step in steps if step.get("step") == name)


def fleet_summary(entries):
    """Counts per outcome, the rollout's span and the time each step took over the fleet."""
    counts = dict((outcome, 0) for outcome in OUTCOMES)
    for entry in entries:
        counts[entry["outcome"]] += 1
    starts = [e["started_at"] for e in entries if e.get("started_at") is not None]
    ends = [e["finished_at"] for e in entries if e.get("finished_at") is not None]
    steps = sorted(set(step["step"] for e in entries for step in e.get("steps", [])))
    return {
        "hosts": len(entries),
        "outcomes": counts,
        "succeeded": counts["failed"] == 0 and counts["rolled_back"] == 0 and counts["not_reached"] == 0,
        "span_s": round(max(ends) - min(starts), 1) if starts and ends else None,
        "step_seconds": dict((name, round(sum(_seconds(e.get("steps", []), name) for e in entries), 1)) for name in steps),
    }


def _gate_cell(gate):
    if not gate:
        return "-"
    if gate.get("skipped"):
        return "skipped (%s)" % gate["skipped"]
    verdict = gate.get("verdict") or {}
    ratio = verdict.get("ratio")
    figure = "%.1f tok/s" % verdict["output_tokens_per_s"] if verdict.get("output_tokens_per_s") is not None else "?"
    return "%s %s%s" % ("pass" if verdict.get("passed") else "FAIL", figure, " (x%.2f)" % ratio if ratio is not None else "")


def markdown(name, entries, summary):
    """The Markdown report: one row per host in rollout order, then the fleet's figures."""
    lines = ["# Rollout %s" % name, "",
             "| host | outcome | steps (s) | gate | back in the router | note |",
             "|---|---|---|---|---|---|"]
    for entry in entries:
        steps = ", ".join("%s %.1f" % (step["step"], float(step.get("seconds") or 0)) for step in entry.get("steps", []))
        note = entry.get("error") or ""
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            entry["host"], entry["outcome"], steps or "-", _gate_cell(entry.get("gate")),
            {True: "yes", False: "no"}.get(entry.get("returned"), "-"), note.replace("|", "/").replace("\n", " ")[:300]))
    counts = summary["outcomes"]
    lines += ["", "%d hosts: %s. Span %s s." % (
        summary["hosts"], ", ".join("%d %s" % (counts[o], o) for o in OUTCOMES if counts[o]),
        summary["span_s"] if summary["span_s"] is not None else "?")]
    if summary["step_seconds"]:
        lines.append("Time per step over the fleet: %s." % ", ".join("%s %.1f s" % kv for kv in sorted(summary["step_seconds"].items())))
    return "\n".join(lines) + "\n"


def fleet_report(name, hosts, reports, settings):
    """``{json_doc, markdown, summary}``: ``hosts`` in rollout order, ``reports`` maps host -> its report."""
    if not isinstance(reports, dict):
        raise GateError("reports: expected a dict of host -> vllm_rollout_host_report, got %s" % type(reports).__name__)
    entries = [_host_entry(host, reports.get(host)) for host in hosts]
    summary = fleet_summary(entries)
    return {"json_doc": {"name": name, "settings": settings, "hosts": entries, "summary": summary},
            "markdown": markdown(name, entries, summary), "summary": summary}
