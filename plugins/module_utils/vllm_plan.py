# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Enumerate, check, size and rank vLLM parallelism plans for one model on
one host. The checks are in vllm_rules.py, the memory and cost model in
vllm_memory.py; this file puts them together."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_memory import (
    GIB,
    RUNTIME_RESERVE_GIB,
    decode_estimate,
    gpu_spec,
    kv_bytes_per_token,
    layer_signatures,
    weights_per_gpu,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_rules import (
    check_plan,
    moe_parallel,
    parse_version,
)

# vllm/config/cache.py CacheConfig.gpu_memory_utilization default, by the
# first release that has it: 0.92 in every release from 0.28.0 to 0.32.0
# (docs/vllm-rules-by-version.md); releases before 0.28 were not read, and
# 0.9 was their long-standing default.
GPU_MEMORY_UTILIZATION_DEFAULTS = (
    ((0, 0, 0), 0.9),
    ((0, 28, 0), 0.92),
)


class PlanError(Exception):
    """Inputs the planner cannot work with; the message names the input."""


def default_gpu_memory_utilization(vllm_version):
    version = parse_version(vllm_version)
    value = None
    for since, default in GPU_MEMORY_UTILIZATION_DEFAULTS:
        if version >= since:
            value = default
    return value


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_plans(gpus):
    """Every (tp, pp, dp, ep) using at most ``gpus`` GPUs: all of them, a
    divisor of them, or any smaller count (TP=6 on an 8-GPU host is a plan
    people try). Expert parallel is tried wherever more than one rank would
    hold experts, on dense models too: vLLM rejects it there, and the plan
    list says so."""
    plans = []
    for world in range(gpus, 0, -1):
        for tp in _divisors(world):
            for pp in _divisors(world // tp):
                dp = world // tp // pp
                plans.append({"tp": tp, "pp": pp, "dp": dp, "ep": False})
                if tp * dp > 1:
                    plans.append({"tp": tp, "pp": pp, "dp": dp, "ep": True})
    return plans


def vllm_args(plan):
    args = ["--tensor-parallel-size", str(plan["tp"])]
    if plan["pp"] > 1:
        args += ["--pipeline-parallel-size", str(plan["pp"])]
    if plan["dp"] > 1:
        args += ["--data-parallel-size", str(plan["dp"])]
    if plan["ep"]:
        args.append("--enable-expert-parallel")
    return args


def plan_name(plan):
    name = "TP%d" % plan["tp"]
    if plan["pp"] > 1:
        name += "-PP%d" % plan["pp"]
    if plan["dp"] > 1:
        name += "-DP%d" % plan["dp"]
    if plan["ep"]:
        name += "-EP"
    return name


def evaluate_plan(model, plan, gpus, gpu_memory_gib, vllm_version, utilization, max_model_len,
                  kv_cache_dtype=None, gpu_name=None, link=None, signatures=None, measured_allreduce_us=None):
    errors = check_plan(model, plan, gpus, vllm_version)
    notes = []
    moe = moe_parallel(plan) if model.get("num_experts") else None
    if moe:
        if moe["use_ep"]:
            notes.append("experts: %d per rank over %d expert-parallel ranks (MoE TP size 1)"
                         % (-(-model["num_experts"] // moe["ep_size"]), moe["ep_size"]))
        else:
            notes.append("experts: tensor-sliced over %d ranks, %d intermediate columns each"
                         % (moe["tp_size"], model["moe_intermediate_size"] // moe["tp_size"]))
    if plan["ep"] and plan["tp"] * plan["dp"] == 1:
        notes.append("--enable-expert-parallel has no effect on a single rank")
    if not model.get("mla") and model["num_key_value_heads"] < plan["tp"] and not errors:
        notes.append("KV heads replicated: %d copies of each of %d KV heads"
                     % (plan["tp"] // model["num_key_value_heads"], model["num_key_value_heads"]))
    if model.get("mla") and plan["tp"] > 1:
        notes.append("MLA: the KV latent is not split by TP; every rank caches all of it")

    stages = weights_per_gpu(model, plan, signatures)
    weights = max(s["held_bytes"] for s in stages)
    budget = gpu_memory_gib * GIB * utilization
    kv_bytes = budget - weights - RUNTIME_RESERVE_GIB * GIB
    per_token = kv_bytes_per_token(model, plan, kv_cache_dtype)
    tokens = int(kv_bytes // per_token) if kv_bytes > 0 else 0
    # vLLM refuses to start when one max-length request does not fit
    # (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory); DP
    # engines each hold their own cache.
    fits = tokens >= max_model_len
    if not fits:
        notes.append("does not fit: %.1f GiB of weights per GPU leave %.1f GiB for KV cache, %d tokens < max_model_len %d"
                     % (weights / GIB, max(kv_bytes, 0) / GIB, tokens, max_model_len))
    estimate = decode_estimate(model, plan, stages, gpu_name=gpu_name, link=link,
                               measured_allreduce_us=measured_allreduce_us)
    return {
        "name": plan_name(plan),
        "tp": plan["tp"],
        "pp": plan["pp"],
        "dp": plan["dp"],
        "ep": plan["ep"],
        "gpus_used": plan["tp"] * plan["pp"] * plan["dp"],
        "valid": not errors,
        "errors": errors,
        "notes": notes,
        "weights_gib_per_gpu": round(weights / GIB, 2),
        "kv_cache_gib_per_gpu": round(max(kv_bytes, 0) / GIB, 2),
        "kv_bytes_per_token": int(per_token),
        "kv_cache_tokens": tokens,
        "fits": fits,
        "estimate": estimate,
        "vllm_args": vllm_args(plan),
    }


def _rank_key(result):
    # Valid and fitting first; then fastest single-stream decode; then fewer
    # GPUs, then no pipeline (PP adds a bubble for single streams).
    tokens_per_s = result["estimate"]["decode_tokens_per_s"] or 0.0
    return (not (result["valid"] and result["fits"]), -tokens_per_s, result["gpus_used"], result["pp"])


def plan_model(model, gpus, gpu_memory_gib, vllm_version, gpu_memory_utilization=None, max_model_len=None,
               kv_cache_dtype=None, gpu_name=None, link=None, measured_allreduce_us=None):
    """Evaluate every plan; return ``{"plans": [...], "recommended": plan or None}``."""
    if not isinstance(gpus, int) or gpus < 1:
        raise PlanError("gpus must be a positive integer, got %r" % (gpus,))
    memory_from = "given"
    if gpu_memory_gib is None:
        # Neither given nor gathered: the public specification of the GPU
        # model (../shared/hardware.md), the reference host's by default.
        spec_name, spec = gpu_spec(gpu_name)
        gpu_memory_gib = spec["memory_gb"] * 1e9 / GIB
        memory_from = "specification of %s (%d GB)" % (spec_name, spec["memory_gb"])
    if gpu_memory_gib <= 0:
        raise PlanError("gpu_memory_gib must be a positive number, got %r" % (gpu_memory_gib,))
    utilization = gpu_memory_utilization or default_gpu_memory_utilization(vllm_version)
    if not 0 < utilization <= 1:
        raise PlanError("gpu_memory_utilization must be in (0, 1], got %r" % (utilization,))
    max_len = max_model_len or model.get("max_position_embeddings")
    if not max_len:
        raise PlanError("max_model_len is not set and the model config has no max_position_embeddings")
    quant = model.get("quantization") or {}
    kv_dtype = kv_cache_dtype or quant.get("kv_cache_dtype") or "auto"
    signatures = layer_signatures(model)
    results = [evaluate_plan(model, plan, gpus, gpu_memory_gib, vllm_version, utilization, max_len,
                             kv_dtype, gpu_name, link, signatures, measured_allreduce_us)
               for plan in enumerate_plans(gpus)]
    ranked = sorted(results, key=_rank_key)
    best = ranked[0] if ranked and ranked[0]["valid"] and ranked[0]["fits"] else None
    return {
        "plans": results,
        "recommended": best,
        "inputs": {
            "gpus": gpus,
            "gpu_memory_gib": gpu_memory_gib,
            "gpu_memory_from": memory_from,
            "gpu_memory_utilization": utilization,
            "max_model_len": max_len,
            "kv_cache_dtype": kv_dtype,
            "vllm_version": vllm_version,
            "runtime_reserve_gib": RUNTIME_RESERVE_GIB,
        },
    }


def evaluate_plan_for(model, plan, inputs, gpu_name=None, link=None, measured_allreduce_us=None):
    """Evaluate one configured plan with the inputs ``plan_model`` settled on."""
    wanted = {"tp": plan.get("tp") or 1, "pp": plan.get("pp") or 1, "dp": plan.get("dp") or 1, "ep": bool(plan.get("ep"))}
    return evaluate_plan(model, wanted, inputs["gpus"], inputs["gpu_memory_gib"], inputs["vllm_version"],
                         inputs["gpu_memory_utilization"], inputs["max_model_len"], inputs["kv_cache_dtype"],
                         gpu_name, link, measured_allreduce_us=measured_allreduce_us)
