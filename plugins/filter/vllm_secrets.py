# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that keep secrets out of vLLM units, facts and records (logic in module_utils/serving/vllm_units).

Their documentation is in the .yml file of each filter next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import (
    client_key,
    listen_host,
    redact_argv,
    redact_text,
    secret_input_problems,
)


def vllm_redact_argv(argv):
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("vllm_redact_argv takes a list of arguments, got %s" % type(argv).__name__)
    return redact_argv(list(argv))


def vllm_redact_text(text, secrets=None):
    return redact_text(text, secrets or ())


def vllm_secret_problems(inputs):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("vllm_secret_problems takes a dict of the role's inputs, got %s" % type(inputs).__name__)
    return secret_input_problems(inputs)


def vllm_listen_host(host, api_key_set=False, allow_unauthenticated=False):
    address, problem = listen_host(host, bool(api_key_set), bool(allow_unauthenticated))
    return {"host": address, "problem": problem}


def vllm_client_key(host_vars):
    if not hasattr(host_vars, "get"):
        raise AnsibleFilterError("vllm_client_key takes a host's variables (hostvars[host], or a dict of "
                                 "vllm_service_api_key and vllm_service_secret_env), got %s" % type(host_vars).__name__)
    try:
        return client_key(host_vars)
    except ValueError as exc:
        raise AnsibleFilterError("vllm_client_key: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "vllm_redact_argv": vllm_redact_argv,
            "vllm_redact_text": vllm_redact_text,
            "vllm_secret_problems": vllm_secret_problems,
            "vllm_listen_host": vllm_listen_host,
            "vllm_client_key": vllm_client_key,
        }
