"""vLLM's prefix-cache hit rate through the router, for the same conversations with and without session affinity.

Each conversation has a system text of its own; turn t sends the whole history so far (the system text and the
earlier user turns) plus a new user turn, as a completion of --model through the router (--url). The conversations
run interleaved, one turn each in turn, with a fresh set of texts per mode (no mode finds another's in the cache):

  with     each request carries its conversation's X-Session-ID: the router keeps a conversation on one server;
  without  the same requests without the header: the router (vllm_router_affinity: session) balances them round
           robin, and with an odd number of conversations a conversation's next turn lands on the other server.

The hit rate is vLLM's own: the change of vllm:prefix_cache_hits_total over vllm:prefix_cache_queries_total (prompt
tokens), summed over the servers (--server, their base URLs: /metrics needs no key), read before and after each mode.
No other client may run meanwhile. Stdlib only (the router host has no venv); the API key comes from --key-file.
Writes {mode: {hit_rate, hits, queries, requests}} to --out and prints it.
"""

import argparse
import json
import random
import re
import time
import urllib.error
import urllib.request

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()
COUNTERS = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")


def prefix_counters(server):
    """(queries, hits) of one server, summed over its label sets."""
    with urllib.request.urlopen(server + "/metrics", timeout=30) as response:
        text = response.read().decode()
    totals = []
    for name in COUNTERS:
        values = re.findall(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), text, re.M)
        if not values:
            raise SystemExit("%s/metrics has no %s: is it a vLLM server with prefix caching on?" % (server, name))
        totals.append(sum(float(value) for value in values))
    return totals


def summed_counters(servers):
    pairs = [prefix_counters(server) for server in servers]
    return sum(pair[0] for pair in pairs), sum(pair[1] for pair in pairs)


def text(rng, words):
    return " ".join(rng.choice(WORDS) for _word in range(words))


def complete(args, key, prompt, session):
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    if session:
        headers["X-Session-ID"] = session
    body = json.dumps({"model": args.model, "prompt": prompt, "max_tokens": 2, "ignore_eos": True}).encode()
    request = urllib.request.Request(args.url + "/v1/completions", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise SystemExit("the router answered a prompt of %d characters (session %s) with HTTP %d: %s"
                         % (len(prompt), session, exc.code, exc.read()[:500].decode("utf-8", "replace")))
    if reply.get("model") != args.model:
        raise SystemExit("the router answered %s with %r" % (args.model, reply.get("model")))


def run_mode(args, key, mode, seed):
    rng = random.Random(seed)
    # The run's seed first: a probe run again (molecule verify twice) finds none of the earlier run's texts cached.
    histories = ["Run %d, system %d of %s: %s." % (seed, index, mode, text(rng, args.system_words))
                 for index in range(args.conversations)]
    before = summed_counters(args.server)
    requests = 0
    for turn in range(args.turns):
        for index in range(args.conversations):
            histories[index] += "\nUser turn %d: %s." % (turn, text(rng, args.turn_words))
            complete(args, key, histories[index], "%s-%d-%d" % (mode, seed, index) if mode == "with" else None)
            requests += 1
    after = summed_counters(args.server)
    queries, hits = after[0] - before[0], after[1] - before[1]
    return {"hit_rate": round(hits / queries, 4) if queries else None, "hits": int(hits), "queries": int(queries),
            "requests": requests}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the router")
    parser.add_argument("--model", required=True)
    parser.add_argument("--server", required=True, action="append", help="a vLLM server's base URL; repeat for each")
    parser.add_argument("--key-file", required=True)
    # Odd: round robin then moves every conversation's next turn to the other of two servers.
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    # About 1.4 characters a token with the rig's tiny tokenizer: the fourth turn stays within 1024 tokens (its 818 or so).
    parser.add_argument("--system-words", type=int, default=60)
    parser.add_argument("--turn-words", type=int, default=22)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock, new texts every run")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.key_file) as handle:
        key = handle.read().strip()
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1000000007
    result = {mode: run_mode(args, key, mode, seed * 10 + position)
              for position, mode in enumerate(("with", "without"))}
    result["seed"] = seed
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
