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

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import finite_number, is_finite_number

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


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _figure(level, field, what, default=None):
    """A level's ``field`` as a float (``default`` when absent or null, if given); a value that is not a number
    (a string, a bool) is not a vllm_bench level: GateError naming it. NaN and infinities pass here: the callers
    judge them (a measurement fails the gate, a baseline is an error)."""
    value = level.get(field)
    if value is None and default is not None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise GateError("%s: %s is %r, not a number" % (what, field, value))
    return float(value)


def _pooled(levels, what):
    """The repeats of one level as one for the error rate: their requests, failed and abandoned added up."""
    return {"requests": sum(_figure(level, "requests", what) for level in levels),
            "failed": sum(_figure(level, "failed", what) for level in levels),
            "abandoned": sum(_figure(level, "abandoned", what, 0.0) for level in levels)}


def error_rate(level, what="sweep"):
    """Failed and abandoned requests over the requests sent at one level."""
    requests = _figure(level, "requests", what)
    failed = _figure(level, "failed", what) + _figure(level, "abandoned", what, 0.0)
    return failed / requests if requests else 1.0


def _check_limits(max_regression, max_error_rate):
    """The gate's thresholds: fractions, finite (a NaN limit compares false with everything, so it would pass any
    sweep)."""
    if finite_number(max_regression, "max_regression", GateError, minimum=0) >= 1:
        raise GateError("max_regression: %r must be a fraction in [0, 1)" % (max_regression,))
    finite_number(max_error_rate, "max_error_rate", GateError, minimum=0, maximum=1)


def baseline_tokens(baseline, concurrency):
    """The baseline's median output tok/s at ``concurrency``. Every repeat's figure must be finite and above zero:
    a ratio against NaN, infinity or nothing compares false with any threshold and would pass every server, so
    such a baseline (an edited or broken record, not a measurement of the new server) is a GateError naming it."""
    levels = _levels(baseline, concurrency, "the baseline")
    return _median([finite_number(_figure(level, "output_tokens_per_s", "the baseline"),
                                  "the baseline: output_tokens_per_s at C=%s" % concurrency, GateError, above=0)
                    for level in levels])


def unusable_measurements(levels, concurrency):
    """Why the gate's sweep (``levels``, the repeats of its level) cannot pass: a figure that is NaN, infinite or
    negative (a broken measurement proves nothing about the server), or no output at all. Empty when it can be judged."""
    reasons = []
    for repeat, level in enumerate(levels, 1):
        for field, default in (("output_tokens_per_s", None), ("requests", None), ("failed", None), ("abandoned", 0.0)):
            value = _figure(level, field, "the gate's sweep", default)
            if not is_finite_number(value) or value < 0:
                reasons.append("the gate's sweep measured %s %s at C=%s (repeat %d of %d): not a finite figure of "
                               "zero or more, so the sweep cannot pass" % (field, value, concurrency, repeat, len(levels)))
    if not reasons:
        tokens = _median(_figure(level, "output_tokens_per_s", "the gate's sweep") for level in levels)
        if not tokens > 0:
            reasons.append("output %.1f tok/s at C=%s is not above zero: the new server produced no output"
                           % (tokens, concurrency))
    return reasons


def gate_verdict(measured, baseline, concurrency, max_regression, max_error_rate):
    """``{passed, reasons, output_tokens_per_s, baseline_output_tokens_per_s, ratio, error_rate, repeats}``.

    ``measured`` and ``baseline`` are vllm_bench results (or single levels); ``baseline`` None means
    the host has none recorded yet: only the error rate is judged, and the reasons say so.
    A host fails when its error rate passes ``max_error_rate`` or its output tok/s fell more than
    ``max_regression`` (a fraction) below the baseline's at the same concurrency. A sweep with the level
    repeated counts its median output tok/s and all its requests' errors. A sweep that measured NaN, infinity, a
    negative figure or no output fails, saying so; a baseline like that, or a limit that is not a finite fraction,
    is a GateError.
    """
    _check_limits(max_regression, max_error_rate)
    levels = _levels(measured, concurrency, "the gate's sweep")
    base_tokens = baseline_tokens(baseline, concurrency) if baseline is not None else None
    verdict = {"passed": True, "reasons": unusable_measurements(levels, concurrency), "concurrency": concurrency,
               "output_tokens_per_s": None, "error_rate": None, "baseline_output_tokens_per_s": base_tokens,
               "ratio": None, "repeats": len(levels)}
    if verdict["reasons"]:
        verdict["passed"] = False
        return verdict
    _judge_errors(verdict, _pooled(levels, "the gate's sweep"), max_error_rate)
    tokens = _median(_figure(level, "output_tokens_per_s", "the gate's sweep") for level in levels)
    verdict["output_tokens_per_s"] = tokens
    if base_tokens is None:
        verdict["reasons"].append("no baseline recorded for this server and workload: this sweep becomes the baseline")
        return verdict
    ratio = tokens / base_tokens
    verdict["ratio"] = round(ratio, 3)
    if ratio < 1 - max_regression:
        verdict["passed"] = False
        verdict["reasons"].append("output %.1f tok/s at C=%s is %.0f%% of the baseline's %.1f tok/s; the gate allows a drop of %.0f%%"
                                  % (tokens, concurrency, 100 * ratio, base_tokens, 100 * max_regression))
    else:
        verdict["reasons"].append("output %.1f tok/s at C=%s is %.0f%% of the baseline's %.1f tok/s"
                                  % (tokens, concurrency, 100 * ratio, base_tokens))
    return verdict


def _judge_errors(verdict, pooled, max_error_rate):
    """The error rate of the pooled repeats into ``verdict``, failing it above ``max_error_rate``."""
    errors = error_rate(pooled, "the gate's sweep")
    verdict["error_rate"] = round(errors, 4)
    if errors > max_error_rate:
        verdict["passed"] = False
        verdict["reasons"].append("error rate %.1f%% at C=%s is above the limit %.1f%% (%d of %d requests failed)"
                                  % (100 * errors, verdict["concurrency"], 100 * max_error_rate,
                                     int(pooled["failed"] + pooled["abandoned"]), int(pooled["requests"])))


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
