# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 34, monitoring, attacked the way a careless operator or an attacker would: NaN, strings and negative
figures as throughput baselines, a unit name that forges a textfile sample, newlines in the durations and
addresses the role writes into prometheus.yml, bad ports and loopback addresses in the scrape targets, two hosts
that map to one file_sd file, duplicate series in /metrics, and watchdog state files that are FIFOs, nested
100,000 deep or not UTF-8. Each case fails with a message naming the option or unit and the value, or is reported
per unit; never a traceback, never a hang, never a silent wrong answer.

The role checks run through ansible-playbook once (one play per case, each case's failure message kept by a
rescue), and each case is read from what the last play printed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import signal
import subprocess

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter import vllm_monitoring as monitoring_filters
from ansible_collections.gauntlet.vllm.plugins.filter.vllm_monitoring import vllm_file_sd, vllm_scrape_targets
from ansible_collections.gauntlet.vllm.plugins.module_utils.io import prometheus_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_monitoring as vm
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_monitoring_info
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import printed_json, run_playbook
from ansible_collections.gauntlet.vllm.tests.unit.monitoring.conftest import promtool_path
from ansible_collections.gauntlet.vllm.tests.unit.plugins.modules.test_vllm_monitoring_info import (  # noqa: F401  # pylint: disable=unused-import
    UNIT,
    systemctl,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_monitoring")


def baseline(unit="vllm-a.service", tokens=120.5, concurrency=4):
    return {"unit": unit, "output_tokens_per_second": tokens, "concurrency": concurrency}


# ---- the role's checks, run once by ansible-playbook ---------------------------------------------------------

# (case, task file, play vars, what the failure message must hold; None: the inputs are accepted)
ROLE_CASES = [
    ("defaults", "validate", {}, None),
    ("exporter defaults", "validate_exporter", {}, None),
    ("a good baseline", "validate_exporter", {"vllm_monitoring_baselines": [baseline()]}, None),
    # as the molecule scenario passes a sweep's level: templates that render to a float and an int
    ("a templated baseline", "validate_exporter",
     {"level": {"output_tokens_per_s": 12.5, "concurrency": 4},
      "vllm_monitoring_baselines": [baseline(tokens="{{ level.output_tokens_per_s }}", concurrency="{{ level.concurrency }}")]},
     None),
    ("a nan baseline", "validate_exporter",
     {"vllm_monitoring_baselines": [baseline(tokens="nan")]}, ["vllm-a.service", "output_tokens_per_second", "nan"]),
    ("a negative baseline", "validate_exporter",
     {"vllm_monitoring_baselines": [baseline(tokens=-5.0)]}, ["vllm-a.service", "output_tokens_per_second", "-5"]),
    ("a forged unit", "validate_exporter",
     {"vllm_monitoring_baselines": [baseline(unit='a"} 1\ngauntlet_vllm_baseline_concurrency{unit="vllm-b.service')]},
     ["vllm_monitoring_baselines", "unit", "vllm-b.service"]),
    ("a node exporter port of 70000", "validate_exporter", {"vllm_monitoring_node_exporter_port": 70000},
     ["vllm_monitoring_node_exporter_port", "70000"]),
    ("a scrape interval with a newline", "validate", {"vllm_monitoring_scrape_interval": "15s\n  scrape_timeout: 1s"},
     ["vllm_monitoring_scrape_interval", "scrape_timeout"]),
    ("an evaluation interval with a newline", "validate", {"vllm_monitoring_evaluation_interval": "15s\nfoo: 1"},
     ["vllm_monitoring_evaluation_interval"]),
    ("a retention time with a flag", "validate", {"vllm_monitoring_retention_time": "15d --web.enable-admin-api"},
     ["vllm_monitoring_retention_time", "enable-admin-api"]),
    ("a rules window that ends the range", "validate", {"vllm_monitoring_rules_window": "5m]) or vector(1"},
     ["vllm_monitoring_rules_window"]),
    ("an alert_for with a newline", "validate",
     {"vllm_monitoring_alert_for": dict(yaml.safe_load(open(os.path.join(ROLE, "defaults", "main", "rules.yml")))
                                        ["vllm_monitoring_alert_for"], VllmServerDown="5m\n        labels: {}")},
     ["vllm_monitoring_alert_for", "VllmServerDown"]),
    ("a listen address with a newline", "validate", {"vllm_monitoring_listen_address": "0.0.0.0:9090\"]\n  - x:1"},
     ["vllm_monitoring_listen_address"]),
    ("an alertmanager with a newline", "validate", {"vllm_monitoring_alertmanagers": ["am:9093\n"]},
     ["vllm_monitoring_alertmanagers", "am:9093"]),
    ("a nan threshold", "validate", {"vllm_monitoring_kv_cache_usage_threshold": "nan"},
     ["vllm_monitoring_kv_cache_usage_threshold", "nan"]),
    ("a grafana url with a newline", "validate",
     {"vllm_monitoring_grafana_prometheus_url": "http://127.0.0.1:9090\n    basicAuth: true"},
     ["vllm_monitoring_grafana_prometheus_url"]),
]


def _case_play(name, tasks_from, variables):
    record = "{{ hostile_results | default({}) | combine({%s: %s}) }}"
    return {
        "name": name, "hosts": "localhost", "gather_facts": False, "connection": "local", "vars": variables,
        "tasks": [{"block": [{"ansible.builtin.include_role": {"name": "gauntlet.vllm.vllm_monitoring",
                                                               "tasks_from": tasks_from}},
                             {"ansible.builtin.set_fact": {"hostile_results": record % (json.dumps(name), "'accepted'")}}],
                   "rescue": [{"ansible.builtin.set_fact": {
                       "hostile_results": record % (json.dumps(name), "ansible_failed_result.msg | string")}}]}]}


@pytest.fixture(scope="module")
def role_results(tmp_path_factory):
    """case -> 'accepted' or the failure message, from one ansible-playbook run of every case."""
    plays = [_case_play(name, tasks_from, variables) for name, tasks_from, variables, _expected in ROLE_CASES]
    # the baseline textfile as the exporter's template task renders it
    template = os.path.join(ROLE, "templates", "gauntlet_vllm_baseline.prom.j2")
    plays.append({"name": "print", "hosts": "localhost", "gather_facts": False, "connection": "local",
                  "vars": {"vllm_monitoring_baselines": [baseline(), baseline("vllm-b.service", 7, 1)]},
                  "tasks": [{"ansible.builtin.debug": {"msg": "hostile_results={{ hostile_results | to_json }}"}},
                            {"ansible.builtin.debug": {"msg": "baseline_textfile={{ lookup('ansible.builtin.template', %s)"
                                                              " | to_json }}" % json.dumps(template)}}]})
    playbook = tmp_path_factory.mktemp("hostile_monitoring") / "play.yml"
    playbook.write_text(yaml.safe_dump(plays))
    result = run_playbook(["-i", "localhost,", str(playbook)], json_results=True)
    found = printed_json(result.stdout, "hostile_results")
    assert found is not None, result.stdout[-3000:] + result.stderr[-3000:]
    found["baseline textfile"] = printed_json(result.stdout, "baseline_textfile")
    return found


@pytest.mark.parametrize("name, expected", [(case[0], case[3]) for case in ROLE_CASES], ids=[case[0] for case in ROLE_CASES])
def test_role_inputs_written_into_prometheus_files_are_checked_naming_the_variable(role_results, name, expected):
    if expected is None:
        assert role_results[name] == "accepted"
        return
    message = role_results[name]
    assert message != "accepted", name
    for part in expected:
        assert part in message, (part, message)
    assert "Traceback" not in message


def test_the_role_writes_a_baseline_textfile_that_promtool_accepts(role_results):
    text = role_results["baseline textfile"]
    assert text.startswith("# Written by gauntlet.vllm.vllm_monitoring") and text.endswith("} 1\n")
    assert 'gauntlet_vllm_baseline_output_tokens_per_second{unit="vllm-a.service"} 120.5\n' in text
    assert 'gauntlet_vllm_baseline_concurrency{unit="vllm-b.service"} 1\n' in text
    check = subprocess.run([promtool_path(), "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_both_entry_points_check_their_inputs_before_anything_else():
    for entry, check in (("main.yml", "validate.yml"), ("exporter.yml", "validate_exporter.yml")):
        with open(os.path.join(ROLE, "tasks", entry)) as handle:
            first = yaml.safe_load(handle)[0]
        assert first.get("ansible.builtin.import_tasks") == check, (entry, first)


# ---- 1. baselines: NaN, strings, zero and negative figures --------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("output_tokens_per_second", "nan"), ("output_tokens_per_second", float("nan")),
    ("output_tokens_per_second", float("inf")), ("output_tokens_per_second", "120"),
    ("output_tokens_per_second", -5.0), ("output_tokens_per_second", 0), ("output_tokens_per_second", True),
    ("output_tokens_per_second", None), ("concurrency", 0), ("concurrency", -1), ("concurrency", 2.5),
    ("concurrency", "4"), ("concurrency", float("nan")), ("concurrency", True)])
def test_a_nan_string_or_non_positive_baseline_figure_is_refused_naming_unit_and_field(field, value):
    bad = baseline()
    bad[field] = value
    with pytest.raises(AnsibleFilterError) as raised:
        monitoring_filters.vllm_baseline_textfile([baseline("vllm-good.service"), bad])
    message = str(raised.value)
    assert "vllm_monitoring_baselines" in message and "vllm-a.service" in message and field in message
    assert repr(value) in message or str(value) in message


# ---- 2. baselines: a unit name that forges a sample or breaks the textfile -----------------------------------

@pytest.mark.parametrize("unit", ['a"} 1\ngauntlet_vllm_baseline_concurrency{unit="vllm-b.service', 'vllm-"a.service',
                                  "vllm-a.service\n", "vllm-a\\.service", "", None, 7, "vllm-a"])
def test_a_unit_name_that_is_not_a_unit_name_is_refused_naming_it(unit):
    with pytest.raises(AnsibleFilterError) as raised:
        monitoring_filters.vllm_baseline_textfile([baseline(unit=unit), baseline("vllm-b.service")])
    message = str(raised.value)
    assert "vllm_monitoring_baselines" in message and "unit" in message and repr(unit)[1:-1][:20] in message


def test_two_baselines_of_one_unit_are_refused_naming_it():
    with pytest.raises(AnsibleFilterError, match="vllm-a.service.*twice"):
        monitoring_filters.vllm_baseline_textfile([baseline(), baseline(tokens=3.0)])


def test_the_baseline_textfile_reads_back_as_written_and_passes_promtool(tmp_path):
    text = monitoring_filters.vllm_baseline_textfile([baseline("vllm-b.service", 80, 2), baseline("vllm-a@x:1.service", 1e-05, 64)])
    assert sorted(prometheus_text.parse_exposition(text), key=repr) == sorted([
        ("gauntlet_vllm_baseline_output_tokens_per_second", {"unit": "vllm-a@x:1.service"}, 1e-05),
        ("gauntlet_vllm_baseline_output_tokens_per_second", {"unit": "vllm-b.service"}, 80.0),
        ("gauntlet_vllm_baseline_concurrency", {"unit": "vllm-a@x:1.service"}, 64.0),
        ("gauntlet_vllm_baseline_concurrency", {"unit": "vllm-b.service"}, 2.0)], key=repr)
    check = subprocess.run([promtool_path(), "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    empty = monitoring_filters.vllm_baseline_textfile([])
    assert prometheus_text.parse_exposition(empty) == [] and "# TYPE gauntlet_vllm_baseline_concurrency gauge" in empty


# ---- 4. scrape targets: ports, unit entries, loopback, file_sd collisions ------------------------------------

def unit(name="vllm-a.service", argv=None, port=8000, enabled=True):
    return {"name": name, "argv": argv if argv is not None else ["--host", "0.0.0.0"], "enabled": enabled,
            "running": True, "port": port, "model": "/m"}


@pytest.mark.parametrize("port", [0, None, 70000, -1, 65536])
def test_a_unit_without_a_scrapable_port_is_skipped_naming_its_port_not_scraped_at_8000(port):
    targets = vllm_scrape_targets([unit(port=port), unit("vllm-b.service", port=8001)], host="h", address="10.0.0.5")
    assert [group["targets"] for group in targets["vllm"]] == [["10.0.0.5:8001"]]
    assert targets["skipped"][0]["unit"] == "vllm-a.service"
    assert ("null" if port is None else "--port is %d," % port) in targets["skipped"][0]["reason"]


@pytest.mark.parametrize("units, named", [
    ([unit(port="8000")], "vllm-a.service"), ([unit(port=True)], "vllm-a.service"), ([unit(port=[1])], "vllm-a.service"),
    ([unit(port=80.5)], "vllm-a.service"), (["vllm-a.service"], "vllm-a.service"), ([None], "None"),
    ([unit(name=None)], "name"), ([unit(name=3)], "name"), ([unit(argv="--host 0.0.0.0")], "argv"),
    ([unit(argv=[1, None])], "argv")])
def test_a_unit_entry_or_port_of_the_wrong_type_is_refused_naming_it_not_a_traceback(units, named):
    with pytest.raises(AnsibleFilterError) as raised:
        vllm_scrape_targets(units, host="h", address="10.0.0.5")
    assert named in str(raised.value)


def test_a_host_name_or_exporter_target_with_a_line_break_is_refused_naming_it():
    with pytest.raises(AnsibleFilterError, match="host's inventory name"):
        vllm_scrape_targets([unit()], host="gpu-1\nx", address="10.0.0.5")
    with pytest.raises(AnsibleFilterError, match="address"):
        vllm_scrape_targets([unit()], host="gpu-1", address="10.0.0.5\n")
    with pytest.raises(AnsibleFilterError, match="host's inventory name"):
        vllm_file_sd([{"host": "gpu-1\u2028x", "vllm": [], "node": "10.0.0.1:9100"}])
    with pytest.raises(AnsibleFilterError, match="gpu-1: node"):
        vllm_file_sd([{"host": "gpu-1", "vllm": [], "node": "10.0.0.1:9100\n"}])
    for groups in ("a:1", [{"targets": "a:1"}], [{"targets": ["a:1"], "labels": {"unit": 1}}], [None]):
        with pytest.raises(AnsibleFilterError, match="host gpu-1: "):
            vllm_file_sd([{"host": "gpu-1", "vllm": groups, "node": "10.0.0.1:9100"}])


@pytest.mark.parametrize("listen", ["127.0.0.2", "127.255.255.254", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1",
                                    "LOCALHOST", "localhost"])
def test_every_loopback_address_is_skipped_never_scraped_as_remote(listen):
    targets = vllm_scrape_targets([unit(argv=["--host", listen])], host="h", address="10.0.0.5")
    assert targets["vllm"] == [] and listen in targets["skipped"][0]["reason"]


def test_two_hosts_that_map_to_one_file_sd_file_fail_naming_both():
    reports = [{"host": "gpu:1", "vllm": [], "node": "10.0.0.1:9100", "dcgm": ""},
               {"host": "gpu_1", "vllm": [], "node": "10.0.0.2:9100", "dcgm": ""}]
    with pytest.raises(AnsibleFilterError) as raised:
        vllm_file_sd(reports)
    assert "gpu:1" in str(raised.value) and "gpu_1" in str(raised.value) and "vllm-gpu_1.json" in str(raised.value)
    with pytest.raises(AnsibleFilterError, match="gpu-1.*twice"):
        vllm_file_sd([dict(reports[0], host="gpu-1"), dict(reports[1], host="gpu-1")])


# ---- 5. /metrics: a duplicate series is an error, not a sum ---------------------------------------------------

def test_a_duplicate_series_in_metrics_is_an_error_naming_both_lines_never_summed():
    text = ('vllm:num_requests_running{engine="0",model_name="a"} 2\n'
            '# HELP x\n'
            'vllm:num_requests_running{model_name="a", engine="0"} 2\n')
    with pytest.raises(prometheus_text.ExpositionError, match=r"line 3 .*duplicate.*line 1"):
        prometheus_text.parse_exposition(text)
    figures, error = vm.read_metrics("http://h/metrics", 1, fetch=lambda url, timeout: text)
    assert figures is None and "duplicate" in error
    # the same name with another label set, or another name with the same labels, is no duplicate
    assert len(prometheus_text.parse_exposition('m{a="1"} 1\nm{a="2"} 1\nn{a="1"} 1\nm 1\n')) == 4


# ---- 6. vllm_monitoring_info: watchdog state files that hang or break it --------------------------------------

@contextlib.contextmanager
def deadline(seconds):
    """A hang becomes a test failure after ``seconds`` instead of blocking the suite."""
    def expired(signum, frame):
        raise AssertionError("still blocked after %d s" % seconds)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _state_file(tmp_path):
    (tmp_path / "watchdog").mkdir()
    return tmp_path / "watchdog" / (UNIT + ".json")


@pytest.mark.parametrize("kind", ["fifo", "nested", "not utf-8", "huge int", "directory"])
def test_an_unusable_watchdog_state_is_reported_for_its_unit_never_a_hang_or_traceback(run_module, systemctl, tmp_path,  # noqa: F811
                                                                                       kind):
    path = _state_file(tmp_path)
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "nested":
        path.write_text("[" * 100000 + "]" * 100000)
    elif kind == "not utf-8":
        path.write_bytes(b'{"unit": "\xff\xfe"}')
    elif kind == "huge int":
        path.write_text('{"restarts_total": %s}' % ("9" * 5000))
    else:
        path.mkdir()
    with deadline(20):
        result, failed = run_module(vllm_monitoring_info.main, {"state_dir": str(tmp_path), "units": [UNIT], "timeout": 1})
    assert not failed, result
    report = result["units"][0]
    assert report["watchdog"] is None and report["watchdog_error"].startswith(str(path))
    assert result["summary"]["watchdog_errors"] == [UNIT]


def test_a_missing_watchdog_state_is_no_error():
    assert vm.read_watchdog("/nonexistent-gauntlet", UNIT, 0.0) == (None, None)
