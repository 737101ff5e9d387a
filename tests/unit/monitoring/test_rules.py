# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The alert and recording rules of roles/vllm_monitoring: rendered with the role's defaults, accepted by
`promtool check rules`, and every alert fires (labels and annotations checked) and stays quiet where it
must, in the promtool unit tests of tests/unit/monitoring/rules/*.test.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import shutil

import jinja2
import pytest
import yaml

from .conftest import (RENDERED_RULES_NAME, RULE_TESTS_DIR, RULES_DEFAULTS, alert_rules, all_rules, promtool_path,
                       render_rules_with, rule_defaults, run_promtool)

# The alert names every part of issue 18 relies on (the molecule scenario queries some of them).
DESIGN_ALERTS = frozenset((
    "VllmServerDown", "VllmReadinessFailing", "VllmWatchdogRestarted", "VllmWatchdogGaveUp",
    "VllmRequestErrorsRising", "VllmTimeToFirstTokenHigh", "VllmQueueTimeHigh", "VllmKvCacheNearlyFull",
    "VllmPreemptionsRising", "VllmThroughputCollapsed", "NodeExporterDown", "GpuTemperatureHigh",
    "GpuMemoryNearlyFull", "GpuXidErrors", "GpuEccUncorrectedErrors",
))
# Alerts about a GPU or a whole host: they name the host (and GPU), not a unit or model.
HOST_ALERTS = frozenset(("NodeExporterDown", "GpuTemperatureHigh", "GpuMemoryNearlyFull", "GpuXidErrors",
                         "GpuEccUncorrectedErrors"))
# Each threshold variable and the alert whose expression it sets.
THRESHOLDS = {
    "vllm_monitoring_ttft_p99_budget_seconds": "VllmTimeToFirstTokenHigh",
    "vllm_monitoring_queue_p99_budget_seconds": "VllmQueueTimeHigh",
    "vllm_monitoring_kv_cache_usage_threshold": "VllmKvCacheNearlyFull",
    "vllm_monitoring_error_ratio_threshold": "VllmRequestErrorsRising",
    "vllm_monitoring_preemptions_per_second_threshold": "VllmPreemptionsRising",
    "vllm_monitoring_throughput_collapse_ratio": "VllmThroughputCollapsed",
    "vllm_monitoring_gpu_temperature_threshold_celsius": "GpuTemperatureHigh",
    "vllm_monitoring_gpu_memory_used_threshold": "GpuMemoryNearlyFull",
}


def rule_test_files():
    files = sorted(glob.glob(os.path.join(RULE_TESTS_DIR, "*.test.yml")))
    assert files, "no promtool unit tests in %s" % RULE_TESTS_DIR
    return files


def staged_rules(tmp_path, rules_text):
    """The rendered rule file and the unit tests side by side (the tests name it relative to themselves)."""
    (tmp_path / RENDERED_RULES_NAME).write_text(rules_text)
    for path in rule_test_files():
        shutil.copy(path, str(tmp_path))
    return [os.path.basename(path) for path in rule_test_files()]


def test_the_rendered_rules_pass_promtool_check(tmp_path, rules_text):
    path = tmp_path / RENDERED_RULES_NAME
    path.write_text(rules_text)
    status, output = run_promtool("check", "rules", str(path))
    assert status == 0, output
    assert "SUCCESS" in output


def test_every_alert_fires_and_stays_quiet_as_the_promtool_unit_tests_say(tmp_path, rules_text):
    names = staged_rules(tmp_path, rules_text)
    status, output = run_promtool("test", "rules", *names, cwd=str(tmp_path))
    assert status == 0, output


def test_the_alerts_are_the_designed_ones_each_once(rules):
    alerts = [rule["alert"] for rule in all_rules(rules) if "alert" in rule]
    assert sorted(alerts) == sorted(DESIGN_ALERTS)


def test_every_alert_has_a_firing_and_a_quiet_case_in_the_unit_tests():
    firing, quiet = set(), set()
    for path in rule_test_files():
        with open(path) as handle:
            for case in yaml.safe_load(handle)["tests"]:
                for check in case.get("alert_rule_test", []):
                    (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert DESIGN_ALERTS - firing == set(), "alerts never seen firing"
    assert DESIGN_ALERTS - quiet == set(), "alerts never checked quiet"


def test_every_firing_case_checks_labels_and_annotations():
    for path in rule_test_files():
        with open(path) as handle:
            for case in yaml.safe_load(handle)["tests"]:
                for check in case.get("alert_rule_test", []):
                    for alert in check.get("exp_alerts") or []:
                        assert alert.get("exp_labels", {}).get("severity"), (path, check["alertname"])
                        assert set(alert.get("exp_annotations", {})) == set(("summary", "description", "runbook")), \
                            (path, check["alertname"])


@pytest.mark.parametrize("name", sorted(DESIGN_ALERTS))
def test_every_alert_has_severity_and_annotations_naming_where_and_how_much(rules, name):
    rule = alert_rules(rules)[name]
    assert rule["labels"]["severity"] in ("critical", "warning")
    annotations = rule["annotations"]
    assert set(annotations) == set(("summary", "description", "runbook"))
    assert "{{ $labels.host }}" in annotations["summary"]
    assert "$value" in annotations["description"]
    assert len(annotations["runbook"]) > 40, "a runbook hint says what to look at"
    if name not in HOST_ALERTS:
        for label in ("unit", "model"):
            assert "{{ $labels.%s }}" % label in annotations["description"], (name, label)


def test_prometheus_templates_survive_jinja_and_nothing_of_jinja_is_left(rules_text):
    """{{ $labels.x }} / {{ $value }} reach Prometheus as written; no Jinja syntax or Python repr leaks out."""
    assert rules_text.count("{{ $labels.host }}") >= len(DESIGN_ALERTS)
    assert "{{ $value" in rules_text
    for leftover in ("{%", "%}", "{#", "#}", "vllm_monitoring_", "_for.", "None", "True", "False"):
        assert leftover not in rules_text, leftover
    # Every {{ }} left is Prometheus's (starts with $ or a Go template keyword / dot).
    for inner in re.findall(r"\{\{(.*?)\}\}", rules_text):
        assert re.match(r"\s*(\$|with |end\b|\.)", inner), inner


@pytest.mark.parametrize("variable,alert", sorted(THRESHOLDS.items()))
def test_each_threshold_comes_from_its_variable(variable, alert):
    rules = yaml.safe_load(render_rules_with(**{variable: 12345.5}))
    rule = alert_rules(rules)[alert]
    assert "12345.5" in rule["expr"]
    assert "12345.5" in rule["annotations"]["description"]
    default = rule_defaults()[variable]
    assert "12345.5" not in yaml.safe_dump(alert_rules(yaml.safe_load(render_rules_with(**{variable: default})))[alert])


def test_durations_come_from_the_variables():
    defaults = rule_defaults()
    alert_for = dict(defaults["vllm_monitoring_alert_for"], VllmServerDown="42s")
    rules = yaml.safe_load(render_rules_with(vllm_monitoring_alert_for=alert_for, vllm_monitoring_rules_window="7m",
                                             vllm_monitoring_events_window="3h"))
    alerts = alert_rules(rules)
    assert alerts["VllmServerDown"]["for"] == "42s"
    assert all(alerts[name]["for"] == defaults["vllm_monitoring_alert_for"][name] for name in DESIGN_ALERTS - {"VllmServerDown"})
    text = yaml.safe_dump(rules)
    assert "[7m]" in text and "[5m]" not in text
    assert "restarts_total[3h]" in alerts["VllmWatchdogRestarted"]["expr"]
    assert "[3h]" in alerts["GpuXidErrors"]["expr"]


def test_an_alert_missing_from_alert_for_stops_the_rendering_naming_it():
    alert_for = dict(rule_defaults()["vllm_monitoring_alert_for"])
    del alert_for["VllmQueueTimeHigh"]
    with pytest.raises(jinja2.UndefinedError, match="VllmQueueTimeHigh"):
        render_rules_with(vllm_monitoring_alert_for=alert_for)


def test_defaults_give_every_alert_a_duration_and_explain_every_variable():
    defaults = rule_defaults()
    assert sorted(defaults["vllm_monitoring_alert_for"]) == sorted(DESIGN_ALERTS)
    assert all(name.startswith("vllm_monitoring_") for name in defaults)
    with open(RULES_DEFAULTS) as handle:
        lines = handle.read().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^vllm_monitoring_\w+:", line):
            assert lines[index - 1].startswith("#"), "%s has no comment above it" % line


def test_a_missing_promtool_fails_the_tests_with_its_name(monkeypatch, tmp_path):
    monkeypatch.delenv("GAUNTLET_PROMTOOL", raising=False)
    with pytest.raises(pytest.fail.Exception, match="GAUNTLET_PROMTOOL"):
        promtool_path()
    monkeypatch.setenv("GAUNTLET_PROMTOOL", str(tmp_path / "nowhere" / "promtool"))
    with pytest.raises(pytest.fail.Exception, match="scripts/lib.sh"):
        promtool_path()
