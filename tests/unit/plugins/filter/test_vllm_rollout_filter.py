# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_gate_verdict filter: the gate's logic reached from Jinja, bad input as a filter error."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_rollout import FilterModule, vllm_gate_verdict

LEVEL = {"concurrency": 4, "output_tokens_per_s": 100.0, "requests": 16, "failed": 0}


def test_the_filter_is_registered_and_judges():
    assert FilterModule().filters()["vllm_gate_verdict"] is vllm_gate_verdict
    verdict = vllm_gate_verdict({"levels": [LEVEL]}, baseline={"levels": [dict(LEVEL, output_tokens_per_s=200.0)]},
                                concurrency="4", max_regression="0.25")
    assert verdict["passed"] is False and verdict["ratio"] == 0.5


def test_an_empty_baseline_is_no_baseline():
    assert vllm_gate_verdict({"levels": [LEVEL]}, baseline={}, concurrency=4)["baseline_output_tokens_per_s"] is None


@pytest.mark.parametrize("kwargs, message", [
    ({}, "needs concurrency"),
    ({"concurrency": 8}, "no level at concurrency 8"),
    ({"concurrency": 4, "max_regression": "lots"}, "could not convert|lots"),
])
def test_bad_input_is_a_filter_error(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        vllm_gate_verdict({"levels": [LEVEL]}, **kwargs)
