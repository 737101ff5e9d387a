# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The measuring core of the coming vllm_bench module: vLLM's metric definitions, the stream
parser, saturation, baseline comparison and the table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils import vllm_bench


@pytest.mark.parametrize("values, pct, expected", [
    # numpy.percentile(values, pct) for these inputs.
    ([1, 2, 3, 4], 50, 2.5),
    ([1, 2, 3, 4], 90, 3.7),
    ([1, 2, 3, 4], 99, 3.97),
    ([5], 99, 5),
    ([10, 0, 30, 20], 25, 7.5),
    ([], 50, 0.0),
])
def test_percentile_matches_numpy_linear(values, pct, expected):
    assert vllm_bench.percentile(values, pct) == pytest.approx(expected)


def test_random_token_prompts_are_exact_and_reproducible():
    first = vllm_bench.random_token_prompts(4, 128, 512, seed=7, reserved_ids=3)
    assert first == vllm_bench.random_token_prompts(4, 128, 512, seed=7, reserved_ids=3)
    assert first != vllm_bench.random_token_prompts(4, 128, 512, seed=8, reserved_ids=3)
    assert [len(prompt) for prompt in first] == [128] * 4
    assert min(min(prompt) for prompt in first) >= 3 and max(max(prompt) for prompt in first) < 512
    with pytest.raises(ValueError):
        vllm_bench.random_token_prompts(1, 4, 2, seed=0, reserved_ids=2)


def sse(*payloads):
    return b"".join(b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n" for p in payloads)


def test_stream_parser_handles_split_chunks_comments_and_done():
    stream = b": ping\n\n" + sse({"choices": [{"text": "a"}]}, {"choices": [{"text": "b"}]},
                                 {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}, b"[DONE]")
    parser = vllm_bench.StreamParser()
    events = []
    for start in range(0, len(stream), 7):       # bytes arrive in arbitrary pieces
        events += parser.feed(stream[start:start + 7])
    assert events[-1] == "[DONE]"
    assert [event["choices"][0]["text"] for event in events[:2]] == ["a", "b"]
    assert events[2]["usage"]["completion_tokens"] == 2


def test_record_follows_vllm_definitions():
    record = vllm_bench.new_request_record(prompt_len=128)
    record["start"] = 10.0
    last = record["start"]
    timeline = [(10.5, {"choices": [{"text": "x"}]}), (10.6, {"choices": [{"text": "y"}]}),
                (10.8, {"choices": [{"text": "zz"}]}),
                (10.9, {"choices": [], "usage": {"prompt_tokens": 130, "completion_tokens": 4}}), (10.9, "[DONE]")]
    for now, event in timeline:
        last = vllm_bench.record_event(record, event, now, last)
    record["latency"] = last - record["start"]
    record["ok"] = True
    assert record["ttft"] == pytest.approx(0.5)
    assert record["itl"] == pytest.approx([0.1, 0.2])       # one gap per chunk, as vLLM counts
    assert record["latency"] == pytest.approx(0.8)           # the last chunk with a choice, not the usage chunk
    assert record["prompt_tokens"] == 130 and record["completion_tokens"] == 4
    level = vllm_bench.level_metrics(8, [record], duration_s=2.0)
    assert level["tpot_ms"]["mean"] == pytest.approx((0.8 - 0.5) / 3 * 1000, abs=1e-3)
    assert level["output_tokens_per_s"] == 2.0
    assert level["total_tokens_per_s"] == 67.0
    assert level["request_throughput"] == 0.5


def ok_record(ttft, latency, tokens, prompt=10):
    return {"ok": True, "error_class": None, "error": None, "ttft": ttft, "itl": [], "latency": latency,
            "prompt_tokens": prompt, "completion_tokens": tokens, "start": 0.0, "end": latency}


def failed_record(error_class, error):
    record = vllm_bench.new_request_record(10)
    record.update(error_class=error_class, error=error)
    return record


def test_failures_are_counted_by_class_and_kept_out_of_latencies():
    records = [ok_record(0.1, 1.0, 10), failed_record("connection", "Cannot connect to host 127.0.0.1:8000"),
               failed_record("connection", "Cannot connect to host 127.0.0.1:8000"), failed_record("timeout", "")]
    level = vllm_bench.level_metrics(4, records, duration_s=1.0)
    assert level["completed"] == 1 and level["failed"] == 3
    assert level["failed_by_class"] == {"connection": 2, "timeout": 1}
    assert level["first_errors"] == ["Cannot connect to host 127.0.0.1:8000"]
    assert level["ttft_ms"]["p99"] == 100.0


def level(concurrency, tok_s, completed=10):
    return {"concurrency": concurrency, "completed": completed, "output_tokens_per_s": tok_s,
            "request_throughput": tok_s / 100, "ttft_ms": {"p99": 50.0 * concurrency}, "tpot_ms": {"median": 10.0},
            "e2el_ms": {"p99": 900.0}}


def test_saturation_is_where_more_concurrency_stops_paying():
    sweep = [level(1, 100), level(8, 700), level(32, 2000), level(128, 2080), level(256, 2050), level(1024, 1500)]
    expected = {"saturation_concurrency": 32, "peak_output_tokens_per_s": 2080, "peak_concurrency": 128}
    assert vllm_bench.saturation(sweep) == expected
    # Still climbing at the last level: the last level is where the sweep stops telling.
    assert vllm_bench.saturation([level(1, 100), level(2, 190)])["saturation_concurrency"] == 2
    assert vllm_bench.saturation([level(1, 0, completed=0)])["saturation_concurrency"] is None


def test_baseline_comparison_per_level():
    rows = vllm_bench.compare_with_baseline([level(8, 800), level(32, 1800)], [level(8, 1000), level(16, 1500)])
    assert [row["concurrency"] for row in rows] == [8]
    assert rows[0]["output_tokens_per_s"] == {"value": 800, "baseline": 1000, "change_pct": -20.0}


def test_markdown_table_has_a_row_per_level():
    records = [ok_record(0.1, 1.0, 10)]
    table = vllm_bench.markdown_table([vllm_bench.level_metrics(1, records, 1.0),
                                       vllm_bench.level_metrics(8, records, 0.5)], title="tiny-llama")
    lines = table.splitlines()
    assert lines[0] == "### tiny-llama"
    assert lines[4].startswith("| 1 | 1 | 0 | 1.00 | 10.0 | 20.0 | 100.0 / 100.0 |")
    assert lines[5].startswith("| 8 | 1 | 0 | 2.00 | 20.0 |")


def test_prometheus_counters_are_summed_over_labels():
    text = "\n".join([
        "# HELP vllm:num_preemptions_total Cumulative number of preemptions.",
        "# TYPE vllm:num_preemptions_total counter",
        'vllm:num_preemptions_total{engine="0",model_name="tiny-llama"} 3.0',
        'vllm:num_preemptions_total{engine="1",model_name="tiny-llama"} 2.0',
        'vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny-llama"} 1.25',
        "process_cpu_seconds_total 12.5",
    ])
    assert vllm_bench.parse_prometheus(text, {"vllm:num_preemptions_total", "vllm:request_queue_time_seconds_sum"}) == {
        "vllm:num_preemptions_total": 5.0, "vllm:request_queue_time_seconds_sum": 1.25}
