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

import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_memory import is_quantized

# The releases these rules were read from (docs/vllm-rules-by-version.md: the
# 0.28.0 to 0.32.0 sdists; there are no patch releases in that range). Any
# other release gets a warning: its verdicts restate the nearest one read.
SUPPORTED_VERSIONS = ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
# First release whose Fp8MoEMethod refines FP8 MoE scale blocks instead of
# rejecting a TP split that cuts through them (docs/vllm-rules-by-version.md).
FP8_MOE_BLOCK_REFINE_SINCE = "0.29.0"
# A vLLM release as pip and `vllm --version` write it: 0.32.0, v0.30, 0.32.0rc1,
# 0.31.0.post1, 0.32.0.dev5+g0123abc, 0.32.0+cpu. Matched whole (fullmatch): ``$`` also accepts a trailing newline.
_VERSION_PATTERN = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(?:a|b|rc|post|dev)\d*)*(?:\+[0-9A-Za-z][0-9A-Za-z._-]*)?")


def parse_version(version):
    """'0.28.0' / '0.32.0+cpu' / 'v0.30' -> (0, 28, 0). Anything that is not a
    release number raises ValueError naming it: 'banana' is not 0.0.0."""
    match = _VERSION_PATTERN.fullmatch(version.strip()) if isinstance(version, str) else None
    if not match:
        raise ValueError("vllm_version must be a vLLM release number such as 0.32.0, got %r" % (version,))
    return tuple(int(part or 0) for part in match.groups())


def version_warning(vllm_version):
    """None for a release the rules were read from, else a sentence saying
    which release's rules the verdicts restate instead."""
    version = parse_version(vllm_version)
    read = [parse_version(v) for v in SUPPORTED_VERSIONS]
    if version in read:
        return None
    nearest = SUPPORTED_VERSIONS[0] if version < read[0] else SUPPORTED_VERSIONS[-1]
    if read[0] < version < read[-1]:
        nearest = [v for v, t in zip(SUPPORTED_VERSIONS, read) if t < version][-1]
    return ("vllm_version %s is not one of the releases the planner's rules were read from (%s to %s): its verdicts "
            "restate %s's rules and may not match what %s raises."
            % (vllm_version, SUPPORTED_VERSIONS[0], SUPPORTED_VERSIONS[-1], nearest, vllm_version))


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
# Rules: each takes (model, plan, gpus) and returns None or
# (exception, message, source): the exception type and message vLLM raises,
# and the vLLM file and function that raise it.
# --------------------------------------------------------------------------

def rule_world_size(model, plan, gpus):
    # vllm/config/parallel.py ParallelConfig.__post_init__ compares TP x PP
    # with the node's GPUs; DP engines each take their own TP x PP slice and
    # fail later, in the worker (v1/worker/gpu_worker.py, "DP adjusted local
    # rank ... is out of bounds").
    world = plan["tp"] * plan["pp"]
    if world > gpus:
        return ("ValueError",
                "World size (%d) is larger than the number of available GPUs (%d) in this node. If this is intentional "
                "and you are using:\n- ray, set '--distributed-executor-backend ray'.\n- multiprocessing, set "
                "'--nnodes' appropriately." % (world, gpus),
                "vllm/config/parallel.py ParallelConfig.__post_init__")
    if world * plan["dp"] > gpus:
        return ("AssertionError",
                # The lowest out-of-range rank: the first of GPU index `gpus`.
                "DP adjusted local rank %d is out of bounds for %d devices." % (gpus, gpus),
                "vllm/v1/worker/gpu_worker.py Worker.init_device")
    return None


def rule_attention_heads(model, plan, gpus):
    # vllm/config/model.py ModelConfig.verify_with_parallel_config
    heads, tp = model["num_attention_heads"], plan["tp"]
    if heads % tp:
        return ("ValueError", "Total number of attention heads (%d) must be divisible by tensor parallel size (%d)."
                % (heads, tp), "vllm/config/model.py ModelConfig.verify_with_parallel_config")
    return None


def rule_expert_parallel_dense(model, plan, gpus):
    # vllm/config/model.py ModelConfig._verify_with_expert_parallelism
    if plan["ep"] and not model.get("num_experts"):
        return ("ValueError", "Number of experts in the model must be greater than 0 when expert parallelism is enabled.",
                "vllm/config/model.py ModelConfig._verify_with_expert_parallelism")
    return None


def rule_pipeline_layers(model, plan, gpus):
    # vllm/distributed/utils.py get_pp_indices does not refuse more stages
    # than layers: the extra stages get no layers and the run is useless.
    # Not a vLLM error: the planner refuses it on its own account.
    if plan["pp"] > model["num_hidden_layers"]:
        return ("PlannerError", "Pipeline parallel size (%d) is larger than the number of hidden layers (%d): "
                "some stages would hold no layer." % (plan["pp"], model["num_hidden_layers"]),
                "vllm/distributed/utils.py get_pp_indices")
    return None


# Model files that check the KV head split themselves, with a bare assert,
# before QKVParallelLinear's divide() would: (file, attention class).
KV_HEAD_ASSERTS = {
    "LlamaForCausalLM": ("llama.py", "LlamaAttention"),
    "MiniMaxM2ForCausalLM": ("minimax_m2.py", "MiniMaxM2Attention"),
    "MixtralForCausalLM": ("mixtral.py", "MixtralAttention"),
    "Qwen2MoeForCausalLM": ("qwen2_moe.py", "Qwen2MoeAttention"),
    "Qwen3MoeForCausalLM": ("qwen3_moe.py", "Qwen3MoeAttention"),
    "Glm4MoeForCausalLM": ("glm4_moe.py", "Glm4MoeAttention"),
}


def rule_kv_heads(model, plan, gpus):
    # vllm/model_executor/layers/linear.py QKVParallelLinear.__init__:
    # KV heads are split when there are at least TP of them, replicated
    # (TP / heads copies) otherwise; both go through divide(). Several model
    # files assert the same first, without a message: vLLM then raises a
    # bare AssertionError whose traceback shows the assert line.
    if model.get("mla"):
        return None  # MLA has no per-head KV projection to split.
    kv, tp = model["num_key_value_heads"], plan["tp"]
    if tp >= kv:
        if not tp % kv:
            return None
        bare, numerator, denominator = "assert tp_size % self.total_num_kv_heads == 0", tp, kv
    elif kv % tp:
        bare, numerator, denominator = "assert self.total_num_kv_heads % tp_size == 0", kv, tp
    else:
        return None
    own = KV_HEAD_ASSERTS.get(model.get("architecture"))
    if own:
        return ("AssertionError", bare, "vllm/model_executor/models/%s %s.__init__" % own)
    return ("AssertionError", _divide_message(numerator, denominator),
            "vllm/model_executor/layers/linear.py QKVParallelLinear.__init__")


def rule_vocab(model, plan, gpus):
    # vllm/model_executor/layers/vocab_parallel_embedding.py
    # VocabParallelEmbedding: the vocab is padded to a multiple of 64, then
    # divided by TP through divide().
    padded = -(-model["vocab_size"] // 64) * 64
    if padded % plan["tp"]:
        return ("AssertionError", _divide_message(padded, plan["tp"]),
                "vllm/model_executor/layers/vocab_parallel_embedding.py VocabParallelEmbedding.__init__")
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
            return ("AssertionError", _divide_message(size, tp),
                    "vllm/model_executor/layers/linear.py MergedColumnParallelLinear.__init__")
    return None


def rule_moe_intermediate(model, plan, gpus):
    # vllm/model_executor/layers/fused_moe/config.py FusedMoEConfig.__post_init__
    # (built by fused_moe/layer.py FusedMoEFactory before any expert weight
    # is created, whatever the quantization): a bare
    # `assert self.intermediate_size % tp_size == 0` on the MoE TP size,
    # which FusedMoEParallelConfig.make flattens over TP x DP without expert
    # parallel (1 with it). gpt-oss asserts a stricter width first (gpt_oss).
    experts_width = model.get("moe_intermediate_size")
    moe_tp = moe_parallel(plan)["tp_size"]
    if model.get("num_experts") and experts_width and experts_width % moe_tp:
        return ("AssertionError", "assert self.intermediate_size % tp_size == 0",
                "vllm/model_executor/layers/fused_moe/config.py FusedMoEConfig.__post_init__")
    return None


def _fp8_block(model):
    quant = model.get("quantization") or {}
    block = quant.get("block_size")
    if quant.get("method") in ("fp8", "compressed-tensors") and block:
        return quant, block
    return None, None


def rule_fp8_block_linear(model, plan, gpus):
    # vllm/model_executor/layers/quantization/utils/fp8_utils.py
    # validate_fp8_block_shape (from Fp8LinearMethod.create_weights): a
    # TP-split row-parallel input must be a multiple of block_k, a TP-split
    # single column-parallel output a multiple of block_n. Merged column
    # layers (QKV, gate_up) are exempt: linear.py ColumnParallelLinear.
    # _maybe_allow_fp8_block_shape_mismatch lets them through.
    quant, block = _fp8_block(model)
    tp = plan["tp"]
    if not block or tp == 1:
        return None
    block_n, block_k = block[0], block[1]
    heads = model["num_attention_heads"] // tp
    mla = model.get("mla")
    checks = []  # in the order vLLM builds the layers
    if mla:
        q_out = heads * (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"])
        q_module = "self_attn.q_b_proj" if mla.get("q_lora_rank") else "self_attn.q_proj"
        checks.append(("model.layers.0." + q_module, "column", q_out))
        checks.append(("model.layers.0.self_attn.kv_b_proj", "column", heads * (mla["qk_nope_head_dim"] + mla["v_head_dim"])))
        checks.append(("model.layers.0.self_attn.o_proj", "row", heads * mla["v_head_dim"]))
    else:
        checks.append(("model.layers.0.self_attn.o_proj", "row", heads * model["head_dim"]))
    if not model.get("num_experts") or model.get("first_k_dense"):
        checks.append(("model.layers.0.mlp.down_proj", "row", model["intermediate_size"] // tp))
    shared = model.get("shared_expert_intermediate_size")
    if model.get("num_experts") and shared:
        layer = model.get("first_k_dense") or 0
        checks.append(("model.layers.%d.mlp.shared_experts.down_proj" % layer, "row", shared // tp))
    source = "vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape"
    for module, kind, size in checks:
        if not is_quantized(quant, module):
            continue
        if kind == "row" and size % block_k:
            return ("ValueError", "Weight input_size_per_partition = %d is not divisible by weight quantization block_k = %d."
                    % (size, block_k), source)
        if kind == "column" and size % block_n:
            return ("ValueError", "Weight output_partition_size = %d is not divisible by weight quantization block_n = %d."
                    % (size, block_n), source)
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
    source = "vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape_moe"
    if per_partition % block_n:
        return ("ValueError", "The output_size of gate's and up's weight = %d is not divisible by weight quantization block_n = %d."
                % (per_partition, block_n), source)
    if plan["tp"] > 1 and per_partition % block_k:
        return ("ValueError", "The input_size of down's weight = %d is not divisible by weight quantization block_k = %d."
                % (per_partition, block_k), source)
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
    source = ("vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
              "compressed_tensors_moe_wna16.py CompressedTensorsWNA16MoEMethod.create_weights")
    if model["hidden_size"] % group:
        return ("ValueError", "CompressedTensors WNA16 MoE requires hidden_size (%d) to be divisible by group_size (%d)."
                % (model["hidden_size"], group), source)
    per_partition = model["moe_intermediate_size"] // moe_parallel(plan)["tp_size"]
    if per_partition % group:
        return ("ValueError",
                "CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per "
                "tensor-parallel partition (%d) to be divisible by group_size (%d). Scale groups would otherwise "
                "cross TP shard boundaries; use a compatible TP size or enable expert parallelism." % (per_partition, group),
                source)
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
                    "groups. Consider reducing tensor_parallel_size." % (size, module, group),
                    "vllm/distributed/utils.py verify_group_size_divides_partition")
    return None


# Sparse MoE blocks that refuse more TP ranks than experts: file and class.
MOE_TP_EXPERT_CHECKS = {
    "MiniMaxM2ForCausalLM": ("minimax_m2.py", "MiniMaxM2MoE"),
    "Qwen2MoeForCausalLM": ("qwen2_moe.py", "Qwen2MoeSparseMoeBlock"),
    "Qwen3MoeForCausalLM": ("qwen3_moe.py", "Qwen3MoeSparseMoeBlock"),
}


def rule_moe_tp_exceeds_experts(model, plan, gpus):
    # vllm/model_executor/models/{minimax_m2,qwen2_moe,qwen3_moe}.py: the
    # sparse block checks the attention TP size against the expert count.
    experts = model.get("num_experts")
    where = MOE_TP_EXPERT_CHECKS.get(model.get("architecture"))
    if experts and where and plan["tp"] > experts:
        return ("ValueError", "Tensor parallel size %d is greater than the number of experts %d." % (plan["tp"], experts),
                "vllm/model_executor/models/%s %s.__init__" % where)
    return None


def rule_nvfp4_linear(model, plan, gpus):
    # vllm/model_executor/layers/quantization/modelopt.py
    # KNvfp4Static.create_weights: a TP-split row-parallel input must be a
    # multiple of the 16-element NVFP4 group.
    quant = model.get("quantization") or {}
    tp = plan["tp"]
    if quant.get("method") != "modelopt_fp4" or tp == 1:
        return None
    checks = []
    if not model.get("mla"):
        checks.append(("model.layers.0.self_attn.o_proj", model["num_attention_heads"] // tp * model["head_dim"]))
    if not model.get("num_experts") or model.get("first_k_dense"):
        checks.append(("model.layers.0.mlp.down_proj", model["intermediate_size"] // tp))
    shared = model.get("shared_expert_intermediate_size")
    if model.get("num_experts") and shared:
        layer = model.get("first_k_dense") or 0
        checks.append(("model.layers.%d.mlp.shared_experts.down_proj" % layer, shared // tp))
    for module, size in checks:
        if is_quantized(quant, module) and size % 16:
            return ("ValueError", "Unsupported model when in features size is not multiple of 16",
                    "vllm/model_executor/layers/quantization/modelopt.py KNvfp4Static.create_weights")
    return None


def rule_gpt_oss(model, plan, gpus):
    # vllm/model_executor/models/gpt_oss.py: the MLP asserts its width over
    # the whole torch world (TP x PP x DP), and the attention divides KV
    # heads by TP without max(1, ...), so TP above the KV heads divides by 0.
    if model.get("architecture") != "GptOssForCausalLM":
        return None
    world = plan["tp"] * plan["pp"] * (plan["dp"] if plan["dp"] > 1 else 1)
    if model["intermediate_size"] % world:
        return ("AssertionError", "assert config.intermediate_size % self.world_size == 0",
                "vllm/model_executor/models/gpt_oss.py MLPBlock.__init__")
    if plan["tp"] > model["num_key_value_heads"]:
        return ("ZeroDivisionError", "integer division or modulo by zero",
                "vllm/model_executor/models/gpt_oss.py OAIAttention.__init__")
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
    ("gpt_oss", rule_gpt_oss, "model construction", None, None),
    ("dense_intermediate", rule_dense_intermediate, "model construction", None, None),
    # Linear-layer weights of layer 0 (attention, dense MLP, shared experts)
    # are created before the first MoE block's FusedMoEConfig and experts.
    ("fp8_block_linear", rule_fp8_block_linear, "weight creation", None, None),
    ("int4_group_linear", rule_int4_group_linear, "weight creation", None, None),
    ("nvfp4_linear", rule_nvfp4_linear, "weight creation", None, None),
    ("moe_intermediate", rule_moe_intermediate, "model construction", None, None),
    ("fp8_block_moe", rule_fp8_block_moe, "weight creation", None, None),
    ("int4_group_moe", rule_int4_group_moe, "weight creation", None, None),
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
            errors.append({"check": name, "exception": failure[0], "message": failure[1], "source": failure[2],
                           "when": when})
    return errors
