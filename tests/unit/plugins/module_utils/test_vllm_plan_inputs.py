# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile numbers for the planner: every input is checked, and the error
names the input and the value it got."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_plan
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import (
    MAX_GPUS_PER_HOST,
    MAX_PLANS,
    PlanError,
    check_plan_fields,
    enumerate_plans,
    evaluate_plan_for,
    plan_model,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_rules import parse_version, version_warning

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "model_configs")
LLAMA = load_model_config(os.path.join(FIXTURES, "meta-llama--Meta-Llama-3.1-70B.json"), discover_hf_quant=False)
GOOD = {"gpus": 8, "gpu_memory_gib": 80.0, "vllm_version": "0.32.0", "gpu_memory_utilization": None,
        "max_model_len": 8192, "kv_cache_dtype": None}


def plan_with(**changes):
    args = dict(GOOD, **changes)
    options = {key: value for key, value in args.items() if key not in ("gpus", "gpu_memory_gib", "vllm_version")}
    return plan_model(LLAMA, gpus=args["gpus"], gpu_memory_gib=args["gpu_memory_gib"], vllm_version=args["vllm_version"],
                      **options)


@pytest.mark.parametrize("name, value", [
    ("gpus", 0), ("gpus", -2), ("gpus", True), ("gpus", 2.0), ("gpus", "8"), ("gpus", MAX_GPUS_PER_HOST + 1),
    ("gpu_memory_gib", 0), ("gpu_memory_gib", -1.0), ("gpu_memory_gib", float("nan")), ("gpu_memory_gib", float("inf")),
    ("gpu_memory_gib", True), ("gpu_memory_gib", 150754820096),
    ("gpu_memory_utilization", 0), ("gpu_memory_utilization", 0.0), ("gpu_memory_utilization", -0.5),
    ("gpu_memory_utilization", 1.5), ("gpu_memory_utilization", True), ("gpu_memory_utilization", float("nan")),
    ("max_model_len", 0), ("max_model_len", -1), ("max_model_len", -4096), ("max_model_len", True),
    ("max_model_len", 8192.5),
    ("kv_cache_dtype", "banana"), ("kv_cache_dtype", ""), ("kv_cache_dtype", "FP8"), ("kv_cache_dtype", "int8"),
    ("vllm_version", "banana"), ("vllm_version", ""), ("vllm_version", "0"), ("vllm_version", "0.x.1"),
    ("vllm_version", 28), ("vllm_version", None),
])
def test_a_bad_input_is_refused_naming_the_input_and_its_value(name, value):
    with pytest.raises(PlanError) as err:
        plan_with(**{name: value})
    assert name in str(err.value)
    assert repr(value) in str(err.value)


def test_zero_is_not_replaced_by_the_default():
    # 0 used to mean "the default" for both: it is a value, and a wrong one.
    for name in ("gpu_memory_utilization", "max_model_len"):
        with pytest.raises(PlanError, match=name):
            plan_with(**{name: 0})


def test_omitted_inputs_still_take_their_defaults():
    result = plan_with(gpu_memory_gib=None, max_model_len=None, kv_cache_dtype=None, gpu_memory_utilization=None)
    assert result["inputs"]["gpu_memory_utilization"] == 0.92
    assert result["inputs"]["max_model_len"] == LLAMA["max_position_embeddings"]
    assert result["inputs"]["kv_cache_dtype"] == "auto"
    assert result["inputs"]["gpu_memory_from"].startswith("specification of")


def test_max_model_len_minus_one_no_longer_makes_every_plan_fit():
    with pytest.raises(PlanError) as err:
        plan_with(gpus=1, max_model_len=-1)
    assert "max_model_len" in str(err.value) and "-1" in str(err.value)


@pytest.fixture
def listed_plans(monkeypatch):
    """Every plan the planner lists from here on (vllm_plan._splits counted): work measured without a clock."""
    produced = []
    real_splits = vllm_plan._splits  # pylint: disable=protected-access

    def counting_splits(world, extra):
        for plan in real_splits(world, extra):
            produced.append(plan)
            yield plan
    monkeypatch.setattr(vllm_plan, "_splits", counting_splits)
    return produced


def test_many_gpus_answer_before_any_plan_with_a_clear_message(listed_plans):
    # Refused before a single plan is listed (counted, not timed).
    with pytest.raises(PlanError) as err:
        plan_with(gpus=1000)
    assert "gpus" in str(err.value) and "1000" in str(err.value) and "one host" in str(err.value)
    assert listed_plans == []


def test_the_largest_host_is_planned_within_the_plan_cap(listed_plans):
    plans = enumerate_plans(MAX_GPUS_PER_HOST)
    assert len(plans) <= MAX_PLANS
    del listed_plans[:]
    # A huge GPU count stops at the cap instead of listing every split first: counted, not timed (a timed bound
    # failed once on a loaded machine).
    with pytest.raises(PlanError, match="more than %d plans" % MAX_PLANS):
        enumerate_plans(100000)
    assert len(listed_plans) == MAX_PLANS + 1


@pytest.mark.parametrize("bad, field", [
    ({"tp": -2}, "plan.tp"), ({"tp": 0}, "plan.tp"), ({"pp": -1}, "plan.pp"), ({"dp": -3}, "plan.dp"),
    ({"pp": 0}, "plan.pp"), ({"dp": 0}, "plan.dp"), ({"tp": True}, "plan.tp"), ({"tp": 2.0}, "plan.tp"),
    ({"tp": "2"}, "plan.tp"), ({"tp": 1000}, "plan.tp"), ({"ep": 1}, "plan.ep"), ({"ep": "yes"}, "plan.ep"),
])
def test_a_bad_plan_field_is_refused_naming_the_field(bad, field):
    inputs = plan_with(gpus=4)["inputs"]
    with pytest.raises(PlanError) as err:
        evaluate_plan_for(LLAMA, bad, inputs)
    assert field in str(err.value)
    assert repr(list(bad.values())[0]) in str(err.value)


def test_unknown_plan_keys_are_named():
    with pytest.raises(PlanError) as err:
        check_plan_fields({"tp": 2, "tensor_parallel": 4, "EP": True})
    assert "EP, tensor_parallel" in str(err.value)
    with pytest.raises(PlanError, match="plan must be a dict"):
        check_plan_fields([2, 1, 1])


def test_absent_or_null_plan_fields_are_the_defaults():
    assert check_plan_fields({"tp": 4}) == {"tp": 4, "pp": 1, "dp": 1, "ep": False}
    assert check_plan_fields({"tp": 2, "pp": None, "dp": None, "ep": None}) == {"tp": 2, "pp": 1, "dp": 1, "ep": False}


@pytest.mark.parametrize("text, parsed", [
    ("0.32.0", (0, 32, 0)), ("v0.30", (0, 30, 0)), ("0.32.0+cpu", (0, 32, 0)), ("0.32.0rc1", (0, 32, 0)),
    ("0.31.0.post1", (0, 31, 0)), ("0.33.0.dev5+g0123abc", (0, 33, 0)), (" 0.29.0 ", (0, 29, 0)),
])
def test_release_numbers_are_read(text, parsed):
    assert parse_version(text) == parsed


def test_a_release_the_rules_were_read_from_gets_no_warning():
    for version in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.32.0+cpu", "v0.30"):
        assert version_warning(version) is None
        result = plan_with(vllm_version=version)
        assert result["version_warning"] is None and result["warnings"] == []


@pytest.mark.parametrize("version, nearest", [("0.27.0", "0.28.0"), ("0.11.2", "0.28.0"), ("0.33.0", "0.32.0"),
                                              ("1.0.0", "0.32.0"), ("0.32.1", "0.32.0"), ("0.29.5", "0.29.0")])
def test_a_release_outside_the_rules_range_is_warned_about(version, nearest):
    result = plan_with(vllm_version=version)
    warning = result["version_warning"]
    assert warning and version in warning and "0.28.0 to 0.32.0" in warning
    assert "restate %s's rules" % nearest in warning
    assert result["warnings"] == [warning]
    # Still planned: a warning, not a failure.
    assert result["plans"]


def test_an_unmodelled_kv_dtype_is_accepted_with_a_warning():
    result = plan_with(kv_cache_dtype="nvfp4")
    assert result["inputs"]["kv_cache_dtype"] == "nvfp4"
    assert any("nvfp4" in w and "approximate" in w for w in result["warnings"])
    for exact in ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"):
        assert plan_with(kv_cache_dtype=exact)["warnings"] == []
