# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Measure vLLM's sleep mode on one GPU with the collection's own client (module_utils/serving/vllm_sleep.py).

  PYTHONPATH=<vllm site>:<folder holding ansible_collections/gauntlet/vllm> \\
      python3 scripts/sleep_mode_eval.py MODEL_DIR OUT_JSON DEADLINE_S [--eager-b]

Starts two vLLM servers of MODEL_DIR (a config.json; dummy weights) one after the other, served as ``a`` on 8001 and
``b`` on 8002, each with --enable-sleep-mode at --gpu-memory-utilization 0.40, and measures each cold start (process
start to the first completion with tokens). Then, with vllm_sleep: puts b to sleep; sends a completion to the
sleeping b (does it queue, fail, or wait?); sleeps a while a long completion runs on it, with vLLM's default mode
(abort) and with mode=wait; switches a->b and b->a three times at level 1; sleeps a at level 2, wakes it, and asks
for a completion before and after POST /collective_rpc reload_weights. GPU memory (nvidia-smi) is read at each step.
Completions are greedy with token-id prompts (--skip-tokenizer-init), so a server's output after a wake can be
compared with its output after the cold start: equal ids mean the weights came back whole.

Everything goes to OUT_JSON (written after each phase, and in ``finally``); a table goes to stdout. The servers are
stopped in ``finally``; the script ends before DEADLINE_S seconds have passed (phases that would not fit are
recorded as skipped). Not imported by the collection; docs/sleep-mode.md reports its run.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_sleep

SERVERS = (("a", 8001), ("b", 8002))
SERVER_ARGS = ["--load-format", "dummy", "--skip-tokenizer-init", "--enable-sleep-mode",
               "--gpu-memory-utilization", "0.40", "--max-model-len", "4096", "--seed", "0"]
SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0", "HF_HUB_OFFLINE": "1",
              "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
# A throwaway key, so the run shows which routes it guards (completions) and which it does not (/sleep).
API_KEY = "sleep-eval-key"
PROMPT = list(range(1, 33))
MAX_TOKENS = 8
# Greedy, token ids back, no stop at a (tokenizer-less) EOS: the same prompt gives the same ids while the weights hold.
EXTRA = {"return_token_ids": True, "ignore_eos": True}
SWITCH_ROUNDS = 3
REQUEST_TIMEOUT = 120
# A cold start of the second server with less than this left uses --enforce-eager (no torch.compile, no graphs).
EAGER_BELOW_S = 260
LOG_MARKERS = ("Sleep mode freed", "CuMemAllocator", "fall asleep", "wake up", "Reloading", "reload", "Error",
               "Traceback", "NotImplementedError", "init engine", "Model loading took", "Available KV cache",
               "GPU KV cache size", "torch.compile took", "Graph capturing", "abort", "SECURITY WARNING")


class Run:
    """The record, the clock and the servers of one run."""

    def __init__(self, out_json, deadline_s):
        self.started = time.monotonic()
        self.stop_at = self.started + deadline_s
        self.out_json = out_json
        self.servers = {}
        self.record = {"argv": sys.argv, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "deadline_s": deadline_s, "server_args": SERVER_ARGS + ["--api-key", "(throwaway)"],
                       "server_env": SERVER_ENV, "prompt_token_ids": PROMPT, "max_tokens": MAX_TOKENS,
                       "completion_extra": EXTRA, "steps": [], "skipped": []}

    def left(self):
        return self.stop_at - time.monotonic()

    def now(self):
        return round(time.monotonic() - self.started, 2)

    def step(self, name, **fields):
        """One line of the record, with the GPU memory at that moment."""
        entry = dict({"step": name, "t_s": self.now(), "gpu_memory_used_mib": gpu_memory_used()}, **fields)
        self.record["steps"].append(entry)
        print("[%7.1f s] %-28s %s" % (entry["t_s"], name, short(fields)), flush=True)
        return entry

    def save(self):
        temporary = self.out_json + ".tmp"
        with open(temporary, "w") as handle:
            json.dump(self.record, handle, indent=1, sort_keys=True, default=str)
        os.replace(temporary, self.out_json)


def short(fields):
    text = json.dumps(fields, default=str, sort_keys=True)
    return text if len(text) < 200 else text[:197] + "..."


def sh(argv):
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30,
                              universal_newlines=True, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return "failed: %s" % exc


def gpu_memory_used():
    """MiB used on GPU 0 (all processes), as nvidia-smi reports it."""
    text = sh(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"])
    try:
        return int(text.splitlines()[0])
    except (ValueError, IndexError):
        return text


def versions():
    """Versions from the installed metadata (no import of torch or vLLM here: the servers own the GPU)."""
    from importlib import metadata
    found = {"python": sys.version.split()[0]}
    for name in ("vllm", "torch", "triton", "flashinfer-python", "transformers"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["gpu"] = sh(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader", "-i", "0"])
    found["nvidia_smi"] = sh(["nvidia-smi"]).splitlines()[2:4]
    return found


def url(name):
    return "http://127.0.0.1:%d" % dict(SERVERS)[name]


def start_server(run, name, model_dir, log_dir, eager=False):
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--served-model-name",
            name, "--port", str(dict(SERVERS)[name]), "--api-key", API_KEY] + SERVER_ARGS
    if eager:
        args.append("--enforce-eager")
    log_path = os.path.join(log_dir, "server-%s.log" % name)
    with open(log_path, "w") as log:
        # Its own session, so stopping it reaches the engine-core process it forks too.
        run.servers[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                             env=dict(os.environ, **SERVER_ENV))
    return log_path


def cold_start(run, name, model_dir, log_dir, eager):
    """Start the server and wait for the first completion with tokens; the seconds from process start."""
    started = time.monotonic()
    start_server(run, name, model_dir, log_dir, eager)
    last = None
    while run.left() > 30:
        if run.servers[name].poll() is not None:
            return run.step("cold_start_" + name, ok=False, error="exited with %s" % run.servers[name].returncode,
                            eager=eager, last_error=last)
        try:
            answer = vllm_sleep.completion(url(name), name, API_KEY, 30, PROMPT, MAX_TOKENS, EXTRA)
            if answer["completion_tokens"]:
                return run.step("cold_start_" + name, ok=True, seconds=round(time.monotonic() - started, 2),
                                eager=eager, completion=answer)
        except vllm_sleep.SleepModeError as exc:
            last = str(exc)
        time.sleep(1)
    return run.step("cold_start_" + name, ok=False, error="deadline", eager=eager, last_error=last)


def stop_servers(run):
    """SIGTERM to each server's process group, SIGKILL after 20 s."""
    for server in run.servers.values():
        signal_group(server, signal.SIGTERM)
    for server in run.servers.values():
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            signal_group(server, signal.SIGKILL)
            server.wait(10)


def signal_group(server, number):
    try:
        os.killpg(server.pid, number)
    except ProcessLookupError:  # the group is gone already
        pass


def in_background(call):
    """Run ``call`` in a thread; the returned dict gets its result or error and the seconds it took."""
    box = {}

    def target():
        started = time.monotonic()
        try:
            box["answer"] = call()
        except vllm_sleep.SleepModeError as exc:
            box["error"], box["status"] = str(exc), exc.status
        box["seconds"] = round(time.monotonic() - started, 3)
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def timed(call):
    started = time.monotonic()
    value = call()
    return value, round(time.monotonic() - started, 3)


def same_ids(run, name, answer):
    """Whether ``answer`` generated the ids the server generated after its cold start (the weights are intact)."""
    reference = run.record.get("reference_token_ids", {}).get(name)
    return None if reference is None or not answer else answer.get("token_ids") == reference


def check_endpoints(run):
    """The dev routes on live servers: is_sleeping, server_info's flag (twice: vLLM collects its environment on the
    first call), and what a completion without the API key gets."""
    for name, dummy in SERVERS:
        probe = {"is_sleeping": vllm_sleep.is_sleeping(url(name))}
        for attempt in ("first", "again"):
            try:
                probe["enable_sleep_mode_" + attempt], probe["server_info_%s_s" % attempt] = timed(
                    lambda: vllm_sleep.sleep_mode_enabled(url(name), 60))
            except vllm_sleep.SleepModeError as exc:
                probe["server_info_%s_error" % attempt] = str(exc)
        status, body = vllm_sleep.http("POST", url(name) + "/v1/completions",
                                       vllm_sleep.completion_payload(name, PROMPT, MAX_TOKENS), None, 30)
        probe["completion_without_key"] = {"status": status, "body": vllm_sleep.snippet(body, 200)}
        run.step("endpoints_" + name, **probe)


def queued_while_asleep(run):
    """A completion sent to the sleeping b: answered, refused, or held until the wake?"""
    thread, box = in_background(lambda: vllm_sleep.completion(url("b"), "b", API_KEY, 60, PROMPT, MAX_TOKENS, EXTRA))
    time.sleep(5)
    pending_after_5s = thread.is_alive()
    # Unauthenticated on purpose: the dev routes take no key.
    dummy, wake_s = timed(lambda: vllm_sleep.wake_up(url("b"), timeout=REQUEST_TIMEOUT))
    thread.join(60)
    run.step("request_to_sleeping_b", pending_after_5s=pending_after_5s, wake_s=wake_s, result=box,
             same_ids_as_cold_start=same_ids(run, "b", box.get("answer")))
    dummy, sleep_s = timed(lambda: vllm_sleep.sleep(url("b"), 1, REQUEST_TIMEOUT))
    run.step("b_asleep_again", sleep_s=sleep_s, is_sleeping=vllm_sleep.is_sleeping(url("b")))


def sleep_with_request_running(run, mode, max_tokens, head_start):
    """Put a to sleep while a long completion runs on it; what that completion gets, and how long the sleep took."""
    long_extra = dict(EXTRA, return_token_ids=False)
    thread, box = in_background(
        lambda: vllm_sleep.completion(url("a"), "a", API_KEY, 120, PROMPT, max_tokens, long_extra))
    time.sleep(head_start)
    dummy, sleep_s = timed(lambda: vllm_sleep.sleep(url("a"), 1, REQUEST_TIMEOUT, mode))
    thread.join(120)
    run.step("sleep_a_mode_%s_with_request_running" % (mode or "default"), max_tokens=max_tokens,
             head_start_s=head_start, sleep_s=sleep_s, running_request=box,
             is_sleeping=vllm_sleep.is_sleeping(url("a")))
    dummy, wake_s = timed(lambda: vllm_sleep.wake_up(url("a"), timeout=REQUEST_TIMEOUT))
    answer = vllm_sleep.wait_for_completion(url("a"), "a", API_KEY, 60, PROMPT, MAX_TOKENS, EXTRA)
    run.step("a_awake_again", wake_s=wake_s, completion=answer, same_ids_as_cold_start=same_ids(run, "a", answer))


def switches(run):
    """SWITCH_ROUNDS rounds of a->b and b->a with vllm_sleep.switch at level 1."""
    run.record["switches"] = []
    for round_ in range(SWITCH_ROUNDS):
        for sleeper, waker in (("a", "b"), ("b", "a")):
            if run.left() < 60:
                run.record["skipped"].append("switch %s->%s of round %d: deadline" % (sleeper, waker, round_ + 1))
                return
            result = vllm_sleep.switch(url(sleeper), url(waker), waker, API_KEY, 1, REQUEST_TIMEOUT, PROMPT,
                                       MAX_TOKENS, EXTRA)
            result.update(round=round_ + 1, sleep=sleeper, wake=waker,
                          same_ids_as_cold_start=same_ids(run, waker, result["completion"]))
            run.record["switches"].append(result)
            run.step("switch_%s_to_%s_%d" % (sleeper, waker, round_ + 1), seconds=result["seconds"],
                     before=result["before"], after=result["after"], same_ids=result["same_ids_as_cold_start"])
        run.save()


def try_completion(name):
    try:
        return vllm_sleep.completion(url(name), name, API_KEY, 60, PROMPT, MAX_TOKENS, EXTRA)
    except vllm_sleep.SleepModeError as exc:
        return {"error": str(exc), "status": exc.status}


def level_two(run):
    """Sleep a at level 2 (weights discarded), wake it, and see what a completion gives before and after vLLM's
    reload_weights (POST /collective_rpc, another unauthenticated dev route)."""
    dummy, sleep_s = timed(lambda: vllm_sleep.sleep(url("a"), 2, REQUEST_TIMEOUT))
    run.step("a_sleep_level_2", sleep_s=sleep_s, is_sleeping=vllm_sleep.is_sleeping(url("a")))
    dummy, wake_s = timed(lambda: vllm_sleep.wake_up(url("a"), timeout=REQUEST_TIMEOUT))
    answer = try_completion("a")
    run.step("a_wake_after_level_2", wake_s=wake_s, completion=answer, same_ids_as_cold_start=same_ids(run, "a", answer))
    try:
        (status, body), reload_s = timed(lambda: vllm_sleep.http("POST", url("a") + "/collective_rpc",
                                                                 {"method": "reload_weights"}, None, 180))
        reload = {"status": status, "body": vllm_sleep.snippet(body, 600), "seconds": reload_s}
    except vllm_sleep.SleepModeError as exc:
        reload = {"error": str(exc)}
    answer = try_completion("a")
    run.step("a_reload_weights", reload=reload, completion_after=answer,
             same_ids_as_cold_start=same_ids(run, "a", answer), server_alive=run.servers["a"].poll() is None)


def phases(run, model_dir, log_dir, eager_b):
    run.step("before_servers")
    for name, dummy in SERVERS:
        eager = name == "b" and (eager_b or run.left() < EAGER_BELOW_S)
        entry = cold_start(run, name, model_dir, log_dir, eager)
        if not entry["ok"]:
            return
        run.record.setdefault("reference_token_ids", {})[name] = entry["completion"]["token_ids"]
        run.save()
    if run.left() < 120:
        run.record["skipped"].append("everything after the cold starts: deadline")
        return
    check_endpoints(run)
    dummy, sleep_s = timed(lambda: vllm_sleep.sleep(url("b"), 1, REQUEST_TIMEOUT))
    run.step("b_sleep_level_1", sleep_s=sleep_s, is_sleeping=vllm_sleep.is_sleeping(url("b")))
    queued_while_asleep(run)
    run.save()
    if run.left() < 100:
        run.record["skipped"].append("sleeps with a request running, switches, level 2: deadline")
        return
    sleep_with_request_running(run, None, 2048, 1.5)
    sleep_with_request_running(run, "wait", 256, 0.5)
    run.save()
    switches(run)
    if run.left() < 60:
        run.record["skipped"].append("level 2: deadline")
        return
    level_two(run)


def log_facts(path):
    try:
        with open(path, errors="replace") as handle:
            text = handle.read()
    except OSError:
        return {"lines": [], "tail": ""}
    lines = [line[:400] for line in text.splitlines() if any(marker in line for marker in LOG_MARKERS)]
    return {"lines": lines[:120], "tail": text[-3000:]}


def table(record):
    rows = ["%-34s %8s %8s %8s %8s %9s" % ("step", "sleep_s", "wake_s", "first_s", "total_s", "GPU MiB")]
    for step in record["steps"]:
        seconds = step.get("seconds") if isinstance(step.get("seconds"), dict) else {}
        rows.append("%-34s %8s %8s %8s %8s %9s" % (
            step["step"], seconds.get("sleep_s", step.get("sleep_s", "")) or "",
            seconds.get("wake_s", step.get("wake_s", "")) or "", seconds.get("first_completion_s", "") or "",
            seconds.get("total_s", step.get("seconds") if not seconds else "") or "", step["gpu_memory_used_mib"]))
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("model_dir")
    parser.add_argument("out_json")
    parser.add_argument("deadline_s", type=float)
    parser.add_argument("--eager-b", action="store_true", help="start b with --enforce-eager")
    options = parser.parse_args()
    run = Run(options.out_json, options.deadline_s)
    # SIGTERM ends the run like SIGINT, through the finally below.
    signal.signal(signal.SIGTERM, lambda *args: sys.exit(143))
    log_dir = os.path.dirname(os.path.abspath(options.out_json))
    run.record["versions"] = versions()
    try:
        phases(run, os.path.abspath(options.model_dir), log_dir, options.eager_b)
    except (vllm_sleep.SleepModeError, KeyboardInterrupt, SystemExit) as exc:
        run.record["error"] = "%s: %s" % (type(exc).__name__, exc)
        print("stopped: %s" % run.record["error"], flush=True)
    finally:
        stop_servers(run)
        run.step("after_servers_stopped")
        run.record["server_logs"] = {name: log_facts(os.path.join(log_dir, "server-%s.log" % name))
                                     for name, dummy in SERVERS}
        run.record["elapsed_s"] = run.now()
        run.save()
        print(table(run.record), flush=True)


if __name__ == "__main__":
    main()
