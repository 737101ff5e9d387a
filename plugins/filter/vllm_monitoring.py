# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the role vllm_monitoring writes for Prometheus: the scrape targets of one host's vLLM units (from
gauntlet.vllm.vllm_service_info's ``units``), the file_sd files of the monitoring host, and the throughput
baselines' textfile.

Their documentation is in vllm_scrape_targets.yml, vllm_file_sd.yml, vllm_router_file_sd.yml and
vllm_baseline_textfile.yml next to this file. Every input that ends up in a file is checked here, and a bad one fails naming the unit, host or field: a
target, file or sample that would be wrong is never written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.prometheus_text import (
    ExpositionError,
    format_sample,
    parse_exposition,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    SafeIOError,
    finite_number,
    full_match,
    is_int,
    short_text,
    single_line,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import flag_value, listen_kind

# The address the monitoring host scrapes a host at: a name, an IPv4 address or an IPv6 one (bare or bracketed).
ADDRESS = re.compile(r"[A-Za-z0-9._:%-]+|\[[0-9A-Fa-f:.%A-Za-z-]+\]")
# A baseline's unit: a systemd service unit name (letters, digits and ':', '_', '.', '@', '-'; never a quote,
# backslash or line break, which would end the textfile's label or line), ending in .service like the unit label
# of the vLLM targets the rules join it with.
UNIT_NAME = re.compile(r"[A-Za-z0-9:_.@-]+\.service")
BASELINE_METRICS = (
    ("gauntlet_vllm_baseline_output_tokens_per_second", "output_tokens_per_second",
     "Output tokens per second measured by a bench level of this unit."),
    ("gauntlet_vllm_baseline_concurrency", "concurrency",
     "Concurrent requests of the bench level the baseline was measured at."),
)


def _fail(message, *args):
    raise AnsibleFilterError(message % args)


def _shown(value):
    return short_text(repr(value), 80)


# ---- scrape targets of one host ------------------------------------------------------------------------------

def _target_address(listen_host, address):
    """(host:port prefix, None) or (None, why not) for a server bound to ``listen_host``."""
    kind = listen_kind(listen_host)
    if kind == "loopback":
        return None, ("listens on %s only (vllm_service_host): a monitoring host cannot scrape it; set vllm_service_host "
                      "to 0.0.0.0 or the host's address (an API key is then required) to monitor it" % listen_host)
    if kind == "all":
        return address, None
    return listen_host, None


def _wanted(unit):
    """A unit meant to serve: enabled, or running now. Units handed over are stopped and disabled."""
    return bool(unit.get("enabled")) or bool(unit.get("running"))


def _host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host and not host.startswith("[") else "%s:%d" % (host, port)


def _checked_unit(entry, index):
    """(name, argv, port, model) of one of vllm_service_info's units; a unit of another shape fails naming it."""
    if not isinstance(entry, dict):
        _fail("vllm_scrape_targets: units[%d] is not one of vllm_service_info's units (a dict): %s", index, _shown(entry))
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        _fail("vllm_scrape_targets: units[%d] has no unit name (key name), got %s", index, _shown(name))
    argv = entry.get("argv") or []
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        _fail("vllm_scrape_targets: unit %s: argv must be a list of strings, got %s", name, _shown(argv))
    # vllm_service_info's port is a whole number, or null for a --port that is not a number.
    port = entry.get("port")
    if port is not None and not is_int(port):
        _fail("vllm_scrape_targets: unit %s: port must be a whole number or null (as vllm_service_info reports it), "
              "got %s", name, _shown(port))
    model = flag_value(argv, "--served-model-name") or entry.get("model") or ""
    if not isinstance(model, str):
        _fail("vllm_scrape_targets: unit %s: model must be a string, got %s", name, _shown(model))
    return name, argv, port, model


def _port_problem(port):
    """Why a unit's port cannot be scraped, or None. No default stands in: a unit on port 0 or with a --port that
    is not a number does not listen on 8000."""
    if port is not None and 1 <= port <= 65535:
        return None
    shown = "not a number (null)" if port is None else str(port)
    return "its --port is %s, not a TCP port from 1 to 65535: there is no address to scrape" % shown


def _one_line(value, where):
    """``value`` when it is one line of text (safe_io's check); AnsibleFilterError naming ``where`` otherwise."""
    try:
        return single_line(value, where)
    except SafeIOError as exc:
        raise AnsibleFilterError(str(exc))


def _check_host_and_address(host, address):
    if not host:
        _fail("vllm_scrape_targets needs the host's inventory name, got host=%s", _shown(host))
    _one_line(host, "vllm_scrape_targets: the host's inventory name (host)")
    if not full_match(ADDRESS, address):
        _fail("vllm_scrape_targets needs the address to scrape the host at (a name or an IP address), got address=%s",
              _shown(address))


def vllm_scrape_targets(units, host, address):
    """{vllm: [file_sd groups], skipped: [{unit, reason}]} for the units of one host."""
    if not isinstance(units, list):
        _fail("vllm_scrape_targets takes vllm_service_info's units (a list), got %s", _shown(units))
    _check_host_and_address(host, address)
    checked = sorted(((entry,) + _checked_unit(entry, index) for index, entry in enumerate(units)), key=lambda item: item[1])
    groups, skipped = [], []
    for entry, name, argv, port, model in checked:
        if not _wanted(entry):
            skipped.append({"unit": name, "reason": "disabled and not running (not meant to serve)"})
            continue
        target_host, why_not = _target_address(flag_value(argv, "--host") or "", address)
        why_not = why_not or _port_problem(port)
        if why_not:
            skipped.append({"unit": name, "reason": why_not})
            continue
        groups.append({"targets": [_host_port(target_host, port)], "labels": {"host": host, "unit": name, "model": model}})
    return {"vllm": groups, "skipped": skipped}


# ---- the monitoring host's file_sd files ---------------------------------------------------------------------

def _file_sd_safe(host):
    """A host name made safe for a file name, and still recognisable (not injective: see _claim)."""
    return "".join(char if char.isalnum() or char in "._-" else "_" for char in host)


def _claim(owners, host):
    """Record that ``host``'s files are its own; two hosts whose names map to one file name fail naming both
    (one host's targets would overwrite the other's, and Prometheus would scrape only one of them)."""
    safe = _file_sd_safe(host)
    if safe in owners:
        if owners[safe] == host:
            _fail("vllm_file_sd: host %s is given twice (one vllm_monitoring_exporter_report per host)", host)
        _fail("vllm_file_sd: hosts %s and %s map to the same file_sd files (vllm-%s.json; characters other than letters, "
              "digits, '.', '_' and '-' become '_'): one would overwrite the other's targets; rename one of them in "
              "the inventory", _shown(owners[safe]), _shown(host), safe)
    owners[safe] = host


def _checked_groups(host, groups):
    """A host's vllm file_sd groups, each {targets: [str], labels: {str: str}} as Prometheus reads them."""
    if not isinstance(groups, list):
        _fail("vllm_file_sd: host %s: vllm must be a list of file_sd groups, got %s", host, _shown(groups))
    for group in groups:
        targets = group.get("targets") if isinstance(group, dict) else None
        labels = group.get("labels", {}) if isinstance(group, dict) else None
        targets_ok = isinstance(targets, list) and all(isinstance(target, str) for target in targets)
        labels_ok = isinstance(labels, dict) and all(isinstance(value, str) for value in labels.values())
        if not (targets_ok and labels_ok):
            _fail("vllm_file_sd: host %s: a file_sd group must be {targets: [strings], labels: {name: string}}, got %s",
                  host, _shown(group))
    return groups


def _exporter_target(host, report, key):
    """The node or dcgm exporter's ``address:port`` of a report, [] when it has none."""
    target = _one_line(report.get(key) or "", "vllm_file_sd: host %s: %s (the exporter's address:port)" % (host, key))
    return [{"targets": [target], "labels": {"host": host}}] if target else []


def vllm_file_sd(reports):
    """[{host, job, file, groups}] for the monitoring host, from every vLLM host's vllm_monitoring_exporter_report."""
    if not isinstance(reports, list):
        _fail("vllm_file_sd takes a list of vllm_monitoring_exporter_report dicts, got %s", _shown(reports))
    files, owners = [], {}
    for report in reports:
        host = report.get("host") if isinstance(report, dict) else None
        if not host:
            _fail("a scrape host without its inventory name (key host): %s", _shown(report))
        _one_line(host, "vllm_file_sd: a host's inventory name (host)")
        _claim(owners, host)
        safe = _file_sd_safe(host)
        for job, groups in (("vllm", _checked_groups(host, report.get("vllm") or [])),
                            ("node", _exporter_target(host, report, "node")),
                            ("dcgm", _exporter_target(host, report, "dcgm"))):
            files.append({"host": host, "job": job, "file": "%s-%s.json" % (job, safe), "groups": groups})
    return files


# ---- the routers' file_sd files -------------------------------------------------------------------------------

ROUTER_JOBS = (("router", "metrics_url"), ("router_backends", "backends_metrics_url"))


def _router_target(router, key, url):
    """(address:port, path) of one of a router's metrics URLs; a URL Prometheus cannot scrape fails naming it."""
    url = _one_line(url, "vllm_router_file_sd: router %s: %s" % (router, key))
    found = re.match(r"^http://([^/?#]+)(/[^?#]*)$", url or "")
    if not found or not full_match(ADDRESS, found.group(1).rsplit(":", 1)[0]) or not re.search(r":[0-9]+$", found.group(1)):
        _fail("vllm_router_file_sd: router %s: %s must be an http://address:port/path URL (vllm_router_report's), got %s",
              router, key, _shown(url))
    return found.group(1), found.group(2)


def vllm_router_file_sd(routers):
    """[{router, job, file, groups}]: for each router (vllm_monitoring_router_targets), HAProxy's exporter (job router)
    and the router's model-per-backend info series (job router_backends), each a target labelled router=<name> whose
    path (__metrics_path__) is the router's own."""
    if not isinstance(routers, list):
        _fail("vllm_monitoring_router_targets must be a list of {router, metrics_url, backends_metrics_url}, got %s",
              _shown(routers))
    files, owners = [], {}
    for index, entry in enumerate(routers):
        router = entry.get("router") if isinstance(entry, dict) else None
        if not isinstance(router, str) or not router:
            _fail("vllm_monitoring_router_targets[%d] has no router name (key router): %s", index, _shown(entry))
        _one_line(router, "vllm_monitoring_router_targets[%d].router" % index)
        safe = _file_sd_safe(router)
        if safe in owners:
            _fail("vllm_monitoring_router_targets: routers %s and %s map to the same file_sd file (router-%s.json)",
                  _shown(owners[safe]), _shown(router), safe)
        owners[safe] = router
        for job, key in ROUTER_JOBS:
            target, path = _router_target(router, key, entry.get(key))
            files.append({"router": router, "job": job, "file": "%s-%s.json" % (job, safe),
                          "groups": [{"targets": [target], "labels": {"router": router, "__metrics_path__": path}}]})
    return files


# ---- the throughput baselines' textfile ------------------------------------------------------------------------

def _checked_baseline(entry, index):
    """{unit, output_tokens_per_second, concurrency} of one baseline; a bad one fails naming its unit and field.

    Figures are numbers, never strings ("nan" parses as a float): a NaN, infinite, zero or negative baseline would
    make VllmThroughputCollapsed compare with nothing and never fire."""
    if not isinstance(entry, dict):
        _fail("vllm_monitoring_baselines[%d] must be a dict {unit, output_tokens_per_second, concurrency}, got %s",
              index, _shown(entry))
    unit = entry.get("unit")
    if not full_match(UNIT_NAME, unit):
        _fail("vllm_monitoring_baselines[%d].unit must be a systemd service unit name (letters, digits, ':', '_', '.', "
              "'@' and '-', ending in .service), got %s", index, _shown(unit))
    tokens = finite_number(entry.get("output_tokens_per_second"), "vllm_monitoring_baselines: %s: output_tokens_per_second"
                           % unit, AnsibleFilterError, above=0)
    concurrency = entry.get("concurrency")
    if not is_int(concurrency) or concurrency < 1:
        _fail("vllm_monitoring_baselines: %s: concurrency must be a whole number of 1 or more, got %s", unit,
              _shown(concurrency))
    return {"unit": unit, "output_tokens_per_second": tokens, "concurrency": concurrency}


def _check_reads_back(text, samples):
    """The textfile read by the strict parser holds exactly ``samples``: a rendering that would add, lose or change
    a sample never replaces the file node exporter serves (its hosts have no promtool to check it with)."""
    try:
        read = parse_exposition(text)
    except ExpositionError as exc:
        _fail("vllm_baseline_textfile: the rendered textfile is not Prometheus text: %s", exc)
    if read != samples:
        _fail("vllm_baseline_textfile: the rendered textfile would not read back as written: %s", _shown(read))


def vllm_baseline_textfile(baselines):
    """The textfile of ``vllm_monitoring_baselines`` (HELP, TYPE and one sample per unit and metric)."""
    if not isinstance(baselines, list):
        _fail("vllm_monitoring_baselines must be a list of {unit, output_tokens_per_second, concurrency}, got %s",
              _shown(baselines))
    checked = [_checked_baseline(entry, index) for index, entry in enumerate(baselines)]
    units = [entry["unit"] for entry in checked]
    for unit in sorted(set(unit for unit in units if units.count(unit) > 1)):
        _fail("vllm_monitoring_baselines: %s is given twice (one baseline per unit)", unit)
    lines, samples = [], []
    for metric, field, help_text in BASELINE_METRICS:
        lines.extend(["# HELP %s %s" % (metric, help_text), "# TYPE %s gauge" % metric])
        for entry in sorted(checked, key=lambda item: item["unit"]):
            lines.append(format_sample(metric, {"unit": entry["unit"]}, entry[field]))
            samples.append((metric, {"unit": entry["unit"]}, float(entry[field])))
    text = "\n".join(lines) + "\n"
    _check_reads_back(text, samples)
    return text


class FilterModule(object):
    def filters(self):
        return {"vllm_scrape_targets": vllm_scrape_targets, "vllm_file_sd": vllm_file_sd,
                "vllm_router_file_sd": vllm_router_file_sd, "vllm_baseline_textfile": vllm_baseline_textfile}
