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
    assert sorted(FILTERS) == ["vllm_client_key", "vllm_listen_host", "vllm_redact_argv", "vllm_redact_text",
                               "vllm_secret_problems"]


@pytest.mark.parametrize("host_vars, key", [
    ({}, ""),
    ({"vllm_service_api_key": "k-direct"}, "k-direct"),
    # The documented way: the key only in the environment file's variables.
    ({"vllm_service_secret_env": {"VLLM_API_KEY": "k-env"}}, "k-env"),
    ({"vllm_service_secret_environment": {"VLLM_API_KEY": "k-old"}}, "k-old"),
    # Both given: the environment file's value is what the server checks (its combine puts secret_env last).
    ({"vllm_service_api_key": "k-direct", "vllm_service_secret_env": {"VLLM_API_KEY": "k-env"}}, "k-env"),
    ({"vllm_service_secret_environment": {"VLLM_API_KEY": "k-old"}, "vllm_service_secret_env": {"VLLM_API_KEY": "k-env"}},
     "k-env"),
    ({"vllm_service_api_key": "k-direct", "vllm_service_secret_env": {"HF_TOKEN": "hf_x"}}, "k-direct"),
    ({"vllm_service_api_key": None, "vllm_service_secret_env": None}, ""),
])
def test_client_key_is_the_environment_files_key(host_vars, key):
    assert FILTERS["vllm_client_key"](host_vars) == key


def test_client_key_refuses_what_is_no_host_vars():
    with pytest.raises(AnsibleFilterError, match="host's variables"):
        FILTERS["vllm_client_key"]("k-direct")
    with pytest.raises(AnsibleFilterError, match="vllm_service_secret_env must be a dict"):
        FILTERS["vllm_client_key"]({"vllm_service_secret_env": ["VLLM_API_KEY=k"]})


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
        "vllm_service_serving.extra_args: --api-key")
    with pytest.raises(AnsibleFilterError, match="dict"):
        FILTERS["vllm_secret_problems"](["--api-key"])


def test_listen_host_filter():
    assert FILTERS["vllm_listen_host"]("auto") == {"host": "127.0.0.1", "problem": None}
    assert FILTERS["vllm_listen_host"]("auto", api_key_set=True) == {"host": "0.0.0.0", "problem": None}
    refused = FILTERS["vllm_listen_host"]("0.0.0.0")
    assert refused["host"] == "0.0.0.0" and "vllm_service_allow_unauthenticated" in refused["problem"]
