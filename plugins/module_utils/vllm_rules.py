# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The checks vLLM applies to a parallelism plan, restated so a plan can be
rejected before anything is installed or launched.

Each rule cites the vLLM file and function it restates (read from the
vllm 0.32.0 source) and returns the exact message vLLM would raise. Rules run
in the order vLLM reaches them: engine-argument and config validation first
(fails in seconds), then model construction (fails after the processes have
started), then quantized-weight creation (fails after minutes of loading on
a large checkpoint). ``when`` in a result says which.

Rules are keyed on the vLLM version through ``since``/``until`` so that a
behaviour change between releases is a new rule entry, not an edit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_memory import is_quantized

# The releases these rules were checked against.
SUPPORTED_VERSIONS = ("0.28.0", "0.32.0")
# First release whose Fp8MoEMethod refines FP8 MoE scale blocks instead of
# rejecting a TP split that cuts through them (docs/vllm-rules-by-version.md).
FP8_MOE_BLOCK_REFINE_SINCE = "0.32.0"


def parse_version(version):
    """'0.28.0' / '0.32.0+cpu' / 'v0.30' -> (0, 28, 0)."""
    text = str(version).lstrip("v").split("+", maxsplit=1)[0]
    parts = []
    for piece in text.split(".")[:3]:
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        parts.append(int(digits or 0))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def moe_parallel(plan):
    """vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
    without expert parallel the experts are tensor-sliced over TP x DP ranks;
    with it each of TP x DP ranks owns whole experts (MoE TP size 1).
    Expert parallel needs more than one rank, otherwise the flag is ignored."""
    ranks = plan["tp"] * plan["dp"]
    use_ep = bool(plan["ep"]) and ranks > 1
    return {"tp_size": 1 if use_ep else ranks, "ep_size": ranks if use_ep else 1, "use_ep": use_ep}


def _divide_message(numerator, denominator):
    # vllm/distributed/utils.py ensure_divisibility (AssertionError)
    return "%d is not divisible by %d" % (numerator, denominator)


# --------------------------------------------------------------------------
# Rules: each takes (model, plan) and returns None or (exception, message).
# --------------------------------------------------------------------------

def rule_world_size(model, plan, gpus):
    # vllm/config/parallel.py ParallelConfig: world size = TP x PP per engine,
    # DP engines each take their own; CUDA cannot place more ranks than GPUs.
    need = plan["tp"] * plan["pp"] * plan["dp"]
    if need > gpus:
        return ("ValueError", "The plan needs %d GPUs (TP %d x PP %d x DP %d) but the host has %d."
                % (need, plan["tp"], plan["pp"], plan["dp"], gpus))
    return None


def rule_attention_heads(model, plan, gpus):
    # vllm/config/model.py ModelConfig.verify_with_parallel_config
    heads, tp = model["num_attention_heads"], plan["tp"]
    if heads % tp:
        return ("ValueError", "Total number of attention heads (%d) must be divisible by tensor parallel size (%d)."
                % (heads, tp))
    return None


def rule_expert_parallel_dense(model, plan, gpus):
    # vllm/config/model.py ModelConfig._verify_with_expert_parallelism
    if plan["ep"] and not model.get("num_experts"):
        return ("ValueError", "Number of experts in the model must be greater than 0 when expert parallelism is enabled.")
    return None


def rule_pipeline_layers(model, plan, gpus):
    # vllm/distributed/utils.py get_pp_indices: every stage needs a layer.
    if plan["pp"] > model["num_hidden_layers"]:
        return ("ValueError", "Pipeline parallel size (%d) is larger than the number of hidden layers (%d)."
                % (plan["pp"], model["num_hidden_layers"]))
    return None


def rule_kv_heads(model, plan, gpus):
    # vllm/model_executor/layers/linear.py QKVParallelLinear.__init__:
    # KV heads are split when there are at least TP of them, replicated
    # (TP / heads copies) otherwise; both go through divide().
    if model.get("mla"):
        return None  # MLA has no per-head KV projection to split.
    kv, tp = model["num_key_value_heads"], plan["tp"]
    if tp >= kv:
        if tp % kv:
            return ("AssertionError", _divide_message(tp, kv))
    elif kv % tp:
        return ("AssertionError", _divide_message(kv, tp))
    return None


def rule_vocab(model, plan, gpus):
    # vllm/model_executor/layers/vocab_parallel_embedding.py
    # VocabParallelEmbedding: the vocab is padded to a multiple of 64, then
    # divided by TP through divide().
    padded = -(-model["vocab_size"] // 64) * 64
    if padded % plan["tp"]:
        return ("AssertionError", _divide_message(padded, plan["tp"]))
    return None


def rule_dense_intermediate(model, plan, gpus):
    # vllm/model_executor/layers/linear.py MergedColumnParallelLinear /
    # RowParallelLinear: divide(output_size, tp) for gate/up, input for down.
    # Applies to dense models and to the dense layers before the first MoE
    # layer (first_k_dense), and to shared experts (split by attention TP).
    tp = plan["tp"]
    sizes = []
    if not model.get("num_experts") or model.get("first_k_dense"):
        sizes.append(model["intermediate_size"])
    shared = model.get("shared_expert_intermediate_size")
    if model.get("num_experts") and shared:
        sizes.append(shared)
    for size in sizes:
        if size % tp:
            return ("AssertionError", _divide_message(size, tp))
    return None


def _fp8_block(model):
    quant = model.get("quantization") or {}
    block = quant.get("block_size")
    if quant.get("method") in ("fp8", "compressed-tensors") and block:
        return quant, block
    return None, None


def rule_fp8_block_linear(model, plan, gpus):
    # vllm/model_executor/layers/quantization/utils/fp8_utils.py
    # validate_fp8_block_shape: a TP-split column-parallel output must be a
    # multiple of block_n, a TP-split row-parallel input of block_k.
    quant, block = _fp8_block(model)
    tp = plan["tp"]
    if not block or tp == 1:
        return None
    block_n, block_k = block[0], block[1]
    checks = []
    if not model.get("mla"):
        head_dim = model["head_dim"]
        q_out = model["num_attention_heads"] // tp * head_dim
        checks.append(("model.layers.0.self_attn.q_proj", "column", q_out))
        if model["num_key_value_heads"] >= tp:
            checks.append(("model.layers.0.self_attn.k_proj", "column", model["num_key_value_heads"] // tp * head_dim))
        checks.append(("model.layers.0.self_attn.o_proj", "row", q_out))
    if not model.get("num_experts") or model.get("first_k_dense"):
        checks.append(("model.layers.0.mlp.gate_up_proj", "column", model["intermediate_size"] // tp))
        checks.append(("model.layers.0.mlp.down_proj", "row", model["intermediate_size"] // tp))
    shared = model.get("shared_expert_intermediate_size")
    if model.get("num_experts") and shared:
        layer = model.get("first_k_dense") or 0
        checks.append(("model.layers.%d.mlp.shared_experts.gate_up_proj" % layer, "column", shared // tp))
        checks.append(("model.layers.%d.mlp.shared_experts.down_proj" % layer, "row", shared // tp))
    for module, kind, size in checks:
        if not is_quantized(quant, module):
            continue
        if kind == "row" and size % block_k:
            return ("ValueError", "Weight input_size_per_partition = %d is not divisible by weight quantization block_k = %d."
                    % (size, block_k))
        if kind == "column" and size % block_n:
            return ("ValueError", "Weight output_partition_size = %d is not divisible by weight quantization block_n = %d."
                    % (size, block_n))
    return None


def _gcd(*numbers):
    result = 0
    for number in numbers:
        a, b = result, number
        while b:
            a, b = b, a % b
        result = a
    return result


def rule_fp8_block_moe(model, plan, gpus, version=None):
    # vllm/model_executor/layers/quantization/utils/fp8_utils.py
    # validate_fp8_block_shape_moe, called from Fp8MoEMethod.create_weights
    # (quantization/fp8.py) with intermediate_size // moe_tp_size
    # (fused_moe/config.py FusedMoEConfig). The second check keys on the
    # attention TP size, not the MoE one.
    # Since FP8_MOE_BLOCK_REFINE_SINCE, native FP8 checkpoints first try
    # smaller scale blocks (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape:
    # gcd(block_n, block_k, size per partition, hidden) when >= 32) and only
    # validate when that fails; compressed-tensors FP8 MoE
    # (CompressedTensorsW8A8Fp8MoEMethod.create_weights) always validates.
    quant, block = _fp8_block(model)
    if not block or not model.get("num_experts"):
        return None
    layer = model.get("first_k_dense") or 0
    if not is_quantized(quant, "model.layers.%d.mlp.experts.0.gate_up_proj" % layer):
        return None
    moe_tp = moe_parallel(plan)["tp_size"]
    per_partition = model["moe_intermediate_size"] // moe_tp
    block_n, block_k = block[0], block[1]
    needs_check = per_partition % block_n or (moe_tp > 1 and per_partition % block_k)
    refines = (quant.get("method") == "fp8" and version is not None
               and parse_version(version) >= parse_version(FP8_MOE_BLOCK_REFINE_SINCE))
    if needs_check and refines and _gcd(block_n, block_k, per_partition, model["hidden_size"]) >= 32:
        return None
    if per_partition % block_n:
        return ("ValueError", "The output_size of gate's and up's weight = %d is not divisible by weight quantization block_n = %d."
                % (per_partition, block_n))
    if plan["tp"] > 1 and per_partition % block_k:
        return ("ValueError", "The input_size of down's weight = %d is not divisible by weight quantization block_k = %d."
                % (per_partition, block_k))
    return None


def rule_int4_group_moe(model, plan, gpus):
    # vllm/model_executor/layers/quantization/compressed_tensors/
    # compressed_tensors_moe/compressed_tensors_moe_wna16.py
    # CompressedTensorsWNA16MoEMethod.create_weights
    quant = model.get("quantization") or {}
    group = quant.get("group_size")
    if quant.get("method") != "compressed-tensors" or not group or quant.get("bits") != 4 or not model.get("num_experts"):
        return None
    layer = model.get("first_k_dense") or 0
    if not is_quantized(quant, "model.layers.%d.mlp.experts.0.gate_up_proj" % layer):
        return None
    if model["hidden_size"] % group:
        return ("ValueError", "CompressedTensors WNA16 MoE requires hidden_size (%d) to be divisible by group_size (%d)."
                % (model["hidden_size"], group))
    per_partition = model["moe_intermediate_size"] // moe_parallel(plan)["tp_size"]
    if per_partition % group:
        return ("ValueError",
                "CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per "
                "tensor-parallel partition (%d) to be divisible by group_size (%d). Scale groups would otherwise "
                "cross TP shard boundaries; use a compatible TP size or enable expert parallelism." % (per_partition, group))
    return None


def rule_int4_group_linear(model, plan, gpus):
    # vllm/model_executor/layers/quantization/compressed_tensors/schemes/
    # compressed_tensors_wNa16.py CompressedTensorsWNA16.create_weights ->
    # vllm/distributed/utils.py verify_group_size_divides_partition: a
    # TP-split row-parallel input must hold whole scale groups.
    quant = model.get("quantization") or {}
    group = quant.get("group_size")
    tp = plan["tp"]
    if quant.get("method") != "compressed-tensors" or not group or quant.get("block_size") or tp == 1:
        return None
    checks = []
    if not model.get("mla"):
        checks.append(("model.layers.0.self_attn.o_proj", model["num_attention_heads"] // tp * model["head_dim"]))
    if not model.get("num_experts") or model.get("first_k_dense"):
        checks.append(("model.layers.0.mlp.down_proj", model["intermediate_size"] // tp))
    for module, size in checks:
        if is_quantized(quant, module) and size % group:
            return ("ValueError",
                    "Weight input_size_per_partition=%d for layer '%s' is not divisible by group_size=%d. This happens "
                    "when tensor_parallel_size splits the layer input into shards that are not a whole number of quant "
                    "groups. Consider reducing tensor_parallel_size." % (size, module, group))
    return None


def rule_moe_tp_exceeds_experts(model, plan, gpus):
    # Qwen2/3-MoE style sparse blocks refuse more TP ranks than experts
    # (vllm/model_executor/models/qwen3_moe.py Qwen3MoeSparseMoeBlock.__init__).
    experts = model.get("num_experts")
    if experts and model.get("model_type") in ("qwen2_moe", "qwen3_moe") and plan["tp"] > experts:
        return ("ValueError", "Tensor parallel size %d is greater than the number of experts %d."
                % (plan["tp"], experts))
    return None


# (name, function, when vLLM fails, since, until) in the order vLLM reaches them.
RULES = (
    ("world_size", rule_world_size, "startup", None, None),
    ("attention_heads", rule_attention_heads, "config validation", None, None),
    ("expert_parallel_dense", rule_expert_parallel_dense, "config validation", None, None),
    ("pipeline_layers", rule_pipeline_layers, "model construction", None, None),
    ("kv_heads", rule_kv_heads, "model construction", None, None),
    ("vocab", rule_vocab, "model construction", None, None),
    ("moe_tp_exceeds_experts", rule_moe_tp_exceeds_experts, "model construction", None, None),
    ("dense_intermediate", rule_dense_intermediate, "model construction", None, None),
    ("fp8_block_linear", rule_fp8_block_linear, "weight creation", None, None),
    ("fp8_block_moe", rule_fp8_block_moe, "weight creation", None, None),
    ("int4_group_moe", rule_int4_group_moe, "weight creation", None, None),
    ("int4_group_linear", rule_int4_group_linear, "weight creation", None, None),
)


# Rules whose behaviour depends on the version inside the rule itself.
VERSIONED_RULES = (rule_fp8_block_moe,)


def rules_for(vllm_version):
    version = parse_version(vllm_version)
    return [r for r in RULES
            if (r[3] is None or version >= parse_version(r[3])) and (r[4] is None or version < parse_version(r[4]))]


def check_plan(model, plan, gpus, vllm_version):
    """All failing checks of ``plan``, first failing (the one vLLM raises) first."""
    errors = []
    for name, rule, when, _since, _until in rules_for(vllm_version):
        failure = rule(model, plan, gpus, vllm_version) if rule in VERSIONED_RULES else rule(model, plan, gpus)
        if failure:
            errors.append({"check": name, "exception": failure[0], "message": failure[1], "when": when})
    return errors
