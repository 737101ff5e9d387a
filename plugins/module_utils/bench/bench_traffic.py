# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Real traffic for ``vllm_bench``: open-loop arrivals, length mixes, shared prefixes, custom datasets,
goodput under SLOs and the max sustainable rate. Pure functions (no aiohttp, no network), named as
``vllm bench serve`` names them, with the definitions of vLLM 0.32's ``vllm/benchmarks``:

- Arrivals (``serve.py`` ``get_request``): gaps drawn from a gamma distribution of shape ``burstiness``
  and scale ``1 / (request_rate * burstiness)`` (``burstiness`` 1 is a Poisson process; its gaps' coefficient
  of variation is ``1 / sqrt(burstiness)``). The cumulative times are then scaled so that the last arrival
  falls at ``requests / request_rate``, as vLLM does "to stabilise the throughput across seeds". A rate of
  ``inf`` sends every request at once. Each request's send time is fixed before the level starts, so a slow
  client does not drift the schedule (a late send is measured as ``lag``).
- Lengths (``datasets/utils.py`` ``get_sampling_params``): input and output lengths uniform integers in
  ``[floor(L * (1 - r)), ceil(L * (1 + r))]``, the output's low bound at least 1, ``r`` in [0, 1).
- Shared prefix (``RandomDataset`` ``prefix_len``): the same ``prefix_len`` random tokens before every
  prompt, whose length is then ``prefix_len`` + its sampled input length.
- Custom dataset (``CustomDataset``): JSONL, one object per line with ``prompt`` and, optionally,
  ``output_tokens``.
- Goodput (``serve.py`` ``calculate_metrics``): a completed request is good when each given SLO holds:
  TTFT, TPOT (0 for a request of one output token) and E2E each at or below its limit in ms. Goodput is
  the good requests per second of the level's duration.

The max sustainable rate is ours: the highest target rate whose level completed every request and whose
p99 of each SLO metric is within it (the SLO held for 99% of requests, not only on average).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math

INF = float("inf")

# The goodput SLO keys, the level's latency figure each limits, and its name in messages.
SLO_METRICS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2el_ms", "E2E"))
# A custom dataset larger than this is refused (it is read whole, on the host).
MAX_DATASET_BYTES = 256 * 1024 * 1024
# Bisection stops when the bracket is narrower than this share of its upper end.
SEARCH_RESOLUTION = 0.02
# Open-loop levels without requests_per_level or duration send this many seconds of arrivals.
DEFAULT_RATE_LEVEL_S = 10.0
MIN_RATE_LEVEL_REQUESTS = 16
# An open-loop level's prompts are built before it starts: a rate of millions per second would build them for ever.
MAX_LEVEL_REQUESTS = 100000


class DatasetError(ValueError):
    """A custom dataset that cannot be used; the message names the file, the line and the field."""


def parse_rate(value):
    """A request rate as a float (``inf`` for the string "inf" or a float infinity), or ValueError saying why."""
    if isinstance(value, bool):
        raise ValueError("%r is not a number of requests/s or 'inf'" % (value,))
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return INF
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError("%r is not a number of requests/s or 'inf'" % (value,))
    if math.isnan(rate) or rate <= 0:
        raise ValueError("%r is not above 0 requests/s" % (value,))
    return rate


def percentile(values, pct):
    """numpy.percentile's default (linear) on a plain list; 0.0 for no values, as vLLM reports."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(math.floor(rank))
    high = int(math.ceil(rank))
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize_ms(values):
    """Mean, median (also as p50), p90 and p99 of a list of seconds, in milliseconds."""
    mean = sum(values) / len(values) if values else 0.0
    median = round(percentile(values, 50) * 1000, 3)
    return {
        "mean": round(mean * 1000, 3),
        "median": median,
        "p50": median,
        "p90": round(percentile(values, 90) * 1000, 3),
        "p99": round(percentile(values, 99) * 1000, 3),
    }


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def rate_problems(rates, requests_per_level, duration, max_concurrency, name="request_rate",
                  hint="set requests_per_level or duration"):
    """Problems of open-loop rates, each naming ``name[i]``: a rate that is not above 0 or ``inf``, or one whose
    level would build more than MAX_LEVEL_REQUESTS requests (``hint`` says what to set instead)."""
    problems = []
    for index, rate in enumerate(rates):
        try:
            count = requests_for_rate(parse_rate(rate), requests_per_level or 0, duration, max_concurrency or 0)
        except (ValueError, TypeError) as exc:
            problems.append("%s[%d]: %s" % (name, index, exc))
            continue
        if count > MAX_LEVEL_REQUESTS:
            problems.append("%s[%d]: %s makes a level of %d requests, more than %d; %s"
                            % (name, index, rate, count, MAX_LEVEL_REQUESTS, hint))
    return problems


def mix_problems(range_ratio, goodput, prefix=""):
    """Problems of the length mix (``range_ratio`` in [0, 1)) and the goodput SLO (``ttft_ms``, ``tpot_ms``,
    ``e2el_ms``, each milliseconds above 0 or None for no limit), each naming ``prefix`` + the field."""
    problems = []
    if not (_is_number(range_ratio) and 0 <= range_ratio < 1):
        problems.append("%srange_ratio must be at least 0 and below 1 (got %s)" % (prefix, range_ratio))
    for key, value in sorted((goodput or {}).items()):
        if key not in [name for name, dummy in SLO_METRICS]:
            problems.append("%sgoodput.%s is not an SLO (ttft_ms, tpot_ms or e2el_ms)" % (prefix, key))
        elif value is not None and not (_is_number(value) and math.isfinite(value) and value > 0):
            problems.append("%sgoodput.%s must be a number of milliseconds above 0 (got %s)" % (prefix, key, value))
    return problems


def rate_label(rate):
    """A rate as results carry it: the number, or the string "inf" (JSON has no infinity)."""
    return "inf" if rate == INF else round(rate, 6)


def rate_text(rate):
    return "inf" if rate == INF else "%g req/s" % rate


def requests_for_rate(rate, requests_per_level, duration, max_concurrency):
    """How many requests an open-loop level sends: ``requests_per_level`` when given; else ``duration``
    seconds of arrivals; else 10 seconds of them (at least 16). An ``inf`` level without a count sends
    four times ``max_concurrency`` (at least 16)."""
    if requests_per_level:
        return requests_per_level
    if rate == INF:
        return max(MIN_RATE_LEVEL_REQUESTS, 4 * (max_concurrency or 0))
    seconds = duration or DEFAULT_RATE_LEVEL_S
    return max(MIN_RATE_LEVEL_REQUESTS if not duration else 1, int(math.ceil(rate * seconds - 1e-9)))


def arrival_offsets(count, rate, burstiness, rng):
    """Seconds from the level's start at which each of ``count`` requests is due (vLLM's ``get_request``)."""
    if rate == INF:
        return [0.0] * count
    if burstiness == INF:
        gaps = [1.0 / rate] * count
    else:
        theta = 1.0 / (rate * burstiness)
        gaps = [rng.gammavariate(burstiness, theta) for dummy in range(count)]
    offsets = []
    total = 0.0
    for gap in gaps:
        total += gap
        offsets.append(total)
    if offsets and offsets[-1] > 0:
        scale = (count / rate) / offsets[-1]
        offsets = [offset * scale for offset in offsets]
    return offsets


def length_bounds(length, range_ratio, least=0):
    """The uniform range of a length around ``length`` (``get_sampling_params``)."""
    low = max(least, int(math.floor(length * (1 - range_ratio))))
    high = max(least, int(math.ceil(length * (1 + range_ratio))))
    return low, high


def sample_lengths(count, input_len, output_len, range_ratio, rng):
    """``count`` input and output lengths, uniform around the means (``range_ratio`` 0: exactly them)."""
    in_low, in_high = length_bounds(input_len, range_ratio, least=1)
    out_low, out_high = length_bounds(output_len, range_ratio, least=1)
    inputs = [rng.randint(in_low, in_high) for dummy in range(count)]
    outputs = [rng.randint(out_low, out_high) for dummy in range(count)]
    return inputs, outputs


def shared_prefix(prefix_len, vocab_size, reserved_ids, rng):
    """The random prefix every prompt of a sweep starts with (``prefix_len`` ids above the reserved ones)."""
    return [reserved_ids + rng.randrange(vocab_size - reserved_ids) for dummy in range(prefix_len)]


def token_prompts(input_lens, prefix, vocab_size, reserved_ids, rng):
    """Prompts of token ids: the shared ``prefix``, then ``input_lens[i]`` ids each.

    The body is vLLM's RandomDataset sequence ``(offset + index + position) % span`` above the reserved
    ids, with a random offset per prompt drawn from ``rng`` (for the same seed and no prefix, the prompts of
    ``vllm_bench.random_token_prompts``), so prompts differ from their first token after the prefix.
    """
    span = vocab_size - reserved_ids
    if span <= 0:
        raise ValueError("vocab_size %d leaves no ids above reserved_ids %d" % (vocab_size, reserved_ids))
    prompts = []
    for index, length in enumerate(input_lens):
        offset = rng.randrange(span)
        prompts.append(list(prefix) + [reserved_ids + (offset + index + position) % span for position in range(length)])
    return prompts


def _dataset_entry(path, number, line, default_output):
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise DatasetError("%s line %d: not JSON (%s)" % (path, number, exc))
    if not isinstance(item, dict):
        raise DatasetError("%s line %d: a JSON object with 'prompt' is expected, not %s"
                           % (path, number, type(item).__name__))
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise DatasetError("%s line %d: 'prompt' must be a non-empty string (got %s)"
                           % (path, number, json.dumps(prompt)[:80]))
    output = item.get("output_tokens", default_output)
    if isinstance(output, bool) or not isinstance(output, int) or output < 1:
        raise DatasetError("%s line %d: 'output_tokens' must be a whole number of 1 or more (got %s)"
                           % (path, number, json.dumps(output)[:80]))
    return {"prompt": prompt, "output_tokens": output}


def read_custom_dataset(path, default_output, max_bytes=MAX_DATASET_BYTES):
    """The entries of a ``vllm bench serve`` custom JSONL file: ``{"prompt", "output_tokens"}`` per
    non-blank line (``output_tokens`` defaults to ``default_output``). DatasetError names the file, the
    line and the field of the first problem."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except (IOError, OSError) as exc:
        raise DatasetError("%s: cannot read the dataset: %s" % (path, exc.strerror or exc))
    if len(data) > max_bytes:
        raise DatasetError("%s: larger than %d bytes; split it" % (path, max_bytes))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError("%s: not UTF-8 text (byte %d)" % (path, exc.start))
    entries = [_dataset_entry(path, number, line, default_output)
               for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not entries:
        raise DatasetError("%s: no requests (one JSON object per line, with 'prompt')" % path)
    return entries


def gap_cv(times):
    """Coefficient of variation (standard deviation / mean) of the gaps between sorted ``times``; None for
    fewer than three times or a zero mean."""
    ordered = sorted(times)
    gaps = [later - earlier for earlier, later in zip(ordered, ordered[1:])]
    if len(gaps) < 2:
        return None
    mean = sum(gaps) / len(gaps)
    if mean <= 0:
        return None
    variance = sum((gap - mean) ** 2 for gap in gaps) / len(gaps)
    return math.sqrt(variance) / mean


def request_tpot(record):
    """TPOT of one completed request in seconds, 0 for one output token (as vLLM counts it for goodput)."""
    tokens = record["completion_tokens"] or 0
    if tokens <= 1:
        return 0.0
    return (record["latency"] - record["ttft"]) / (tokens - 1)


# No engine step produces a stream's tokens faster than this: vLLM's shortest decode step is a few hundred
# microseconds even for a tiny model on an H100 with CUDA graphs, and speculative decoding adds a handful of tokens
# per step. A request whose tokens after the first came faster reached the client in a burst after it had ended
# (the rig's CI run of 2026-12-07 measured a median of 0.013 ms at C=4: 64 tokens in two reads 0.8 ms apart).
BURST_TOKEN_S = 50e-6


def arrived_whole(record):
    """Whether every token of a completed request of more than one token reached the client at once.

    Its E2E then equals its TTFT, or exceeds it by less than ``BURST_TOKEN_S`` a token (the answer split over a
    few network reads): the client or the server waited for the CPU until the request had ended (on a loaded
    two-core host a tiny model's whole answer can), so the request shows no decode time at all.
    """
    tokens = record["completion_tokens"] or 0
    return tokens > 1 and record["latency"] - record["ttft"] < (tokens - 1) * BURST_TOKEN_S


def is_good(record, slo):
    """Whether a completed request met every SLO given (each figure at or below its limit, in ms)."""
    figures = {"ttft_ms": record["ttft"], "tpot_ms": request_tpot(record), "e2el_ms": record["latency"]}
    return all(figures[key] * 1000.0 <= slo[key] for key, dummy in SLO_METRICS if key in slo)


def goodput(done_records, slo, duration_s):
    """Good requests and their rate over the level's duration, or None without an SLO."""
    if not slo:
        return None
    good = sum(1 for record in done_records if is_good(record, slo))
    return {"good_requests": good, "request_goodput": round(good / max(duration_s, 1e-9), 3)}


# vLLM's own time to first token, a histogram from when its front end hands the request to the engine to the first
# token. Its change over a level, beside the client's TTFT, tells where a slow first token waited: on the rig
# (2 cores) an open loop at 20 req/s saw client TTFTs of 380 ms in a burst while vLLM counted every one of the 600
# requests under 100 ms; the bench client's own dispatch and its new connections stalled at the same moments.
SERVER_TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds"


def _bucket_bound_ms(deltas, share, total):
    """The upper bound (ms) of the first bucket holding ``share`` of ``total`` requests; None past the last finite one."""
    for bound, count in deltas:
        if count >= share * total - 1e-9:
            return None if math.isinf(bound) else round(bound * 1000.0, 3)
    return None


def server_ttft(before, after):
    """vLLM's own TTFT over a level from its histogram's change (SERVER_TTFT_HISTOGRAM buckets in ``before`` and
    ``after``, le -> cumulative count): ``requests``, ``p50_ms_at_most`` and ``p99_ms_at_most`` (the upper bound of
    the bucket each percentile falls in; None past the last finite bucket). None when /metrics lacked it."""
    start, end = (before or {}).get(SERVER_TTFT_HISTOGRAM), (after or {}).get(SERVER_TTFT_HISTOGRAM)
    if not end or start is None:
        return None
    deltas = sorted((bound, end[bound] - start.get(bound, 0.0)) for bound in end)
    total = deltas[-1][1]
    if total <= 0:
        return None
    return {"requests": int(round(total)), "p50_ms_at_most": _bucket_bound_ms(deltas, 0.5, total),
            "p99_ms_at_most": _bucket_bound_ms(deltas, 0.99, total)}


def _own_p99_ttft(level):
    """vLLM's own p99 TTFT bound of a level (server_ttft), or None."""
    return (level.get("server_ttft_ms") or {}).get("p99_ms_at_most")


def _outside_engine(level, limit):
    """Why a p99 TTFT above ``limit`` was not the engine's, when vLLM's own histogram says so; else ''."""
    own = _own_p99_ttft(level)
    if own is None or own > limit:
        return ""
    return (" (vLLM's own p99 TTFT was at most %g ms: the rest passed outside the engine, in the network, the HTTP "
            "front end or the client)" % own)


def missed_only_outside_engine(level, slo):
    """Whether a level missed the SLO and would have met it with vLLM's own p99 TTFT in place of the client's: its
    only miss was time spent outside the engine."""
    own = _own_p99_ttft(level)
    if own is None or not slo_misses(level, slo):
        return False
    return not slo_misses(dict(level, ttft_ms=dict(level["ttft_ms"], p99=min(level["ttft_ms"]["p99"], own))), slo)


def slo_misses(level, slo):
    """What keeps a level from meeting the SLO: a failed or missing request, or a p99 above its limit."""
    misses = []
    if level["completed"] == 0:
        misses.append("no request completed")
    if level["failed"] or level.get("abandoned"):
        misses.append("%d request(s) failed" % (level["failed"] + level.get("abandoned", 0)))
    for key, name in SLO_METRICS:
        if key in slo and level["completed"] and level[key]["p99"] > slo[key]:
            why = _outside_engine(level, slo[key]) if key == "ttft_ms" else ""
            misses.append("p99 %s %.1f ms > %g ms%s" % (name, level[key]["p99"], slo[key], why))
    return misses


def judge(level, slo):
    """Add ``slo_met`` and ``slo_misses`` to a measured level (None and [] without an SLO)."""
    misses = slo_misses(level, slo) if slo else []
    level["slo_met"] = (not misses) if slo else None
    level["slo_misses"] = misses
    return level


def prefix_hit_rate(server_metrics):
    """Share of the prompt tokens looked up in vLLM's prefix cache over a level that it found, or None."""
    queries = server_metrics.get("vllm:prefix_cache_queries_total")
    hits = server_metrics.get("vllm:prefix_cache_hits_total")
    if not queries or hits is None:
        return None
    return round(hits / queries, 4)


def _target(level):
    return INF if level["request_rate"] == "inf" else float(level["request_rate"])


def max_sustainable(rate_levels, slo):
    """The highest target rate whose level met the SLO, and a sentence saying how it was found or why not.

    An ``inf`` level that met it gives its achieved request rate, but only when no finite rate missed it: then the
    server was never the limit. Beside a finite rate that missed, a burst that met the SLO says nothing about a
    sustained rate (its few requests are one wave: measured on an H100, 16 requests at once met the SLO at 11.8
    req/s achieved while 28 req/s sustained met it too and 40 did not).
    """
    if not slo:
        return None, "no SLO given (goodput): nothing to sustain"
    if not rate_levels:
        return None, "no open-loop level was measured (request_rate)"
    met = [level for level in rate_levels if level.get("slo_met")]
    finite_missed = [level for level in rate_levels if not level.get("slo_met") and _target(level) != INF]
    if finite_missed:
        met = [level for level in met if _target(level) != INF]
    if not met:
        lowest = min(finite_missed or rate_levels, key=_target)
        return None, "no %slevel met the SLO; the lowest, %s, missed it: %s" % (
            "finite " if finite_missed and len(finite_missed) < len(rate_levels) else "", rate_text(_target(lowest)),
            "; ".join(lowest.get("slo_misses") or ["unknown"]))
    best = max(met, key=_target)
    if _target(best) == INF:
        return best["request_throughput"], ("every request sent at once (rate inf) met the SLO, and no finite rate "
                                            "missed it: %.3f req/s achieved" % best["request_throughput"])
    above = [level for level in rate_levels if _target(level) > _target(best)]
    return _target(best), "the highest of %d level(s) that met the SLO%s" % (
        len(rate_levels), "; the next above, %s, did not" % rate_text(min(_target(level) for level in above))
        if above else "; no higher rate was measured")


def next_search_rate(rate_levels, slo):
    """The next rate of a bisection for the max sustainable rate, or None when there is nothing to search.

    Between the highest finite rate that met the SLO and the lowest measured rate above it that did not
    (half the lowest rate when none met it); None when every measured rate met it or the bracket is
    narrower than ``SEARCH_RESOLUTION`` of its top.
    """
    if not slo or not rate_levels:
        return None
    met = [_target(level) for level in rate_levels if level.get("slo_met") and _target(level) != INF]
    missed = [_target(level) for level in rate_levels if not level.get("slo_met") and _target(level) != INF]
    low = max(met) if met else 0.0
    above = [rate for rate in missed if rate > low]
    if not above:
        return None
    high = min(above)
    if (high - low) / high < SEARCH_RESOLUTION:
        return None
    return round((low + high) / 2.0, 6)
