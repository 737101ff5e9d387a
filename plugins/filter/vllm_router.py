# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The router's layout: one HAProxy backend per served model.

Its documentation is in vllm_router_layout.yml next to this file; the logic is in module_utils/fleet/vllm_router_layout.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router_layout import LayoutError, router_layout


def vllm_router_layout(backends, default_model):
    """The layout; a backend list the router cannot route fails the task naming the entry and field."""
    try:
        return router_layout(backends, default_model)
    except LayoutError as exc:
        raise AnsibleFilterError("vllm_router_layout: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"vllm_router_layout": vllm_router_layout}
