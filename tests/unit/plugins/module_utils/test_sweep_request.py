# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SweepRequest is the vllm_bench module's options as one value: the same names and defaults as the module's
argument spec, frozen, refusing what the module would not take, and never printing the API key."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import dataclasses

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.sweep_request import SweepRequest
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_bench


def test_the_fields_are_the_modules_options_with_their_defaults():
    fields = dict((field.name, field) for field in dataclasses.fields(SweepRequest))
    assert set(fields) == set(vllm_bench.ARGUMENT_SPEC)
    request = SweepRequest(model="tiny")
    for name, spec in vllm_bench.ARGUMENT_SPEC.items():
        if name != "model":
            assert getattr(request, name) == spec.get("default"), name


def test_absent_options_take_their_defaults_and_a_dropped_option_is_refused():
    request = SweepRequest.from_module_params({"model": "tiny", "concurrency": [1, 4]})
    assert request.concurrency == [1, 4] and request.input_len == 512 and request.api_key is None
    with pytest.raises(ValueError, match="unknown vllm_bench options: concurency"):
        SweepRequest.from_module_params({"model": "tiny", "concurency": [1]})
    with pytest.raises(ValueError, match="model: required"):
        SweepRequest.from_module_params({"model": ""})


def test_a_request_is_frozen_and_each_has_its_own_lists():
    first, second = SweepRequest(model="a"), SweepRequest(model="b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.seed = 1
    first.concurrency.append(2048)
    assert second.concurrency == [1, 8, 32, 128, 256, 1024]


def test_the_api_key_is_never_printed():
    assert "s3cret" not in repr(SweepRequest(model="tiny", api_key="s3cret"))
