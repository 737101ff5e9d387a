# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What ``gauntlet.vllm.vllm_monitoring_info`` reports about each vLLM unit of a host.

No Ansible imports: the module hands in a ``run(argv) -> (rc, stdout, stderr)`` callable for
systemctl and the clock; everything else is here and testable.

Per unit: its state, the figures a health gate reads from its ``/metrics`` (KV-cache usage,
running and waiting requests, preemption, token and request counters) and its watchdog's state
file (``<state_dir>/watchdog/<unit>.json``, written by the role ``vllm_service``). What cannot
be read is ``None`` with an ``*_error`` saying why; a number is never made up.

``io/prometheus_text.parse_exposition`` reads the Prometheus text format strictly: a body that is not
exposition text (an HTML error page, another program on the port) is an error naming the line, not a
silent zero.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import ssl
import time

from urllib.error import HTTPError, URLError
from urllib.request import HTTPSHandler, ProxyHandler, build_opener

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.prometheus_text import ExpositionError, parse_exposition
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    SafeIOError,
    is_finite_number,
    is_int,
    parse_json,
    read_text,
    short_text,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import find_units, flag_value

DEFAULT_STATE_DIR = "/var/lib/gauntlet-vllm"
# A /metrics larger than this is not a vLLM server's (0.32 writes about 60 KiB).
MAX_METRICS_BYTES = 16 * 1024 * 1024
HOUR_SECONDS = 3600
# A watchdog state holds a few counters and the restarts of the last hour (about 1 KiB); far more is not one.
MAX_STATE_BYTES = 1024 * 1024

# Field -> (metric names tried in order, how label sets combine). kv_cache_usage_perc is vLLM
# >= 0.10's name; gpu_cache_usage_perc the older one. Counters carry "_total" in 0.32's text.
METRICS = (
    ("kv_cache_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "max"),
    ("requests_running", ("vllm:num_requests_running",), "sum"),
    ("requests_waiting", ("vllm:num_requests_waiting",), "sum"),
    ("preemptions_total", ("vllm:num_preemptions_total",), "sum"),
    ("generation_tokens_total", ("vllm:generation_tokens_total",), "sum"),
    ("prompt_tokens_total", ("vllm:prompt_tokens_total",), "sum"),
    ("request_success_total", ("vllm:request_success_total",), "sum"),
)
# A /metrics without this is not a vLLM server's.
REQUIRED_METRIC = "vllm:num_requests_running"

WATCHDOG_FIELDS = ("restarts_total", "restarts_last_hour", "gave_up", "consecutive_failures", "last_probe",
                   "last_restart")


def _number(value):
    """A float that holds a whole number as an int (counts read better so); None stays None."""
    if value is None:
        return None
    return int(value) if value.is_integer() else value


def combine(samples, names, how):
    """The value of the first of ``names`` present in ``samples``, its label sets combined.

    ``how`` is ``sum`` (requests, counters: one set per engine and model) or ``max`` (a ratio
    per engine: the fullest cache is the one that matters). NaN and infinite samples are left
    out; None when no finite sample of any name is present.
    """
    for name in names:
        values = [value for sample_name, _labels, value in samples if sample_name == name and math.isfinite(value)]
        if values:
            return _number(sum(values) if how == "sum" else max(values))
    return None


def vllm_figures(text):
    """The METRICS fields from a vLLM /metrics body; raises ExpositionError for a body that is not one."""
    samples = parse_exposition(text)
    if not any(name == REQUIRED_METRIC for name, _labels, _value in samples):
        raise ExpositionError("no %s sample: not a vLLM server's /metrics" % REQUIRED_METRIC)
    return dict((field, combine(samples, names, how)) for field, names, how in METRICS)


# ---- where a unit's /metrics is ---------------------------------------------------------------

_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]", "*")


def metrics_url(argv, port):
    """The URL of a unit's /metrics: its ``--host`` when that is one address, else 127.0.0.1.

    HTTPS when the server has ``--ssl-certfile`` (the certificate is then not checked: the
    address read is the server's own, not the name the certificate was issued for).
    """
    host = (flag_value(argv, "--host") or "").strip()
    if host in _ANY_ADDRESS:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    scheme = "https" if flag_value(argv, "--ssl-certfile") else "http"
    return "%s://%s:%d/metrics" % (scheme, host, port)


def fetch_text(url, timeout):
    """GET ``url`` (no proxy) -> its body as text; raises ValueError naming the URL and the problem."""
    handlers = [ProxyHandler({})]
    if url.startswith("https:"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        handlers.append(HTTPSHandler(context=context))
    try:
        response = build_opener(*handlers).open(url, timeout=timeout)
        try:
            body = response.read(MAX_METRICS_BYTES + 1)
        finally:
            response.close()
    except HTTPError as exc:
        raise ValueError("%s could not be read: HTTP %s %s" % (url, exc.code, exc.reason))
    except URLError as exc:
        raise ValueError("%s could not be read: %s" % (url, getattr(exc, "reason", exc)))
    except Exception as exc:  # timeouts, resets, bad status lines
        raise ValueError("%s could not be read: %s (%s)" % (url, exc, type(exc).__name__))
    if len(body) > MAX_METRICS_BYTES:
        raise ValueError("%s answered more than %d bytes: not a vLLM server's /metrics" % (url, MAX_METRICS_BYTES))
    return body.decode("utf-8", "replace")


def read_metrics(url, timeout, fetch=fetch_text):
    """``(figures, None)`` or ``(None, error)`` for one /metrics URL; never raises for a bad server."""
    try:
        text = fetch(url, timeout)
    except ValueError as exc:
        return None, str(exc)
    try:
        return vllm_figures(text), None
    except ExpositionError as exc:
        return None, "%s did not answer vLLM metrics: %s" % (url, exc)


# ---- the watchdog's state file ---------------------------------------------------------------

def watchdog_state_path(state_dir, unit):
    return os.path.join(state_dir, "watchdog", "%s.json" % unit)


def state_shape_problems(state):
    """What is wrong with a parsed watchdog state (design18's shape), as field-naming messages."""
    if not isinstance(state, dict):
        return ["is not a JSON object"]
    problems = []
    for field in ("consecutive_failures", "restarts_total"):
        if not is_int(state.get(field)) or state.get(field) < 0:
            problems.append("%s must be a whole number of 0 or more (got %r)" % (field, state.get(field)))
    restarts = state.get("restarts")
    if not isinstance(restarts, list) or not all(is_finite_number(item) for item in restarts):
        problems.append("restarts must be a list of epoch seconds (got %r)" % (short_text(restarts, 60),))
    if not isinstance(state.get("gave_up"), bool):
        problems.append("gave_up must be true or false (got %r)" % (state.get("gave_up"),))
    for field in ("last_probe", "last_restart"):
        if state.get(field) is not None and not isinstance(state.get(field), dict):
            problems.append("%s must be an object or null (got %r)" % (field, short_text(state.get(field), 60)))
    return problems


def summarize_state(state, now):
    """The reported watchdog fields of a valid state."""
    return {
        "restarts_total": state["restarts_total"],
        "restarts_last_hour": len([when for when in state["restarts"] if now - HOUR_SECONDS < when <= now]),
        "gave_up": state["gave_up"],
        "consecutive_failures": state["consecutive_failures"],
        "last_probe": state.get("last_probe"),
        "last_restart": state.get("last_restart"),
    }


def read_watchdog(state_dir, unit, now):
    """``(watchdog, error)`` for one unit: ``(None, None)`` when it has no state file (no watchdog yet).

    The file is read through safe_io: a FIFO is refused, never waited on; a file that is too large, not UTF-8 or
    nested past the recursion limit is an error. An unusable file is this unit's ``watchdog_error``, not the
    module's failure: a health gate still gets every other unit's figures, and the summary names the unit.
    """
    path = watchdog_state_path(state_dir, unit)
    if not os.path.lexists(path):
        return None, None
    try:
        state = parse_json(read_text(path, limit=MAX_STATE_BYTES), path)
    except SafeIOError as exc:
        return None, str(exc)
    problems = state_shape_problems(state)
    if problems:
        return None, "%s is not a watchdog state: %s" % (path, "; ".join(problems))
    return summarize_state(state, now), None


# ---- the units ------------------------------------------------------------------------------

def unit_report(unit, argv, options, now, fetch=fetch_text):
    """One unit's entry: state, /metrics figures (or why not) and watchdog (or why not)."""
    url = metrics_url(argv, unit["port"]) if unit["port"] is not None else None
    metrics, metrics_error = None, None
    if unit["active_state"] != "active":
        metrics_error = "the unit is %s, not active: its /metrics was not read" % unit["active_state"]
    elif url is None:
        metrics_error = "the unit's --port is not a number: no /metrics address"
    else:
        metrics, metrics_error = read_metrics(url, options["timeout"], fetch)
    watchdog, watchdog_error = read_watchdog(options["state_dir"], unit["name"], now)
    return {
        "name": unit["name"],
        "active_state": unit["active_state"],
        "port": unit["port"],
        "model": unit["model"],
        "url": url,
        "metrics": metrics,
        "metrics_error": metrics_error,
        "watchdog": watchdog,
        "watchdog_error": watchdog_error,
    }


def summarize(reports):
    """One dict a health gate reads: counts, any unit given up, fullest KV cache, requests waiting."""
    kv = [r["metrics"]["kv_cache_usage"] for r in reports if r["metrics"] and r["metrics"]["kv_cache_usage"] is not None]
    waiting = [r["metrics"]["requests_waiting"] for r in reports
               if r["metrics"] and r["metrics"]["requests_waiting"] is not None]
    gave_up = [r["name"] for r in reports if r["watchdog"] and r["watchdog"]["gave_up"]]
    return {
        "units": len(reports),
        "active": len([r for r in reports if r["active_state"] == "active"]),
        "gave_up": bool(gave_up),
        "gave_up_units": gave_up,
        "max_kv_cache_usage": max(kv) if kv else None,
        "requests_waiting": _number(float(sum(waiting))) if waiting else None,
        "metrics_errors": [r["name"] for r in reports if r["metrics_error"]],
        "watchdog_errors": [r["name"] for r in reports if r["watchdog_error"]],
    }


def monitoring_info(run, options, now=None, fetch=fetch_text):
    """``{"units": [...], "summary": {...}}`` for the host. ``run`` runs systemctl with the given args."""
    now = time.time() if now is None else now
    reports = [unit_report(unit, argv, options, now, fetch) for unit, argv in find_units(run, options.get("units"))]
    return {"units": reports, "summary": summarize(reports)}
