# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how faithfully vllm_bench's open-loop client keeps its schedule (issue 31's goals), measured on the
sends it made, not on the schedule it drew:

- the coefficient of variation of the gaps between sends: a Poisson level (burstiness 1) 1 +- 0.2, burstiness 4
  0.5 +- 0.15;
- the achieved request rate of a 20 req/s level within +-15% of the target;
- the client's CPU per request.

The server is a local one that streams like vLLM's OpenAI server (16 chunks 5 ms apart), so the figures are the
client's alone; the same level against real vLLM, beside `vllm bench serve`, is printed by the vllm_service
scenario (bench_open_loop_fidelity.yml). Figures to read, not a pass/fail test: it fails only if a request fails."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import json
import random
import resource
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import vllm_bench

CHUNK_GAP_S = 0.005


class StreamingServer(ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for index in range(request["max_tokens"]):
            time.sleep(CHUNK_GAP_S)
            self.wfile.write(b"data: " + json.dumps({"choices": [{"index": 0, "text": "t%d" % index}]}).encode() + b"\n\n")
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": len(request["prompt"]), "completion_tokens": request["max_tokens"]}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def level(url, rate, burstiness, count, seed):
    prompts = vllm_bench.random_token_prompts(count, 64, 512, seed)
    requests = [{"prompt": prompt, "prompt_len": 64, "max_tokens": 16} for prompt in prompts]
    offsets = bench_traffic.arrival_offsets(count, rate, burstiness, random.Random(seed))
    loop = asyncio.new_event_loop()
    started = cpu_seconds()
    try:
        records, wall, dummy = loop.run_until_complete(vllm_bench.run_open_level(
            url, "completions", "bench", requests, offsets, 30.0))
    finally:
        loop.close()
    figures = vllm_bench.level_metrics(None, records, wall)
    figures["arrivals"] = vllm_bench.arrival_figures(records, count)
    figures["cpu_ms_per_request"] = 1000.0 * (cpu_seconds() - started) / count
    return figures


def main():
    server = StreamingServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % server.server_address[1]
    failed = 0
    rows = [("Poisson gaps' CV", 100.0, 1.0, 200, "1 +- 0.2", lambda f: f["arrivals"]["gap_cv"]),
            ("burstiness 4 gaps' CV", 100.0, 4.0, 200, "0.5 +- 0.15", lambda f: f["arrivals"]["gap_cv"]),
            ("achieved / target at 20 req/s", 20.0, 1.0, 60, "1 +- 0.15", lambda f: f["request_throughput"] / 20.0)]
    print("%-32s %8s %10s %12s %10s %s" % ("figure", "value", "goal", "offered/s", "lag p99", "CPU ms/request"))
    for name, rate, burstiness, count, goal, value in rows:
        figures = level(url, rate, burstiness, count, seed=len(name))
        failed += figures["failed"]
        arrivals = figures["arrivals"]
        print("%-32s %8.3f %10s %12.2f %8.1f ms %8.3f" % (
            name, value(figures), goal, arrivals["offered_rate"], arrivals["lag_ms_p99"], figures["cpu_ms_per_request"]))
    server.shutdown()
    if failed:
        print("%d request(s) failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
