# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which vLLM units a monitoring host scrapes, at which address, and the file_sd files it writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_monitoring import vllm_file_sd, vllm_router_file_sd, vllm_scrape_targets


def unit(name, argv, enabled=True, running=True, port=8000, model="/opt/models/m"):
    return {"name": name, "argv": argv, "enabled": enabled, "running": running, "port": port, "model": model}


def test_a_unit_on_every_interface_is_scraped_at_the_hosts_address_with_its_labels():
    units = [unit("vllm-a.service", ["/v/bin/vllm", "serve", "/opt/models/a", "--served-model-name", "a", "--host", "0.0.0.0",
                                     "--port", "8001"], port=8001)]
    assert vllm_scrape_targets(units, host="gpu-1", address="10.0.0.5") == {
        "vllm": [{"targets": ["10.0.0.5:8001"], "labels": {"host": "gpu-1", "unit": "vllm-a.service", "model": "a"}}],
        "skipped": []}


def test_no_host_flag_means_every_interface_and_the_model_path_is_the_label_without_a_served_name():
    targets = vllm_scrape_targets([unit("vllm-b.service", ["/v/bin/vllm", "serve", "/opt/models/b"], model="/opt/models/b")],
                                  host="gpu-1", address="10.0.0.5")
    assert targets["vllm"] == [{"targets": ["10.0.0.5:8000"], "labels": {"host": "gpu-1", "unit": "vllm-b.service",
                                                                         "model": "/opt/models/b"}}]


def test_a_specific_address_is_scraped_there_and_ipv6_is_bracketed():
    targets = vllm_scrape_targets([unit("vllm-c.service", ["--host=192.168.1.9"]),
                                   unit("vllm-d.service", ["--host", "fd00::9"], port=9000)], host="h", address="10.0.0.5")
    assert [group["targets"] for group in targets["vllm"]] == [["192.168.1.9:8000"], ["[fd00::9]:9000"]]


def test_a_loopback_unit_is_skipped_with_the_reason_never_dropped_silently():
    targets = vllm_scrape_targets([unit("vllm-e.service", ["--host", "127.0.0.1"])], host="h", address="10.0.0.5")
    assert targets["vllm"] == []
    assert targets["skipped"][0]["unit"] == "vllm-e.service"
    assert "127.0.0.1 only" in targets["skipped"][0]["reason"] and "vllm_service_host" in targets["skipped"][0]["reason"]


def test_a_unit_handed_over_is_not_a_target_but_an_enabled_failed_one_is():
    targets = vllm_scrape_targets([unit("vllm-old.service", [], enabled=False, running=False),
                                   unit("vllm-failed.service", [], enabled=True, running=False)], host="h", address="a")
    assert [group["labels"]["unit"] for group in targets["vllm"]] == ["vllm-failed.service"]
    assert targets["skipped"] == [{"unit": "vllm-old.service", "reason": "disabled and not running (not meant to serve)"}]


@pytest.mark.parametrize("units, host, address", [("not a list", "h", "a"), ([], "", "a"), ([], "h", "")])
def test_bad_inputs_are_refused_naming_them(units, host, address):
    with pytest.raises(AnsibleFilterError):
        vllm_scrape_targets(units, host=host, address=address)


def test_every_host_gets_one_file_per_job_and_an_empty_one_when_it_has_nothing_for_that_job():
    report = {"host": "gpu/1", "vllm": [{"targets": ["a:1"], "labels": {"unit": "u"}}], "node": "a:9100", "dcgm": ""}
    assert vllm_file_sd([report]) == [
        {"host": "gpu/1", "job": "vllm", "file": "vllm-gpu_1.json", "groups": [{"targets": ["a:1"], "labels": {"unit": "u"}}]},
        {"host": "gpu/1", "job": "node", "file": "node-gpu_1.json", "groups": [{"targets": ["a:9100"], "labels": {"host": "gpu/1"}}]},
        {"host": "gpu/1", "job": "dcgm", "file": "dcgm-gpu_1.json", "groups": []}]


def test_a_report_without_its_host_is_refused():
    with pytest.raises(AnsibleFilterError, match="without its inventory name"):
        vllm_file_sd([{"vllm": []}])


# ---- the routers' file_sd files -------------------------------------------------------------------------------

def test_each_router_gets_its_exporter_and_its_backends_info_each_at_its_own_path():
    router = {"router": "gw/1", "metrics_url": "http://10.0.0.5:8404/metrics",
              "backends_metrics_url": "http://[fd00::5]:8404/gauntlet/metrics"}
    assert vllm_router_file_sd([router]) == [
        {"router": "gw/1", "job": "router", "file": "router-gw_1.json",
         "groups": [{"targets": ["10.0.0.5:8404"], "labels": {"router": "gw/1", "__metrics_path__": "/metrics"}}]},
        {"router": "gw/1", "job": "router_backends", "file": "router_backends-gw_1.json",
         "groups": [{"targets": ["[fd00::5]:8404"], "labels": {"router": "gw/1", "__metrics_path__": "/gauntlet/metrics"}}]}]
    assert vllm_router_file_sd([]) == []


@pytest.mark.parametrize("routers, message", [
    ({"router": "gw"}, "must be a list"),
    ([{"metrics_url": "http://a:1/m", "backends_metrics_url": "http://a:1/b"}], r"\[0\] has no router name"),
    ([{"router": "gw", "metrics_url": "https://a:1/m", "backends_metrics_url": "http://a:1/b"}], "gw: metrics_url"),
    ([{"router": "gw", "metrics_url": "http://a/m", "backends_metrics_url": "http://a:1/b"}], "gw: metrics_url"),
    ([{"router": "gw", "metrics_url": "http://a:1/m", "backends_metrics_url": "http://a b:1/x"}], "gw: backends_metrics_url"),
    ([{"router": "gw", "metrics_url": "http://a:1/m\nx", "backends_metrics_url": "http://a:1/b"}], "gw: metrics_url"),
    ([{"router": "g:w", "metrics_url": "http://a:1/m", "backends_metrics_url": "http://a:1/b"},
      {"router": "g_w", "metrics_url": "http://b:1/m", "backends_metrics_url": "http://b:1/b"}], "same file_sd file"),
])
def test_a_router_target_prometheus_could_not_scrape_is_refused_naming_it(routers, message):
    with pytest.raises(AnsibleFilterError, match=message):
        vllm_router_file_sd(routers)
