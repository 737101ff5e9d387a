# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every PromQL expression of the collection's Grafana dashboards, ready to send to Prometheus.

Reads the dashboard JSON files (default: roles/vllm_monitoring/files/dashboards/*.json), substitutes
Grafana's variables and prints a JSON list on stdout, one entry per expression:
``{"dashboard": uid, "panel": title, "expr": PromQL, "needs_gpu": bool, "needs_router": bool}``. ``needs_gpu`` is
true when the expression reads only GPU series (``gauntlet_gpu_*`` from the NVML textfile collector, ``DCGM_*`` from
NVIDIA's DCGM exporter): a host without a GPU has none of them. ``needs_router`` is true when it reads only a
router's series (``haproxy_*``, ``gauntlet_router_*``): a monitoring host without a router has none. The query of each template variable
(``label_values(<query>, label)``) is listed too, as panel ``variable <name>``.

Substitutions: ``$datasource`` only ever names the panel's data source and is dropped; ``$host`` and
``$unit`` inside ``=~`` / ``!~`` matchers become the given values joined by ``|`` or ``.+`` when none is
given (inside ``=`` / ``!=`` a value is required); ``$__rate_interval`` → 1m, ``$__interval`` → 15s,
``$__range`` → 5m (each can be changed). An unknown variable is an error naming the dashboard and panel.

Standard library only: the molecule scenario runs it on the controller against the live Prometheus.
Usage: dashboard_queries.py [--host H] [--unit U] [--rate-interval 1m] [FILE.json ...]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import glob
import json
import os
import re
import sys

DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "vllm_monitoring",
                           "files", "dashboards")
GPU_PREFIXES = ("gauntlet_gpu_", "DCGM_")
ROUTER_PREFIXES = ("haproxy_", "gauntlet_router_")
LABEL_VARIABLES = ("host", "unit")

# $name, ${name}, ${name:format}, [[name]]
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.S)

# PromQL words that are not metric names.
_KEYWORDS = frozenset(("and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                       "group_right", "inf", "nan", "Inf", "NaN", "atan2"))
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")


class DashboardError(ValueError):
    """A dashboard this script cannot read: names the file/dashboard, panel and what is wrong."""


def _variable_name(match):
    return match.group(1) or match.group(2) or match.group(3)


def _regex_value(name, values):
    return "|".join(values[name]) if values.get(name) else ".+"


def _substitute_matchers(expr, values, where):
    """$host / $unit inside label matchers: a regex for =~ / !~, the one given value for = / !=."""
    def matcher(match):
        label, op, text = match.groups()

        def variable(found):
            name = _variable_name(found)
            if name not in LABEL_VARIABLES:
                return found.group(0)
            if op in ("=~", "!~"):
                return _regex_value(name, values)
            if len(values.get(name) or []) != 1:
                raise DashboardError("%s: $%s is used with %s in %r: give exactly one --%s" % (where, name, op, expr, name))
            return values[name][0]
        return '%s%s"%s"' % (label, op, _VARIABLE.sub(variable, text))
    return _MATCHER.sub(matcher, expr)


def substitute(expr, where="", host=None, unit=None, rate_interval="1m", interval="15s", range_="5m"):
    """The expression with Grafana's variables replaced (see the module's docstring)."""
    values = {"host": list(host or []), "unit": list(unit or [])}
    fixed = {"__rate_interval": rate_interval, "__interval": interval, "__range": range_}
    expr = _substitute_matchers(expr, values, where)

    def other(found):
        name = _variable_name(found)
        if name in fixed:
            return fixed[name]
        raise DashboardError("%s: variable $%s in %r cannot be substituted (only in a label matcher: $host, $unit; "
                             "anywhere: $__rate_interval, $__interval, $__range)" % (where, name, expr))
    return _VARIABLE.sub(other, expr)


def _strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)


def metric_names(expr):
    """The metric names an (already substituted) PromQL expression reads, sorted."""
    text = _strip_strings(expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS:
            continue
        names.add(name)
    return sorted(names)


def _reads_only(expr, prefixes):
    names = metric_names(expr)
    return bool(names) and all(name.startswith(prefixes) for name in names)


def needs_gpu(expr):
    """True when every series the expression reads comes from a GPU exporter."""
    return _reads_only(expr, GPU_PREFIXES)


def needs_router(expr):
    """True when every series the expression reads comes from a router (HAProxy's exporter and the router's info
    series): a fleet without a router has none of them."""
    return _reads_only(expr, ROUTER_PREFIXES)


def iter_panels(panels):
    """Every panel, rows' nested panels included."""
    for panel in panels or []:
        yield panel
        yield from iter_panels(panel.get("panels"))


def _variable_query(variable):
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    query = query or variable.get("definition") or ""
    match = _LABEL_VALUES.match(query)
    return match.group(1) if match else None


def _entries(uid, items, options):
    entries = []
    for title, raw in items:
        where = "dashboard %s, panel %r" % (uid, title)
        expr = substitute(raw, where, **options)
        entries.append({"dashboard": uid, "panel": title, "expr": expr, "needs_gpu": needs_gpu(expr),
                        "needs_router": needs_router(expr)})
    return entries


def dashboard_expressions(dashboard):
    """(panel title, raw expression) of every target and query variable of a dashboard."""
    items = []
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = _variable_query(variable)
            if query:
                items.append(("variable %s" % variable.get("name"), query))
    for panel in iter_panels(dashboard.get("panels")):
        for target in panel.get("targets") or []:
            if target.get("expr"):
                items.append((panel.get("title", ""), target["expr"]))
    return items


def load_dashboard(path):
    try:
        with open(path) as handle:
            dashboard = json.load(handle)
    except (OSError, ValueError) as exc:
        raise DashboardError("%s: not a readable dashboard JSON file: %s" % (path, exc))
    if not isinstance(dashboard, dict) or not dashboard.get("uid"):
        raise DashboardError("%s: a dashboard needs a uid" % path)
    return dashboard


def dashboard_queries(paths=None, host=None, unit=None, rate_interval="1m", interval="15s", range_="5m"):
    """The list this script prints, for the given dashboard files (default: the role's dashboards)."""
    paths = paths or sorted(glob.glob(os.path.join(DEFAULT_DIR, "*.json")))
    options = {"host": host, "unit": unit, "rate_interval": rate_interval, "interval": interval, "range_": range_}
    entries = []
    for path in paths:
        dashboard = load_dashboard(path)
        entries.extend(_entries(dashboard["uid"], dashboard_expressions(dashboard), options))
    return entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("files", nargs="*", help="dashboard JSON files (default: the role's dashboards)")
    parser.add_argument("--host", action="append", help="value of $host (repeat for several)")
    parser.add_argument("--unit", action="append", help="value of $unit (repeat for several)")
    parser.add_argument("--rate-interval", default="1m", help="value of $__rate_interval (default 1m)")
    parser.add_argument("--interval", default="15s", help="value of $__interval (default 15s)")
    parser.add_argument("--range", dest="range_", default="5m", help="value of $__range (default 5m)")
    args = parser.parse_args(argv)
    try:
        entries = dashboard_queries(args.files, args.host, args.unit, args.rate_interval, args.interval, args.range_)
    except DashboardError as exc:
        sys.stderr.write("dashboard_queries: %s\n" % exc)
        return 2
    json.dump(entries, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
