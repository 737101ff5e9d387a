# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's health gate and fleet report (module_utils/fleet/vllm_rollout.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_rollout import GateError, fleet_report, gate_verdict


def level(tokens, concurrency=4, requests=16, failed=0, abandoned=0):
    return {"concurrency": concurrency, "output_tokens_per_s": tokens, "requests": requests, "failed": failed,
            "abandoned": abandoned, "completed": requests - failed - abandoned}


def sweep(*levels):
    return {"levels": list(levels)}


def test_a_server_as_fast_as_its_baseline_passes_with_the_ratio():
    verdict = gate_verdict(sweep(level(410.0)), sweep(level(400.0)), 4, 0.25, 0.0)
    assert verdict["passed"] is True
    assert verdict["ratio"] == 1.025 and verdict["baseline_output_tokens_per_s"] == 400.0
    assert "102% of the baseline's 400.0 tok/s" in verdict["reasons"][0]


def test_a_drop_beyond_the_threshold_fails_naming_both_figures():
    verdict = gate_verdict(sweep(level(290.0)), sweep(level(400.0)), 4, 0.25, 0.0)
    assert verdict["passed"] is False and verdict["ratio"] == 0.725
    assert "290.0 tok/s at C=4 is 72% of the baseline's 400.0 tok/s; the gate allows a drop of 25%" in verdict["reasons"][0]


def test_a_drop_just_inside_the_threshold_passes():
    assert gate_verdict(sweep(level(300.0)), sweep(level(400.0)), 4, 0.25, 0.0)["passed"] is True


def test_failed_and_abandoned_requests_count_against_the_error_rate():
    verdict = gate_verdict(sweep(level(400.0, failed=1, abandoned=1)), sweep(level(400.0)), 4, 0.25, 0.2)
    assert verdict["passed"] is True and verdict["error_rate"] == 0.125
    verdict = gate_verdict(sweep(level(400.0, failed=1, abandoned=1)), sweep(level(400.0)), 4, 0.25, 0.0)
    assert verdict["passed"] is False and verdict["error_rate"] == 0.125
    assert "2 of 16 requests failed" in verdict["reasons"][0]


def test_without_a_baseline_only_errors_are_judged_and_the_reason_says_so():
    verdict = gate_verdict(sweep(level(10.0)), None, 4, 0.25, 0.0)
    assert verdict["passed"] is True and verdict["ratio"] is None
    assert verdict["reasons"] == ["no baseline recorded for this server and workload: this sweep becomes the baseline"]
    assert gate_verdict(sweep(level(10.0, failed=1)), None, 4, 0.25, 0.0)["passed"] is False


def test_a_repeated_level_is_judged_on_its_median_and_all_its_requests():
    # One slow repeat (a noisy neighbour) does not fail the host; the baseline's repeats give their median too.
    measured = sweep(level(390.0), level(150.0), level(410.0))
    baseline = sweep(level(380.0), level(400.0), level(900.0))
    verdict = gate_verdict(measured, baseline, 4, 0.25, 0.0)
    assert verdict["passed"] is True and verdict["repeats"] == 3
    assert (verdict["output_tokens_per_s"], verdict["baseline_output_tokens_per_s"]) == (390.0, 400.0)
    # A real regression is slow in most repeats.
    assert gate_verdict(sweep(level(200.0), level(410.0), level(190.0)), baseline, 4, 0.25, 0.0)["passed"] is False
    # Errors are counted over every repeat's requests.
    errors = gate_verdict(sweep(level(400.0, failed=1), level(400.0), level(400.0, abandoned=2)), baseline, 4, 0.25, 0.0)
    assert errors["error_rate"] == 0.0625 and "3 of 48 requests failed" in errors["reasons"][0]
    # An even count takes the middle two.
    assert gate_verdict(sweep(level(300.0), level(500.0)), baseline, 4, 0.25, 0.0)["output_tokens_per_s"] == 400.0


def test_the_level_is_picked_by_concurrency_and_a_missing_one_is_named():
    measured = sweep(level(100.0, concurrency=1), level(400.0, concurrency=4))
    assert gate_verdict(measured, level(400.0), 4, 0.25, 0.0)["output_tokens_per_s"] == 400.0
    with pytest.raises(GateError, match=r"the baseline: no level at concurrency 4 \(levels: \[8\]\)"):
        gate_verdict(measured, sweep(level(400.0, concurrency=8)), 4, 0.25, 0.0)


@pytest.mark.parametrize("bad, message", [
    ("fast", "expected a vllm_bench result, got str"),
    ({"levels": [{"concurrency": 4, "output_tokens_per_s": None, "requests": 4, "failed": 0}]}, "output_tokens_per_s is None"),
])
def test_a_sweep_that_is_not_one_is_refused_naming_it(bad, message):
    with pytest.raises(GateError, match="the gate's sweep: " + message):
        gate_verdict(bad, None, 4, 0.25, 0.0)


def test_a_threshold_outside_zero_to_one_is_refused():
    with pytest.raises(GateError, match="max_regression"):
        gate_verdict(sweep(level(1.0)), None, 4, 1.5, 0.0)


def host_report(outcome, started, steps, gate=None, returned=True, error=None):
    return {"outcome": outcome, "started_at": started, "finished_at": started + sum(s["seconds"] for s in steps),
            "steps": steps, "gate": gate or {}, "returned": returned, "error": error, "unit": "vllm-tiny.service"}


def test_the_fleet_report_lists_hosts_in_order_with_unreached_ones_and_sums_the_steps():
    passed = {"verdict": gate_verdict(sweep(level(400.0)), sweep(level(400.0)), 4, 0.25, 0.0)}
    reports = {
        "canary": host_report("updated", 100.0, [{"step": "drain", "seconds": 2.0}, {"step": "deploy", "seconds": 40.0},
                                                 {"step": "gate", "seconds": 10.0}], gate=passed),
        "second": host_report("rolled_back", 160.0, [{"step": "deploy", "seconds": 30.0}, {"step": "rollback", "seconds": 35.0}],
                              error="vllm-tiny.service failed the health gate: output ... | pipe"),
    }
    built = fleet_report("rollout-tiny", ["canary", "second", "third"], reports, {"serial": [1, "50%"]})
    summary = built["summary"]
    assert [h["host"] for h in built["json_doc"]["hosts"]] == ["canary", "second", "third"]
    assert built["json_doc"]["hosts"][2]["outcome"] == "not_reached"
    assert summary["outcomes"] == {"updated": 1, "unchanged": 0, "rolled_back": 1, "failed": 0, "not_reached": 1}
    assert summary["succeeded"] is False and summary["span_s"] == 125.0
    assert summary["step_seconds"] == {"deploy": 70.0, "drain": 2.0, "gate": 10.0, "rollback": 35.0}
    rows = built["markdown"].splitlines()
    assert rows[4].startswith("| canary | updated | drain 2.0, deploy 40.0, gate 10.0 | pass 400.0 tok/s (x1.00) | yes |")
    # A pipe in an error cannot break the table.
    assert "output ... / pipe" in rows[5]
    assert rows[6] == "| third | not_reached | - | - | - |  |"
    assert "3 hosts: 1 updated, 1 rolled_back, 1 not_reached. Span 125.0 s." in built["markdown"]


def test_a_fleet_where_every_host_updated_succeeded():
    reports = {"a": host_report("updated", 0.0, [{"step": "deploy", "seconds": 1.0}]),
               "b": host_report("unchanged", 1.0, [{"step": "deploy", "seconds": 1.0}])}
    assert fleet_report("r", ["a", "b"], reports, {})["summary"]["succeeded"] is True


def test_an_unknown_outcome_is_refused_naming_the_host():
    with pytest.raises(GateError, match="hosts.a.outcome: 'done'"):
        fleet_report("r", ["a"], {"a": {"outcome": "done"}}, {})
