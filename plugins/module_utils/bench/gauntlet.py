# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ranking the candidates of a gauntlet: which measured deployment wins, by which figure, and why the
others did not.

A candidate is a dict the ``vllm_gauntlet`` role records on the controller:

- ``name``: the candidate's name; ``model``: its catalogue key; ``plan``: the plan's name (``TP8-EP``);
- ``status``: ``measured`` (``result`` holds the ``vllm_bench`` result), ``skipped`` (the planner rejected
  the plan or it does not fit: ``reason`` holds vLLM's message) or ``failed`` (it was launched and did not
  serve, or the sweep broke: ``reason``);
- ``estimate`` (optional): the planner's estimate of its plan (``vllm_plan``'s ``plans[].estimate``), shown
  beside the measured figures with the ratio measured / predicted (``prediction``).

Three ways to rank:

- ``peak_output_tokens_per_s``: the highest output tok/s at any concurrency (of the levels that completed
  every request);
- ``output_tokens_per_s_within_latency_budget``: the highest output tok/s among those levels whose latency
  statistic (p99 TTFT by default) stays within the budget. A candidate with no such level is not ranked,
  and says so;
- ``max_rate_within_slo``: the highest request rate (req/s) the candidate sustained within its SLO, the
  sweep's ``max_sustainable_rate`` (open-loop ``rate_levels`` measured with a goodput SLO). A candidate
  without one is not ranked, with the sweep's ``max_sustainable_rate_reason``.

``build_report`` turns the ``vllm_gauntlet_report`` module's options into what ``report_files.write_report``
writes (the ranking document, the table, the PNG renderer) and what the module returns (``summary``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files

MODULE_NAME = "vllm_gauntlet_report"

RANK_BY = ("peak_output_tokens_per_s", "output_tokens_per_s_within_latency_budget", "max_rate_within_slo")
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
LATENCY_STATISTICS = ("mean", "median", "p90", "p99")
STATUSES = ("measured", "skipped", "failed")


class GauntletError(ValueError):
    pass


def check_budget(budget):
    """The latency budget with its defaults, or GauntletError naming the bad field."""
    budget = dict(budget or {})
    budget.setdefault("metric", "ttft_ms")
    budget.setdefault("statistic", "p99")
    if budget["metric"] not in LATENCY_METRICS:
        raise GauntletError("latency_budget.metric: '%s' is not one of %s" % (budget["metric"], ", ".join(LATENCY_METRICS)))
    if budget["statistic"] not in LATENCY_STATISTICS:
        raise GauntletError("latency_budget.statistic: '%s' is not one of %s"
                            % (budget["statistic"], ", ".join(LATENCY_STATISTICS)))
    try:
        budget["max_ms"] = float(budget.get("max_ms"))
    except (TypeError, ValueError):
        raise GauntletError("latency_budget.max_ms: '%s' is not a number of milliseconds" % budget.get("max_ms"))
    if budget["max_ms"] <= 0:
        raise GauntletError("latency_budget.max_ms: must be above 0 (got %s)" % budget["max_ms"])
    return budget


def rate_level_of(result, rate):
    """The open-loop level a max sustainable ``rate`` comes from: the one of that target rate that met the SLO,
    or an ``inf`` one that met it and achieved that rate; None when there is none."""
    for level in (result or {}).get("rate_levels") or []:
        if not isinstance(level, dict) or not level.get("slo_met") or rate is None:
            continue
        target = level.get("request_rate")
        if target == "inf" and level.get("request_throughput") == rate:
            return level
        if isinstance(target, (int, float)) and not isinstance(target, bool) and float(target) == rate:
            return level
    return None


def rate_score(result):
    """The ``max_rate_within_slo`` score: the sweep's max sustainable rate, with the target rate of its level
    (``request_rate``: a number, or "inf" when every request sent at once met the SLO)."""
    result = result or {}
    rate = result.get("max_sustainable_rate")
    if rate is None:
        return {"score": None, "concurrency": None, "request_rate": None, "latency_ms": None,
                "reason": result.get("max_sustainable_rate_reason") or "no open-loop levels"}
    level = rate_level_of(result, rate)
    return {"score": rate, "concurrency": None, "request_rate": level["request_rate"] if level else rate,
            "latency_ms": None, "reason": None}


def score(result, rank_by, budget=None):
    """The candidate's figure, the level it comes from, and why it has none.

    Returns ``{"score": tok/s (req/s for max_rate_within_slo) or None, "concurrency": C or None,
    "request_rate": the open-loop level's target rate (max_rate_within_slo) or None, "latency_ms": the budgeted
    statistic at that level or None, "reason": None or why it is not ranked}``.
    """
    if rank_by == "max_rate_within_slo":
        return rate_score(result)
    levels = [level for level in (result or {}).get("levels") or []
              if level.get("completed", 0) > 0 and not level.get("failed")]
    if not levels:
        return {"score": None, "concurrency": None, "request_rate": None, "latency_ms": None,
                "reason": "no concurrency level completed every request"}
    if rank_by == "peak_output_tokens_per_s":
        best = max(levels, key=lambda level: (level["output_tokens_per_s"], -level["concurrency"]))
        return {"score": best["output_tokens_per_s"], "concurrency": best["concurrency"], "request_rate": None,
                "latency_ms": None, "reason": None}
    if rank_by != "output_tokens_per_s_within_latency_budget":
        raise GauntletError("rank_by: '%s' is not one of %s" % (rank_by, ", ".join(RANK_BY)))
    budget = check_budget(budget)

    def latency(level):
        return (level.get(budget["metric"]) or {}).get(budget["statistic"])

    within = [level for level in levels if latency(level) is not None and latency(level) <= budget["max_ms"]]
    if not within:
        lowest = min(latency(level) for level in levels if latency(level) is not None)
        return {"score": None, "concurrency": None, "request_rate": None, "latency_ms": None,
                "reason": "no level keeps %s %s within %.0f ms (lowest: %.1f ms)"
                          % (budget["statistic"], budget["metric"][:-3].upper(), budget["max_ms"], lowest)}
    best = max(within, key=lambda level: (level["output_tokens_per_s"], -level["concurrency"]))
    return {"score": best["output_tokens_per_s"], "concurrency": best["concurrency"], "request_rate": None,
            "latency_ms": latency(best), "reason": None}


def _level_at(levels, concurrency):
    for level in levels or []:
        if isinstance(level, dict) and level.get("concurrency") == concurrency:
            return level
    return None


def _ratio(measured, predicted):
    if measured is None or not predicted:
        return None
    return round(float(measured) / float(predicted), 3)


def prediction(candidate):
    """The planner's figures for a candidate beside the measured ones.

    Returns ``predicted_peak_output_tokens_per_s`` and ``predicted_c1_output_tokens_per_s`` (from
    ``estimate``: its C=1 level, else its single-stream ``decode_tokens_per_s``), the measured
    ``measured_c1_output_tokens_per_s``, and ``peak_ratio`` / ``c1_ratio`` (measured / predicted). Each is
    None where the estimate or the measurement lacks it."""
    estimate = candidate.get("estimate") if isinstance(candidate.get("estimate"), dict) else {}
    result = (candidate.get("result") or {}) if candidate.get("status") == "measured" else {}
    predicted_c1 = (_level_at(estimate.get("levels"), 1) or {}).get("output_tokens_per_s")
    if predicted_c1 is None:
        predicted_c1 = estimate.get("decode_tokens_per_s")
    predicted_peak = estimate.get("peak_output_tokens_per_s")
    measured_c1 = (_level_at(result.get("levels"), 1) or {}).get("output_tokens_per_s")
    measured_peak = result.get("peak_output_tokens_per_s")
    return {"predicted_peak_output_tokens_per_s": predicted_peak, "predicted_c1_output_tokens_per_s": predicted_c1,
            "measured_c1_output_tokens_per_s": measured_c1, "peak_ratio": _ratio(measured_peak, predicted_peak),
            "c1_ratio": _ratio(measured_c1, predicted_c1)}


def predicted_points(candidate, metric="ttft_ms"):
    """The estimate's levels as plot points: ``(concurrencies, output tok/s, metric ms)``, the latency None
    where the estimate has no figure for ``metric`` (it predicts TTFT and TPOT, not ITL or E2E)."""
    estimate = candidate.get("estimate") if isinstance(candidate.get("estimate"), dict) else {}
    levels = sorted((level for level in estimate.get("levels") or []
                     if isinstance(level, dict) and level.get("output_tokens_per_s") is not None),
                    key=lambda level: level.get("concurrency") or 0)
    latency = [level.get(metric) if isinstance(level.get(metric), (int, float)) else None for level in levels]
    return [level["concurrency"] for level in levels], [level["output_tokens_per_s"] for level in levels], latency


def rank(candidates, rank_by, budget=None, incumbent=None, min_gain_pct=0.0):
    """Every candidate with its score and rank (1 = winner; None when not ranked), best first, then the
    unranked in the order given. Ties go to the candidate listed first.

    With ``incumbent`` (the name of the candidate that serves now, like nccl_sweep's ``original``), a
    challenger only wins when it beats the incumbent's score by more than ``min_gain_pct`` percent: a
    smaller gain is within run-to-run noise and not worth a change. The challenger keeps its figures
    and gets a note.
    """
    if rank_by not in RANK_BY:
        raise GauntletError("rank_by: '%s' is not one of %s" % (rank_by, ", ".join(RANK_BY)))
    names = set()
    rows = []
    for order, candidate in enumerate(candidates):
        name = candidate.get("name")
        if not name:
            raise GauntletError("candidates[%d]: has no name" % order)
        if name in names:
            raise GauntletError("candidates[%d]: the name '%s' is used twice" % (order, name))
        names.add(name)
        status = candidate.get("status")
        if status not in STATUSES:
            raise GauntletError("candidates[%d] (%s): status '%s' is not one of %s"
                                % (order, name, status, ", ".join(STATUSES)))
        row = dict(candidate, order=order)
        row.update(prediction(candidate))
        if status == "measured":
            row.update(score(candidate.get("result"), rank_by, budget))
        else:
            row.update({"score": None, "concurrency": None, "request_rate": None, "latency_ms": None,
                        "reason": candidate.get("reason") or status})
        rows.append(row)
    ranked = sorted((row for row in rows if row["score"] is not None), key=lambda row: (-row["score"], row["order"]))
    if incumbent is not None and incumbent not in names:
        raise GauntletError("incumbent: '%s' is not one of the candidates (%s)" % (incumbent, ", ".join(sorted(names))))
    held = [row for row in ranked if row["name"] == incumbent]
    if held and ranked[0] is not held[0]:
        gain = 100.0 * (ranked[0]["score"] / held[0]["score"] - 1) if held[0]["score"] else float("inf")
        if gain <= min_gain_pct:
            ranked[0]["reason"] = ("beats %s by %.1f%%, not more than the %.1f%% a change needs"
                                   % (incumbent, gain, min_gain_pct))
            ranked.remove(held[0])
            ranked.insert(0, held[0])
    for position, row in enumerate(ranked, 1):
        row["rank"] = position
    unranked = [row for row in rows if row["score"] is None]
    for row in unranked:
        row["rank"] = None
    return ranked + unranked


def winner(ranking):
    return ranking[0] if ranking and ranking[0]["rank"] == 1 else None


def _cell(value, fmt="%.1f"):
    return "-" if value is None else fmt % value


def ranked_by(rank_by, budget=None):
    """The figure a ranking is by, as the Markdown names it."""
    if rank_by == "output_tokens_per_s_within_latency_budget":
        budget = check_budget(budget)
        return "output tok/s with %s %s <= %.0f ms" % (
            budget["statistic"], budget["metric"][:-3].upper(), budget["max_ms"])
    if rank_by == "max_rate_within_slo":
        return "max request rate within the SLO"
    return "peak output tok/s"


def winner_text(best):
    """The winner with its figure: tok/s at a concurrency, or the request rate it sustained."""
    if not best:
        return "none (no candidate was measured within the rules)"
    if best.get("request_rate") is not None:
        figure = "%s req/s%s" % (report_files.rate_text(best["score"]),
                                 " (every request sent at once, rate inf)" if best["request_rate"] == "inf" else "")
    else:
        figure = "%.1f tok/s at C=%s" % (best["score"], best["concurrency"])
    return "**%s** (%s, %s) with %s" % (best["name"], best.get("model"), best.get("plan"), figure)


def slo_note(ranking):
    """The SLO the ranked candidates' rates were judged by, or a warning that it differs between them."""
    slos = []
    for row in ranking:
        slo = (row.get("result") or {}).get("slo")
        if row["score"] is not None and slo not in slos:
            slos.append(slo)
    if len(slos) > 1:
        return " The candidates were measured against different SLOs (%s): compare their rates with care." % (
            "; ".join(report_files.slo_text(slo) or "none" for slo in slos))
    if slos and slos[0]:
        return " SLO: %s (the p99 of each, and no failed request)." % report_files.slo_text(slos[0])
    return ""


def _where_and_ttft(row):
    """The table's "at" cell (the concurrency, or the target rate) and the p99 TTFT of that level."""
    result = row.get("result") or {}
    if row.get("request_rate") is not None:
        level = rate_level_of(result, row["score"]) or {}
        return report_files.rate_text(row["request_rate"]), (level.get("ttft_ms") or {}).get("p99")
    at_level = [level for level in result.get("levels") or [] if level.get("concurrency") == row["concurrency"]]
    return row["concurrency"] or "-", at_level[0]["ttft_ms"]["p99"] if at_level else None


def _columns(figure, by_rate, where):
    """The table's columns: (header, right-aligned, cell of a row). Ranked by peak tok/s, the figure column is the
    peak, so the measured peak does not get a second column."""
    def peak(row):
        result = row.get("result") or {}
        return _cell(result.get("peak_output_tokens_per_s") if row["status"] == "measured" and result.get("levels")
                     else None)
    columns = [("rank", True, lambda row: row["rank"] or "-"), ("candidate", False, lambda row: row["name"]),
               ("model", False, lambda row: row.get("model") or "-"), ("plan", False, lambda row: row.get("plan") or "-"),
               ("status", False, lambda row: row["status"]),
               (figure, True, lambda row: _cell(row["score"], "%g" if by_rate else "%.1f")),
               ("at %s" % where, True, lambda row: _where_and_ttft(row)[0])]
    if figure != ranked_by("peak_output_tokens_per_s"):
        columns.append(("peak tok/s", True, peak))
    columns += [("predicted peak", True, lambda row: _cell(row.get("predicted_peak_output_tokens_per_s"))),
                ("measured/predicted", True, lambda row: _cell(row.get("peak_ratio"), "%.2f")),
                ("C=1 tok/s", True, lambda row: _cell(row.get("measured_c1_output_tokens_per_s"))),
                ("predicted C=1", True, lambda row: _cell(row.get("predicted_c1_output_tokens_per_s"))),
                ("C=1 measured/predicted", True, lambda row: _cell(row.get("c1_ratio"), "%.2f")),
                ("p99 TTFT ms at %s" % where, True, lambda row: _cell(_where_and_ttft(row)[1])),
                ("ready s", True, lambda row: _cell(row.get("time_to_ready_s"))),
                ("note", False, lambda row: (row.get("reason") or "").replace("|", "\\|").replace("\n", " "))]
    return columns


def markdown(title, ranking, rank_by, budget=None):
    """The comparison table, winner first, skipped and failed candidates with their reasons."""
    figure = ranked_by(rank_by, budget)
    by_rate = rank_by == "max_rate_within_slo"
    columns = _columns(figure, by_rate, "req/s" if by_rate else "C")
    lines = ["## %s" % title, "",
             "Ranked by %s. Winner: %s.%s" % (
                 figure, winner_text(winner(ranking)), slo_note(ranking) if by_rate else ""), "",
             "| %s |" % " | ".join(header for header, dummy, dummy2 in columns),
             "|%s|" % "|".join("---:" if right else "---" for dummy, right, dummy2 in columns)]
    for row in ranking:
        lines.append("| %s |" % " | ".join(str(cell(row)) for dummy, dummy2, cell in columns))
    return "\n".join(lines) + "\n"


# ---- the report the vllm_gauntlet_report module writes ----------------------------------------

def sweeps_only(candidates):
    """The candidates with a registered ``vllm_bench`` task result replaced by its sweep (``ansible_facts``)."""
    unwrapped = []
    for candidate in candidates:
        result = candidate.get("result")
        if isinstance(result, dict) and "levels" not in result and "vllm_bench" in (result.get("ansible_facts") or {}):
            candidate = dict(candidate, result=result["ansible_facts"]["vllm_bench"])
        unwrapped.append(candidate)
    return unwrapped


def draw_predicted(throughput, latency, row, metric, color):
    """The planner's estimate beside the measured line: same colour, dashed, hollow markers."""
    xs, tok_s, latency_ms = predicted_points(row, metric)
    if not xs:
        return
    style = dict(color=color, linestyle="--", marker="o", markerfacecolor="none", alpha=0.8)
    throughput.plot(xs, tok_s, label="%s predicted" % row["name"], **style)
    if any(value is not None for value in latency_ms):
        latency.plot(xs, latency_ms, label="%s predicted" % row["name"], **style)


def draw_rate_candidate(throughput, latency, row):
    """A measured candidate's open-loop levels: achieved req/s and p99 TTFT against the target rate (an ``inf``
    level a lone star at the rate it achieved), its max sustainable rate a dotted line in its colour. Returns the
    x positions drawn."""
    points = report_files.rate_points((row.get("result") or {}).get("rate_levels"))
    if not points:
        return []
    label = "%s%s" % (row["name"], " (winner)" if row["rank"] == 1 else "")
    color = report_files.plot_rate_series(throughput, points, lambda level: level.get("request_throughput"), "-o",
                                          label).get_color()
    report_files.plot_rate_series(latency, points, lambda level: (level.get("ttft_ms") or {}).get("p99"), "-o",
                                  label, color=color)
    if row["score"] is not None:
        for axis in (throughput, latency):
            axis.axvline(row["score"], color=color, linestyle=":",
                         label="%s max %s req/s" % (row["name"], report_files.rate_text(row["score"])))
    return [x for x, dummy, dummy in points]


def rate_png_renderer(title, ranking):
    """For ``max_rate_within_slo``: achieved req/s and p99 TTFT against the target request rate, one line per
    measured candidate with its max sustainable rate marked, the SLOs' TTFT limits dashed red."""

    def render(path):
        figure, (throughput, latency) = report_files.two_panel_figure()
        xs = []
        for row in ranking:
            if row["status"] == "measured":
                xs += draw_rate_candidate(throughput, latency, row)
        if xs:
            throughput.plot(sorted(set(xs)), sorted(set(xs)), ":", color="grey", label="target")
        limits = sorted(set(((row.get("result") or {}).get("slo") or {}).get("ttft_ms") for row in ranking
                            if row["status"] == "measured") - set([None]))
        for limit in limits:
            latency.axhline(limit, color="red", linestyle="--", label="SLO TTFT %g ms" % limit)
        report_files.finish_rate_axis(throughput, "Achieved request rate", "req/s", xs, fontsize="small")
        report_files.finish_rate_axis(latency, "p99 TTFT", "ms", xs, fontsize="small")
        report_files.save_figure(figure, title, path, MODULE_NAME)

    return render


def png_renderer(title, ranking, rank_by, budget):
    """A function drawing output tok/s and the budgeted latency (p99 TTFT by default) against concurrency, one
    line per measured candidate and a dashed one for its prediction, at the path it is given (for
    ``max_rate_within_slo``, ``rate_png_renderer``'s figures against the request rate)."""
    if rank_by == "max_rate_within_slo":
        return rate_png_renderer(title, ranking)
    metric, statistic = ("ttft_ms", "p99")
    if rank_by == "output_tokens_per_s_within_latency_budget":
        metric, statistic = budget["metric"], budget["statistic"]

    def render(path):
        figure, (throughput, latency) = report_files.two_panel_figure()
        for row in ranking:
            levels = (row.get("result") or {}).get("levels") or []
            if row["status"] != "measured" or not levels:
                continue
            label = "%s%s" % (row["name"], " (winner)" if row["rank"] == 1 else "")
            xs = [level["concurrency"] for level in levels]
            line = throughput.plot(xs, [level["output_tokens_per_s"] for level in levels], "-o", label=label)[0]
            latency.plot(xs, [(level.get(metric) or {}).get(statistic) for level in levels], "-o", label=label)
            draw_predicted(throughput, latency, row, metric, line.get_color())
        if rank_by == "output_tokens_per_s_within_latency_budget":
            latency.axhline(budget["max_ms"], color="red", linestyle="--", label="budget")
        report_files.finish_axis(throughput, "Output throughput", "tok/s", fontsize="small")
        report_files.finish_axis(latency, "%s %s" % (statistic, metric[:-3].upper()), "ms", fontsize="small")
        report_files.save_figure(figure, title, path, MODULE_NAME)

    return render


def summary(ranking):
    """The ranking the module returns: the figures only; the sweeps and estimates stay in the JSON file."""
    return [dict((key, value) for key, value in row.items() if key not in ("result", "estimate")) for row in ranking]


def build_report(params):
    """What the module writes and returns for its ``params``: ``files``, ``json_doc``, ``markdown``, ``png`` (a
    renderer or None), ``ranking`` (every row, sweeps included) and ``winner`` (its row or None). Raises
    GauntletError naming the option that is wrong."""
    problem = report_files.prologue_problem(params["name"], params["plot"])
    if problem:
        raise GauntletError(problem)
    budget = check_budget(params["latency_budget"]) if params["latency_budget"] else None
    ranking = rank(sweeps_only(params["candidates"]), params["rank_by"], budget, incumbent=params["incumbent"],
                   min_gain_pct=params["min_gain_pct"])
    text = markdown(params["name"], ranking, params["rank_by"], budget)
    best = winner(ranking)
    document = {"name": params["name"], "rank_by": params["rank_by"], "latency_budget": budget,
                "winner": best["name"] if best else None, "ranking": ranking}
    return {"files": report_files.report_paths(params["output_dir"], params["name"], params["plot"]),
            "json_doc": document, "markdown": text, "ranking": ranking, "winner": best,
            "png": png_renderer(params["name"], ranking, params["rank_by"], budget) if params["plot"] else None}
