# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How the router (role ``vllm_router``) lays the fleet out in HAProxy: one backend per served model.

Each server lists the models it serves (its served model name and, later, its adapters). A request goes only to
the servers of its body's ``model``: the frontend looks the name up in a map file (model -> backend) and picks that
backend, whose health check is a completion of that very model, so a server that serves another model is never
marked down for it. The default model (``vllm_router_model``) keeps the backend name ``vllm`` that drains, rollouts
and reports have always used; every other model gets ``vllm_model_<n>``, numbered in sorted order of the names.
A request without a ``model`` goes to the default model's servers, as vLLM answers it with its first model.

``/v1/models`` is answered by the router itself from every model it routes (the OpenAI list shape vLLM answers
with), so the answer does not depend on which server a balancer would have picked.

No Ansible imports: the filter ``gauntlet.vllm.vllm_router_layout`` and the tests call ``router_layout``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.prometheus_text import format_sample
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match, short_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import SERVED_NAME_PATTERN

DEFAULT_BACKEND = "vllm"
MODEL_BACKEND_PREFIX = "vllm_model_"
# A model name as the router writes it: into a map file (whitespace separates key and value, '#' starts a comment),
# into a health check's body between single quotes, and into HAProxy log-format strings ('%' and '"' would be read).
# Hub ids (org/name), served names and adapter names fit: the one pattern vllm_args checks adapter names with.
MODEL_PATTERN = SERVED_NAME_PATTERN
MAX_MODEL_CHARS = 256


class LayoutError(Exception):
    """A backend list the router cannot route: the message names the backend and the field."""


def check_model_name(value, where):
    """``value`` when it is a model name the router can route; otherwise a LayoutError naming ``where``."""
    if not isinstance(value, str) or len(value) > MAX_MODEL_CHARS or not full_match(MODEL_PATTERN, value):
        raise LayoutError("%s must be a model name of letters, digits and . _ : / @ + - (starting with a letter or "
                          "digit, at most %d characters), got %s" % (where, MAX_MODEL_CHARS, short_text(repr(value), 80)))
    return value


def served_models(backend, index, default_model):
    """The models one backend entry serves: its ``models`` list, or the default model when it lists none."""
    models = backend.get("models")
    if models is None:
        return [default_model]
    if not isinstance(models, list) or not models:
        raise LayoutError("vllm_router_backends[%d] (%s).models must be a non-empty list of model names, got %s"
                          % (index, backend.get("name"), short_text(repr(models), 80)))
    seen = []
    for position, model in enumerate(models):
        name = check_model_name(model, "vllm_router_backends[%d] (%s).models[%d]" % (index, backend.get("name"), position))
        if name not in seen:
            seen.append(name)
    return seen


def _model_order(default_model, servers_by_model):
    """The default model first, then the others sorted: backend numbers do not move when hosts are reordered."""
    return [default_model] + sorted(model for model in servers_by_model if model != default_model)


def router_server_name(host, key, host_entries):
    """The router's server for catalogue entry ``key`` on ``host``: the host's own name for its first (or only) entry,
    ``<host>:<key>`` for the others it serves side by side (``vllm_deploy_host_entries``), so that draining one entry's
    server leaves the others' serving. ':' is an HAProxy identifier character no inventory host name holds."""
    if not host_entries or key not in host_entries or host_entries[0] == key:
        return host
    return "%s:%s" % (host, key)


def backend_name(position):
    return DEFAULT_BACKEND if position == 0 else "%s%d" % (MODEL_BACKEND_PREFIX, position)


def models_list(models):
    """``/v1/models`` as vLLM answers it (``ModelList`` of ``ModelCard``), for every routed model. ``created`` is 0:
    the file must not change from one run to the next, and vLLM's own value is only the time of the request."""
    return {"object": "list",
            "data": [{"id": model, "object": "model", "created": 0, "owned_by": "vllm", "root": model, "parent": None,
                      "permission": []} for model in models]}


def router_layout(backends, default_model):
    """{models, backends: [{name, model, servers}], map: [[model, backend]], models_json} for the router's config."""
    check_model_name(default_model, "vllm_router_model")
    if not isinstance(backends, list) or not backends:
        raise LayoutError("vllm_router_backends must be a non-empty list of servers")
    servers_by_model = {}
    names = set()
    base_models = set()
    for index, backend in enumerate(backends):
        if not isinstance(backend, dict):
            raise LayoutError("vllm_router_backends[%d] must be a dict with name, address and port" % index)
        if backend.get("name") in names:
            raise LayoutError("vllm_router_backends[%d]: the server name %r is used twice" % (index, backend.get("name")))
        names.add(backend.get("name"))
        served = served_models(backend, index, default_model)
        # A server's first model is the one it loaded; the others are its LoRA adapters.
        base_models.add(served[0])
        for model in served:
            servers_by_model.setdefault(model, []).append(backend)
    if default_model not in servers_by_model:
        raise LayoutError("vllm_router_model %r is served by none of vllm_router_backends (they serve: %s)"
                          % (default_model, ", ".join(sorted(servers_by_model))))
    models = _model_order(default_model, servers_by_model)
    layout = [{"name": backend_name(position), "model": model, "servers": servers_by_model[model],
               "kind": "model" if model in base_models else "adapter"}
              for position, model in enumerate(models)]
    return {"models": models, "backends": layout, "map": [[entry["model"], entry["name"]] for entry in layout],
            "models_json": json.dumps(models_list(models), sort_keys=True), "metrics": backends_metrics(layout)}


BACKEND_INFO_METRIC = "gauntlet_router_backend_info"


def backends_metrics(layout):
    """Which model (or LoRA adapter) each HAProxy backend serves, in Prometheus's text format: one
    ``gauntlet_router_backend_info{proxy, model, kind}`` series of value 1 per backend. HAProxy's own exporter labels
    its series by backend (``proxy``) only; the dashboards join this info series on ``proxy`` to show a model's, and
    an adapter's, requests, errors and latency by name. The router serves the file on its stats port."""
    lines = ["# HELP %s The model or LoRA adapter (kind) each HAProxy backend of the router routes to." % BACKEND_INFO_METRIC,
             "# TYPE %s gauge" % BACKEND_INFO_METRIC]
    for entry in layout:
        lines.append(format_sample(BACKEND_INFO_METRIC, {"proxy": entry["name"], "model": entry["model"],
                                                         "kind": entry["kind"]}, 1))
    return "\n".join(lines) + "\n"
