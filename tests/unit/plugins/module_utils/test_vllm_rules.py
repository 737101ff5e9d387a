# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One failing plan per planner rule, with the exact message vLLM raises.

CASES is the single source: the per-rule tests below read it, and
test_vllm_rules_mutation.py evaluates it with each rule of vllm_rules.RULES
left out in turn, to prove every rule has a case that fails without it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_rules
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "model_configs")
_LOADED = {}


def load(name, **changes):
    """A fixture model config, normalised, with ``changes`` applied."""
    if name not in _LOADED:
        sidecar = os.path.join(FIXTURES, name + "_hf_quant.json")
        _LOADED[name] = load_model_config(os.path.join(FIXTURES, name + ".json"),
                                          hf_quant_path=sidecar if os.path.exists(sidecar) else None,
                                          discover_hf_quant=False)
    return dict(_LOADED[name], **changes)


def plan(tp=1, pp=1, dp=1, ep=False):
    return {"tp": tp, "pp": pp, "dp": dp, "ep": ep}


LLAMA = "meta-llama--Meta-Llama-3.1-70B"
MIXTRAL = "mistralai--Mixtral-8x7B-v0.1"
# vllm/model_executor/layers/fused_moe/config.py FusedMoEConfig.__post_init__: a bare assert.
MOE_WIDTH_ASSERT = "assert self.intermediate_size % tp_size == 0"
INT4_GROUP_128 = {"method": "compressed-tensors", "scheme": "int4 pack-quantized", "bits": 4, "group_size": 128,
                  "block_size": None, "kv_cache_dtype": None, "ignored_modules": ["lm_head"], "origin": "test"}
FP8_BLOCK_128 = {"method": "fp8", "bits": 8, "block_size": [128, 128], "group_size": None, "kv_cache_dtype": None,
                 "ignored_modules": ["lm_head"]}
NVFP4 = {"method": "modelopt_fp4", "bits": 4, "group_size": 16, "block_size": None, "kv_cache_dtype": None,
         "ignored_modules": []}


def _kimi_int4_40_columns():
    # 8 x 40 MoE columns: 40 per rank at TP8, not a whole number of 32-column groups.
    return load("moonshotai--Kimi-K2.5", moe_intermediate_size=8 * 40)


# (id, rule, model, plan, gpus, vllm_version, exception, message): the plan's
# first error (the one vLLM raises) must be exactly this.
CASES = [
    ("world-size-tp", "world_size", lambda: load(LLAMA), plan(tp=8), 4, "0.32.0", "ValueError",
     "World size (8) is larger than the number of available GPUs (4) in this node. If this is intentional and you "
     "are using:\n- ray, set '--distributed-executor-backend ray'.\n- multiprocessing, set '--nnodes' appropriately."),
    ("world-size-dp", "world_size", lambda: load(LLAMA), plan(tp=4, dp=2), 4, "0.32.0", "AssertionError",
     "DP adjusted local rank 4 is out of bounds for 4 devices."),
    ("attention-heads", "attention_heads", lambda: load(LLAMA), plan(tp=6), 6, "0.32.0", "ValueError",
     "Total number of attention heads (64) must be divisible by tensor parallel size (6)."),
    ("ep-on-dense", "expert_parallel_dense", lambda: load(LLAMA), plan(tp=8, ep=True), 8, "0.32.0", "ValueError",
     "Number of experts in the model must be greater than 0 when expert parallelism is enabled."),
    ("pp-above-layers", "pipeline_layers", lambda: load(LLAMA, num_hidden_layers=2), plan(pp=4), 4, "0.32.0",
     "PlannerError",
     "Pipeline parallel size (4) is larger than the number of hidden layers (2): some stages would hold no layer."),
    ("kv-heads-model-assert", "kv_heads", lambda: load("MiniMaxAI--MiniMax-M2.5"), plan(tp=6), 8, "0.32.0",
     "AssertionError", "assert self.total_num_kv_heads % tp_size == 0"),
    ("kv-heads-qkv-linear", "kv_heads", lambda: load(LLAMA, architecture="SomeLlamaLike", num_attention_heads=48),
     plan(tp=6), 6, "0.32.0", "AssertionError", "8 is not divisible by 6"),
    # 64 064 = 64 x 1001 tokens (already padded to 64) over TP3.
    ("vocab", "vocab", lambda: load(LLAMA, num_attention_heads=48, num_key_value_heads=6, vocab_size=64 * 1001,
                                    intermediate_size=3 * 9600),
     plan(tp=3), 4, "0.32.0", "AssertionError", "64064 is not divisible by 3"),
    ("moe-tp-above-experts", "moe_tp_exceeds_experts", lambda: load("Qwen--Qwen3-30B-A3B", num_experts=4),
     plan(tp=8), 8, "0.32.0", "ValueError", "Tensor parallel size 8 is greater than the number of experts 4."),
    ("gpt-oss-kv-zero", "gpt_oss", lambda: load("openai--gpt-oss-120b"), plan(tp=16), 16, "0.32.0",
     "ZeroDivisionError", "integer division or modulo by zero"),
    ("dense-intermediate", "dense_intermediate", lambda: load(LLAMA, intermediate_size=8004), plan(tp=8), 8, "0.32.0",
     "AssertionError", "8004 is not divisible by 8"),
    # The MoE width over the MoE TP size, which is TP x DP without expert
    # parallel: one case per MoE family of the fixtures (gpt-oss asserts a
    # stricter width first, see test_gpt_oss_asserts_its_width_before_fused_moe).
    ("moe-intermediate-mixtral-tp1-dp6", "moe_intermediate", lambda: load(MIXTRAL), plan(tp=1, dp=6), 6, "0.32.0",
     "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-mixtral-tp2-dp3", "moe_intermediate", lambda: load(MIXTRAL), plan(tp=2, dp=3), 6, "0.28.0",
     "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-qwen3-moe", "moe_intermediate", lambda: load("Qwen--Qwen3-30B-A3B"), plan(tp=1, dp=5), 5,
     "0.30.0", "AssertionError", MOE_WIDTH_ASSERT),
    # FP8 [128, 128]: before the fix the planner reported the fp8 block error of a floor-divided 307.
    ("moe-intermediate-minimax-fp8", "moe_intermediate", lambda: load("MiniMaxAI--MiniMax-M2.5"), plan(tp=1, dp=5), 5,
     "0.32.0", "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-minimax-nvfp4", "moe_intermediate", lambda: load("nvidia--MiniMax-M2.5-NVFP4"),
     plan(tp=1, dp=5), 5, "0.31.0", "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-deepseek-v3", "moe_intermediate", lambda: load("deepseek-ai--DeepSeek-V3"), plan(tp=2, dp=3), 6,
     "0.29.0", "AssertionError", MOE_WIDTH_ASSERT),
    # INT4 group 32: before the fix the planner reported the WNA16 group error of a floor-divided 341.
    ("moe-intermediate-kimi-int4", "moe_intermediate", lambda: load("moonshotai--Kimi-K2.5"), plan(tp=2, dp=3), 6,
     "0.32.0", "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-glm4-moe", "moe_intermediate", lambda: load("zai-org--GLM-4.7-FP8.ABRIDGED"), plan(tp=1, dp=5),
     5, "0.32.0", "AssertionError", MOE_WIDTH_ASSERT),
    ("moe-intermediate-glm5-nvfp4", "moe_intermediate", lambda: load("nvidia--GLM-5-NVFP4"), plan(tp=2, dp=3), 6,
     "0.32.0", "AssertionError", MOE_WIDTH_ASSERT),
    ("fp8-block-linear", "fp8_block_linear",
     lambda: load(LLAMA, quantization=FP8_BLOCK_128, intermediate_size=8 * 200), plan(tp=8), 8, "0.28.0",
     "ValueError", "Weight input_size_per_partition = 200 is not divisible by weight quantization block_k = 128."),
    ("fp8-block-moe", "fp8_block_moe", lambda: load("MiniMaxAI--MiniMax-M2.5"), plan(tp=8), 8, "0.28.0",
     "ValueError",
     "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."),
    ("int4-group-moe", "int4_group_moe", _kimi_int4_40_columns, plan(tp=8), 8, "0.32.0", "ValueError",
     "CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per tensor-parallel "
     "partition (40) to be divisible by group_size (32). Scale groups would otherwise cross TP shard boundaries; use "
     "a compatible TP size or enable expert parallelism."),
    ("int4-group-linear", "int4_group_linear",
     lambda: load(LLAMA, quantization=INT4_GROUP_128, intermediate_size=8 * 200), plan(tp=8), 8, "0.32.0",
     "ValueError",
     "Weight input_size_per_partition=200 for layer 'model.layers.0.mlp.down_proj' is not divisible by "
     "group_size=128. This happens when tensor_parallel_size splits the layer input into shards that are not a "
     "whole number of quant groups. Consider reducing tensor_parallel_size."),
    ("nvfp4-linear", "nvfp4_linear", lambda: load(LLAMA, quantization=NVFP4, intermediate_size=8 * 24), plan(tp=8),
     8, "0.32.0", "ValueError", "Unsupported model when in features size is not multiple of 16"),
]


def first_error(case):
    _id, _rule, model, wanted, gpus, version, _exception, _message = case
    errors = vllm_rules.check_plan(model(), wanted, gpus, version)
    return errors[0] if errors else None


def case_holds(case):
    """Whether the plan's first error is the case's rule, exception and message."""
    first = first_error(case)
    return first is not None and (first["check"], first["exception"], first["message"]) == case[1:2] + case[6:8]


def failing_cases():
    """The ids of the cases that do not hold with vllm_rules.RULES as it is now."""
    return [case[0] for case in CASES if not case_holds(case)]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_rule_rejects_the_plan_with_vllms_message(case):
    first = first_error(case)
    assert first is not None, "%s: no rule rejected %r" % (case[0], case[3])
    assert first["check"] == case[1]
    assert first["exception"] == case[6]
    assert first["message"] == case[7]


def test_every_rule_has_a_failing_plan_case():
    ruled = {rule[0] for rule in vllm_rules.RULES}
    cased = {case[1] for case in CASES}
    assert ruled - cased == set(), "rules without a case in CASES"
    assert cased - ruled == set(), "cases for rules that do not exist"


def test_the_fixed_plans_pass_every_rule():
    # The same models with a plan vLLM accepts: the cases fail because of the plan, not the model.
    assert vllm_rules.check_plan(load(LLAMA), plan(tp=8), 8, "0.32.0") == []
    assert vllm_rules.check_plan(load("Qwen--Qwen3-30B-A3B", num_experts=8), plan(tp=8), 8, "0.32.0") == []
    assert vllm_rules.check_plan(load(LLAMA, num_hidden_layers=4), plan(pp=4), 4, "0.32.0") == []
    assert vllm_rules.check_plan(load(LLAMA, quantization=INT4_GROUP_128, intermediate_size=8 * 256), plan(tp=8), 8,
                                 "0.32.0") == []
    assert vllm_rules.check_plan(_kimi_int4_40_columns(), plan(tp=8, ep=True), 8, "0.32.0") == []


# Plans vLLM accepts: the MoE width divides TP x DP, or expert parallel keeps
# whole experts per rank (MoE TP size 1; experts need not divide the EP size,
# fused_moe/expert_map_manager.py determine_expert_map gives the remainder to
# the first ranks).
MOE_WIDTH_ACCEPTED = [
    ("mixtral-tp2-dp4", MIXTRAL, plan(tp=2, dp=4), 8),
    ("mixtral-tp1-dp6-ep", MIXTRAL, plan(tp=1, dp=6, ep=True), 6),
    ("mixtral-tp2-dp3-ep", MIXTRAL, plan(tp=2, dp=3, ep=True), 6),
    ("qwen3-moe-tp2-dp3", "Qwen--Qwen3-30B-A3B", plan(tp=2, dp=3), 6),
    ("qwen3-moe-tp1-dp5-ep", "Qwen--Qwen3-30B-A3B", plan(tp=1, dp=5, ep=True), 5),
    ("minimax-tp2-dp3", "MiniMaxAI--MiniMax-M2.5", plan(tp=2, dp=3), 6),
    ("minimax-tp1-dp5-ep", "MiniMaxAI--MiniMax-M2.5", plan(tp=1, dp=5, ep=True), 5),
    ("deepseek-v3-tp2-dp4", "deepseek-ai--DeepSeek-V3", plan(tp=2, dp=4), 8),
    ("deepseek-v3-tp2-dp3-ep", "deepseek-ai--DeepSeek-V3", plan(tp=2, dp=3, ep=True), 6),
    ("kimi-int4-tp2-dp4", "moonshotai--Kimi-K2.5", plan(tp=2, dp=4), 8),
    ("kimi-int4-tp2-dp3-ep", "moonshotai--Kimi-K2.5", plan(tp=2, dp=3, ep=True), 6),
    ("glm4-moe-tp2-dp3", "zai-org--GLM-4.7-FP8.ABRIDGED", plan(tp=2, dp=3), 6),
    ("glm5-tp2-dp4", "zai-org--GLM-5", plan(tp=2, dp=4), 8),
    ("gpt-oss-tp1-dp6", "openai--gpt-oss-120b", plan(tp=1, dp=6), 6),
]


@pytest.mark.parametrize("version", vllm_rules.SUPPORTED_VERSIONS)
@pytest.mark.parametrize("case", MOE_WIDTH_ACCEPTED, ids=[case[0] for case in MOE_WIDTH_ACCEPTED])
def test_moe_width_plans_vllm_accepts(case, version):
    _id, name, wanted, gpus = case
    assert vllm_rules.check_plan(load(name), wanted, gpus, version) == []


@pytest.mark.parametrize("version", vllm_rules.SUPPORTED_VERSIONS)
def test_moe_width_is_checked_in_every_supported_release(version):
    errors = vllm_rules.check_plan(load(MIXTRAL), plan(tp=2, dp=3), 6, version)
    assert [(e["check"], e["exception"], e["message"]) for e in errors] == [
        ("moe_intermediate", "AssertionError", MOE_WIDTH_ASSERT)]


def test_gpt_oss_asserts_its_width_before_fused_moe():
    # gpt_oss.py MLPBlock asserts over the whole world before it builds FusedMoE.
    errors = vllm_rules.check_plan(load("openai--gpt-oss-120b"), plan(tp=1, dp=7), 7, "0.32.0")
    assert [e["check"] for e in errors] == ["gpt_oss", "moe_intermediate"]


def test_linear_weights_fail_before_the_moe_width():
    # Layer 0's dense MLP (GLM-5: first_k_dense 3) is created before the first
    # MoE block's FusedMoEConfig. Its NVFP4 down_proj takes 12 304 / 2 = 6152
    # inputs at TP2, not a multiple of 16; the MoE width 2048 over TP2 x DP3
    # is not whole either: vLLM stops at the linear layer.
    model = load("nvidia--GLM-5-NVFP4", intermediate_size=2 * 6152)
    errors = vllm_rules.check_plan(model, plan(tp=2, dp=3), 6, "0.32.0")
    assert [e["check"] for e in errors] == ["nvfp4_linear", "moe_intermediate"]
