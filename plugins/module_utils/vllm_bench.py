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

What is pure (metrics, saturation, baseline comparison, tables) lives here without aiohttp so
it can be tested anywhere; ``run_level`` needs aiohttp, which every vLLM venv has.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import json
import math
import random
import re
import time

try:
    import aiohttp
except ImportError:  # pragma: no cover - the module reports it; every vLLM venv has aiohttp
    aiohttp = None

PERCENTILES = (50, 90, 99)

# The failure classes a level counts, in the order they are checked.
ERROR_CLASSES = ("http_4xx", "http_5xx", "timeout", "connection", "stream", "no_tokens")


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
    """Mean, median, p90 and p99 of a list of seconds, in milliseconds."""
    mean = sum(values) / len(values) if values else 0.0
    return {
        "mean": round(mean * 1000, 3),
        "median": round(percentile(values, 50) * 1000, 3),
        "p90": round(percentile(values, 90) * 1000, 3),
        "p99": round(percentile(values, 99) * 1000, 3),
    }


def random_token_prompts(count, input_len, vocab_size, seed, reserved_ids=0):
    """Prompts of exactly ``input_len`` token ids, the same for a given seed.

    Like vLLM's RandomDataset (``(offset + index + arange(input_len)) % vocab_size``), but sent as
    token ids so their length needs no tokenizer; ids below ``reserved_ids`` (special tokens of
    most vocabularies) are skipped.
    """
    rng = random.Random(seed)
    span = vocab_size - reserved_ids
    if span <= 0:
        raise ValueError("vocab_size %d leaves no ids above reserved_ids %d" % (vocab_size, reserved_ids))
    prompts = []
    for index in range(count):
        offset = rng.randrange(span)
        prompts.append([reserved_ids + (offset + index + position) % span for position in range(input_len)])
    return prompts


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
            "prompt_tokens": prompt_len, "completion_tokens": None, "start": None, "end": None, "done": False}


def record_event(record, event, now, last_choice_at):
    """Account one parsed event of a request; returns the new time of its last choice chunk."""
    if event == "[DONE]":
        record["done"] = True
        return last_choice_at
    if event.get("choices"):
        if record["ttft"] is None:
            record["ttft"] = now - record["start"]
        else:
            record["itl"].append(now - last_choice_at)
        return now
    usage = event.get("usage")
    if usage:
        record["completion_tokens"] = usage.get("completion_tokens")
        if usage.get("prompt_tokens") is not None:
            record["prompt_tokens"] = usage["prompt_tokens"]
    return last_choice_at


def classify_http_error(status):
    return "http_4xx" if 400 <= status < 500 else "http_5xx"


def level_metrics(concurrency, records, duration_s):
    """The figures of one concurrency level from its request records."""
    done = [record for record in records if record["ok"]]
    failed = {}
    for record in records:
        if not record["ok"]:
            failed[record["error_class"]] = failed.get(record["error_class"], 0) + 1
    output_tokens = sum(record["completion_tokens"] or 0 for record in done)
    input_tokens = sum(record["prompt_tokens"] or 0 for record in done)
    tpots = [(record["latency"] - record["ttft"]) / (record["completion_tokens"] - 1)
             for record in done if (record["completion_tokens"] or 0) > 1]
    itls = [gap for record in done for gap in record["itl"]]
    duration_s = max(duration_s, 1e-9)
    return {
        "concurrency": concurrency,
        "requests": len(records),
        "completed": len(done),
        "failed": sum(failed.values()),
        "failed_by_class": failed,
        "first_errors": sorted({record["error"] for record in records if not record["ok"] and record["error"]})[:5],
        "duration_s": round(duration_s, 3),
        "request_throughput": round(len(done) / duration_s, 3),
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "output_tokens_per_s": round(output_tokens / duration_s, 3),
        "total_tokens_per_s": round((input_tokens + output_tokens) / duration_s, 3),
        "ttft_ms": summarize_ms([record["ttft"] for record in done]),
        "tpot_ms": summarize_ms(tpots),
        "itl_ms": summarize_ms(itls),
        "e2el_ms": summarize_ms([record["latency"] for record in done]),
    }


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
    return "\n".join(lines) + "\n"


_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def parse_prometheus(text, names):
    """Sum of every sample of each metric in ``names`` (labels summed over) from /metrics text."""
    totals = {}
    for line in text.splitlines():
        match = _METRIC_LINE.match(line)
        if match and match.group(1) in names:
            try:
                totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(3))
            except ValueError:
                continue
    return totals


def request_payload(api, model, prompt, max_tokens, ignore_eos):
    """A streaming request whose final chunk carries the server's token counts."""
    payload = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
    if api == "chat":
        payload["messages"] = [{"role": "user", "content": prompt}]
    else:
        payload["prompt"] = prompt
    return payload


def _short(text, limit=200):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


async def one_request(session, url, payload, headers, timeout_s, prompt_len):
    """Send one streaming request and time it the way vLLM's benchmark does."""
    record = new_request_record(prompt_len)
    record["start"] = time.perf_counter()
    last_choice_at = record["start"]
    try:
        async with session.post(url, json=payload, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
            if response.status != 200:
                body = await response.text()
                record["error_class"] = classify_http_error(response.status)
                record["error"] = "HTTP %d: %s" % (response.status, _short(body))
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
        # A server that sends no usage: one token per chunk, as vLLM's benchmark then assumes.
        record["completion_tokens"] = len(record["itl"]) + 1
    record["ok"] = True
    return record


async def run_level(base_url, api, model, prompts, prompt_lens, concurrency, max_tokens, ignore_eos,
                    timeout_s, api_key=None, duration_s=None):
    """Send ``prompts`` with at most ``concurrency`` in flight; returns (records, wall seconds).

    With ``duration_s`` the prompts are cycled until that many seconds have passed, and the
    requests in flight then are waited for (each is bounded by ``timeout_s``).
    """
    url = base_url.rstrip("/") + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    records = []
    async with aiohttp.ClientSession(connector=connector) as session:
        gate = asyncio.Semaphore(concurrency)
        started = time.perf_counter()

        async def worker(index):
            async with gate:
                if duration_s is not None and time.perf_counter() - started >= duration_s:
                    return
                position = index % len(prompts)
                payload = request_payload(api, model, prompts[position], max_tokens, ignore_eos)
                records.append(await one_request(session, url, payload, headers, timeout_s, prompt_lens[position]))

        if duration_s is None:
            await asyncio.gather(*(worker(index) for index in range(len(prompts))))
        else:
            index = 0
            pending = set()
            while time.perf_counter() - started < duration_s:
                while len(pending) < concurrency:
                    pending.add(asyncio.ensure_future(worker(index)))
                    index += 1
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if pending:
                await asyncio.wait(pending)
        wall = time.perf_counter() - started
    return records, wall
