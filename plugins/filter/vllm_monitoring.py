# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Prometheus scrape targets of one host's vLLM units, from gauntlet.vllm.vllm_service_info's ``units``.

Its documentation is in vllm_scrape_targets.yml next to this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import flag_value

# Addresses only the host itself can reach: a server bound there cannot be scraped from a monitoring host.
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
# vLLM binds every interface when --host is absent (uvicorn's host None) or one of these.
ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]")


def _target_address(listen_host, address):
    """(host:port prefix, None) or (None, why not) for a server bound to ``listen_host``."""
    if listen_host in LOOPBACK:
        return None, ("listens on %s only (vllm_service_host): a monitoring host cannot scrape it; set vllm_service_host "
                      "to 0.0.0.0 or the host's address (an API key is then required) to monitor it" % listen_host)
    if listen_host in ALL_INTERFACES:
        return address, None
    return listen_host, None


def _wanted(unit):
    """A unit meant to serve: enabled, or running now. Units handed over are stopped and disabled."""
    return bool(unit.get("enabled")) or bool(unit.get("running"))


def _host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host and not host.startswith("[") else "%s:%d" % (host, port)


def vllm_scrape_targets(units, host, address):
    """{vllm: [file_sd groups], skipped: [{unit, reason}]} for the units of one host."""
    if not isinstance(units, list):
        raise AnsibleFilterError("vllm_scrape_targets takes vllm_service_info's units (a list), got %r" % (units,))
    if not host or not address:
        raise AnsibleFilterError("vllm_scrape_targets needs the host's inventory name and the address to scrape it at, "
                                 "got host=%r address=%r" % (host, address))
    groups, skipped = [], []
    for unit in sorted(units, key=lambda item: item.get("name", "")):
        argv = [str(word) for word in unit.get("argv") or []]
        if not _wanted(unit):
            skipped.append({"unit": unit.get("name"), "reason": "disabled and not running (not meant to serve)"})
            continue
        target_host, why_not = _target_address(flag_value(argv, "--host") or "", address)
        if why_not:
            skipped.append({"unit": unit.get("name"), "reason": why_not})
            continue
        model = flag_value(argv, "--served-model-name") or unit.get("model") or ""
        groups.append({"targets": [_host_port(target_host, int(unit.get("port") or 8000))],
                       "labels": {"host": host, "unit": unit.get("name"), "model": model}})
    return {"vllm": groups, "skipped": skipped}


def _file_sd_name(job, host):
    """One file per job and host; a host name is made safe for a file name, and stays recognisable."""
    safe = "".join(char if char.isalnum() or char in "._-" else "_" for char in str(host))
    return "%s-%s.json" % (job, safe)


def vllm_file_sd(reports):
    """[{host, job, file, groups}] for the monitoring host, from every vLLM host's vllm_monitoring_exporter_report."""
    if not isinstance(reports, list):
        raise AnsibleFilterError("vllm_file_sd takes a list of vllm_monitoring_exporter_report dicts, got %r" % (reports,))
    files = []
    for report in reports:
        host = report.get("host") if isinstance(report, dict) else None
        if not host:
            raise AnsibleFilterError("a scrape host without its inventory name (key host): %r" % (report,))
        files.append({"host": host, "job": "vllm", "file": _file_sd_name("vllm", host), "groups": report.get("vllm") or []})
        files.append({"host": host, "job": "node", "file": _file_sd_name("node", host),
                      "groups": [{"targets": [report["node"]], "labels": {"host": host}}] if report.get("node") else []})
        files.append({"host": host, "job": "dcgm", "file": _file_sd_name("dcgm", host),
                      "groups": [{"targets": [report["dcgm"]], "labels": {"host": host}}] if report.get("dcgm") else []})
    return files


class FilterModule(object):
    def filters(self):
        return {"vllm_scrape_targets": vllm_scrape_targets, "vllm_file_sd": vllm_file_sd}
