# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's verdict: the one sentence the preflight role shows and fails with, and the GPU subset check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import (
    PlanError,
    check_visible_devices,
    evaluate_plan_for,
    plan_model,
    verdict,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "model_configs")
RTX_PRO_6000_GIB = 96e9 / 1024 ** 3
BLOCK_N_192 = "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."


def minimax():
    return load_model_config(os.path.join(FIXTURES, "MiniMaxAI--MiniMax-M2.5.json"))


def test_the_recommendation_is_usable_and_says_so():
    result = plan_model(minimax(), 8, RTX_PRO_6000_GIB, "0.28.0", max_model_len=32768)
    said = verdict(result)
    assert said["usable"] and said["plan_name"] == result["recommended"]["name"]
    assert said["reason"] == ""
    assert said["plan_name"] in said["alternatives"]
    assert said["message"] == "plan %s loads and fits" % said["plan_name"]


def test_a_configured_plan_vllm_crashes_on_carries_vllms_message():
    model = minimax()
    result = plan_model(model, 8, RTX_PRO_6000_GIB, "0.28.0", max_model_len=32768)
    selected = evaluate_plan_for(model, {"tp": 8}, result["inputs"])
    said = verdict(result, selected)
    assert not said["usable"] and said["plan_name"] == "TP8"
    assert said["reason"] == "vLLM would raise ValueError at weight creation: " + BLOCK_N_192
    assert "TP8" not in said["alternatives"] and "TP8-EP" in said["alternatives"]
    assert said["message"].startswith(said["reason"]) and said["message"].endswith(
        "Plans that load and fit: %s." % ", ".join(said["alternatives"]))


def test_a_plan_wider_than_the_visible_gpus_is_refused_with_vllms_world_size_message():
    model = minimax()
    result = plan_model(model, 4, RTX_PRO_6000_GIB, "0.28.0", max_model_len=32768)
    said = verdict(result, evaluate_plan_for(model, {"tp": 8, "ep": True}, result["inputs"]))
    assert not said["usable"]
    assert "World size (8) is larger than the number of available GPUs (4)" in said["reason"]


def test_no_plan_fits_names_the_gpus_and_the_valid_plans():
    result = plan_model(minimax(), 1, 24.0, "0.28.0", max_model_len=32768)
    said = verdict(result)
    assert not said["usable"] and said["plan_name"] is None and said["alternatives"] == []
    assert said["reason"].startswith("no plan loads and fits on 1 GPUs of 24.0 GiB (")
    assert said["message"].endswith("Plans that load and fit: none.")


def test_limits_no_plan_meets_are_named_instead_of_a_memory_shortfall():
    result = plan_model(minimax(), 8, RTX_PRO_6000_GIB, "0.28.0", max_model_len=32768, min_user_tokens_per_s=1e6)
    said = verdict(result)
    assert not said["usable"] and said["alternatives"]
    assert said["reason"].startswith("no plan meets the limits min_user_tokens_per_s 1000000")


@pytest.mark.parametrize("devices, host, expected", [
    (["0", "1", "2", "3"], 8, ["0", "1", "2", "3"]),
    ("4, 5", 8, ["4", "5"]),
    (["GPU-0b1c", "GPU-77aa"], 2, ["GPU-0b1c", "GPU-77aa"]),
])
def test_visible_devices_are_the_gpus_the_plan_is_made_for(devices, host, expected):
    assert check_visible_devices(devices, host) == expected


@pytest.mark.parametrize("devices, host, message", [
    (["0", "8"], 8, "visible_devices '0,8' names GPU 8, but the host has 8 (0 to 7)"),
    ("1,1", 8, "visible_devices '1,1' names GPU 1 twice"),
    ({"gpu": 0}, 8, "visible_devices must be a list of GPU indices or UUIDs"),
])
def test_visible_devices_the_host_lacks_are_named(devices, host, message):
    with pytest.raises(PlanError) as raised:
        check_visible_devices(devices, host)
    assert message in str(raised.value)
