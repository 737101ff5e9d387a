# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Enumerate, check, size and rank vLLM parallelism plans for one model on
one host. The checks are in vllm_rules.py, the memory and cost model in
vllm_memory.py; this file puts them together."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_memory import (
    GIB,
    KV_CACHE_DTYPES,
    RUNTIME_RESERVE_GIB,
    decode_estimate,
    gpu_spec,
    kv_bytes_per_token,
    kv_dtype_is_sized,
    layer_signatures,
    weights_per_gpu,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_rules import (
    check_plan,
    moe_parallel,
    parse_version,
    version_warning,
)

# vllm/config/cache.py CacheConfig.gpu_memory_utilization default, by the
# first release that has it: 0.92 in every release from 0.28.0 to 0.32.0
# (docs/vllm-rules-by-version.md); releases before 0.28 were not read, and
# 0.9 was their long-standing default.
GPU_MEMORY_UTILIZATION_DEFAULTS = (
    ((0, 0, 0), 0.9),
    ((0, 28, 0), 0.92),
)


# The planner plans one host (vLLM compares TP x PP with the GPUs of its node,
# vllm/config/parallel.py ParallelConfig.__post_init__). vLLM sets no upper
# bound of its own (tensor/pipeline/data_parallel_size are Field(ge=1)); no
# single server holds more than 64 GPUs (8 on HGX/DGX boards, 16 on the
# largest NVSwitch systems, 20 in the densest PCIe chassis), so a larger count
# is a typo or a cluster and is refused before any plan is enumerated.
MAX_GPUS_PER_HOST = 64
# Plans enumerate_plans may list: 1528 at 64 GPUs; a bound on the work and on
# the size of the result whatever the caller passes.
MAX_PLANS = 2048
# No GPU has a TiB of memory: a larger figure is a byte count or a typo.
MAX_GPU_MEMORY_GIB = 1024
PLAN_KEYS = ("tp", "pp", "dp", "ep")


class PlanError(Exception):
    """Inputs the planner cannot work with; the message names the input."""


def _is_int(value):
    # True is an int to Python, not a GPU count to anyone.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(value)


def check_count(name, value, upper=None):
    """An integer of at least 1 (and at most ``upper``), else PlanError naming ``name``."""
    if not _is_int(value) or value < 1 or (upper is not None and value > upper):
        bound = "from 1 to %d" % upper if upper is not None else "of at least 1"
        raise PlanError("%s must be an integer %s, got %r" % (name, bound, value))
    return value


def check_gpus(gpus):
    if _is_int(gpus) and gpus > MAX_GPUS_PER_HOST:
        raise PlanError("gpus must be an integer from 1 to %d (the GPUs of one host: the planner plans a single node, "
                        "as vLLM checks TP x PP against the GPUs of its node), got %r" % (MAX_GPUS_PER_HOST, gpus))
    return check_count("gpus", gpus, MAX_GPUS_PER_HOST)


def check_gpu_memory_gib(gpu_memory_gib):
    if not _is_number(gpu_memory_gib) or not 0 < gpu_memory_gib <= MAX_GPU_MEMORY_GIB:
        raise PlanError("gpu_memory_gib must be a number of GiB above 0 and at most %d (one GPU's memory), got %r"
                        % (MAX_GPU_MEMORY_GIB, gpu_memory_gib))
    return gpu_memory_gib


def check_gpu_memory_utilization(value):
    # vllm/config/cache.py CacheConfig.gpu_memory_utilization: Field(gt=0, le=1).
    if not _is_number(value) or not 0 < value <= 1:
        raise PlanError("gpu_memory_utilization must be a number in (0, 1], got %r" % (value,))
    return value


def check_max_model_len(value):
    if value == -1 and _is_int(value):
        # vLLM reads -1 as "fit the longest length memory allows"; the planner
        # needs the length to decide whether a plan fits.
        raise PlanError("max_model_len must be an integer of at least 1 (vLLM's -1, fit to memory, cannot be planned "
                        "for: give the length), got -1")
    return check_count("max_model_len", value)


def check_kv_cache_dtype(value):
    if value not in KV_CACHE_DTYPES:
        raise PlanError("kv_cache_dtype must be one of vLLM's --kv-cache-dtype values (%s), got %r"
                        % (", ".join(KV_CACHE_DTYPES), value))
    return value


def check_vllm_version(vllm_version):
    """PlanError unless a release number; returns the out-of-range warning or None."""
    try:
        return version_warning(vllm_version)
    except ValueError as exc:
        raise PlanError(str(exc))


def check_plan_fields(plan):
    """``plan`` ({tp, pp, dp, ep}, absent or None fields meaning 1, 1, 1, false)
    as a complete plan, or PlanError naming the field and its value."""
    if not isinstance(plan, dict):
        raise PlanError("plan must be a dict like {tp: 8, ep: true}, got %r" % (plan,))
    unknown = sorted(str(key) for key in plan if key not in PLAN_KEYS)
    if unknown:
        raise PlanError("plan has unknown key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(PLAN_KEYS)))
    checked = {}
    for key in ("tp", "pp", "dp"):
        value = plan.get(key)
        checked[key] = 1 if value is None else check_count("plan." + key, value, MAX_GPUS_PER_HOST)
    ep = plan.get("ep")
    if ep is not None and not isinstance(ep, bool):
        raise PlanError("plan.ep must be true or false, got %r" % (ep,))
    checked["ep"] = bool(ep)
    return checked


def check_inputs(gpus, gpu_memory_gib, vllm_version, gpu_memory_utilization=None, max_model_len=None,
                 kv_cache_dtype=None, link=None, plan=None):
    """Every input of plan_model (and the configured plan), checked before
    anything is loaded or enumerated; None means "use the default" where the
    planner has one. Returns the warnings (a version outside the rules' range)."""
    check_gpus(gpus)
    if gpu_memory_gib is not None:
        check_gpu_memory_gib(gpu_memory_gib)
    warning = check_vllm_version(vllm_version)
    if gpu_memory_utilization is not None:
        check_gpu_memory_utilization(gpu_memory_utilization)
    if max_model_len is not None:
        check_max_model_len(max_model_len)
    if kv_cache_dtype is not None:
        check_kv_cache_dtype(kv_cache_dtype)
    if link not in (None, "pcie", "nvlink"):
        raise PlanError("link must be pcie or nvlink, got %r" % (link,))
    if plan is not None:
        check_plan_fields(plan)
    return [warning] if warning else []


def default_gpu_memory_utilization(vllm_version):
    version = parse_version(vllm_version)
    value = None
    for since, default in GPU_MEMORY_UTILIZATION_DEFAULTS:
        if version >= since:
            value = default
    return value


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_plans(gpus, limit=MAX_PLANS):
    """Every (tp, pp, dp, ep) using at most ``gpus`` GPUs: all of them, a
    divisor of them, or any smaller count (TP=6 on an 8-GPU host is a plan
    people try). Expert parallel is tried wherever more than one rank would
    hold experts, on dense models too: vLLM rejects it there, and the plan
    list says so. Stops with PlanError past ``limit`` plans."""
    plans = []
    for world in range(gpus, 0, -1):
        for tp in _divisors(world):
            for pp in _divisors(world // tp):
                dp = world // tp // pp
                plans.append({"tp": tp, "pp": pp, "dp": dp, "ep": False})
                if tp * dp > 1:
                    plans.append({"tp": tp, "pp": pp, "dp": dp, "ep": True})
                if len(plans) > limit:
                    raise PlanError("gpus %d gives more than %d plans to evaluate; plan for at most %d GPUs"
                                    % (gpus, limit, MAX_GPUS_PER_HOST))
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


def _settle_memory(gpu_memory_gib, gpu_name):
    if gpu_memory_gib is not None:
        return gpu_memory_gib, "given"
    # Neither given nor gathered: the public specification of the GPU model
    # (../shared/hardware.md), the reference host's by default.
    spec_name, spec = gpu_spec(gpu_name)
    return spec["memory_gb"] * 1e9 / GIB, "specification of %s (%d GB)" % (spec_name, spec["memory_gb"])


def _settle_max_model_len(max_model_len, model):
    if max_model_len is not None:
        return max_model_len
    declared = model.get("max_position_embeddings")
    if declared is None:
        raise PlanError("max_model_len is not set and the model config has no max_position_embeddings")
    if not _is_int(declared) or declared < 1:
        raise PlanError("max_model_len is not set and the model config's max_position_embeddings is not a positive "
                        "integer (%r): set max_model_len" % (declared,))
    return declared


def _settle_kv_cache_dtype(kv_cache_dtype, model, warnings):
    quant = model.get("quantization") or {}
    kv_dtype = kv_cache_dtype or quant.get("kv_cache_dtype") or "auto"
    if not kv_dtype_is_sized(kv_dtype):
        warnings.append("kv_cache_dtype %s: the planner does not model this cache layout exactly; its KV sizes are "
                        "approximate" % kv_dtype)
    return kv_dtype


def plan_model(model, gpus, gpu_memory_gib, vllm_version, gpu_memory_utilization=None, max_model_len=None,
               kv_cache_dtype=None, gpu_name=None, link=None, measured_allreduce_us=None):
    """Evaluate every plan; return ``{"plans": [...], "recommended": plan or None, ...}``.

    Every input is checked first (PlanError names the bad one); None means
    the default: the GPU's specification, vLLM's utilization default for the
    version, the model's max_position_embeddings, the checkpoint's KV dtype."""
    warnings = check_inputs(gpus, gpu_memory_gib, vllm_version, gpu_memory_utilization, max_model_len,
                            kv_cache_dtype, link)
    version_note = warnings[0] if warnings else None
    gpu_memory_gib, memory_from = _settle_memory(gpu_memory_gib, gpu_name)
    utilization = gpu_memory_utilization
    if utilization is None:
        utilization = default_gpu_memory_utilization(vllm_version)
    max_len = _settle_max_model_len(max_model_len, model)
    kv_dtype = _settle_kv_cache_dtype(kv_cache_dtype, model, warnings)
    plans = enumerate_plans(gpus)
    signatures = layer_signatures(model)
    results = [evaluate_plan(model, plan, gpus, gpu_memory_gib, vllm_version, utilization, max_len,
                             kv_dtype, gpu_name, link, signatures, measured_allreduce_us)
               for plan in plans]
    ranked = sorted(results, key=_rank_key)
    best = ranked[0] if ranked and ranked[0]["valid"] and ranked[0]["fits"] else None
    return {
        "plans": results,
        "recommended": best,
        "version_warning": version_note,
        "warnings": warnings,
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
    """Evaluate one configured plan with the inputs ``plan_model`` settled on
    (PlanError names a bad field of ``plan``)."""
    wanted = check_plan_fields(plan)
    return evaluate_plan(model, wanted, inputs["gpus"], inputs["gpu_memory_gib"], inputs["vllm_version"],
                         inputs["gpu_memory_utilization"], inputs["max_model_len"], inputs["kv_cache_dtype"],
                         gpu_name, link, measured_allreduce_us=measured_allreduce_us)
