# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The router's layout: one HAProxy backend per served model, and the server name of an entry on a host.

Their documentation is in vllm_router_layout.yml and vllm_router_server_name.yml next to this file; the logic is in module_utils/fleet/vllm_router_layout.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router_layout import (
    LayoutError,
    router_layout,
    router_server_name,
)


def vllm_router_layout(backends, default_model):
    """The layout; a backend list the router cannot route fails the task naming the entry and field."""
    try:
        return router_layout(backends, default_model)
    except LayoutError as exc:
        raise AnsibleFilterError("vllm_router_layout: %s" % exc)


def vllm_router_server_name(host, key, host_entries=None):
    """The router's server name of catalogue entry ``key`` on inventory host ``host``."""
    if host_entries is not None and not isinstance(host_entries, (list, tuple)):
        raise AnsibleFilterError("vllm_router_server_name: host_entries must be a list of catalogue keys, got %r"
                                 % (host_entries,))
    return router_server_name(host, key, list(host_entries or []))


class FilterModule(object):
    def filters(self):
        return {"vllm_router_layout": vllm_router_layout, "vllm_router_server_name": vllm_router_server_name}
