# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_bench module end to end against a local stand-in for vLLM's OpenAI server that can be
made hostile: completions that all fail, hang or break off, /v1/models and /detokenize answers of
the wrong shape, redirects, TLS with a certificate nobody signed, and options out of range."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic as traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench as bench
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_bench

MODELS = {"object": "list", "data": [{"id": "tiny-llama", "object": "model", "root": "/nonexistent", "max_model_len": 256}]}
API_KEY = "sk-test-gauntlet-4f1c"


class FakeVLLM(BaseHTTPRequestHandler):
    """Answers like vLLM's OpenAI server; ``self.server.state`` says how (see ``fake_server``)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type="application/json", headers=None):
        body = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        state = self.server.state
        state["seen"].append(("GET", self.path, self.headers.get("Authorization")))
        if self.path == "/health":
            self._send(503 if state["health_down_after_post"] and state["posts"] else 200, b"")
        elif self.path == "/v1/models" and state["redirect_models"]:
            self._send(302, b"", headers={"Location": state["redirect_to"] + "/v1/models"})
        elif self.path == "/v1/models":
            body = state["models"]
            self._send(200, body if isinstance(body, str) else json.dumps(body),
                       content_type="text/html" if str(body).startswith("<") else "application/json")
        elif self.path == "/metrics":
            self._send(200, b"", content_type="text/plain")
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        state = self.server.state
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        state["seen"].append(("POST", self.path, self.headers.get("Authorization")))
        if self.path == "/detokenize":
            self._send(200, state["detokenize"])
            return
        with state["lock"]:
            state["posts"] += 1
            state["prompts"].append(json.dumps(request.get("prompt") or request.get("messages")))
            number = state["posts"]
            state["in_flight"] += 1
            state["in_flight_at_post"].append(state["in_flight"])
        try:
            self._answer(request, state["mode"](number))
        finally:
            with state["lock"]:
                state["in_flight"] -= 1

    def _answer(self, request, mode):
        state = self.server.state
        if mode == "http_500":
            self._send(500, b'{"error": {"message": "EngineCore encountered an issue", "code": 500}}')
        elif mode == "redirect":
            self._send(307, b"", headers={"Location": state["redirect_to"] + self.path})
        elif mode == "hang":
            state["release"].wait(30)
            self._send(500, b"released")
        elif mode == "slow":
            time.sleep(0.2)
            self._stream(request, cut=False)
        else:
            self._stream(request, cut=(mode == "cut"))

    def _stream(self, request, cut):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for index in range(request["max_tokens"]):
            chunk = {"choices": [{"index": 0, "text": "t%d" % index}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
            if cut:
                return              # the connection closes after one chunk, without [DONE]
        usage = {"choices": [], "usage": {"prompt_tokens": len(request.get("prompt") or []),
                                          "completion_tokens": request["max_tokens"]}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        self.wfile.flush()


def start_server(mode="ok", tls_context=None, **state):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeVLLM)
    httpd.daemon_threads = True
    if tls_context is not None:
        httpd.socket = tls_context.wrap_socket(httpd.socket, server_side=True)
    modes = mode if callable(mode) else (lambda number: mode)
    httpd.state = dict({"mode": modes, "models": MODELS, "detokenize": '{"prompt": "some text"}', "redirect_to": None,
                        "redirect_models": False, "health_down_after_post": False, "posts": 0, "seen": [], "lock": threading.Lock(),
                        "in_flight": 0, "in_flight_at_post": [], "prompts": [],
                        "release": threading.Event()}, **state)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    scheme = "https" if tls_context is not None else "http"
    return httpd, "%s://127.0.0.1:%d" % (scheme, httpd.server_address[1])


@pytest.fixture
def fake_server():
    servers = []

    def make(mode="ok", **state):
        httpd, url = start_server(mode, **state)
        servers.append(httpd)
        return httpd.state, url

    yield make
    for httpd in servers:
        httpd.state["release"].set()
        httpd.shutdown()
        httpd.server_close()


def bench_args(url, **extra):
    args = {"base_url": url, "model": "tiny-llama", "api_key": API_KEY, "concurrency": [1], "requests_per_level": 8,
            "input_len": 4, "output_len": 3, "warmup_requests": 0, "request_timeout": 5, "power": False,
            "scrape_metrics": False}
    args.update(extra)
    return args


def completion_posts(state):
    return [entry for entry in state["seen"] if entry[0] == "POST" and "completions" in entry[1]]


# ---- a sweep whose requests fail: the task fails, early, with the levels measured ------------

def test_a_healthy_sweep_passes(run_module, fake_server):
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[1, 2]))
    assert not failed, result.get("msg")
    assert [level["completed"] for level in result["levels"]] == [8, 8]
    assert result["failed_level"] is None and result["aborted"] is None
    assert result["workload"]["max_failure_ratio"] == 0.05 and result["workload"]["temperature"] == 0.0


def test_every_completion_failing_fails_the_task_early(run_module, fake_server):
    state, url = fake_server("http_500")
    started = time.monotonic()
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[2, 8], requests_per_level=40))
    assert failed
    assert time.monotonic() - started < 10
    assert result["failed_level"] == 2 and [level["concurrency"] for level in result["levels"]] == [2]
    level = result["levels"][0]
    assert level["completed"] == 0 and level["failed_by_class"] == {"http_5xx": level["failed"]}
    # 40 requests allow 2 failures: the level stops at the third, with at most one more in flight.
    assert 3 <= level["failed"] + level["abandoned"] <= 4
    assert len(completion_posts(state)) <= 4
    assert "level C=2" in result["msg"] and "max_failure_ratio 0.05" in result["msg"] and "HTTP 500" in result["msg"]
    assert "ansible_facts" not in result


def test_a_hanging_server_costs_one_request_timeout_not_the_sweep(run_module, fake_server):
    state, url = fake_server("hang")
    started = time.monotonic()
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[2, 4], requests_per_level=40,
                                                            request_timeout=0.5))
    assert failed
    assert time.monotonic() - started < 5          # 40 requests at C=2 would take 10 s, the two levels 15 s
    level = result["levels"][0]
    assert result["failed_level"] == 2 and level["failed_by_class"] == {"timeout": level["failed"]}
    assert len(completion_posts(state)) <= 4


def test_a_stream_that_breaks_off_fails_the_level(run_module, fake_server):
    state, url = fake_server("cut")
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed and result["failed_level"] == 1
    assert list(result["levels"][0]["failed_by_class"]) == ["stream"]
    assert "broke off before [DONE]" in result["msg"]


def test_failures_within_the_ratio_pass_and_beyond_it_fail(run_module, fake_server):
    # Every 20th request fails: 2 of 40, which 0.05 allows (40 x 0.05 = 2) and 0.04 does not (1).
    state, url = fake_server(lambda number: "http_500" if number % 20 == 0 else "ok")
    result, failed = run_module(vllm_bench.main, bench_args(url, requests_per_level=40))
    assert not failed, result.get("msg")
    assert result["levels"][0]["failed"] == 2 and result["levels"][0]["completed"] == 38
    state["posts"] = 0
    result, failed = run_module(vllm_bench.main, bench_args(url, requests_per_level=40, max_failure_ratio=0.04))
    assert failed and result["failed_level"] == 1
    assert "2 of 40 request(s) failed (http_5xx 2), more than max_failure_ratio 0.04 allows (1)" in result["msg"]


def test_levels_measured_before_the_failed_one_are_kept(run_module, fake_server):
    state, url = fake_server(lambda number: "ok" if number <= 8 else "http_500")
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[1, 4, 16]))
    assert failed
    assert [level["concurrency"] for level in result["levels"]] == [1, 4]
    assert result["levels"][0]["completed"] == 8 and result["levels"][0]["output_tokens"] == 24
    assert result["failed_level"] == 4 and result["aborted"].startswith("level C=4:")
    assert result["peak_concurrency"] == 1


def test_a_server_gone_during_the_failed_level_says_so(run_module, fake_server):
    state, url = fake_server("http_500", health_down_after_post=True)
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[2, 4]))
    assert failed and result["failed_level"] == 2
    assert result["aborted"].startswith("the server went away during level C=2 (level C=2: ")


def test_a_failed_warm_up_request_stops_before_the_sweep(run_module, fake_server):
    state, url = fake_server("http_500")
    result, failed = run_module(vllm_bench.main, bench_args(url, warmup_requests=3))
    assert failed and result["levels"] == [] and result["failed_level"] is None
    assert "a warm-up request failed (http_5xx): HTTP 500" in result["msg"]
    assert len(completion_posts(state)) == 1


@pytest.mark.parametrize("concurrency, warm_up_at", [([1, 4], 4), ([2], 2), ([1], 1)])
def test_warm_up_requests_run_at_the_sweeps_highest_concurrency(run_module, fake_server, concurrency, warm_up_at):
    # Like vllm bench serve's --num-warmups under --max-concurrency: a fresh server's first batches of the
    # sweep's size are slow, and warming it one request at a time left that to the first level.
    state, url = fake_server("slow")
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=concurrency, warmup_requests=4,
                                                            requests_per_level=4))
    assert not failed, result
    assert max(state["in_flight_at_post"][:4]) == warm_up_at


def test_every_closed_loop_level_and_the_warm_up_send_prompts_of_their_own(run_module, fake_server):
    # One pool re-sent at every level (after a warm-up of its first prompts) let vLLM's prefix cache answer the
    # later levels from the earlier ones: an H100 sweep found 98 % of one client's prompt tokens cached, and
    # measured 23 ms of TTFT for a 1024-token prompt that takes 90 (tests/unit/fixtures/perf/README.md).
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(url, concurrency=[1, 2], warmup_requests=2,
                                                            requests_per_level=4, input_len=16))
    assert not failed, result
    assert len(state["prompts"]) == 2 + 4 + 4
    assert len(set(state["prompts"])) == len(state["prompts"])


# ---- options out of range are refused before anything is sent --------------------------------

@pytest.mark.parametrize("option, value", [
    ("request_timeout", 0), ("request_timeout", -1), ("request_timeout", float("inf")), ("request_timeout", float("nan")),
    ("concurrency", [4, 0]), ("concurrency", []), ("requests_per_level", -1), ("input_len", 0), ("output_len", 0),
    ("warmup_requests", -2), ("duration", -1.0), ("max_failure_ratio", 1.5), ("max_failure_ratio", -0.1),
    ("vocab_size", 0), ("reserved_token_ids", -1), ("power_gpus", [0, -1]), ("base_url", "127.0.0.1:8000"),
])
def test_options_out_of_range_are_refused_by_name(run_module, fake_server, option, value):
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(url, **{option: value}))
    assert failed
    assert result["msg"].startswith(option + " must be")
    assert state["seen"] == []


def test_a_length_past_max_model_len_is_refused(run_module, fake_server):
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(url, input_len=250, output_len=10))
    assert failed
    assert "input_len + output_len = 260 tokens, more than the max_model_len 256" in result["msg"]
    assert completion_posts(state) == []


# ---- odd answers from /v1/models and /detokenize: a message, never a traceback ----------------

@pytest.mark.parametrize("body, words", [
    ("<html><body><h1>502 Bad Gateway</h1></body></html>", "did not answer JSON: <html>"),
    ("", "did not answer JSON: an empty body"),
    ([{"id": "tiny-llama"}], "answered an array, not an object with 'data'"),
    ({"object": "list"}, "'data' is missing, not a list of models"),
    ({"data": {"id": "tiny-llama"}}, "'data' is an object, not a list of models"),
    ({"data": [{"name": "tiny-llama"}]}, "data[0] has no 'id' string"),
    ({"data": ["tiny-llama"]}, "data[0] has no 'id' string"),
    ({"data": [{"id": "tiny-llama", "max_model_len": "4096"}]}, 'data[0].max_model_len is "4096", not a whole number'),
    ({"data": [{"id": "tiny-llama", "max_model_len": -1}]}, "data[0].max_model_len is -1"),
    ({"data": [{"id": "tiny-llama", "root": ["/models"]}]}, "data[0].root is an array, not a path"),
])
def test_odd_model_lists_name_the_endpoint_and_the_fault(run_module, fake_server, body, words):
    state, url = fake_server(models=body)
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert result["msg"].startswith(url + "/v1/models")
    assert words in result["msg"]


@pytest.mark.parametrize("body, words", [
    ("<html>Internal Server Error</html>", "did not answer JSON"),
    ("[1, 2, 3]", "the answer has no 'prompt' string: [1, 2, 3]"),
    ('{"text": "hello"}', "the answer has no 'prompt' string"),
    ('{"prompt": [1, 2]}', "the answer has no 'prompt' string"),
])
def test_odd_detokenize_answers_name_the_endpoint(run_module, fake_server, body, words):
    state, url = fake_server(detokenize=body)
    result, failed = run_module(vllm_bench.main, bench_args(url, api="chat"))
    assert failed
    assert "could not detokenize the chat prompts: %s/detokenize" % url in result["msg"]
    assert words in result["msg"]


def test_a_model_config_with_a_bad_vocab_size_names_the_file(run_module, fake_server, tmp_path):
    (tmp_path / "config.json").write_text('{"vocab_size": "many"}')
    state, url = fake_server(models={"data": [{"id": "tiny-llama", "root": str(tmp_path)}]})
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert result["msg"] == '%s has vocab_size "many", not a whole number of tokens; set vocab_size' % (
        tmp_path / "config.json")


def test_a_hostile_model_config_names_the_file_without_a_traceback(run_module, fake_server, tmp_path):
    (tmp_path / "config.json").write_text("[" * 100000 + "]" * 100000)
    state, url = fake_server(models={"data": [{"id": "tiny-llama", "root": str(tmp_path)}]})
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert result["msg"].startswith("cannot read vocab_size from %s: %s: invalid JSON: nested too deeply" % (
        tmp_path / "config.json", tmp_path / "config.json"))


# ---- the API key stays with base_url; certificates are checked ------------------------------

def test_a_redirected_model_list_is_not_followed_with_the_key(run_module, fake_server):
    elsewhere, other_url = fake_server()
    state, url = fake_server(redirect_to=other_url, redirect_models=True)
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert "answered a redirect (HTTP 302) to %s/v1/models; redirects are not followed" % other_url in result["msg"]
    assert elsewhere["seen"] == []
    assert API_KEY not in json.dumps(result)


def test_a_redirected_completion_is_not_followed_with_the_key(run_module, fake_server):
    elsewhere, other_url = fake_server()
    state, url = fake_server("redirect", redirect_to=other_url)
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert result["levels"][0]["failed_by_class"] == {"http_other": result["levels"][0]["failed"]}
    assert "a redirect to %s/v1/completions, not followed" % other_url in result["msg"]
    assert elsewhere["seen"] == []


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory):
    """A server context with a self-signed certificate for 127.0.0.1, which no client trusts."""
    folder = tmp_path_factory.mktemp("tls")
    key, cert = str(folder / "key.pem"), str(folder / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_https_certificates_are_verified_by_default(run_module, fake_server, tls_context):
    state, url = fake_server(tls_context=tls_context)
    result, failed = run_module(vllm_bench.main, bench_args(url))
    assert failed
    assert "cannot reach the server at %s" % url in result["msg"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"]
    assert [entry for entry in state["seen"] if entry[2]] == []


def test_validate_certs_false_accepts_a_self_signed_server(run_module, fake_server, tls_context):
    state, url = fake_server(tls_context=tls_context)
    result, failed = run_module(vllm_bench.main, bench_args(url, validate_certs=False))
    assert not failed, result.get("msg")
    assert result["levels"][0]["completed"] == 8


# ---- the sweep in module_utils: run_sweep returns the result or raises with the levels ---------

class FakeMeter(object):
    """A PowerMeter stand-in: 12 J per level, and whether it was closed."""

    made = []

    def __init__(self, indices=None):
        self.indices, self.reason, self.starts, self.closed = indices, None, 0, False
        FakeMeter.made.append(self)

    def start(self):
        self.starts += 1

    def stop(self):
        return {"energy_j": 12.0, "seconds": 1.0, "gpus": 1, "samples": 0, "source": "energy counter",
                "average_w": 12.0, "sampled_average_w": None}

    def close(self):
        self.closed = True


def sweep_params(url, **extra):
    params = {name: spec.get("default") for name, spec in vllm_bench.ARGUMENT_SPEC.items()}
    params.update(bench_args(url, power=True, power_gpus=[0], **extra))
    return bench.SweepRequest.from_module_params(params)


def test_run_sweep_returns_the_levels_with_their_energy_and_closes_the_meter(fake_server):
    state, url = fake_server()
    del FakeMeter.made[:]
    result = bench.run_sweep(sweep_params(url, concurrency=[1, 2]), power_meter=FakeMeter)
    meter, = FakeMeter.made
    assert meter.indices == [0] and meter.starts == 2 and meter.closed
    assert [level["joules_per_output_token"] for level in result["levels"]] == [0.5, 0.5]     # 12 J / 24 tokens
    assert result["power_unavailable"] is None and result["peak_concurrency"] in (1, 2)


def test_run_sweep_raises_with_the_levels_measured_and_still_closes_the_meter(fake_server):
    state, url = fake_server(lambda number: "ok" if number <= 8 else "http_500")
    del FakeMeter.made[:]
    with pytest.raises(bench.BenchError) as caught:
        bench.run_sweep(sweep_params(url, concurrency=[1, 4, 16]), power_meter=FakeMeter)
    assert FakeMeter.made[0].closed
    assert str(caught.value).startswith("level C=4: ") and str(caught.value).endswith("; the 2 level(s) measured are in 'levels'")
    assert caught.value.result["failed_level"] == 4 and [level["concurrency"] for level in caught.value.result["levels"]] == [1, 4]
    assert caught.value.result["levels"][1]["joules_per_output_token"] is None       # no output tokens at C=4


def test_run_sweep_fails_before_the_sweep_without_a_result(fake_server):
    state, url = fake_server()
    with pytest.raises(bench.BenchError) as caught:
        bench.run_sweep(sweep_params(url, model="other"), power_meter=FakeMeter)
    assert str(caught.value) == "the server at %s does not serve model 'other'; it serves ['tiny-llama']" % url
    assert caught.value.result == {}


# ---- open loop, length mixes, datasets, goodput and the search for the max rate ---------------------------

def test_an_open_loop_sweep_reports_its_rate_levels_goodput_and_max_rate(run_module, fake_server):
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(
        url, concurrency=[], request_rate=[20, "inf"], requests_per_level=10, range_ratio=0.5, output_len=4,
        prefix_len=5, goodput={"ttft_ms": 5000, "tpot_ms": 5000}))
    assert not failed, result.get("msg")
    assert result["levels"] == [] and [level["request_rate"] for level in result["rate_levels"]] == [20.0, "inf"]
    assert [level["completed"] for level in result["rate_levels"]] == [10, 10]
    assert all(level["goodput"]["good_requests"] == 10 and level["slo_met"] for level in result["rate_levels"])
    # The inf level met the SLO: the max rate is what it achieved, and the workload says what was sent.
    assert result["max_sustainable_rate"] == result["rate_levels"][1]["request_throughput"]
    assert result["slo"] == {"ttft_ms": 5000.0, "tpot_ms": 5000.0}
    assert result["workload"]["request_rate"] == [20.0, "inf"] and result["workload"]["prefix_len"] == 5
    # Lengths mixed +-50% around 4 (so 2 to 6 tokens out), each prompt 5 + 2..6 tokens.
    tokens = [level["output_tokens"] for level in result["rate_levels"]]
    assert all(20 <= count <= 60 for count in tokens)
    assert result["rate_levels"][0]["arrivals"]["sent"] == 10


def test_a_custom_dataset_is_replayed_through_chat(run_module, fake_server, tmp_path):
    state, url = fake_server()
    path = tmp_path / "traffic.jsonl"
    path.write_text('{"prompt": "hello there", "output_tokens": 2}\n{"prompt": "tell me more"}\n')
    result, failed = run_module(vllm_bench.main, bench_args(
        url, api="chat", concurrency=[2], requests_per_level=4, dataset={"type": "custom", "path": str(path)}))
    assert not failed, result.get("msg")
    assert result["levels"][0]["output_tokens"] == 2 + 3 + 2 + 3            # output_tokens, else output_len 3
    assert result["workload"]["dataset"] == {"type": "custom", "path": str(path), "requests": 2}
    assert not [entry for entry in state["seen"] if entry[1] == "/detokenize"]    # sent as the file has it


def test_a_bad_dataset_fails_before_anything_is_sent(run_module, fake_server, tmp_path):
    state, url = fake_server()
    path = tmp_path / "traffic.jsonl"
    path.write_text('{"prompt": "hello"}\n{"prompt": 42}\n')
    result, failed = run_module(vllm_bench.main, bench_args(url, dataset={"type": "custom", "path": str(path)}))
    assert failed and result["msg"] == "dataset: %s line 2: 'prompt' must be a non-empty string (got 42)" % path
    assert not completion_posts(state)


@pytest.mark.parametrize("extra, words", [
    ({"request_rate": [0]}, "request_rate[0]: 0 is not above 0 requests/s"),
    ({"request_rate": ["fast"]}, "request_rate[0]: 'fast' is not a number of requests/s or 'inf'"),
    ({"request_rate": [1e9], "requests_per_level": 0}, "request_rate[0]: 1000000000.0 makes a level of 10000000000 requests, more than 100000"),
    ({"burstiness": 0.0}, "burstiness must be above 0"),
    ({"range_ratio": 1.0}, "range_ratio must be at least 0 and below 1 (got 1.0)"),
    ({"prefix_len": -1}, "prefix_len must be 0 or more (got -1)"),
    ({"max_concurrency": -2}, "max_concurrency must be 0 or more (got -2)"),
    ({"goodput": {"ttft_ms": 0}}, "goodput.ttft_ms must be a number of milliseconds above 0 (got 0.0)"),
    ({"goodput": {"e2el_ms": float("nan")}}, "goodput.e2el_ms must be a number of milliseconds above 0 (got nan)"),
    ({"dataset": {"type": "custom"}}, "dataset.path is required for dataset.type custom"),
    ({"rate_search_steps": 2}, "rate_search_steps 2 needs request_rate levels to search between and a goodput SLO"),
    ({"request_rate": [2], "goodput": {"ttft_ms": 9}, "rate_search_steps": 21}, "rate_search_steps must be 20 or fewer"),
])
def test_open_loop_options_out_of_range_are_refused_by_name(run_module, fake_server, extra, words):
    state, url = fake_server()
    result, failed = run_module(vllm_bench.main, bench_args(url, **extra))
    assert failed and words in result["msg"]
    assert not completion_posts(state)


def test_the_search_bisects_towards_the_max_rate_within_its_steps(monkeypatch):
    measured = []

    def fake_level(params, loop, meter, source, rate, index, searched=False):
        measured.append((rate, searched))
        met = rate <= 5.0                   # the server holds the SLO up to 5 req/s
        return {"request_rate": rate, "completed": 1, "failed": 0, "requests": 1, "failed_by_class": {},
                "first_errors": [], "abandoned": 0, "slo_met": met, "slo_misses": [] if met else ["p99 TTFT"]}

    monkeypatch.setattr(bench, "measure_rate_level", fake_level)
    monkeypatch.setattr(bench, "reachable", lambda params: True)
    request = bench.SweepRequest(model="tiny", request_rate=[2, 8], rate_search_steps=3, goodput={"ttft_ms": 100},
                                 max_failure_ratio=0)
    state = bench.Sweep()
    assert bench.open_loop(request, None, None, None, state)
    assert measured == [(2.0, False), (8.0, False), (5.0, True), (6.5, True), (5.75, True)]
    assert traffic.max_sustainable(state.rate_levels, request.goodput)[0] == 5.0
