#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_bench
short_description: Sweep a vLLM server over concurrency levels and request rates; throughput, latency, goodput as facts
version_added: 0.1.0
description:
  - Sends seeded random prompts at every concurrency level of O(concurrency) to an OpenAI-compatible vLLM server,
    streaming, and measures each level with the definitions of C(vllm bench serve) (vLLM 0.32
    C(vllm/benchmarks/serve.py)). TTFT is the time to the first streamed chunk, ITL the gap between chunks, TPOT
    (E2E - TTFT) / (output tokens - 1) per request, E2E the time to the last chunk. Token counts are the server's
    C(usage); throughputs are per second of the level's wall time.
  - Each level and the warm-up draw prompts of their own from O(seed), so no level finds an earlier one's prompts
    in vLLM's prefix cache; only O(prefix_len) is shared. Each level returns the share of its prompt tokens the
    cache held (C(prefix_cache_hit_rate)).
  - Completion prompts are token ids, so every prompt has exactly O(input_len) tokens without a tokenizer. Chat
    prompts are those ids turned into text by the server's C(/detokenize) endpoint. With O(ignore_eos) every answer
    has exactly O(output_len) tokens.
  - Finds the saturation concurrency (the level past which more concurrency adds less than 5% output tok/s) and the
    peak. Reads vLLM's C(/metrics) before and after each level and returns the deltas (preemptions, queue time).
  - Faults are measured, not hung on. Each request has O(request_timeout). Failed requests are counted by class. A
    server that cannot be reached, does not serve O(model), or answers C(/v1/models) or C(/detokenize) with
    something else than vLLM's JSON fails the task before the sweep, saying which endpoint and what was wrong.
  - A level whose failed requests exceed O(max_failure_ratio) of its requests, or that completes none, fails the
    task. The level stops sending as soon as its failures exceed that allowance and cancels the requests in flight
    (C(abandoned) in RV(levels)). A server whose completions all hang thus costs (allowed failures + 1) /
    concurrency O(request_timeout)s, rounded up (one for most levels), not the whole sweep. A failed warm-up
    request fails the task before the sweep. A server that dies mid-sweep ends the sweep the same way. The levels
    measured, the failed one included, stay in the result with RV(failed_level) and the reason in RV(aborted).
  - Real traffic, as C(vllm bench serve) names it. O(request_rate) adds open-loop levels (requests arrive on a
    schedule, Poisson or gamma with O(burstiness), capped by O(max_concurrency)); O(range_ratio) mixes lengths;
    O(prefix_len) shares a prefix; O(dataset) replays a custom JSONL; O(goodput) sets SLOs, which give each level its
    good requests per second and the sweep its max sustainable rate (RV(max_sustainable_rate)), found on the ladder
    or by bisection (O(rate_search_steps)).
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
    description:
      - The server's API key, sent as a bearer token. Never logged or returned.
      - Redirects are never followed, so that the key goes to O(base_url) only; a server that redirects fails with
        where it points to.
    type: str
  validate_certs:
    description: With an C(https) O(base_url), verify the server's certificate. Set to V(false) only for a self-signed test server.
    type: bool
    default: true
  concurrency:
    description:
      - Closed-loop levels, in order; each keeps this many requests in flight (a request is sent when one finishes).
      - May be empty when O(request_rate) is given.
    type: list
    elements: int
    default: [1, 8, 32, 128, 256, 1024]
  request_rate:
    description:
      - Open-loop levels, measured after the O(concurrency) levels, in order, as C(vllm bench serve --request-rate).
        Each is a number of requests per second (above 0) or V(inf) (every request of the level at once).
      - Requests arrive when they are due, whatever is in flight (only O(max_concurrency) holds them back), with
        gaps drawn from a gamma distribution of shape O(burstiness); the arrival times are scaled so that the last
        falls at requests / rate, as vLLM does.
      - A level sends O(requests_per_level) requests; without it, O(duration) seconds of arrivals; without that,
        10 seconds of them (at least 16). An V(inf) level without O(requests_per_level) sends 4 x
        O(max_concurrency) (at least 16).
      - Each level draws its own prompts from O(seed), so vLLM's prefix cache holds for it only what the workload
        shares (O(prefix_len)), not earlier levels' prompts.
    type: list
    elements: raw
    default: []
  burstiness:
    description:
      - Shape of the gamma distribution of the open-loop gaps, as C(--burstiness). V(1) is a Poisson process (gaps'
        coefficient of variation 1); higher is more regular (CV 1/sqrt(burstiness), V(4) gives 0.5), lower burstier.
    type: float
    default: 1.0
  max_concurrency:
    description:
      - Most requests in flight during an open-loop level, as C(--max-concurrency); a request due when that many are
        in flight waits for one to finish (its TTFT starts when it is sent). V(0) sets no cap.
    type: int
    default: 0
  range_ratio:
    description:
      - Length mix, as C(--random-range-ratio). Each request's input and output lengths are uniform whole numbers in
        [L x (1 - r), L x (1 + r)] around O(input_len) and O(output_len) (rounded outwards; the output at least 1).
        At least 0 and below 1; V(0) gives every request exactly those lengths.
    type: float
    default: 0.0
  prefix_len:
    description:
      - Tokens of a random prefix shared by every prompt of the sweep, before its O(input_len) tokens, as
        C(--random-prefix-len). vLLM's prefix cache can then serve them; RV(levels[].prefix_cache_hit_rate) says
        how much it did.
    type: int
    default: 0
  dataset:
    description:
      - Where the prompts come from. V(random) (default) - seeded random token ids of O(input_len) / O(output_len)
        with O(range_ratio) and O(prefix_len).
      - V(custom) - C(vllm bench serve)'s custom JSONL at O(dataset.path), to replay your own traffic. Each non-blank
        line is an object with C(prompt) (a string) and optionally C(output_tokens) (whole number of 1 or more,
        default O(output_len)). Every level sends its lines in order from the first, cycling when it needs more.
        With O(api=chat) each prompt is the content of one user message (the server applies the chat template); with
        V(completions) it is sent as it is (C(vllm bench serve) wraps it in the chat template unless told
        C(--skip-chat-template)). Input token counts are then the server's (C(usage)).
      - A file that cannot be read, is not UTF-8 JSONL, or has a line without a C(prompt) string or with a bad
        C(output_tokens) fails the task before anything is sent, naming the file, the line and the field.
    type: dict
    suboptions:
      type:
        description: V(random) or V(custom).
        type: str
        choices: [random, custom]
        default: random
      path:
        description: The JSONL file on the host the module runs on; required for V(custom).
        type: path
  goodput:
    description:
      - Service level objectives in milliseconds, as C(--goodput ttft:<ms> tpot:<ms> e2el:<ms>); any of the three.
      - A completed request is good when its TTFT, TPOT (0 for a single output token) and E2E are each at or below
        the limit given. Every level reports its good requests per second (RV(levels[].goodput)).
      - A level meets the SLO (C(slo_met)) when it completed every request and the p99 of each metric given is
        within its limit. The highest open-loop rate that meets it is RV(max_sustainable_rate).
    type: dict
    suboptions:
      ttft_ms:
        description: Time to first token, at most, in ms.
        type: float
      tpot_ms:
        description: Time per output token after the first, at most, in ms.
        type: float
      e2el_ms:
        description: End-to-end latency, at most, in ms.
        type: float
  rate_search_steps:
    description:
      - After the O(request_rate) ladder, measure up to this many more open-loop levels, each at the midpoint between
        the highest rate that met the O(goodput) SLO and the lowest measured rate above it that did not (half the
        lowest rate when none met it). It stops early once that bracket is narrower than 2% of its top. Needs
        O(goodput) and O(request_rate); at most 20.
    type: int
    default: 0
  requests_per_level:
    description:
      - Requests per level; 0 means four times the level's concurrency, at least 8 (closed loop), or the rule of
        O(request_rate) (open loop). Ignored by closed-loop levels with O(duration).
    type: int
    default: 0
  duration:
    description:
      - Seconds each closed-loop level keeps sending (requests still in flight then are waited for); 0 sends
        O(requests_per_level). An open-loop level sends rate x O(duration) requests when O(requests_per_level) is 0.
    type: float
    default: 0
  input_len:
    description: Prompt length in tokens (the mean with O(range_ratio); the prefix comes on top).
    type: int
    default: 512
  output_len:
    description: Tokens to generate per request (C(max_tokens)); the mean with O(range_ratio).
    type: int
    default: 128
  ignore_eos:
    description: Keep generating past end-of-sequence, so every answer has O(output_len) tokens.
    type: bool
    default: true
  warmup_requests:
    description:
      - Requests sent before the sweep, not measured, up to the highest O(concurrency) at a time (as C(vllm bench serve
        --num-warmups) does with its C(--max-concurrency)).
      - A server just started is slow on its first batches of a new size; warm-up requests at the sweep's concurrency
        keep that out of the first level.
    type: int
    default: 2
  request_timeout:
    description: Seconds one request may take before it counts as a C(timeout) failure; must be above 0.
    type: float
    default: 600
  max_failure_ratio:
    description:
      - Share of a level's requests (between 0 and 1) that may fail before the level fails the task. The failures
        allowed are this share of the level's requests, rounded down (with O(duration), of the prompts or of the
        requests sent, whichever is more); 0.05 of 32 requests allows 1.
      - A level that completes no request fails whatever this is.
    type: float
    default: 0.05
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
  - E2E ends, as in C(vllm bench serve), at the last streamed chunk that carries a choice; the usage chunk and
    C([DONE]) after it do not count.
  - Failure counting differs from C(vllm bench serve) (vLLM 0.32 C(endpoint_request_func.py)). There a request
    succeeds when it answered HTTP 200 with at least one chunk carrying a choice and reading the body raised no
    error; C([DONE]) and error events (an object with an C(error) key) are not looked at. Here it must also end with
    C([DONE]) and carry no error event. So a stream that stops cleanly before C([DONE]), or one where vLLM's server reports an error
    after some tokens (it sends an error event, then C([DONE])), is a success there and a C(stream) failure here.
    A chunked body cut off is a failure in both.
  - A request whose whole answer arrived in one network read has TPOT 0 in C(vllm bench serve); here it is left out
    of C(tpot_ms) and counted in C(unstreamed_requests), as is one whose tokens after the first came faster than
    50 microseconds each (a burst of a few reads after the request had ended, not a decode).
  - Without C(usage), C(vllm bench serve) counts output tokens by re-tokenising the text; here each chunk with a
    choice counts one. Its request timeout is 6 hours; here O(request_timeout). When every request fails it warns
    and exits 0 with C(completed=0); here the level fails the task (O(max_failure_ratio)).
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

- name: Open loop - Poisson arrivals at 2, 4, 8 and 16 req/s, lengths mixed +-50%, a 256-token shared prefix
  gauntlet.vllm.vllm_bench:
    model: kimi-k2.5
    api_key: "{{ vault_vllm_api_key }}"
    concurrency: []
    request_rate: [2, 4, 8, 16]
    burstiness: 1
    range_ratio: 0.5
    prefix_len: 256
    goodput: {ttft_ms: 2000, tpot_ms: 50}
    rate_search_steps: 3
  vars:
    ansible_python_interpreter: /opt/vllm/venv/bin/python
  register: kimi_rates

- name: Replay your own prompts through the chat API at 4 req/s
  gauntlet.vllm.vllm_bench:
    model: kimi-k2.5
    api: chat
    api_key: "{{ vault_vllm_api_key }}"
    concurrency: []
    request_rate: [4]
    dataset: {type: custom, path: /var/lib/traffic/prompts.jsonl}
  vars:
    ansible_python_interpreter: /opt/vllm/venv/bin/python

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
      description:
        - Failures per class (C(http_4xx), C(http_5xx), C(http_other) (a redirect, not followed), C(timeout),
          C(connection), C(stream) (cut off before C([DONE]), an error event, an unreadable event), C(no_tokens)).
      type: dict
    abandoned:
      description: Requests in flight when the level was stopped for too many failures, cancelled; neither requests nor failures.
      type: int
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
      description: Time to first token; C(mean), C(median), C(p50) (the median again), C(p90), C(p99) in ms.
      type: dict
    tpot_ms:
      description:
        - Time per output token after the first; same statistics.
        - Requests whose whole answer arrived at once are left out (see C(unstreamed_requests)); all zeros when
          no request of the level streamed.
      type: dict
    unstreamed_requests:
      description:
        - Completed requests of more than one token whose whole answer reached the client at once, so their decode
          time was not seen. The client or the server waited for the CPU until they had ended.
        - At once means in one network read (E2E equal to TTFT) or in a burst of reads whose tokens after the first
          came faster than 50 microseconds each, faster than any engine step.
        - Their TPOT, which C(vllm bench serve) counts as 0 or near it, is left out of C(tpot_ms).
      type: int
    itl_ms:
      description: Inter-token (inter-chunk) latency; same statistics.
      type: dict
    e2el_ms:
      description: End-to-end latency; same statistics.
      type: dict
    server_metrics:
      description: Deltas of vLLM's C(/metrics) over the level (preemptions, queue time, finished requests); empty when unavailable.
      type: dict
    server_ttft_ms:
      description:
        - vLLM's own time to first token over the level, from the change of its C(vllm:time_to_first_token_seconds)
          histogram - C(requests), C(p50_ms_at_most) and C(p99_ms_at_most) (the upper bound of the bucket each
          percentile falls in; null past the last finite bucket). Null when C(/metrics) lacks it.
        - Beside the client's RV(levels[].ttft_ms) it says where a slow first token waited. When the client's p99 TTFT
          misses the SLO but vLLM's own p99 is within it, RV(levels[].slo_misses) says the rest passed outside the
          engine (the network, the HTTP front end or the client).
      type: dict
    client_cpu_s:
      description: CPU seconds (user + system) this module spent sending and timing the level's requests.
      type: float
    power:
      description:
        - GPU energy over the level; null without GPUs. C(energy_j), C(seconds), C(gpus), C(samples), C(source)
          (C(energy counter) or C(power samples)), C(average_w) (C(energy_j) / C(seconds)) and C(sampled_average_w)
          (the mean of the power samples, which lag the load; null without samples).
      type: dict
    joules_per_output_token:
      description: GPU energy of the level divided by its output tokens; null without GPUs.
      type: float
    client_cpu_ms_per_request:
      description: RV(levels[].client_cpu_s) per request sent, in ms.
      type: float
    prefix_cache_hit_rate:
      description:
        - Share (0 to 1) of the prompt tokens vLLM looked up in its prefix cache over the level that it found there
          (C(vllm:prefix_cache_hits_total) / C(vllm:prefix_cache_queries_total)); null when C(/metrics) lacks them.
      type: float
    goodput:
      description:
        - With O(goodput) - C(good_requests) (completed requests that met every SLO given) and C(request_goodput)
          (them per second of the level's duration); null without.
      type: dict
    slo_met:
      description: With O(goodput) - whether every request completed and each p99 given is within its SLO; null without.
      type: bool
    slo_misses:
      description: What kept the level from meeting the SLO (C(p99 TTFT 812.0 ms > 500 ms), failed requests); empty when met.
      type: list
      elements: str
rate_levels:
  description:
    - One entry per open-loop level measured (O(request_rate)), the ladder first, then the levels of the search.
    - Each has every key of RV(levels) but C(concurrency), and the keys below.
  returned: always
  type: list
  elements: dict
  contains:
    request_rate:
      description: The target rate in requests/s, or the string C(inf).
      type: raw
    burstiness:
      description: The gamma shape of the gaps.
      type: float
    max_concurrency:
      description: The cap on requests in flight, or null.
      type: int
    searched:
      description: Whether the level was added by the search for the max rate (O(rate_search_steps)).
      type: bool
    request_throughput:
      description: The achieved rate - completed requests per second of the level's duration (first due to last done).
      type: float
    arrivals:
      description:
        - How the client kept the schedule. C(planned) and C(sent) requests, C(window_s) (first to last send),
          C(offered_rate) (sends per second over that window), C(gap_cv) (the coefficient of variation of the gaps
          between sends - about 1 for Poisson), C(lag_ms_p99) (how late the p99 send was against its schedule).
      type: dict
    waiting_at_arrivals_end:
      description:
        - When the level's last request was due - C(client) (requests due and not finished, those held by the cap
          included), C(queued_by_cap) (held by O(max_concurrency), not sent yet), C(server_waiting) (vLLM's
          C(vllm:num_requests_waiting) then; null when C(/metrics) could not tell).
      type: dict
slo:
  description: The O(goodput) SLO the figures were judged by (its keys given), or null.
  returned: always
  type: dict
max_sustainable_rate:
  description:
    - The highest target request rate whose open-loop level met the O(goodput) SLO (every request completed, each p99
      within its limit); for an V(inf) level, its achieved rate, but only when no finite rate missed the SLO (beside
      one that did, a burst that met it says nothing about a sustained rate). Null without an SLO, without open-loop
      levels, or when no level met it.
  returned: always
  type: float
max_sustainable_rate_reason:
  description: How RV(max_sustainable_rate) was found (which level above missed), or why it is null.
  returned: always
  type: str
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
  description:
    - What was sent - model, api, lengths, seed, vocabulary, requests per level or duration, max_failure_ratio,
      temperature, request rates, burstiness, max_concurrency, range_ratio, prefix_len, dataset (type, path, lines),
      goodput and rate_search_steps.
  returned: always
  type: dict
aborted:
  description: Why the sweep failed (a level past O(max_failure_ratio), a failed warm-up request, the server went away), or null.
  returned: always
  type: str
failed_level:
  description:
    - The level that failed the sweep (or before which the server stopped answering) - its concurrency, or for an
      open-loop level its request rate (a number, or C(inf)); null when none did.
  returned: always
  type: raw
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench as bench

ARGUMENT_SPEC = dict(
    base_url=dict(type="str", default="http://127.0.0.1:8000"),
    model=dict(type="str", required=True),
    api=dict(type="str", default="completions", choices=["completions", "chat"]),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    concurrency=dict(type="list", elements="int", default=[1, 8, 32, 128, 256, 1024]),
    requests_per_level=dict(type="int", default=0),
    duration=dict(type="float", default=0),
    input_len=dict(type="int", default=512),
    output_len=dict(type="int", default=128),
    ignore_eos=dict(type="bool", default=True),
    warmup_requests=dict(type="int", default=2),
    request_timeout=dict(type="float", default=600),
    max_failure_ratio=dict(type="float", default=0.05),
    seed=dict(type="int", default=0),
    vocab_size=dict(type="int"),
    reserved_token_ids=dict(type="int", default=16, no_log=False),
    scrape_metrics=dict(type="bool", default=True),
    power=dict(type="bool", default=True),
    power_gpus=dict(type="list", elements="int"),
    request_rate=dict(type="list", elements="raw", default=[]),
    burstiness=dict(type="float", default=1.0),
    max_concurrency=dict(type="int", default=0),
    range_ratio=dict(type="float", default=0.0),
    prefix_len=dict(type="int", default=0),
    dataset=dict(type="dict", options=dict(
        type=dict(type="str", choices=["random", "custom"], default="random"),
        path=dict(type="path"),
    )),
    goodput=dict(type="dict", options=dict(
        ttft_ms=dict(type="float"),
        tpot_ms=dict(type="float"),
        e2el_ms=dict(type="float"),
    )),
    rate_search_steps=dict(type="int", default=0),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if bench.aiohttp is None:
        module.fail_json(msg=missing_required_lib("aiohttp", reason="run the module with the vLLM venv's Python"))
    request = bench.SweepRequest.from_module_params(module.params)
    problems = bench.validate_options(request)
    if problems:
        module.fail_json(msg="; ".join(problems))
    if module.check_mode:
        module.exit_json(**bench.check_mode_result())
    try:
        result = bench.run_sweep(request)
    except bench.BenchError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    else:
        module.exit_json(changed=False, ansible_facts={"vllm_bench": result}, **result)


if __name__ == "__main__":
    main()
