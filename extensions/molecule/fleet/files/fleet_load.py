"""A client of the fleet's one endpoint: workers send completions through the router until a stop file appears.

Every request's outcome is kept: HTTP status (or the connection error), latency, and when it ended. On stop,
the workers finish the request they are in, and the totals go to --out as JSON. Stdlib only (the router host
has no venv). The API key is read from a file (--key-file), never from argv.
"""

import argparse
import json
import os
import threading
import time
import urllib.error
import urllib.request


def one_request(url, key, model, max_tokens, timeout):
    body = json.dumps({"model": model, "prompt": "The fleet keeps serving while", "max_tokens": max_tokens,
                       "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    started = time.time()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.loads(response.read())
            ok = response.status == 200 and reply.get("usage", {}).get("completion_tokens") == max_tokens
            # The router sent it to a server of that model: vLLM answers with the name it was asked for.
            ok = ok and reply.get("model") == model
            return {"ok": ok, "status": response.status, "model": model,
                    "error": None if ok else "short or misrouted answer: %s %s" % (reply.get("model"), reply.get("usage")),
                    "latency_s": time.time() - started, "ended": time.time()}
    except urllib.error.HTTPError as exc:
        return {"ok": False, "status": exc.code, "model": model, "error": exc.read()[:200].decode("utf-8", "replace"),
                "latency_s": time.time() - started, "ended": time.time()}
    except Exception as exc:  # every failure a client would see counts
        return {"ok": False, "status": None, "model": model, "error": repr(exc)[:200], "latency_s": time.time() - started,
                "ended": time.time()}


def worker(args, key, results, lock, first):
    turn = first
    while not os.path.exists(args.stop_file):
        # The models in turn (a base model and its LoRA adapter, say): a rollout must fail none of them.
        outcome = one_request(args.url, key, args.model[turn % len(args.model)], args.max_tokens, args.timeout)
        turn += 1
        with lock:
            results.append(outcome)
            progress = {"sent": len(results), "ok": len([r for r in results if r["ok"]])}
            with open(args.out + ".progress.tmp", "w") as handle:
                json.dump(progress, handle)
            os.rename(args.out + ".progress.tmp", args.out + ".progress")
        # Paced, not flat out: the client proves that no request fails, and on the rig's two cores a client
        # running flat out would starve the server that is starting next to the one that serves.
        time.sleep(args.pause if outcome["ok"] else max(args.pause, 0.2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True, action="append", help="a model to ask for; repeat for several")
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--pause", type=float, default=0.25, help="seconds each worker waits between requests")
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.key_file) as handle:
        key = handle.read().strip()
    results, lock, started = [], threading.Lock(), time.time()
    threads = [threading.Thread(target=worker, args=(args, key, results, lock, index)) for index in range(args.workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if not r["ok"]]
    latencies = sorted(r["latency_s"] for r in results if r["ok"])
    summary = {"sent": len(results), "ok": len(results) - len(failed), "failed": len(failed),
               "first_failures": failed[:10], "seconds": round(time.time() - started, 1),
               "by_model": dict((model, {"sent": len([r for r in results if r["model"] == model]),
                                         "failed": len([r for r in failed if r["model"] == model])}) for model in args.model),
               "latency_p50_s": round(latencies[len(latencies) // 2], 3) if latencies else None,
               "latency_max_s": round(latencies[-1], 3) if latencies else None}
    with open(args.out + ".tmp", "w") as handle:
        json.dump(summary, handle, indent=2)
    os.rename(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
