# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PlanRequest: the planner's question as one value (issue 33: plan_model took 20 parameters and the module's raw
options went four calls deep)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import dataclasses
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_plan
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.plan_request import MODULE_OPTIONS, PlanRequest

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "model_configs")


def module_options(**given):
    params = dict((name, None) for name in MODULE_OPTIONS)
    params.update(vllm_version="0.24.0", enforce_eager=False, model="ignored", plan=None)
    params.update(given)
    return params


def test_the_module_options_become_the_fields_of_the_same_name():
    params = module_options(max_model_len=8192, objective="latency", workload={"input_len": 512}, nodes=2,
                            enforce_eager=None)
    request = PlanRequest.from_module_options(params, 8, 80.0, "NVIDIA H100", "nvlink")
    assert (request.gpus, request.gpu_memory_gib, request.vllm_version) == (8, 80.0, "0.24.0")
    assert (request.gpu_name, request.link, request.measured_allreduce_us) == ("NVIDIA H100", "nvlink", None)
    assert (request.max_model_len, request.objective, request.nodes) == (8192, "latency", 2)
    assert request.workload == {"input_len": 512} and request.enforce_eager is False
    # Every option of the list is a field: a new module option cannot be dropped on the way to the planner.
    fields = set(field.name for field in dataclasses.fields(PlanRequest))
    assert set(MODULE_OPTIONS) <= fields


def test_a_request_is_frozen_and_unknown_fields_are_refused():
    request = PlanRequest(8, None, "0.24.0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.gpus = 4
    with pytest.raises(TypeError):
        PlanRequest(8, None, "0.24.0", max_model_length=8192)
    model = load_model_config(os.path.join(FIXTURES, "Qwen--Qwen3-30B-A3B.json"))
    with pytest.raises(TypeError):
        vllm_plan.plan_model(model, 8, None, "0.24.0", max_model_length=8192)


def test_plan_model_and_make_plans_answer_the_same_question_alike():
    model = load_model_config(os.path.join(FIXTURES, "Qwen--Qwen3-30B-A3B.json"))
    options = dict(max_model_len=8192, gpu_name="NVIDIA H100", objective="latency")
    by_arguments = vllm_plan.plan_model(model, 4, None, "0.24.0", **options)
    by_request = vllm_plan.make_plans(model, PlanRequest(4, None, "0.24.0", **options))
    assert by_arguments["ranking"] == by_request["ranking"] and by_arguments["ranking"]
    assert by_arguments["inputs"] == by_request["inputs"]
    # A bad value is still named by the planner's checks, whichever way it came.
    with pytest.raises(vllm_plan.PlanError, match="max_model_len"):
        vllm_plan.make_plans(model, PlanRequest(4, None, "0.24.0", max_model_len=-1))
