# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's filters: the server name of a catalogue entry on a host (vllm_router_server_name)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_router import FilterModule


FILTERS = FilterModule().filters()
NAME = FILTERS["vllm_router_server_name"]


def test_one_entry_per_host_is_the_hosts_own_server():
    assert NAME("gpu-01", "llama") == "gpu-01"
    assert NAME("gpu-01", "llama", []) == "gpu-01"


def test_entries_side_by_side_after_the_first_are_host_colon_key():
    entries = ["llama", "moe"]
    assert NAME("gpu-01", "llama", entries) == "gpu-01"
    assert NAME("gpu-01", "moe", entries) == "gpu-01:moe"


def test_an_entry_the_host_does_not_keep_side_by_side_is_the_hosts_server():
    # A gauntlet candidate or a one-off deploy replaces what serves: the host's own server.
    assert NAME("gpu-01", "other", ["llama", "moe"]) == "gpu-01"


def test_host_entries_that_are_not_a_list_are_refused_by_name():
    with pytest.raises(AnsibleFilterError, match="host_entries must be a list"):
        NAME("gpu-01", "moe", "llama,moe")
