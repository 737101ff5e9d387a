# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gauntlet.vllm secret filters the vllm_service role (and vllm_deploy, vllm_gauntlet) use."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_secrets import FilterModule

FILTERS = FilterModule().filters()


def test_the_filters_are_registered():
    assert sorted(FILTERS) == ["vllm_listen_host", "vllm_redact_argv", "vllm_redact_text", "vllm_secret_problems"]


def test_redact_argv_filter():
    assert FILTERS["vllm_redact_argv"](["vllm", "serve", "m", "--api-key", "k-123456789"]) == [
        "vllm", "serve", "m", "--api-key", "********"]
    with pytest.raises(AnsibleFilterError, match="list of arguments"):
        FILTERS["vllm_redact_argv"]("vllm serve m")


def test_redact_text_filter_takes_literal_secrets():
    assert FILTERS["vllm_redact_text"](["x my-secret-value y"], secrets=["my-secret-value"]) == ["x ******** y"]
    assert FILTERS["vllm_redact_text"]("--api-key abc") == "--api-key ********"


def test_secret_problems_filter():
    assert FILTERS["vllm_secret_problems"]({"extra_args": ["--api-key", "k"]})[0].startswith(
        "vllm_service_extra_args: --api-key")
    with pytest.raises(AnsibleFilterError, match="dict"):
        FILTERS["vllm_secret_problems"](["--api-key"])


def test_listen_host_filter():
    assert FILTERS["vllm_listen_host"]("auto") == {"host": "127.0.0.1", "problem": None}
    assert FILTERS["vllm_listen_host"]("auto", api_key_set=True) == {"host": "0.0.0.0", "problem": None}
    refused = FILTERS["vllm_listen_host"]("0.0.0.0")
    assert refused["host"] == "0.0.0.0" and "vllm_service_allow_unauthenticated" in refused["problem"]
