# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run playbooks/swap.yml against two real vLLM servers on one GPU, and record what it did.

  PYTHONPATH=<vllm site>:<folder holding ansible_collections/gauntlet/vllm> ANSIBLE_COLLECTIONS_PATH=<that folder> \\
      python3 scripts/swap_playbook_eval.py MODEL_DIR OUT_JSON DEADLINE_S \\
          [--ansible-playbook /tmp/site/bin/ansible-playbook] [--playbook playbooks/swap.yml] [--eager]

Starts two vLLM servers of MODEL_DIR (a config.json; dummy weights) as scripts/sleep_mode_eval.py does (its
functions, imported): served as ``a`` on 8001 and ``b`` on 8002, --enable-sleep-mode, --gpu-memory-utilization 0.40,
VLLM_SERVER_DEV_MODE=1, a throwaway --api-key. One difference: the servers get a tokenizer instead of
--skip-tokenizer-init, since the playbook's wake step (the vllm_sleep module with ``model``) checks the woken server
with a text prompt, which a server without a tokenizer refuses. The tokenizer is a generated word-level one (one
token per id of the model's vocabulary, ``t<id>``; every word of a text prompt is ``<unk>``, id 0), written with the
config into a temporary model folder.

Then ``ansible-playbook`` (run by this Python, with a JSON stdout callback written next to the inventory) runs the playbook against a generated
inventory: host ``gpu-local`` in group ``vllm_hosts``, ``ansible_connection: local``, the two entries side by side
(vllm_deploy_host_entries, vllm_deploy_models with sleep_mode), the key as vllm_service_api_key, and no
vllm_router_hosts group (so the router steps are skipped). The runs: swap_to=b in check mode, b, b again, a, a again,
and c (not an entry: must fail). Around each run: /is_sleeping of both servers before and after, GPU memory, and a
completion (token-id prompt, greedy) to each awake server, compared with the ids it gave after its cold start.

Everything goes to OUT_JSON (the key scrubbed), with the servers' logs next to it; a table goes to stdout. The
servers are stopped in ``finally``; runs that would not fit DEADLINE_S are recorded as skipped. Not imported by the
collection; docs/sleep-mode.md reports its run.
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sleep_mode_eval as sme  # noqa: E402  (same folder; brings vllm_sleep through ansible_collections)

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_sleep  # noqa: E402

HOST = "gpu-local"
# (label, swap_to, check mode, what the run must show)
RUNS = (
    ("check_b", "b", True, "changed, and nothing changed on the servers"),
    ("swap_b", "b", False, "a asleep, b awake"),
    ("again_b", "b", False, "0 changed"),
    ("swap_a", "a", False, "b asleep, a awake"),
    ("again_a", "a", False, "0 changed"),
    ("refuse_c", "c", False, "fails naming vllm_deploy_host_entries"),
)
PLAYBOOK_TIMEOUT = 300
# A run is started only with this much time left (ansible-playbook's start, a first sleep of 11-12 s, the reads).
RUN_NEEDS_S = 60


def tokenizer_files(vocab_size, bos_token_id=None, eos_token_id=None):
    """tokenizer.json and tokenizer_config.json of a word-level tokenizer with one token per id, ``<unk>`` = 0, and
    the model's BOS and EOS ids as its bos and eos tokens."""
    vocab = {"<unk>": 0}
    vocab.update(("t%d" % index, index) for index in range(1, vocab_size))
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "model_max_length": 131072,
              "clean_up_tokenization_spaces": False}
    for name, token_id in (("bos_token", bos_token_id), ("eos_token", eos_token_id)):
        if isinstance(token_id, int) and 0 < token_id < vocab_size:
            config[name] = "t%d" % token_id
    return tokenizer, config


def model_folder(model_dir, work):
    """A copy of MODEL_DIR's files with the generated tokenizer added; its path."""
    target = os.path.join(work, "model")
    os.makedirs(target)
    for name in os.listdir(model_dir):
        source = os.path.join(model_dir, name)
        if os.path.isfile(source):
            shutil.copy(source, target)
    with open(os.path.join(target, "config.json")) as handle:
        model_config = json.load(handle)
    vocab_size = model_config["vocab_size"]
    tokenizer, config = tokenizer_files(vocab_size, model_config.get("bos_token_id"), model_config.get("eos_token_id"))
    for name, content in (("tokenizer.json", tokenizer), ("tokenizer_config.json", config)):
        with open(os.path.join(target, name), "w") as handle:
            json.dump(content, handle)
    return target, vocab_size


def inventory(work, key):
    """The inventory (JSON is YAML) of one local host with the two entries side by side; its path."""
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "vllm_deploy_host_entries": ["a", "b"],
        "vllm_deploy_models": {name: {"repo_id": "x/%s" % name, "port": port, "sleep_mode": True}
                               for name, port in sme.SERVERS},
        "vllm_service_api_key": key,
    }
    path = os.path.join(work, "inventory.yml")
    with open(path, "w") as handle:
        json.dump({"all": {"children": {"vllm_hosts": {"hosts": {HOST: host}}}}}, handle, indent=1)
    return path


# ansible-core has no JSON stdout callback of its own (ansible.builtin.json redirects to ansible.posix.json, a
# collection the GPU host lacks): this one prints, at the end, the tasks' results and the stats, in the shape
# of ansible.posix.json's output (what summarize reads).
CALLBACK = '''
import json
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "swap_eval_json"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.tasks = []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.tasks.append({"task": {"name": task.get_name()}, "hosts": {}})

    def _record(self, result, **extra):
        data = json.loads(self._dump_results(result._result))
        data.update(extra, action=result._task.action)
        self.tasks[-1]["hosts"][result._host.get_name()] = data

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed.keys())
        self._display.display(json.dumps({"plays": [{"tasks": self.tasks}],
                                          "stats": dict((host, stats.summarize(host)) for host in hosts)}))
'''


def ansible_env(work, collections_path):
    config = os.path.join(work, "ansible.cfg")
    with open(config, "w") as handle:
        handle.write("[defaults]\nretry_files_enabled = false\nhost_key_checking = false\n")
    callbacks = os.path.join(work, "callback_plugins")
    os.makedirs(callbacks)
    with open(os.path.join(callbacks, "swap_eval_json.py"), "w") as handle:
        handle.write(CALLBACK)
    return dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_STDOUT_CALLBACK="swap_eval_json",
                ANSIBLE_CALLBACK_PLUGINS=callbacks, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_HOME=os.path.join(work, "ansible-home"),
                ANSIBLE_LOCAL_TEMP=os.path.join(work, "ansible-local"),
                ANSIBLE_REMOTE_TEMP=os.path.join(work, "ansible-remote"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_DEPRECATION_WARNINGS="0", LC_ALL="C.UTF-8", LANG="C.UTF-8")


def states():
    """/is_sleeping of each server (or the error)."""
    found = {}
    for name, dummy in sme.SERVERS:
        try:
            found[name] = vllm_sleep.is_sleeping(sme.url(name), 30)
        except vllm_sleep.SleepModeError as exc:
            found[name] = "error: %s" % exc
    return found


def summarize(answer):
    """The play's stats, and per task what it did on the host (loop items each), from the JSON callback's output."""
    stats = (answer.get("stats") or {}).get(HOST, {})
    tasks, failure = [], None
    for play in answer.get("plays", []):
        for task in play.get("tasks", []):
            result = (task.get("hosts") or {}).get(HOST)
            if result is None:
                continue
            entry = {"task": task["task"]["name"], "action": result.get("action"),
                     "changed": bool(result.get("changed")), "failed": bool(result.get("failed")),
                     "skipped": bool(result.get("skipped"))}
            items = result.get("results")
            if isinstance(items, list):
                entry["items"] = [item_fields(item) for item in items]
            elif str(result.get("action")).endswith("vllm_sleep"):
                entry.update(item_fields(result))
            if result.get("failed"):
                entry["msg"] = result.get("msg")
                failure = failure or {"task": entry["task"], "msg": result.get("msg")}
            tasks.append(entry)
    return {"stats": stats, "tasks": tasks, "failure": failure}


def item_fields(result):
    keys = ("item", "changed", "failed", "skipped", "was_sleeping", "is_sleeping", "seconds", "completion", "msg")
    fields = {key: result.get(key) for key in keys if key in result}
    return fields


def play(run, options, env, inventory_path, label, swap_to, check):
    argv = [sys.executable, options.ansible_playbook, "-i", inventory_path, options.playbook, "-e",
            "swap_to=%s" % swap_to] + (["--check"] if check else [])
    entry = {"label": label, "swap_to": swap_to, "check": check, "argv": [os.path.basename(argv[0])] + argv[1:],
             "is_sleeping_before": states(), "gpu_memory_used_mib_before": sme.gpu_memory_used()}
    started = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                              timeout=max(10, min(PLAYBOOK_TIMEOUT, run.left() - 20)), check=False)
        entry["rc"], stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        entry["rc"], stdout, stderr = "timeout", exc.stdout or "", exc.stderr or ""
        stdout, stderr = [text.decode("utf-8", "replace") if isinstance(text, bytes) else text
                          for text in (stdout, stderr)]
    entry["wall_s"] = round(time.monotonic() - started, 2)
    entry["stderr_tail"] = stderr[-1500:]
    try:
        entry.update(summarize(json.loads(stdout[stdout.index("{"):])))
        entry["changed"] = entry["stats"].get("changed")
    except ValueError:
        entry["stdout_tail"] = stdout[-3000:]
    entry["is_sleeping_after"] = states()
    entry["gpu_memory_used_mib_after"] = sme.gpu_memory_used()
    entry["completions_after"] = {}
    for name, sleeping in entry["is_sleeping_after"].items():
        if sleeping is False:
            try:
                answer = vllm_sleep.completion(sme.url(name), name, sme.API_KEY, 60, sme.PROMPT, sme.MAX_TOKENS,
                                               sme.EXTRA)
                answer["same_ids_as_cold_start"] = sme.same_ids(run, name, answer)
            except vllm_sleep.SleepModeError as exc:
                answer = {"error": str(exc), "status": exc.status}
            entry["completions_after"][name] = answer
    run.record["runs"].append(entry)
    run.step("playbook_" + label, wall_s=entry["wall_s"], rc=entry["rc"], changed=entry.get("changed"),
             after=entry["is_sleeping_after"])
    return entry


def verdicts(record):
    """Whether each run showed what it must (see RUNS)."""
    by_label = {entry["label"]: entry for entry in record["runs"]}
    found = {}

    def same_ids_everywhere(entry):
        answers = entry["completions_after"].values()
        return bool(answers) and all(answer.get("same_ids_as_cold_start") is True for answer in answers)

    for label, swap_to, check, dummy in RUNS:
        entry = by_label.get(label)
        if entry is None:
            found[label] = None
            continue
        before, after = entry["is_sleeping_before"], entry["is_sleeping_after"]
        other = "a" if swap_to == "b" else "b"
        if label == "check_b":
            ok = entry["rc"] == 0 and (entry.get("changed") or 0) > 0 and before == after
        elif label.startswith("swap_"):
            ok = entry["rc"] == 0 and (entry.get("changed") or 0) > 0 and after == {swap_to: False, other: True}
        elif label.startswith("again_"):
            ok = entry["rc"] == 0 and entry.get("changed") == 0 and after == {swap_to: False, other: True}
        else:
            message = (entry.get("failure") or {}).get("msg") or ""
            ok = entry["rc"] not in (0, "timeout") and "vllm_deploy_host_entries" in message and before == after
        found[label] = bool(ok) and (label == "refuse_c" or same_ids_everywhere(entry))
    return found


def phases(run, options, work):
    model_dir, vocab_size = model_folder(os.path.abspath(options.model_dir), work)
    run.record["model"] = {"source": os.path.abspath(options.model_dir), "vocab_size": vocab_size,
                           "tokenizer": "generated word-level, one token t<id> per id, <unk> = 0, bos/eos from config.json"}
    env = ansible_env(work, options.collections_path)
    inventory_path = inventory(work, sme.API_KEY)
    run.record["inventory"] = {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                      "vllm_deploy_host_entries": ["a", "b"],
                                      "vllm_deploy_models": {name: {"repo_id": "x/%s" % name, "port": port,
                                                                    "sleep_mode": True}
                                                             for name, port in sme.SERVERS},
                                      "vllm_service_api_key": "(throwaway)"},
                               "groups": {"vllm_hosts": [HOST]}, "vllm_router_hosts": "absent"}
    run.record["ansible_env"] = {key: value for key, value in env.items()
                                 if key.startswith("ANSIBLE_") and key not in ("ANSIBLE_CONFIG",)}
    run.step("before_servers")
    for name, dummy in sme.SERVERS:
        entry = sme.cold_start(run, name, model_dir, work, options.eager)
        if not entry["ok"]:
            return
        run.record.setdefault("reference_token_ids", {})[name] = entry["completion"]["token_ids"]
        run.save()
    for label, swap_to, check, dummy in RUNS:
        if run.left() < RUN_NEEDS_S:
            run.record["skipped"].append("%s: deadline" % label)
            continue
        play(run, options, env, inventory_path, label, swap_to, check)
        run.save()


def scrub(value, key):
    """``value`` (JSON-able) with the key replaced wherever it occurs in a string."""
    text = json.dumps(value, default=str)
    return json.loads(text.replace(key, "(throwaway key)")) if key else value


def table(record):
    rows = ["%-9s %-7s %-6s %4s %8s %8s  %-24s %-24s %-9s %s" % (
        "run", "swap_to", "check", "rc", "changed", "wall_s", "is_sleeping before", "is_sleeping after", "GPU MiB",
        "same ids")]
    for entry in record["runs"]:
        same = {name: answer.get("same_ids_as_cold_start") for name, answer in entry["completions_after"].items()}
        rows.append("%-9s %-7s %-6s %4s %8s %8s  %-24s %-24s %-9s %s" % (
            entry["label"], entry["swap_to"], entry["check"], entry["rc"], entry.get("changed"), entry["wall_s"],
            json.dumps(entry["is_sleeping_before"], sort_keys=True), json.dumps(entry["is_sleeping_after"],
                                                                                sort_keys=True),
            entry["gpu_memory_used_mib_after"], json.dumps(same, sort_keys=True)))
    rows.append("verdicts: %s" % json.dumps(record.get("verdicts"), sort_keys=True))
    for entry in record["runs"]:
        if entry.get("failure"):
            rows.append("%s failed in %r: %s" % (entry["label"], entry["failure"]["task"],
                                                 " ".join(str(entry["failure"]["msg"]).split())))
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("model_dir")
    parser.add_argument("out_json")
    parser.add_argument("deadline_s", type=float)
    parser.add_argument("--ansible-playbook", default="/tmp/site/bin/ansible-playbook",
                        help="the ansible-playbook script, run by this Python")
    parser.add_argument("--playbook", default="playbooks/swap.yml")
    parser.add_argument("--collections-path", default=os.environ.get("ANSIBLE_COLLECTIONS_PATH") or "/tmp/ac")
    parser.add_argument("--eager", action="store_true", help="start both servers with --enforce-eager")
    options = parser.parse_args()
    # The servers as sleep_mode_eval starts them, less --skip-tokenizer-init (a tokenizer comes with the model
    # folder), with a key of this run.
    sme.SERVER_ARGS = [arg for arg in sme.SERVER_ARGS if arg != "--skip-tokenizer-init"]
    sme.API_KEY = "throwaway-" + secrets.token_hex(12)
    run = sme.Run(options.out_json, options.deadline_s)
    run.record.update(runs=[], playbook=options.playbook, eager=options.eager,
                      runs_planned=[{"label": label, "swap_to": swap_to, "check": check, "must": must}
                                    for label, swap_to, check, must in RUNS])
    if options.eager:
        run.record["server_args"].append("--enforce-eager")
    save = run.save
    run.save = lambda: (run.record.update(scrub(run.record, sme.API_KEY)), save())
    signal.signal(signal.SIGTERM, lambda *args: sys.exit(143))
    out_dir = os.path.dirname(os.path.abspath(options.out_json))
    work = tempfile.mkdtemp(prefix="swap-eval-")
    run.record["versions"] = sme.versions()
    try:
        from importlib import metadata
        run.record["versions"]["ansible-core"] = metadata.version("ansible-core")
    except Exception as exc:  # not installed where this Python looks
        run.record["versions"]["ansible-core"] = "unknown: %s" % exc
    try:
        phases(run, options, work)
    except (vllm_sleep.SleepModeError, KeyboardInterrupt, SystemExit) as exc:
        run.record["error"] = "%s: %s" % (type(exc).__name__, exc)
        print("stopped: %s" % run.record["error"], flush=True)
    finally:
        sme.stop_servers(run)
        run.step("after_servers_stopped")
        run.record["server_logs"] = {}
        for name, dummy in sme.SERVERS:
            log_path = os.path.join(work, "server-%s.log" % name)
            run.record["server_logs"][name] = sme.log_facts(log_path)
            if os.path.exists(log_path):
                with open(log_path, errors="replace") as source, \
                        open(os.path.join(out_dir, "server-%s.log" % name), "w") as target:
                    target.write(source.read().replace(sme.API_KEY, "(throwaway key)"))
        run.record["verdicts"] = verdicts(run.record)
        run.record["elapsed_s"] = run.now()
        run.save()
        print(table(run.record), flush=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
