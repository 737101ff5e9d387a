#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_bench
short_description: Sweep a vLLM server over concurrency levels and return throughput and latency as facts
version_added: 0.1.0
description:
  - Sends the same seeded random prompts at every concurrency level of O(concurrency) to an OpenAI-compatible vLLM
    server, streaming, and measures each level with the definitions of C(vllm bench serve) (vLLM 0.32
    C(vllm/benchmarks/serve.py)). TTFT is the time to the first streamed chunk, ITL the gap between chunks, TPOT
    (E2E - TTFT) / (output tokens - 1) per request, E2E the time to the last chunk. Token counts are the server's
    C(usage); throughputs are per second of the level's wall time.
  - Completion prompts are token ids, so every prompt has exactly O(input_len) tokens without a tokenizer. Chat
    prompts are those ids turned into text by the server's C(/detokenize) endpoint. With O(ignore_eos) every answer
    has exactly O(output_len) tokens.
  - Finds the saturation concurrency (the level past which more concurrency adds less than 5% output tok/s) and the
    peak. Reads vLLM's C(/metrics) before and after each level and returns the deltas (preemptions, queue time).
  - Faults are measured, not hung on. Each request has O(request_timeout). Failed requests are counted by class. A
    server that cannot be reached, or does not serve O(model), fails the task before the sweep with what it does
    serve. A server that dies mid-sweep ends the sweep and fails the task, with the levels measured so far in
    the result.
  - Must run with a Python that has C(aiohttp), for example the vLLM venv's (C(ansible_python_interpreter)).
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - aiohttp (every vLLM install has it)
options:
  base_url:
    description: Where the server answers, seen from the host the module runs on.
    type: str
    default: http://127.0.0.1:8000
  model:
    description: Served model name.
    type: str
    required: true
  api:
    description: Endpoint to load, C(/v1/completions) or C(/v1/chat/completions).
    type: str
    choices: [completions, chat]
    default: completions
  api_key:
    description: The server's API key, sent as a bearer token. Never logged or returned.
    type: str
  concurrency:
    description: Concurrency levels, in order; each keeps this many requests in flight.
    type: list
    elements: int
    default: [1, 8, 32, 128, 256, 1024]
  requests_per_level:
    description: Requests per level; 0 means four times the level's concurrency, at least 8. Ignored with O(duration).
    type: int
    default: 0
  duration:
    description: Seconds each level keeps sending (requests still in flight then are waited for); 0 sends O(requests_per_level).
    type: float
    default: 0
  input_len:
    description: Prompt length in tokens.
    type: int
    default: 512
  output_len:
    description: Tokens to generate per request (C(max_tokens)).
    type: int
    default: 128
  ignore_eos:
    description: Keep generating past end-of-sequence, so every answer has O(output_len) tokens.
    type: bool
    default: true
  warmup_requests:
    description: Requests sent one at a time before the sweep, not measured.
    type: int
    default: 2
  request_timeout:
    description: Seconds one request may take before it counts as a C(timeout) failure.
    type: float
    default: 600
  seed:
    description: Seed of the random prompts; the same seed gives the same prompts.
    type: int
    default: 0
  vocab_size:
    description:
      - Vocabulary size the prompt token ids are drawn from. Default is the C(vocab_size) of the served model's
        C(config.json), found through C(/v1/models) C(root) when that is a directory on this host, else 32000.
    type: int
  reserved_token_ids:
    description: Token ids below this are not used in prompts (most vocabularies keep special tokens there).
    type: int
    default: 16
  scrape_metrics:
    description: Read vLLM's C(/metrics) before and after each level and return the deltas.
    type: bool
    default: true
  power:
    description:
      - On hosts with NVIDIA GPUs, measure the GPUs' energy during each level (NVML's energy counter, or power sampled
        every 0.1 s where there is none) and return average watts and joules per output token.
      - Needs C(nvidia-ml-py) in the Python the module runs with (vLLM's CUDA build brings it). Without GPUs the
        figures are null and RV(power_unavailable) says why.
    type: bool
    default: true
  power_gpus:
    description: NVML indices of the GPUs the server uses; default all.
    type: list
    elements: int
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: partial
    details: A benchmark is its measurement; in check mode the module checks its inputs, sends nothing and says so.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
    platforms: posix
notes:
  - Metric names differ between tools. Here, as in C(vllm bench serve), ITL is the gap between streamed chunks and
    TPOT the per-request average time per output token after the first; guidellm's C(inter_token_latency) is this
    TPOT.
seealso:
  - name: vllm bench serve
    description: vLLM's own serving benchmark, whose metric definitions this module follows.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve/
  - module: gauntlet.vllm.vllm_wait
"""

EXAMPLES = r"""
- name: Sweep Kimi-K2.5 from 1 to 1024 concurrent requests, 512 tokens in and out
  gauntlet.vllm.vllm_bench:
    model: kimi-k2.5
    api_key: "{{ vault_vllm_api_key }}"
    concurrency: [1, 8, 32, 128, 256, 1024]
    input_len: 512
    output_len: 512
  vars:
    ansible_python_interpreter: /opt/vllm/venv/bin/python
  register: kimi_bench

- name: Show the peak
  ansible.builtin.debug:
    msg: "{{ ansible_facts.vllm_bench.peak_output_tokens_per_s }} tok/s at C={{ ansible_facts.vllm_bench.peak_concurrency }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: success
  type: dict
  contains:
    vllm_bench:
      description: The sweep, as RV(levels), RV(saturation_concurrency) and the other keys below, under one key.
      type: dict
      returned: success
levels:
  description: One entry per concurrency level measured.
  returned: always
  type: list
  elements: dict
  contains:
    concurrency:
      description: Requests kept in flight.
      type: int
    requests:
      description: Requests sent.
      type: int
    completed:
      description: Requests answered with tokens.
      type: int
    failed:
      description: Requests that failed.
      type: int
    failed_by_class:
      description: Failures per class (C(http_4xx), C(http_5xx), C(timeout), C(connection), C(stream), C(no_tokens)).
      type: dict
    first_errors:
      description: Up to five distinct error messages.
      type: list
      elements: str
    duration_s:
      description: Wall time of the level.
      type: float
    request_throughput:
      description: Completed requests per second.
      type: float
    output_tokens_per_s:
      description: Output tokens per second.
      type: float
    total_tokens_per_s:
      description: Input plus output tokens per second.
      type: float
    input_tokens:
      description: Prompt tokens of the completed requests (server's count).
      type: int
    output_tokens:
      description: Output tokens of the completed requests (server's count).
      type: int
    ttft_ms:
      description: Time to first token; C(mean), C(median), C(p90), C(p99) in ms.
      type: dict
    tpot_ms:
      description: Time per output token after the first; same statistics.
      type: dict
    itl_ms:
      description: Inter-token (inter-chunk) latency; same statistics.
      type: dict
    e2el_ms:
      description: End-to-end latency; same statistics.
      type: dict
    server_metrics:
      description: Deltas of vLLM's C(/metrics) over the level (preemptions, queue time, finished requests); empty when unavailable.
      type: dict
    client_cpu_s:
      description: CPU seconds (user + system) this module spent sending and timing the level's requests.
      type: float
    power:
      description: C(average_w), C(energy_j), C(seconds), C(gpus), C(samples) and C(source) of the GPU energy over the level; null without GPUs.
      type: dict
    joules_per_output_token:
      description: GPU energy of the level divided by its output tokens; null without GPUs.
      type: float
power_unavailable:
  description: Why no power figures were taken (no NVML, no GPUs, turned off), or null.
  returned: always
  type: str
client_cpu_s:
  description: CPU seconds of the whole module process (imports, prompts, warm-up and sweep), to compare with other clients.
  returned: always
  type: float
elapsed_s:
  description: Wall seconds of the sweep.
  returned: always
  type: float
saturation_concurrency:
  description: Lowest level past which more concurrency adds less than 5% output tok/s; null when nothing completed.
  returned: always
  type: int
peak_output_tokens_per_s:
  description: Highest output tok/s of any level.
  returned: always
  type: float
peak_concurrency:
  description: The level that reached it.
  returned: always
  type: int
workload:
  description: What was sent (model, api, lengths, seed, vocabulary, requests per level or duration).
  returned: always
  type: dict
aborted:
  description: Why the sweep stopped early (the server went away), or null.
  returned: always
  type: str
"""

import asyncio
import json
import os
import resource
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.gauntlet.vllm.plugins.module_utils import vllm_bench as bench
from ansible_collections.gauntlet.vllm.plugins.module_utils.gpu_power import PowerMeter

# Counters of vLLM's /metrics whose change over a level is reported.
SERVER_COUNTERS = (
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_queue_time_seconds_count",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)
DEFAULT_VOCAB = 32000


def _get(module, url, api_key, timeout=10, data=None):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    response = open_url(url, data=None if data is None else json.dumps(data), method="POST" if data else "GET",
                        headers=headers, timeout=timeout, validate_certs=False)
    return response.read().decode("utf-8")


def served_models(module, params):
    """The /v1/models list, or a failure that says why the server cannot be used."""
    url = params["base_url"].rstrip("/") + "/v1/models"
    try:
        listing = json.loads(_get(module, url, params["api_key"]))
    except HTTPError as exc:
        module.fail_json(msg="%s answered HTTP %s%s" % (url, exc.code, " (is api_key right?)" if exc.code == 401 else ""))
    except (URLError, OSError, ValueError) as exc:
        module.fail_json(msg="cannot reach the server at %s: %s" % (params["base_url"], getattr(exc, "reason", exc)))
    return listing.get("data") or []


def vocabulary(params, model_entry):
    if params["vocab_size"]:
        return params["vocab_size"], "given"
    root = (model_entry or {}).get("root") or ""
    config = os.path.join(root, "config.json")
    if os.path.isfile(config):
        with open(config) as handle:
            data = json.load(handle)
        size = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
        if size:
            return int(size), config
    return DEFAULT_VOCAB, "default"


def scrape(module, params):
    if not params["scrape_metrics"]:
        return None
    try:
        text = _get(module, params["base_url"].rstrip("/") + "/metrics", params["api_key"])
    except (HTTPError, URLError, OSError, ValueError):
        return None
    return bench.parse_prometheus(text, set(SERVER_COUNTERS))


def reachable(module, params):
    try:
        _get(module, params["base_url"].rstrip("/") + "/health", params["api_key"], timeout=5)
        return True
    except (HTTPError, URLError, OSError, ValueError):
        return False


def chat_prompts(module, params, token_prompts):
    """Text for the chat API: the seeded token ids, detokenized by the server itself."""
    prompts = []
    for ids in token_prompts:
        try:
            answer = json.loads(_get(module, params["base_url"].rstrip("/") + "/detokenize", params["api_key"],
                                     data={"model": params["model"], "tokens": ids}))
        except (HTTPError, URLError, OSError, ValueError) as exc:
            module.fail_json(msg="the server could not detokenize the chat prompts: %s" % getattr(exc, "reason", exc))
        prompts.append(answer["prompt"])
    return prompts


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", default="http://127.0.0.1:8000"),
            model=dict(type="str", required=True),
            api=dict(type="str", default="completions", choices=["completions", "chat"]),
            api_key=dict(type="str", no_log=True),
            concurrency=dict(type="list", elements="int", default=[1, 8, 32, 128, 256, 1024]),
            requests_per_level=dict(type="int", default=0),
            duration=dict(type="float", default=0),
            input_len=dict(type="int", default=512),
            output_len=dict(type="int", default=128),
            ignore_eos=dict(type="bool", default=True),
            warmup_requests=dict(type="int", default=2),
            request_timeout=dict(type="float", default=600),
            seed=dict(type="int", default=0),
            vocab_size=dict(type="int"),
            reserved_token_ids=dict(type="int", default=16, no_log=False),
            scrape_metrics=dict(type="bool", default=True),
            power=dict(type="bool", default=True),
            power_gpus=dict(type="list", elements="int"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if bench.aiohttp is None:
        module.fail_json(msg=missing_required_lib("aiohttp", reason="run the module with the vLLM venv's Python"))
    bad = [value for value in params["concurrency"] if value < 1]
    if not params["concurrency"] or bad:
        module.fail_json(msg="concurrency must be a list of levels of 1 or more (got %s)" % params["concurrency"])
    if params["input_len"] < 1 or params["output_len"] < 1:
        module.fail_json(msg="input_len and output_len must be 1 or more (got %d and %d)"
                         % (params["input_len"], params["output_len"]))
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="a benchmark does not run in check mode", levels=[],
                         saturation_concurrency=None, peak_output_tokens_per_s=0.0, peak_concurrency=None,
                         workload={}, aborted=None)

    models = served_models(module, params)
    entry = next((item for item in models if item.get("id") == params["model"]), None)
    if entry is None:
        module.fail_json(msg="the server at %s does not serve model '%s'; it serves %s"
                         % (params["base_url"], params["model"], [item.get("id") for item in models]))
    vocab_size, vocab_from = vocabulary(params, entry)
    largest = max(params["concurrency"])
    per_level = params["requests_per_level"] or max(8, 4 * largest)
    token_prompts = bench.random_token_prompts(per_level, params["input_len"], vocab_size, params["seed"],
                                               reserved_ids=min(params["reserved_token_ids"], vocab_size - 1))
    prompts = chat_prompts(module, params, token_prompts) if params["api"] == "chat" else token_prompts
    prompt_lens = [len(ids) for ids in token_prompts]
    workload = {"model": params["model"], "base_url": params["base_url"], "api": params["api"],
                "input_len": params["input_len"], "output_len": params["output_len"],
                "ignore_eos": params["ignore_eos"], "seed": params["seed"], "vocab_size": vocab_size,
                "vocab_size_from": vocab_from, "prompts": per_level,
                "requests_per_level": None if params["duration"] else "4 x concurrency, at least 8"
                if not params["requests_per_level"] else params["requests_per_level"],
                "duration_s": params["duration"] or None, "max_model_len": entry.get("max_model_len")}

    meter = PowerMeter(indices=params["power_gpus"]) if params["power"] else None
    power_unavailable = "turned off (power: false)" if meter is None else meter.reason
    loop = asyncio.new_event_loop()
    try:
        if params["warmup_requests"]:
            loop.run_until_complete(bench.run_level(
                params["base_url"], params["api"], params["model"], prompts[:params["warmup_requests"]],
                prompt_lens, 1, params["output_len"], params["ignore_eos"], params["request_timeout"],
                params["api_key"]))
        levels = []
        aborted = None
        started = time.time()
        for concurrency in params["concurrency"]:
            if not reachable(module, params):
                aborted = "the server stopped answering /health before level C=%d" % concurrency
                break
            count = len(prompts) if params["duration"] else (params["requests_per_level"] or max(8, 4 * concurrency))
            before = scrape(module, params)
            cpu_before = _cpu_seconds()
            if meter is not None:
                meter.start()
            records, wall = loop.run_until_complete(bench.run_level(
                params["base_url"], params["api"], params["model"], prompts[:count], prompt_lens[:count], concurrency,
                params["output_len"], params["ignore_eos"], params["request_timeout"], params["api_key"],
                duration_s=params["duration"] or None))
            energy = meter.stop() if meter is not None else None
            after = scrape(module, params)
            level = bench.level_metrics(concurrency, records, wall)
            level["power"] = energy
            level["joules_per_output_token"] = (round(energy["energy_j"] / level["output_tokens"], 4)
                                                if energy and level["output_tokens"] else None)
            level["client_cpu_s"] = round(_cpu_seconds() - cpu_before, 3)
            level["server_metrics"] = ({name: round(after.get(name, 0.0) - before.get(name, 0.0), 6)
                                        for name in SERVER_COUNTERS if name in after}
                                       if before is not None and after is not None else {})
            levels.append(level)
            if level["completed"] == 0 and not reachable(module, params):
                aborted = "the server went away during level C=%d" % concurrency
                break
    finally:
        loop.close()
        if meter is not None:
            meter.close()

    result = dict(levels=levels, workload=workload, aborted=aborted, elapsed_s=round(time.time() - started, 1),
                  power_unavailable=power_unavailable,
                  client_cpu_s=round(_cpu_seconds(), 3))
    result.update(bench.saturation(levels))
    if aborted:
        module.fail_json(msg="%s; %d level(s) measured before that are in 'levels'" % (aborted, len(levels)), **result)
    module.exit_json(changed=False, ansible_facts={"vllm_bench": result}, **result)


if __name__ == "__main__":
    main()
