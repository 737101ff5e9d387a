# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Concurrency sweeps against an OpenAI-compatible vLLM server, measured the way vLLM measures.

The definitions follow ``vllm/benchmarks/serve.py`` (``calculate_metrics``) and
``vllm/benchmarks/lib/endpoint_request_func.py`` of vLLM 0.32, so figures compare one to one with
``vllm bench serve``:

- TTFT: from sending the request to the first streamed chunk that carries a choice.
- ITL: the gap between consecutive chunks that carry a choice (one entry per chunk, so a chunk
  holding several tokens counts once, as in vLLM).
- TPOT: per request, (E2E - TTFT) / (output tokens - 1), for requests of more than one token.
- E2E: from sending the request to the last chunk that carries a choice.
- Output tokens: the server's ``usage.completion_tokens`` (``stream_options.include_usage``).
- Throughputs: completed requests, output tokens and input + output tokens per second of the
  level's wall time (first request sent to last request finished).
- Percentiles: linear interpolation between closest ranks (numpy's default).

Success and failure of one request, and where they differ from ``vllm bench serve`` (read in
vLLM 0.32's ``async_request_openai_completions`` / ``..._chat_completions`` and ``calculate_metrics``):

- Ours: a request succeeds when the answer is HTTP 200, at least one chunk carries a choice, no
  event is an ``{"error": ...}`` object, and the stream ends with ``data: [DONE]``.
- vLLM's: a request succeeds when the answer is HTTP 200, at least one chunk carries a choice and
  reading the body raised nothing. It never looks at ``[DONE]`` or at error events. So:

  - a stream that stops without ``[DONE]`` but whose transport ends cleanly (a connection closed
    on a body without length or chunking) is a success there, a ``stream`` failure here. One whose
    chunked body is cut is a failure in both (aiohttp raises ``ClientPayloadError``);
  - an ``{"error": ...}`` event after some chunks (vLLM's server sends one, then ``[DONE]``, when
    generation fails mid-answer) is a success there, with the tokens before it. Here it is a
    ``stream`` failure that quotes the server's message;
  - without ``usage`` it counts output tokens by re-tokenising the generated text (1 without a
    tokenizer). Here they are the number of chunks with a choice;
  - its per-request timeout is 6 hours (``AIOHTTP_TIMEOUT``); ours is ``request_timeout``;
  - when every request fails it warns ("All requests failed") and still exits 0 with
    ``completed: 0``. Here a level whose failures exceed ``max_failure_ratio`` of its requests
    (or that completes nothing) fails the sweep, and ``run_level`` stops sending once the failures
    exceed that allowance (``failure_allowance``): a server whose requests all hang costs
    ceil((allowance + 1) / concurrency) request timeouts, one for most levels, not the level's count.
- Both time E2E to the last chunk that carries a choice: the usage chunk and ``[DONE]`` do not
  move it. vLLM stamps each SSE message as it parses it; this module stamps each network read, so
  events that arrive in one read share a time.
- A request of more than one token whose whole answer arrived in one read (E2E equal to TTFT:
  the client or the server waited for the CPU until it had ended) has TPOT 0 in vLLM's figures.
  Here its TPOT is left out of ``tpot_ms`` and the level counts it in ``unstreamed_requests``, as
  it does a request whose answer came in a burst of reads faster than any engine step
  (``bench_traffic.BURST_TOKEN_S`` a token); their TTFT, E2E and tokens count as usual. When no
  request of a level streamed, ``tpot_ms`` is 0.

What is pure (metrics, saturation, baseline comparison, tables, option and answer checks) lives
here without aiohttp so it can be tested anywhere; ``run_level`` needs aiohttp, which every vLLM
venv has. ``run_sweep`` is the whole benchmark the ``vllm_bench`` module runs, as named steps: the
served model (``served_model``), the prompts (``build_workload``), warm-up and the levels
(``sweep``), each level with its ``/metrics`` deltas and GPU energy (``measure_level``); it returns
the result or raises ``BenchError``, which carries the levels measured when a level failed.
"""

from __future__ import absolute_import, division, print_function
from __future__ import annotations

__metaclass__ = type

import asyncio
import json
import math
import os
import random
import re
import resource
import ssl
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic as traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.bench_traffic import percentile, summarize_ms
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.sweep_request import SweepRequest
from ansible_collections.gauntlet.vllm.plugins.module_utils.io import prometheus_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.host.gpu_power import PowerMeter
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import MAX_CONFIG_BYTES
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import read_json_object

try:
    import aiohttp
except ImportError:  # pragma: no cover - the module reports it; every vLLM venv has aiohttp
    aiohttp = None

PERCENTILES = (50, 90, 99)

# The failure classes a level counts, in the order they are checked.
ERROR_CLASSES = ("http_4xx", "http_5xx", "http_other", "timeout", "connection", "stream", "no_tokens")


def random_token_prompts(count, input_len, vocab_size, seed, reserved_ids=0):
    """Prompts of exactly ``input_len`` token ids, the same for a given seed.

    Like vLLM's RandomDataset (``(offset + index + arange(input_len)) % vocab_size``), but sent as
    token ids so their length needs no tokenizer; ids below ``reserved_ids`` (special tokens of
    most vocabularies) are skipped.
    """
    return traffic.token_prompts([input_len] * count, [], vocab_size, reserved_ids, random.Random(seed))


class StreamParser:
    """Server-sent events from a streaming completion, fed in arbitrary byte chunks."""

    def __init__(self):
        self._buffer = b""

    def feed(self, data):
        """Return the JSON payloads (or the string ``[DONE]``) completed by ``data``."""
        self._buffer += data
        events = []
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            for line in raw.decode("utf-8").splitlines():
                if not line.startswith("data:"):
                    continue        # comments (": ping") and other fields
                payload = line[5:].strip()
                events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events


def new_request_record(prompt_len):
    return {"ok": False, "error_class": None, "error": None, "ttft": None, "itl": [], "latency": None,
            "prompt_tokens": prompt_len, "completion_tokens": None, "start": None, "end": None, "done": False,
            "server_error": None}


def _token_count(usage, key):
    """A token count of a usage object: a whole number of 0 or more, or None when absent."""
    value = usage.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("usage.%s is %r, not a token count" % (key, value))
    return value


def record_event(record, event, now, last_choice_at):
    """Account one parsed event of a request; returns the new time of its last choice chunk.

    E2E ends at the last chunk with a choice: ``[DONE]`` and the usage chunk leave the time alone.
    An ``{"error": ...}`` event is kept in ``server_error`` (the request then fails). Events of
    another shape raise ValueError, which the caller counts as a ``stream`` failure.
    """
    if event == "[DONE]":
        record["done"] = True
        return last_choice_at
    if not isinstance(event, dict):
        raise ValueError("an event is %s, not a JSON object" % type(event).__name__)
    if event.get("error") is not None:
        error = event["error"]
        record["server_error"] = _short(error.get("message", error) if isinstance(error, dict) else error)
        return last_choice_at
    choices = event.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise ValueError("'choices' is %s, not a list" % type(choices).__name__)
    if choices:
        if record["ttft"] is None:
            record["ttft"] = now - record["start"]
        else:
            record["itl"].append(now - last_choice_at)
        return now
    usage = event.get("usage")
    if usage:
        if not isinstance(usage, dict):
            raise ValueError("'usage' is %s, not an object" % type(usage).__name__)
        record["completion_tokens"] = _token_count(usage, "completion_tokens")
        prompt_tokens = _token_count(usage, "prompt_tokens")
        if prompt_tokens is not None:
            record["prompt_tokens"] = prompt_tokens
    return last_choice_at


def classify_http_error(status):
    """4xx and 5xx by their class; anything else that is not 200 (a redirect, which is never followed) is http_other."""
    if 400 <= status < 500:
        return "http_4xx"
    return "http_5xx" if status >= 500 else "http_other"


def finish_record(record, last_choice_at):
    """Decide success once the stream has ended without a transport error (the rule in the module docstring)."""
    if record["server_error"] is not None:
        record["error_class"] = "stream"
        record["error"] = "the server reported an error in the stream after %d chunk(s) with a choice: %s" % (
            0 if record["ttft"] is None else len(record["itl"]) + 1, record["server_error"])
        return record
    if record["ttft"] is None:
        record["error_class"] = "no_tokens"
        record["error"] = "the answer carried no chunk with a choice"
        return record
    if not record["done"]:
        # vLLM always ends a stream with [DONE]; without it the server went away mid-answer.
        record["error_class"] = "stream"
        record["error"] = "the stream broke off before [DONE] after %d chunk(s)" % (len(record["itl"]) + 1)
        return record
    record["latency"] = last_choice_at - record["start"]
    if not record["completion_tokens"]:
        # A server that sends no usage: one token per chunk (vLLM's benchmark re-tokenises the text instead).
        record["completion_tokens"] = len(record["itl"]) + 1
    record["ok"] = True
    return record


def level_metrics(concurrency, records, duration_s, slo=None):
    """The figures of one level from its request records (``concurrency`` None for an open-loop level).

    Records marked ``abandoned`` (in flight when ``run_level`` stopped the level) are counted apart,
    neither as requests nor as failures. With ``slo`` (goodput's ``{ttft_ms, tpot_ms, e2el_ms}``) the level
    also says how many requests met it per second (``goodput``) and whether its p99s did (``slo_met``).
    """
    abandoned = [record for record in records if record.get("abandoned")]
    records = [record for record in records if not record.get("abandoned")]
    done = [record for record in records if record["ok"]]
    failed = {}
    for record in records:
        if not record["ok"]:
            failed[record["error_class"]] = failed.get(record["error_class"], 0) + 1
    output_tokens = sum(record["completion_tokens"] or 0 for record in done)
    input_tokens = sum(record["prompt_tokens"] or 0 for record in done)
    # A request whose answer arrived at once has no measured decode time: vLLM's benchmark counts its TPOT as
    # 0, which drags the median to 0 on a starved host; here it is left out of TPOT and counted apart.
    whole = [record for record in done if traffic.arrived_whole(record)]
    tpots = [traffic.request_tpot(record) for record in done
             if (record["completion_tokens"] or 0) > 1 and not traffic.arrived_whole(record)]
    itls = [gap for record in done for gap in record["itl"]]
    duration_s = max(duration_s, 1e-9)
    return {
        "concurrency": concurrency,
        "requests": len(records),
        "completed": len(done),
        "failed": sum(failed.values()),
        "failed_by_class": failed,
        "abandoned": len(abandoned),
        "first_errors": sorted({record["error"] for record in records if not record["ok"] and record["error"]})[:5],
        "duration_s": round(duration_s, 3),
        "request_throughput": round(len(done) / duration_s, 3),
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "output_tokens_per_s": round(output_tokens / duration_s, 3),
        "total_tokens_per_s": round((input_tokens + output_tokens) / duration_s, 3),
        "ttft_ms": summarize_ms([record["ttft"] for record in done]),
        "tpot_ms": summarize_ms(tpots),
        "unstreamed_requests": len(whole),
        "itl_ms": summarize_ms(itls),
        "e2el_ms": summarize_ms([record["latency"] for record in done]),
        "goodput": traffic.goodput(done, slo, duration_s),
    }


def failure_allowance(ratio, planned, sent=0):
    """How many failed requests a level of ``planned`` requests (``sent`` so far) may have: the ratio, rounded down."""
    return int(math.floor(ratio * max(planned, sent) + 1e-9))


def level_name(level):
    """How messages name a level: ``C=8`` (closed loop) or ``rate 20 req/s`` (open loop)."""
    if level.get("concurrency") is not None:
        return "C=%d" % level["concurrency"]
    return "rate %s" % traffic.rate_text(traffic.parse_rate(level["request_rate"]))


def level_failure(level, ratio):
    """Why a measured level fails the sweep, or None: nothing completed, or more failures than ``ratio`` allows."""
    allowed = failure_allowance(ratio, level["requests"])
    if level["completed"] > 0 and level["failed"] <= allowed:
        return None
    classes = ", ".join("%s %d" % (name, count) for name, count in sorted(level["failed_by_class"].items()))
    reason = "level %s: %d of %d request(s) failed (%s), more than max_failure_ratio %s allows (%d)" % (
        level_name(level), level["failed"], level["requests"], classes or "none", ratio, allowed)
    if level["completed"] == 0 and level["failed"] <= allowed:
        reason = "level %s: none of its %d request(s) completed" % (level_name(level), level["requests"])
    if level.get("abandoned"):
        reason += "; the level was stopped early and %d request(s) in flight abandoned" % level["abandoned"]
    if level["first_errors"]:
        reason += "; first error: %s" % level["first_errors"][0]
    return reason


def saturation(levels, gain=0.05):
    """The concurrency past which more concurrency stops adding throughput, and the peak.

    The saturation point is the lowest level whose output tok/s is within ``gain`` (5%) of every
    higher level's: going further adds less than that.
    """
    measured = [level for level in levels if level["completed"] > 0]
    if not measured:
        return {"saturation_concurrency": None, "peak_output_tokens_per_s": 0.0, "peak_concurrency": None}
    peak = max(measured, key=lambda level: level["output_tokens_per_s"])
    point = None
    for index, level in enumerate(measured):
        later = [other["output_tokens_per_s"] for other in measured[index + 1:]]
        if all(value <= level["output_tokens_per_s"] * (1 + gain) for value in later):
            point = level["concurrency"]
            break
    return {"saturation_concurrency": point, "peak_output_tokens_per_s": peak["output_tokens_per_s"],
            "peak_concurrency": peak["concurrency"]}


COMPARED = (("output_tokens_per_s", "output tok/s"), ("request_throughput", "req/s"),
            ("ttft_ms.p99", "p99 TTFT ms"), ("tpot_ms.median", "median TPOT ms"), ("e2el_ms.p99", "p99 E2E ms"))


def _get(level, dotted):
    value = level
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def compare_with_baseline(levels, baseline_levels):
    """Per concurrency present in both runs: each compared figure, the baseline's, and the change in %."""
    baseline_by_c = {level["concurrency"]: level for level in baseline_levels}
    rows = []
    for level in levels:
        before = baseline_by_c.get(level["concurrency"])
        if before is None:
            continue
        row = {"concurrency": level["concurrency"]}
        for key, dummy in COMPARED:
            now_value, old_value = _get(level, key), _get(before, key)
            change = None
            if now_value is not None and old_value:
                change = round((now_value - old_value) / old_value * 100, 1)
            row[key] = {"value": now_value, "baseline": old_value, "change_pct": change}
        rows.append(row)
    return rows


def markdown_table(levels, title=None):
    """The sweep as a Markdown table, one row per concurrency level."""
    lines = ["### %s" % title, ""] if title else []
    lines.append("| C | done | failed | req/s | out tok/s | total tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms "
                 "| ITL p50 / p99 ms | E2E p50 / p99 ms |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for level in levels:
        lines.append("| %d | %d | %d | %.2f | %.1f | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |" % (
            level["concurrency"], level["completed"], level["failed"], level["request_throughput"],
            level["output_tokens_per_s"], level["total_tokens_per_s"],
            level["ttft_ms"]["median"], level["ttft_ms"]["p99"], level["tpot_ms"]["median"], level["tpot_ms"]["p99"],
            level["itl_ms"]["median"], level["itl_ms"]["p99"], level["e2el_ms"]["median"], level["e2el_ms"]["p99"]))
    return "\n".join(lines + unstreamed_note(levels)) + "\n"


def unstreamed_note(levels):
    """Report lines naming the levels with requests left out of TPOT (``unstreamed_requests``); [] when none."""
    counts = ["%s: %d of %d" % (level_name(level), level["unstreamed_requests"], level["completed"])
              for level in levels if level.get("unstreamed_requests")]
    if not counts:
        return []
    return ["", "Requests whose whole answer arrived at once (in one read, or faster than any engine step), left out "
            "of TPOT (the client or the server waited for the CPU): %s." % ", ".join(counts)]


def parse_prometheus(text, names):
    """Sum of every sample of each metric in ``names`` (labels summed over) from /metrics text; {} for a body that
    is not Prometheus text (the figures are the server's view beside the client's, never required)."""
    try:
        return prometheus_text.sums(prometheus_text.parse_exposition(text), names)
    except prometheus_text.ExpositionError:
        return {}


# Whole-number options and their least value (0 for "0 means the default" options).
INT_MINIMUMS = (("requests_per_level", 0), ("input_len", 1), ("output_len", 1), ("warmup_requests", 0),
                ("reserved_token_ids", 0), ("vocab_size", 1), ("prefix_len", 0), ("max_concurrency", 0),
                ("rate_search_steps", 0))
MAX_SEARCH_STEPS = 20


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def level_problems(request: SweepRequest) -> List[str]:
    """Problems of the levels: closed-loop ``concurrency`` and open-loop ``request_rate``, one of them given."""
    problems = []
    levels = request.concurrency or []
    rates = request.request_rate or []
    if not levels and not rates:
        problems.append("concurrency must be closed-loop levels when request_rate is empty (got both empty): "
                        "give levels, open-loop rates or both")
    if any(level < 1 for level in levels):
        problems.append("concurrency must be a list of levels of 1 or more (got %s)" % (levels,))
    duration = request.duration or 0
    duration = duration if _is_number(duration) and math.isfinite(duration) and duration > 0 else 0
    problems += traffic.rate_problems(rates, request.requests_per_level, duration, request.max_concurrency)
    burstiness = request.burstiness
    if not (_is_number(burstiness) and burstiness > 0):
        problems.append("burstiness must be above 0 (1 is Poisson; got %s)" % (burstiness,))
    steps = request.rate_search_steps or 0
    if steps > MAX_SEARCH_STEPS:
        problems.append("rate_search_steps must be %d or fewer (got %s)" % (MAX_SEARCH_STEPS, steps))
    if steps and not (rates and request.goodput):
        problems.append("rate_search_steps %d needs request_rate levels to search between and a goodput SLO to "
                        "search for" % steps)
    return problems


def traffic_problems(request: SweepRequest) -> List[str]:
    """Problems of the length mix, the dataset and the goodput SLO."""
    problems = traffic.mix_problems(request.range_ratio, request.goodput)
    dataset = request.dataset or {}
    if dataset.get("type", "random") not in ("random", "custom"):
        problems.append("dataset.type must be random or custom (got '%s')" % dataset.get("type"))
    if dataset.get("type") == "custom" and not dataset.get("path"):
        problems.append("dataset.path is required for dataset.type custom (a JSONL file on this host)")
    return problems


def validate_options(request: SweepRequest) -> List[str]:
    """Every problem of the module's numeric and URL options, each naming the option and its value."""
    problems = level_problems(request) + traffic_problems(request)
    for name, least in INT_MINIMUMS:
        value = getattr(request, name)
        if value is not None and value < least:
            problems.append("%s must be %d or more (got %s)" % (name, least, value))
    timeout = request.request_timeout
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        problems.append("request_timeout must be a number of seconds above 0 (got %s); without a bound a silent "
                        "server would hold the sweep for ever" % (timeout,))
    duration = request.duration
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration >= 0):
        problems.append("duration must be 0 or a number of seconds above 0 (got %s)" % (duration,))
    ratio = request.max_failure_ratio
    if not (isinstance(ratio, (int, float)) and 0 <= ratio <= 1):
        problems.append("max_failure_ratio must be between 0 and 1 (got %s)" % (ratio,))
    bad_gpus = [index for index in request.power_gpus or [] if index < 0]
    if bad_gpus:
        problems.append("power_gpus must be NVML indices of 0 or more (got %s)" % (request.power_gpus,))
    base_url = request.base_url or ""
    if not re.match(r"^https?://[^/?#\s]+", base_url, re.IGNORECASE):
        problems.append("base_url must be an http:// or https:// address (got '%s')" % base_url)
    return problems


class AnswerError(ValueError):
    """A server answer of the wrong shape; the message names the endpoint and what was wrong."""


def _json_kind(value):
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _json_answer(url, text):
    try:
        return json.loads(text)
    except ValueError:
        raise AnswerError("%s did not answer JSON: %s" % (url, _short(text, 120) or "an empty body"))


def parse_models(url, text):
    """The entries of a /v1/models answer, each checked for an ``id`` and a sane ``max_model_len``."""
    answer = _json_answer(url, text)
    if not isinstance(answer, dict):
        raise AnswerError("%s answered %s, not an object with 'data'" % (url, _json_kind(answer)))
    data = answer.get("data")
    if not isinstance(data, list):
        kind = "missing" if "data" not in answer else _json_kind(data)
        raise AnswerError("%s: 'data' is %s, not a list of models" % (url, kind))
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            raise AnswerError("%s: data[%d] has no 'id' string: %s" % (url, index, _short(json.dumps(entry), 120)))
        length = entry.get("max_model_len")
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
            raise AnswerError("%s: data[%d].max_model_len is %s, not a whole number of tokens"
                              % (url, index, json.dumps(length)))
        if entry.get("root") is not None and not isinstance(entry["root"], str):
            raise AnswerError("%s: data[%d].root is %s, not a path" % (url, index, _json_kind(entry["root"])))
    return data


def parse_detokenized(url, text):
    """The ``prompt`` text of a /detokenize answer."""
    answer = _json_answer(url, text)
    if not isinstance(answer, dict) or not isinstance(answer.get("prompt"), str):
        raise AnswerError("%s: the answer has no 'prompt' string: %s" % (url, _short(json.dumps(answer), 120)))
    return answer["prompt"]


# Greedy sampling, sent with every request. vllm bench serve sends none unless given --temperature
# (the server's default applies, often the model's generation_config): compare with --temperature 0.
TEMPERATURE = 0.0


def request_payload(api, model, prompt, max_tokens, ignore_eos):
    """A streaming request whose final chunk carries the server's token counts."""
    payload = {"model": model, "max_tokens": max_tokens, "temperature": TEMPERATURE, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
    if api == "chat":
        payload["messages"] = [{"role": "user", "content": prompt}]
    else:
        payload["prompt"] = prompt
    return payload


def _short(text, limit=200):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


async def one_request(session, url, payload, headers, timeout_s, prompt_len, ssl_arg=None):
    """Send one streaming request and time it the way vLLM's benchmark does.

    Redirects are not followed (the API key would go with them); ``ssl_arg`` is aiohttp's ``ssl``
    argument (see ``ssl_option``; None leaves aiohttp's default).
    """
    record = new_request_record(prompt_len)
    record["start"] = time.perf_counter()
    last_choice_at = record["start"]
    options = {"json": payload, "headers": headers, "timeout": aiohttp.ClientTimeout(total=timeout_s),
               "allow_redirects": False}
    if ssl_arg is not None:
        options["ssl"] = ssl_arg
    try:
        async with session.post(url, **options) as response:
            if response.status != 200:
                body = await response.text()
                record["error_class"] = classify_http_error(response.status)
                where = response.headers.get("Location")
                record["error"] = "HTTP %d: %s" % (response.status, _short(body) if where is None else
                                                   "a redirect to %s, not followed" % _short(where, 100))
                return record
            parser = StreamParser()
            async for chunk in response.content.iter_any():
                now = time.perf_counter()
                for event in parser.feed(chunk):
                    last_choice_at = record_event(record, event, now, last_choice_at)
    except asyncio.TimeoutError:
        record["error_class"] = "timeout"
        record["error"] = "no complete answer within %s s" % timeout_s
        return record
    except aiohttp.ClientPayloadError as exc:
        record["error_class"] = "stream"
        record["error"] = "the stream broke off: %s" % _short(exc)
        return record
    except (aiohttp.ClientError, OSError) as exc:
        record["error_class"] = "connection"
        record["error"] = _short(exc)
        return record
    except ValueError as exc:
        record["error_class"] = "stream"
        record["error"] = "unreadable event: %s" % _short(exc)
        return record
    finally:
        record["end"] = time.perf_counter()
    return finish_record(record, last_choice_at)


def abandoned_record(reason):
    """A request in flight when its level was stopped: counted apart by ``level_metrics``."""
    record = new_request_record(None)
    record.update(abandoned=True, error_class="abandoned", error=reason)
    return record


def ssl_option(base_url, validate_certs):
    """aiohttp's ``ssl`` argument: a verifying context for https (unless told not to), else None."""
    if not base_url.lower().startswith("https:"):
        return None
    return ssl.create_default_context() if validate_certs else False


def endpoint(base_url, api, api_key, validate_certs):
    """Where a level's requests go and how: the completions or chat URL, the headers, aiohttp's ``ssl``."""
    url = base_url.rstrip("/") + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    return url, headers, ssl_option(base_url, validate_certs)


def failures_past_allowance(records, ratio, planned, sent):
    """Whether a level's failed records exceed what ``ratio`` allows of its requests (never without a ratio)."""
    if ratio is None:
        return False
    failed = sum(1 for record in records if not record["ok"])
    return failed > failure_allowance(ratio, planned, sent)


async def run_level(base_url, api, model, prompts, prompt_lens, concurrency, max_tokens, ignore_eos,
                    timeout_s, api_key=None, duration_s=None, max_failure_ratio=None, validate_certs=True):
    """Send ``prompts`` with at most ``concurrency`` in flight; returns (records, wall seconds).

    With ``duration_s`` the prompts are cycled until that many seconds have passed, and the
    requests in flight then are waited for (each is bounded by ``timeout_s``). With
    ``max_failure_ratio`` the level stops as soon as its failures exceed ``failure_allowance`` of
    the prompts (or of the requests sent, when cycling sent more): nothing more is sent and the
    requests in flight are cancelled, each returned as an ``abandoned`` record.
    """
    url, headers, ssl_arg = endpoint(base_url, api, api_key, validate_certs)
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    records = []
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()

        async def send(index):
            position = index % len(prompts)
            payload = request_payload(api, model, prompts[position], tokens_of(max_tokens, position), ignore_eos)
            records.append(await one_request(session, url, payload, headers, timeout_s, prompt_lens[position],
                                             ssl_arg=ssl_arg))

        def more_to_send(index):
            if duration_s is None:
                return index < len(prompts)
            return time.perf_counter() - started < duration_s

        index = 0
        pending = set()
        while not failures_past_allowance(records, max_failure_ratio, len(prompts), index):
            while len(pending) < concurrency and more_to_send(index):
                pending.add(asyncio.ensure_future(send(index)))
                index += 1
            if not pending:
                break
            dummy, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            await _abandon(pending, records, "in flight when the level stopped: its failures exceeded "
                           "max_failure_ratio %s" % max_failure_ratio)
        wall = time.perf_counter() - started
    return records, wall


def tokens_of(max_tokens, position):
    """A request's max_tokens: one number for every request, or a list with one per prompt (a length mix)."""
    return max_tokens[position] if isinstance(max_tokens, (list, tuple)) else max_tokens


class OpenLoopCounts:
    """What an open-loop level's client holds at a moment: requests due and unfinished, and those of them
    still waiting for a slot under ``max_concurrency``."""

    def __init__(self):
        self.unfinished = 0
        self.queued = 0


async def _server_waiting(session, base_url, headers, ssl_arg):
    """vLLM's ``vllm:num_requests_waiting`` now (summed over engines), or None when /metrics cannot tell."""
    options = {"headers": headers, "timeout": aiohttp.ClientTimeout(total=5), "allow_redirects": False}
    if ssl_arg is not None:
        options["ssl"] = ssl_arg
    try:
        async with session.get(base_url.rstrip("/") + "/metrics", **options) as response:
            if response.status != 200:
                return None
            text = await response.text()
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
        return None
    return parse_prometheus(text, {"vllm:num_requests_waiting"}).get("vllm:num_requests_waiting")


async def run_open_level(base_url, api, model, requests, offsets, timeout_s, api_key=None, max_concurrency=0,
                         max_failure_ratio=None, validate_certs=True, ignore_eos=True):
    """Send ``requests`` (dicts with ``prompt``, ``prompt_len``, ``max_tokens``) each at its offset from the start
    (``offsets``, seconds), open loop: a request is sent when it is due whatever is in flight, unless
    ``max_concurrency`` requests already are (it then waits for a slot, as ``vllm bench serve``'s semaphore).

    Returns (records, wall seconds, arrivals): each record carries ``due`` and ``dispatched`` (seconds from the
    start), and ``arrivals`` says what was unfinished when the last request was due and vLLM's waiting queue
    then. With ``max_failure_ratio``, failures past its allowance stop the level as in ``run_level``.
    """
    url, headers, ssl_arg = endpoint(base_url, api, api_key, validate_certs)
    connector = aiohttp.TCPConnector(limit=max_concurrency or 0, force_close=False)
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    counts = OpenLoopCounts()
    records = []
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()

        async def send(index, dispatched):
            item = requests[index]
            payload = request_payload(api, model, item["prompt"], item["max_tokens"], ignore_eos)
            try:
                if slots is not None:
                    await slots.acquire()
                    counts.queued -= 1
                try:
                    record = await one_request(session, url, payload, headers, timeout_s, item["prompt_len"],
                                               ssl_arg=ssl_arg)
                finally:
                    if slots is not None:
                        slots.release()
            finally:
                counts.unfinished -= 1
            record.update(due=offsets[index], dispatched=dispatched)
            records.append(record)

        def too_many_failures(sent):
            return failures_past_allowance(records, max_failure_ratio, len(requests), sent)

        pending = set()
        stopped = False
        for index, offset in enumerate(offsets):
            delay = started + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if too_many_failures(index):
                stopped = True
                break
            # Counted when due, not when its task first runs: a burst's tasks all start after the loop.
            counts.unfinished += 1
            counts.queued += 1 if slots is not None else 0
            pending.add(asyncio.ensure_future(send(index, time.perf_counter() - started)))
        arrivals = {"client": counts.unfinished, "queued_by_cap": counts.queued,
                    "server_waiting": None if stopped else await _server_waiting(session, base_url, headers, ssl_arg)}
        while pending and not too_many_failures(len(offsets)):
            dummy, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            await _abandon(pending, records, "in flight when the level stopped: its failures exceeded "
                           "max_failure_ratio %s" % max_failure_ratio)
        wall = time.perf_counter() - started
    return records, wall, arrivals


async def _abandon(pending, records, reason):
    for task in pending:
        task.cancel()
    await asyncio.wait(pending)
    records.extend(abandoned_record(reason) for task in pending if task.cancelled())


# ---- the sweep the vllm_bench module runs -----------------------------------------------------

# Counters of vLLM's /metrics whose change over a level is reported.
SERVER_COUNTERS = (
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_queue_time_seconds_count",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)
DEFAULT_VOCAB = 32000


class BenchError(Exception):
    """The benchmark cannot run, or a level failed it. ``result`` holds the module's result keys to return with
    the failure (the levels measured, the failed one included), empty when it failed before the sweep."""

    def __init__(self, msg, result=None):
        super(BenchError, self).__init__(msg)
        self.result = result or {}


def check_mode_result():
    """What the module returns in check mode: a benchmark is its measurement, so nothing is sent."""
    return dict(changed=False, skipped=True, msg="a benchmark does not run in check mode", levels=[],
                rate_levels=[], saturation_concurrency=None, peak_output_tokens_per_s=0.0, peak_concurrency=None,
                workload={}, aborted=None, failed_level=None, slo=None, max_sustainable_rate=None,
                max_sustainable_rate_reason="a benchmark does not run in check mode")


def _http_get(request, url, timeout=10, data=None):
    """GET (or POST ``data`` as JSON) with the API key; redirects are refused, certificates checked unless told not to."""
    headers = {"Content-Type": "application/json"}
    if request.api_key:
        headers["Authorization"] = "Bearer %s" % request.api_key
    response = open_url(url, data=None if data is None else json.dumps(data), method="POST" if data else "GET",
                        headers=headers, timeout=timeout, validate_certs=request.validate_certs,
                        follow_redirects="none")
    return response.read().decode("utf-8", "replace")


def _http_problem(url, exc):
    """What an HTTPError of ``url`` means, redirects included (they are never followed)."""
    if 300 <= exc.code < 400:
        where = exc.headers.get("Location") if exc.headers is not None else None
        return ("%s answered a redirect (HTTP %s) to %s; redirects are not followed, so that the API key stays with "
                "the server it is meant for: set base_url to where the server answers" % (url, exc.code, where))
    return "%s answered HTTP %s%s" % (url, exc.code, " (is api_key right?)" if exc.code == 401 else "")


def _model_list(request, url):
    """The checked entries of /v1/models, or BenchError saying why the server cannot be used."""
    try:
        return parse_models(url, _http_get(request, url))
    except HTTPError as exc:
        raise BenchError(_http_problem(url, exc))
    except AnswerError as exc:
        raise BenchError(str(exc))
    except (URLError, OSError, ValueError) as exc:
        raise BenchError("cannot reach the server at %s: %s" % (request.base_url, getattr(exc, "reason", exc)))


def served_model(request: SweepRequest) -> Dict[str, Any]:
    """The /v1/models entry of ``model``, or BenchError saying why the server cannot be used."""
    url = request.base_url.rstrip("/") + "/v1/models"
    models = _model_list(request, url)
    entry = next((item for item in models if item["id"] == request.model), None)
    if entry is None:
        raise BenchError("the server at %s does not serve model '%s'; it serves %s"
                         % (request.base_url, request.model, [item["id"] for item in models]))
    needed, terms = longest_request(request)
    if needed is not None and entry.get("max_model_len") is not None and needed > entry["max_model_len"]:
        raise BenchError("%s = %d tokens, more than the max_model_len %d that %s gives for '%s'"
                         % (terms, needed, entry["max_model_len"], url, request.model))
    return entry


def longest_request(request: SweepRequest) -> Tuple[Optional[int], Optional[str]]:
    """The most tokens one request of the random workload can need, and how that is worked out; (None, None)
    for a custom dataset, whose prompt lengths only the server knows."""
    if (request.dataset or {}).get("type") == "custom":
        return None, None
    ratio = request.range_ratio or 0.0
    prefix = request.prefix_len or 0
    longest_in = traffic.length_bounds(request.input_len, ratio, least=1)[1]
    longest_out = traffic.length_bounds(request.output_len, ratio, least=1)[1]
    if not ratio and not prefix:
        return longest_in + longest_out, "input_len + output_len"
    return prefix + longest_in + longest_out, ("prefix_len + the longest input and output of range_ratio %s" % ratio)


def vocabulary(request: SweepRequest, model_entry: Dict[str, Any]) -> Tuple[int, str]:
    """The vocabulary size the prompts are drawn from and where it comes from (given, a config.json, default)."""
    if request.vocab_size:
        return request.vocab_size, "given"
    config = os.path.join(model_entry.get("root") or "", "config.json")
    if not model_entry.get("root") or not os.path.isfile(config):
        return DEFAULT_VOCAB, "default"
    try:
        data = read_json_object(config, ValueError, MAX_CONFIG_BYTES)
        size = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
    except (ValueError, AttributeError) as exc:
        raise BenchError("cannot read vocab_size from %s: %s; set vocab_size" % (config, exc))
    if size is None:
        return DEFAULT_VOCAB, "default"
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise BenchError("%s has vocab_size %s, not a whole number of tokens; set vocab_size" % (config, json.dumps(size)))
    return size, config


def parse_server_figures(text):
    """The SERVER_COUNTERS of /metrics text, and vLLM's TTFT histogram's buckets under traffic.SERVER_TTFT_HISTOGRAM
    (le -> cumulative count); {} for a body that is not Prometheus text."""
    try:
        samples = prometheus_text.parse_exposition(text)
        figures = prometheus_text.sums(samples, set(SERVER_COUNTERS))
        figures[traffic.SERVER_TTFT_HISTOGRAM] = prometheus_text.buckets(samples, traffic.SERVER_TTFT_HISTOGRAM)
    except prometheus_text.ExpositionError:
        return {}
    return figures


def scrape(request: SweepRequest) -> Optional[Dict[str, Any]]:
    """parse_server_figures of /metrics now, or None when turned off or unavailable."""
    if not request.scrape_metrics:
        return None
    try:
        text = _http_get(request, request.base_url.rstrip("/") + "/metrics")
    except (HTTPError, URLError, OSError, ValueError):
        return None
    return parse_server_figures(text)


def reachable(request: SweepRequest) -> bool:
    try:
        _http_get(request, request.base_url.rstrip("/") + "/health", timeout=5)
        return True
    except (HTTPError, URLError, OSError, ValueError):
        return False


def chat_prompts(request, token_prompts):
    """Text for the chat API: the seeded token ids, detokenized by the server itself."""
    url = request.base_url.rstrip("/") + "/detokenize"
    prompts = []
    for ids in token_prompts:
        try:
            prompts.append(parse_detokenized(url, _http_get(request, url, data={"model": request.model, "tokens": ids})))
        except HTTPError as exc:
            raise BenchError("the server could not detokenize the chat prompts: %s" % _http_problem(url, exc))
        except AnswerError as exc:
            raise BenchError("the server could not detokenize the chat prompts: %s" % exc)
        except (URLError, OSError, ValueError) as exc:
            raise BenchError("the server could not detokenize the chat prompts: %s" % getattr(exc, "reason", exc))
    return prompts


def cpu_seconds():
    """CPU seconds (user + system) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class RequestSource:
    """The requests of each level: seeded random token prompts (a length mix around input_len/output_len after
    a shared prefix, as text through the server's /detokenize for chat) or the lines of a custom dataset.

    Every level (closed or open loop) and the warm-up draw their own prompts from the seed and their name, so a
    level finds in vLLM's prefix cache only what its workload shares (the prefix), not the prompts of the levels
    before it. (When the closed loop re-sent one pool's first prompts at every level, after a warm-up of the same
    prompts, an H100 sweep's levels at 1, 4, 16 and 64 clients found 98, 49, 25 and 25 % of their prompt tokens
    cached: TTFT at one client measured a cached prompt, 23 ms instead of a 1024-token prefill's 60-100.)
    A custom dataset is sent as it is, from its first line, at every level (as ``vllm bench serve`` does).
    """

    def __init__(self, request, vocab_size):
        self.request = request
        self.vocab_size = vocab_size
        self.reserved = min(request.reserved_token_ids, vocab_size - 1)
        dataset = request.dataset or {}
        self.entries = None
        if dataset.get("type") == "custom":
            try:
                self.entries = traffic.read_custom_dataset(dataset["path"], request.output_len)
            except traffic.DatasetError as exc:
                raise BenchError("dataset: %s" % exc)
        self.prefix = traffic.shared_prefix(request.prefix_len or 0, vocab_size, self.reserved,
                                            random.Random("%d/prefix" % request.seed))

    def requests(self, name, count):
        """``count`` requests (``prompt``, ``prompt_len`` (None for text of unknown length), ``max_tokens``)."""
        if self.entries is not None:
            chosen = [self.entries[index % len(self.entries)] for index in range(count)]
            return [{"prompt": entry["prompt"], "prompt_len": None, "max_tokens": entry["output_tokens"]}
                    for entry in chosen]
        seed = self.request.seed
        inputs, outputs = traffic.sample_lengths(count, self.request.input_len, self.request.output_len,
                                                 self.request.range_ratio or 0.0,
                                                 random.Random("%d/%s/lengths" % (seed, name)))
        rng = random.Random("%d/%s" % (seed, name))
        ids = traffic.token_prompts(inputs, self.prefix, self.vocab_size, self.reserved, rng)
        prompts = chat_prompts(self.request, ids) if self.request.api == "chat" else ids
        return [{"prompt": prompt, "prompt_len": len(token_ids), "max_tokens": tokens}
                for prompt, token_ids, tokens in zip(prompts, ids, outputs)]


def closed_loop_count(request: SweepRequest) -> int:
    """Prompts of the closed loop's largest level: requests_per_level, else four times the highest level (at least
    8); with a duration, every level cycles through this many."""
    return request.requests_per_level or max(8, 4 * max(request.concurrency or [0]))


def closed_level_requests(request, source, concurrency):
    """A closed-loop level's own requests: requests_per_level, or four times its concurrency (at least 8), or with
    a duration the largest level's count, cycled."""
    count = closed_loop_count(request) if request.duration else (request.requests_per_level or max(8, 4 * concurrency))
    return source.requests("closed/%d" % concurrency, count)


def build_workload(request: SweepRequest, entry: Dict[str, Any]) -> Tuple["RequestSource", Dict[str, Any]]:
    """The request source and the workload description."""
    vocab_size, vocab_from = vocabulary(request, entry)
    source = RequestSource(request, vocab_size)
    closed = closed_loop_count(request) if request.concurrency else 0
    dataset = request.dataset or {}
    workload = {"model": request.model, "base_url": request.base_url, "api": request.api,
                "input_len": request.input_len, "output_len": request.output_len,
                "ignore_eos": request.ignore_eos, "seed": request.seed, "vocab_size": vocab_size,
                "vocab_size_from": vocab_from, "prompts": closed,
                "requests_per_level": None if request.duration else "4 x concurrency, at least 8"
                if not request.requests_per_level else request.requests_per_level,
                "duration_s": request.duration or None, "max_model_len": entry.get("max_model_len"),
                "max_failure_ratio": request.max_failure_ratio, "temperature": TEMPERATURE,
                "request_rate": [traffic.rate_label(traffic.parse_rate(rate)) for rate in request.request_rate or []],
                "burstiness": request.burstiness, "max_concurrency": request.max_concurrency or None,
                "range_ratio": request.range_ratio, "prefix_len": request.prefix_len,
                "dataset": {"type": dataset.get("type", "random"), "path": dataset.get("path"),
                            "requests": len(source.entries) if source.entries is not None else None},
                "goodput": slo_of(request), "rate_search_steps": request.rate_search_steps}
    return source, workload


def slo_of(request: SweepRequest) -> Optional[Dict[str, float]]:
    """The goodput SLO given (only its keys that have a value), or None."""
    slo = dict((key, float(value)) for key, value in (request.goodput or {}).items() if value is not None)
    return slo or None


def run_closed(request, loop, requests, concurrency, **options):
    """``run_level`` over request dicts (``prompt``, ``prompt_len``, ``max_tokens``) with the module's endpoint."""
    return loop.run_until_complete(run_level(
        request.base_url, request.api, request.model, [item["prompt"] for item in requests],
        [item["prompt_len"] for item in requests], concurrency, [item["max_tokens"] for item in requests],
        request.ignore_eos, request.request_timeout, request.api_key, validate_certs=request.validate_certs,
        **options))


def warm_up(request, loop, source):
    """Send the warm-up requests, up to the sweep's highest concurrency at a time (as ``vllm bench serve
    --num-warmups`` does with its ``--max-concurrency``): a server just started is slow on its first batches of a
    new size, and one request at a time would leave the first level to pay for that. An open-loop sweep warms up
    at its max_concurrency (8 without one) with prompts of its own. The reason the sweep cannot start when one
    fails, else None."""
    count = request.warmup_requests
    if not count:
        return None
    requests = source.requests("warmup", count)
    width = max(request.concurrency or [request.max_concurrency or 8])
    records, dummy = run_closed(request, loop, requests, min(len(requests), width), max_failure_ratio=0)
    failed = [record for record in records if not record["ok"] and not record.get("abandoned")]
    if failed:
        return "a warm-up request failed (%s): %s" % (failed[0]["error_class"], failed[0]["error"])
    return None


def server_deltas(before, after):
    """The change of each SERVER_COUNTERS over a level; empty when /metrics could not be read before or after."""
    if before is None or after is None:
        return {}
    return {name: round(after.get(name, 0.0) - before.get(name, 0.0), 6) for name in SERVER_COUNTERS if name in after}


class LevelProbe:
    """What is read around a level: /metrics, client CPU and GPU energy; ``finish`` adds them to its figures."""

    def __init__(self, request, meter):
        self.request = request
        self.meter = meter
        self.before = scrape(request)
        self.cpu_before = cpu_seconds()
        if meter is not None:
            meter.start()

    def finish(self, level):
        energy = self.meter.stop() if self.meter is not None else None
        level["power"] = energy
        level["joules_per_output_token"] = (round(energy["energy_j"] / level["output_tokens"], 4)
                                            if energy and level["output_tokens"] else None)
        level["client_cpu_s"] = round(cpu_seconds() - self.cpu_before, 3)
        sent = level["requests"] + level.get("abandoned", 0)
        level["client_cpu_ms_per_request"] = round(1000.0 * level["client_cpu_s"] / sent, 3) if sent else None
        after = scrape(self.request)
        level["server_metrics"] = server_deltas(self.before, after)
        level["server_ttft_ms"] = traffic.server_ttft(self.before, after)
        level["prefix_cache_hit_rate"] = traffic.prefix_hit_rate(level["server_metrics"])
        return traffic.judge(level, slo_of(self.request))


def measure_level(request, loop, meter, concurrency, requests):
    """One closed-loop level: its requests, then its figures with /metrics deltas, client CPU and GPU energy."""
    probe = LevelProbe(request, meter)
    records, wall = run_closed(request, loop, requests, concurrency, duration_s=request.duration or None,
                               max_failure_ratio=request.max_failure_ratio)
    return probe.finish(level_metrics(concurrency, records, wall, slo_of(request)))


def arrival_figures(records, count):
    """How the arrivals went: requests sent, the window from first to last send, the rate and the gaps' CV
    that window shows, and how late the p99 send was against its schedule."""
    sent = [record for record in records if record.get("dispatched") is not None]
    times = [record["dispatched"] for record in sent]
    window = (max(times) - min(times)) if times else 0.0
    lags = [max(0.0, record["dispatched"] - record["due"]) for record in sent]
    cv = traffic.gap_cv(times)
    return {"planned": count, "sent": len(sent), "window_s": round(window, 3),
            "offered_rate": round((len(sent) - 1) / window, 3) if window > 0 else None,
            "gap_cv": None if cv is None else round(cv, 4), "lag_ms_p99": round(percentile(lags, 99) * 1000, 3)}


def measure_rate_level(request, loop, meter, source, rate, index, searched=False):
    """One open-loop level: ``rate`` requests/s (gamma gaps of shape ``burstiness``), then its figures."""
    count = traffic.requests_for_rate(rate, request.requests_per_level, request.duration,
                                      request.max_concurrency)
    requests = source.requests("rate-%d" % index, count)
    offsets = traffic.arrival_offsets(count, rate, request.burstiness,
                                      random.Random("%d/arrivals/%d" % (request.seed, index)))
    probe = LevelProbe(request, meter)
    records, wall, waiting = loop.run_until_complete(run_open_level(
        request.base_url, request.api, request.model, requests, offsets, request.request_timeout,
        request.api_key, max_concurrency=request.max_concurrency, max_failure_ratio=request.max_failure_ratio,
        validate_certs=request.validate_certs, ignore_eos=request.ignore_eos))
    level = {"request_rate": traffic.rate_label(rate), "burstiness": request.burstiness,
             "max_concurrency": request.max_concurrency or None, "searched": searched}
    figures = level_metrics(None, records, wall, slo_of(request))
    figures.pop("concurrency")
    level.update(figures)
    level["arrivals"] = arrival_figures(records, count)
    level["waiting_at_arrivals_end"] = waiting
    return probe.finish(level)


class Sweep:
    """The levels measured so far and why the sweep stopped (None while it goes on)."""

    def __init__(self):
        self.levels = []
        self.rate_levels = []
        self.aborted = None
        self.failed_level = None

    def stop(self, reason, failed_level=None):
        self.aborted = reason
        self.failed_level = failed_level
        return False

    def check(self, request, level, label):
        """Whether the sweep goes on after ``level``; stops it (False) on a level past max_failure_ratio."""
        reason = level_failure(level, request.max_failure_ratio)
        if not reason:
            return True
        if not reachable(request):
            reason = "the server went away during level %s (%s)" % (level_name(level), reason)
        return self.stop(reason, label)


def closed_loop(request, loop, meter, source, state):
    for concurrency in request.concurrency:
        if not reachable(request):
            return state.stop("the server stopped answering /health before level C=%d" % concurrency, concurrency)
        level = measure_level(request, loop, meter, concurrency, closed_level_requests(request, source, concurrency))
        state.levels.append(level)
        if not state.check(request, level, concurrency):
            return False
    return True


def _rate_level(request, loop, meter, source, state, rate, index, searched):
    """Measure one open-loop level into ``state``; False when the sweep stops there."""
    if not reachable(request):
        return state.stop("the server stopped answering /health before level rate %s" % traffic.rate_text(rate),
                          traffic.rate_label(rate))
    level = measure_rate_level(request, loop, meter, source, rate, index, searched)
    state.rate_levels.append(level)
    return state.check(request, level, traffic.rate_label(rate))


def open_loop(request, loop, meter, source, state):
    """The ladder of request rates, then up to ``rate_search_steps`` levels bisecting for the max rate."""
    ladder = [traffic.parse_rate(rate) for rate in request.request_rate or []]
    for index, rate in enumerate(ladder):
        if not _rate_level(request, loop, meter, source, state, rate, index, False):
            return False
    for step in range(request.rate_search_steps or 0):
        rate = traffic.next_search_rate(state.rate_levels, slo_of(request))
        if rate is None:
            break
        if not _rate_level(request, loop, meter, source, state, rate, len(ladder) + step, True):
            return False
    return True


def sweep(request, meter, source):
    """Warm up, then every closed-loop level, then every open-loop level, until one fails; returns a Sweep."""
    loop = asyncio.new_event_loop()
    state = Sweep()
    try:
        reason = warm_up(request, loop, source)
        if reason:
            state.stop(reason)
        elif closed_loop(request, loop, meter, source, state):
            open_loop(request, loop, meter, source, state)
    finally:
        loop.close()
    return state


def run_sweep(request: SweepRequest, power_meter=PowerMeter) -> Dict[str, Any]:
    """The benchmark of the module's ``request``: the served model, the prompts, warm-up and every level.

    Returns the result (closed-loop levels, open-loop rate levels, workload, saturation and peak, the max
    sustainable rate, power, times). Raises BenchError when the server cannot be used (nothing measured) or when
    the sweep stopped (warm-up, a level past max_failure_ratio, the server gone); then ``result`` holds the same
    keys with the levels measured, the failed one included.
    ``power_meter`` builds the GPU energy meter (``PowerMeter``'s signature).
    """
    entry = served_model(request)
    source, workload = build_workload(request, entry)
    meter = power_meter(indices=request.power_gpus) if request.power else None
    power_unavailable = "turned off (power: false)" if meter is None else meter.reason
    started = time.time()
    try:
        state = sweep(request, meter, source)
    finally:
        if meter is not None:
            meter.close()
    rate, how = traffic.max_sustainable(state.rate_levels, slo_of(request))
    result = dict(levels=state.levels, rate_levels=state.rate_levels, workload=workload, aborted=state.aborted,
                  failed_level=state.failed_level, elapsed_s=round(time.time() - started, 1),
                  power_unavailable=power_unavailable, client_cpu_s=round(cpu_seconds(), 3), slo=slo_of(request),
                  max_sustainable_rate=rate, max_sustainable_rate_reason=how)
    result.update(saturation(state.levels))
    if state.aborted:
        where = "the %d level(s) measured are in 'levels'" % len(state.levels)
        if state.rate_levels:
            where += " and the %d open-loop level(s) in 'rate_levels'" % len(state.rate_levels)
        raise BenchError("%s; %s" % (state.aborted, where), result)
    return result
