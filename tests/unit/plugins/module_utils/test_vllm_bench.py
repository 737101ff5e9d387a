# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The measuring core of the coming vllm_bench module: vLLM's metric definitions, the stream
parser, saturation, baseline comparison and the table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.sweep_request import SweepRequest


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


def test_an_answer_that_arrived_in_one_read_is_left_out_of_tpot():
    # Measured on the rig's two cores under load: the whole stream in one read, E2E equal to TTFT. vLLM's
    # benchmark counts TPOT 0 for it; here it is counted apart and TPOT comes from the requests that streamed.
    whole = [ok_record(0.04, 0.04, 16), ok_record(0.05, 0.05, 16)]
    streamed = [ok_record(0.02, 0.17, 16), ok_record(0.02, 0.32, 16)]
    single_token = ok_record(0.03, 0.03, 1)
    level = vllm_bench.level_metrics(1, whole + streamed + [single_token], duration_s=1.0)
    assert level["unstreamed_requests"] == 2
    assert level["tpot_ms"]["median"] == pytest.approx(15.0)        # (10 + 20) / 2 ms, the zeros left out
    assert level["ttft_ms"]["median"] == pytest.approx(30.0)        # TTFT, E2E and tokens count every request
    assert level["output_tokens"] == 65 and level["completed"] == 5
    table = vllm_bench.markdown_table([level])
    assert "left out of TPOT" in table and "C=1: 2 of 5" in table
    # CI of 2026-12-07, C=4: 64 tokens in two reads 0.8 ms apart, a TPOT of 0.013 ms no engine step makes. It
    # arrived in a burst after the request had ended; a fast stream (0.1 ms a token) still counts.
    burst, fast = ok_record(0.04, 0.0408, 64), ok_record(0.04, 0.0463, 64)
    bursty = vllm_bench.level_metrics(4, [burst, fast], duration_s=1.0)
    assert bursty["unstreamed_requests"] == 1 and bursty["tpot_ms"]["median"] == pytest.approx(0.1)
    nobody = vllm_bench.level_metrics(1, whole, duration_s=1.0)
    assert nobody["unstreamed_requests"] == 2 and nobody["tpot_ms"]["median"] == 0.0
    streaming = vllm_bench.level_metrics(1, streamed, duration_s=1.0)
    assert streaming["unstreamed_requests"] == 0 and "left out" not in vllm_bench.markdown_table([streaming])


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


# ---- failure threshold -------------------------------------------------------------------

@pytest.mark.parametrize("ratio, planned, sent, allowed", [
    (0.05, 40, 0, 2), (0.05, 32, 0, 1), (0.05, 8, 0, 0), (0.0, 100, 0, 0), (1.0, 8, 0, 8),
    (0.29, 100, 0, 29),            # 0.29 * 100 is 28.999... in floating point
    (0.05, 32, 200, 10),           # cycling prompts (duration): the requests sent count once past the prompts
])
def test_failure_allowance_is_the_ratio_rounded_down(ratio, planned, sent, allowed):
    assert vllm_bench.failure_allowance(ratio, planned, sent) == allowed


def test_level_failure_says_which_level_how_many_and_why():
    records = [ok_record(0.1, 1.0, 10)] * 37 + [failed_record("http_5xx", "HTTP 500: EngineCore died")] * 3
    level = vllm_bench.level_metrics(8, records, 1.0)
    assert vllm_bench.level_failure(level, 0.05) == (
        "level C=8: 3 of 40 request(s) failed (http_5xx 3), more than max_failure_ratio 0.05 allows (2); "
        "first error: HTTP 500: EngineCore died")
    assert vllm_bench.level_failure(level, 0.1) is None
    nothing = vllm_bench.level_metrics(4, [failed_record("timeout", "no complete answer within 5 s")], 1.0)
    assert vllm_bench.level_failure(nothing, 1.0) == (
        "level C=4: none of its 1 request(s) completed; first error: no complete answer within 5 s")


def test_abandoned_requests_are_neither_requests_nor_failures():
    records = [failed_record("http_5xx", "HTTP 500"), vllm_bench.abandoned_record("in flight when the level stopped")]
    level = vllm_bench.level_metrics(2, records, 1.0)
    assert (level["requests"], level["failed"], level["abandoned"]) == (1, 1, 1)
    assert level["failed_by_class"] == {"http_5xx": 1}
    expected = "the level was stopped early and 1 request(s) in flight abandoned; first error: HTTP 500"
    assert vllm_bench.level_failure(level, 0.0).endswith(expected)


@pytest.mark.parametrize("status, error_class", [(400, "http_4xx"), (499, "http_4xx"), (500, "http_5xx"),
                                                 (503, "http_5xx"), (302, "http_other"), (307, "http_other")])
def test_http_statuses_fall_into_their_class(status, error_class):
    assert vllm_bench.classify_http_error(status) == error_class


# ---- options and answers -------------------------------------------------------------------

GOOD_OPTIONS = {"base_url": "http://127.0.0.1:8000", "concurrency": [1, 8], "requests_per_level": 0, "duration": 0,
                "input_len": 512, "output_len": 128, "warmup_requests": 2, "request_timeout": 600, "max_failure_ratio": 0.05,
                "vocab_size": None, "reserved_token_ids": 16, "power_gpus": None}


def _request(options):
    return SweepRequest.from_module_params(dict(options, model="tiny"))


def test_good_options_pass():
    assert vllm_bench.validate_options(_request(GOOD_OPTIONS)) == []
    assert vllm_bench.validate_options(_request(dict(GOOD_OPTIONS, base_url="HTTPS://gpu-7.example:8443/", duration=30.5,
                                                     max_failure_ratio=1, power_gpus=[0, 3]))) == []


def test_every_bad_option_is_named_with_its_value():
    bad = dict(GOOD_OPTIONS, concurrency=[0], requests_per_level=-1, input_len=0, output_len=-5, warmup_requests=-1,
               request_timeout=0, duration=float("nan"), max_failure_ratio=2, vocab_size=0, reserved_token_ids=-3,
               power_gpus=[-1], base_url="ftp://x")
    problems = vllm_bench.validate_options(_request(bad))
    assert [problem.split(" ")[0] for problem in problems] == [
        "concurrency", "requests_per_level", "input_len", "output_len", "warmup_requests", "reserved_token_ids",
        "vocab_size", "request_timeout", "duration", "max_failure_ratio", "power_gpus", "base_url"]
    assert "request_timeout must be a number of seconds above 0 (got 0)" in problems[7]
    assert "(got -5)" in problems[3] and "(got 'ftp://x')" in problems[-1]


def test_a_model_list_of_the_right_shape_is_read():
    text = json.dumps({"object": "list", "data": [{"id": "a", "max_model_len": 4096, "root": "/m/a"}, {"id": "b"}]})
    assert [entry["id"] for entry in vllm_bench.parse_models("http://h/v1/models", text)] == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("Service Unavailable", "http://h/v1/models did not answer JSON: Service Unavailable"),
    ('"ok"', "http://h/v1/models answered a string, not an object with 'data'"),
    ('{"data": null}', "http://h/v1/models: 'data' is null, not a list of models"),
    ('{"data": [{"id": ""}]}', 'http://h/v1/models: data[0] has no \'id\' string: {"id": ""}'),
    ('{"data": [{"id": "a", "max_model_len": true}]}', "http://h/v1/models: data[0].max_model_len is true, not a whole"),
    ('{"data": [{"id": "a", "max_model_len": 4096.5}]}', "http://h/v1/models: data[0].max_model_len is 4096.5, not a whole"),
])
def test_model_lists_of_the_wrong_shape_are_named(text, message):
    with pytest.raises(vllm_bench.AnswerError) as caught:
        vllm_bench.parse_models("http://h/v1/models", text)
    assert str(caught.value).startswith(message)


def test_detokenize_answers_are_checked():
    assert vllm_bench.parse_detokenized("http://h/detokenize", '{"prompt": "hi there"}') == "hi there"
    with pytest.raises(vllm_bench.AnswerError, match=r"^http://h/detokenize: the answer has no 'prompt' string: null$"):
        vllm_bench.parse_detokenized("http://h/detokenize", "null")


def test_a_body_that_is_not_prometheus_text_gives_no_counters():
    assert vllm_bench.parse_prometheus("<html><body>502 Bad Gateway</body></html>", {"vllm:num_requests_waiting"}) == {}
