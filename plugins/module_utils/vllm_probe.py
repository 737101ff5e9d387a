# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One look at a vLLM unit: its systemd state, its journal, and whether a real completion works.

The ``vllm_wait`` module runs ``probe`` once on the target; the ``vllm_wait`` action plugin calls it
again and again from the controller and decides with ``verdict`` whether to go on waiting.
``/health`` answers as soon as the API server is up, which says nothing about whether the model
can generate; only a completion that comes back with tokens counts as ready.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_units import load_phase, redact_text

# The options of the module and of the action plugin (which validates them before its loop).
ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    base_url=dict(type="str", default="http://127.0.0.1:8000"),
    model=dict(type="str", required=True),
    api=dict(type="str", default="completions", choices=["completions", "chat"]),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    prompt=dict(type="str", default="The capital of France is"),
    max_tokens=dict(type="int", default=8, no_log=False),
    timeout=dict(type="int"),
    checkpoint_bytes=dict(type="int", default=0),
    timeout_base=dict(type="int", default=600),
    timeout_per_gib=dict(type="float", default=8.0),
    poll_interval=dict(type="int", default=5),
    progress_interval=dict(type="int", default=30),
    request_timeout=dict(type="int", default=60),
    journal_lines=dict(type="int", default=40),
)

UNIT_PROPERTIES = (
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "MainPID",
    "Job",
    "LoadState",
    "InvocationID",
    "ExecMainStartTimestampMonotonic",
    "ActiveEnterTimestampMonotonic",
    "ExecMainStatus",
    "ExecMainCode",
)

# Lines of the current run read to work out the load phase.
PHASE_LINES = 400

GIB = 1024 ** 3


def scaled_timeout(params):
    """The wait's limit in seconds: O(timeout), or a base plus seconds per GiB of checkpoint."""
    if params.get("timeout"):
        return int(params["timeout"])
    gib = (params.get("checkpoint_bytes") or 0) / float(GIB)
    return int(params["timeout_base"] + gib * params["timeout_per_gib"])


def unit_state(module, unit):
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, err = module.run_command([systemctl, "show", "--no-pager", "-p", ",".join(UNIT_PROPERTIES), unit])
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed: %s" % (unit, err.strip() or out.strip()))
    props = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    if props.get("LoadState") == "not-found":
        module.fail_json(msg="%s: no such unit" % unit)
    start_us = props.get("ExecMainStartTimestampMonotonic") or "0"
    active_us = props.get("ActiveEnterTimestampMonotonic") or "0"
    return {
        "active_state": props.get("ActiveState"),
        "sub_state": props.get("SubState"),
        "result": props.get("Result"),
        "n_restarts": int(props.get("NRestarts") or 0),
        "main_pid": int(props.get("MainPID") or 0),
        "job_pending": (props.get("Job") or "") not in ("", "0"),
        "invocation_id": props.get("InvocationID") or None,
        "main_started_monotonic": int(start_us) / 1e6 if start_us.isdigit() else 0.0,
        "active_entered_monotonic": int(active_us) / 1e6 if active_us.isdigit() else 0.0,
        "exec_main_status": int(props.get("ExecMainStatus") or 0),
        # 0 while the main process runs; CLD_EXITED (1), CLD_KILLED (2) or CLD_DUMPED (3) once it has ended.
        "exec_main_code": int(props.get("ExecMainCode") or 0),
    }


def journal(module, args):
    journalctl = module.get_bin_path("journalctl")
    if not journalctl:
        return []
    rc, out, dummy = module.run_command([journalctl, "--no-pager", "-a"] + args)
    return out.splitlines() if rc == 0 else []


def _request(url, payload, api_key, timeout, validate_certs=True):
    """One request; a redirect is never followed, so the API key never goes to another address."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    started = time.monotonic()
    try:
        response = open_url(url, data=None if payload is None else json.dumps(payload),
                            method="GET" if payload is None else "POST", headers=headers,
                            timeout=timeout, validate_certs=validate_certs, follow_redirects="none")
        body = response.read()
        status = response.getcode()
    except HTTPError as exc:
        if 300 <= exc.code < 400:
            location = exc.headers.get("Location") if exc.headers is not None else None
            return {"status": exc.code, "latency_s": round(time.monotonic() - started, 3),
                    "error": "HTTP %s: the server redirects to %s; not followed, so the API key stays with %s" % (
                        exc.code, redact_text(location or "(no Location)"), url)}
        body = exc.read() if hasattr(exc, "read") else b""
        status = exc.code
    except (URLError, OSError, ValueError) as exc:
        return {"status": None, "error": str(getattr(exc, "reason", exc)), "latency_s": time.monotonic() - started}
    result = {"status": status, "latency_s": round(time.monotonic() - started, 3), "error": None}
    try:
        result["json"] = json.loads(body.decode("utf-8")) if body else None
    except ValueError:
        result["json"] = None
        result["error"] = "not JSON: %s" % body[:200]
    if status != 200 and result["error"] is None:
        detail = result["json"]
        if isinstance(detail, dict):
            detail = detail.get("error", detail)
            if isinstance(detail, dict):
                detail = detail.get("message", detail)
        result["error"] = "HTTP %s: %s" % (status, detail)
    return result


def try_completion(params):
    """A real completion; ok only when it comes back 200 with generated tokens."""
    base = params["base_url"].rstrip("/")
    if params["api"] == "chat":
        url = base + "/v1/chat/completions"
        payload = {"model": params["model"], "messages": [{"role": "user", "content": params["prompt"]}]}
    else:
        url = base + "/v1/completions"
        payload = {"model": params["model"], "prompt": params["prompt"]}
    payload.update({"max_tokens": params["max_tokens"], "temperature": 0})
    answer = _request(url, payload, params.get("api_key"), params["request_timeout"],
                      params.get("validate_certs", True))
    body = answer.pop("json", None)
    answer["ok"] = False
    if answer["status"] == 200 and isinstance(body, dict):
        choices = body.get("choices") or [{}]
        usage = body.get("usage") or {}
        first = choices[0]
        answer["text"] = first.get("text") if params["api"] == "completions" else (first.get("message") or {}).get("content")
        answer["completion_tokens"] = usage.get("completion_tokens")
        answer["prompt_tokens"] = usage.get("prompt_tokens")
        answer["ok"] = bool(usage.get("completion_tokens"))
        if not answer["ok"]:
            answer["error"] = "the completion came back without tokens"
    return answer


def probe(module, params):
    """Everything the wait needs to decide, from one look at the target."""
    now = time.monotonic()
    state = unit_state(module, params["unit"])
    # Journal lines can hold a command line (someone's --api-key) or a secret a program printed.
    tail = redact_text(journal(module, ["-u", params["unit"], "-n", str(params["journal_lines"]), "-o", "short-iso"]),
                       [params.get("api_key")])
    phase = None
    if state["invocation_id"]:
        phase = load_phase(journal(module, ["_SYSTEMD_INVOCATION_ID=%s" % state["invocation_id"], "-o", "cat",
                                            "-n", str(PHASE_LINES)]))
    health = None
    completion = None
    if state["active_state"] in ("active", "activating", "reloading"):
        health = _request(params["base_url"].rstrip("/") + "/health", None, params.get("api_key"),
                          min(10, params["request_timeout"]), params.get("validate_certs", True))
        health.pop("json", None)
        if health["status"] == 200:
            completion = try_completion(params)
    running_s = None
    if state["main_started_monotonic"] and state["main_pid"]:
        running_s = round(now - state["main_started_monotonic"], 1)
    # The unit turns active when its ExecStartPost probe got a completion: that is the honest
    # time to ready, also when this look comes long after it.
    ready_after_s = None
    if state["active_state"] == "active" and state["active_entered_monotonic"] > state["main_started_monotonic"] > 0:
        ready_after_s = round(state["active_entered_monotonic"] - state["main_started_monotonic"], 1)
    return {
        "unit_state": state,
        "journal_tail": tail,
        "phase": phase,
        "health": health,
        "completion": completion,
        "running_s": running_s,
        "ready_after_s": ready_after_s,
    }


def verdict(look, initial_restarts):
    """``ready``, ``failed`` (with why) or ``waiting``, from one probe result."""
    state = look["unit_state"]
    completion = look.get("completion") or {}
    if completion.get("ok"):
        return "ready", None
    # Just after `systemctl restart --no-block` the queued job has not run yet, and the unit still
    # shows the state of the run before it.
    if state["job_pending"] and (state["active_state"] in ("failed", "inactive", "deactivating")
                                 or state["sub_state"] == "auto-restart"):
        return "waiting", None
    if state["active_state"] == "failed":
        return "failed", "the unit failed (result %s, exit status %s)" % (state["result"], state["exec_main_status"])
    if state["active_state"] == "activating" and state.get("exec_main_code") and state["sub_state"] != "auto-restart":
        return "failed", "the server exited while the unit was starting (exit status %s)" % state["exec_main_status"]
    if state["sub_state"] == "auto-restart" or state["n_restarts"] > initial_restarts:
        return "failed", "the server exited and systemd is restarting it (restart %d, result %s, exit status %s)" % (
            state["n_restarts"], state["result"], state["exec_main_status"])
    if state["active_state"] in ("inactive", "deactivating") and not state["job_pending"]:
        return "failed", "the unit is %s and nothing is starting it" % state["active_state"]
    return "waiting", None


def _clock(seconds):
    seconds = int(seconds)
    return "%dm%02ds" % (seconds // 60, seconds % 60) if seconds >= 60 else "%ds" % seconds


def wait_until_ready(look_once, params, progress, sleep=time.sleep, clock=time.monotonic):
    """Look at the target until the server answers, fails, or the limit passes; never longer.

    ``look_once()`` returns one ``probe`` result (or a failed module result); ``progress(line)``
    shows a line on the controller. Returns the task result.
    """
    limit = scaled_timeout(params)
    unit = params["unit"]
    started = clock()
    initial_restarts = None
    phases = []
    last_print = None
    while True:
        look = look_once()
        if look.get("failed"):
            look.setdefault("ready", False)
            return look
        waited = clock() - started
        state = look["unit_state"]
        if initial_restarts is None:
            # Restarts before this wait (an earlier failed start) are not this start's failure.
            initial_restarts = state["n_restarts"]
        phase = look.get("phase")
        new_phase = bool(phase) and (not phases or phases[-1]["phase"] != phase)
        if new_phase:
            phases.append({"phase": phase, "seen_after_s": round(waited, 1)})
        base = dict(waited_s=round(waited, 1), timeout_s=limit, phase=phase, phases=phases, unit_state=state)

        outcome, why = verdict(look, initial_restarts)
        if outcome == "ready":
            completion = look["completion"]
            # Units without a readiness ExecStartPost: the server's age at this completion.
            ready_after = look.get("ready_after_s")
            base.update(changed=False, ready=True, completion=completion,
                        time_to_ready_s=ready_after if ready_after is not None else look.get("running_s"),
                        first_completion_latency_s=completion["latency_s"])
            return base
        if outcome == "failed" or waited >= limit:
            if outcome != "failed":
                why = "not ready after %s (limit %d s; scale it with checkpoint_bytes or set timeout)" % (
                    _clock(waited), limit)
            # Redacted on the target already; again here, where the action plugin's result is not masked.
            tail = redact_text(look.get("journal_tail") or [], [params.get("api_key")])
            base.update(failed=True, ready=False, journal_tail=tail, msg="%s: %s; state %s/%s, last phase: %s. Last journal lines:\n%s" % (
                unit, why, state["active_state"], state["sub_state"], phase or "none seen",
                "\n".join(tail) or "(journal empty)"))
            return base

        if last_print is None or new_phase or waited - last_print >= params["progress_interval"]:
            last_print = waited
            detail = ""
            if (look.get("health") or {}).get("status") == 200 and look.get("completion"):
                detail = ", completion not yet: %s" % look["completion"].get("error")
            progress("%s: %s elapsed of %s, %s/%s, %s%s" % (
                unit, _clock(waited), _clock(limit), state["active_state"], state["sub_state"],
                phase or "starting", detail))
        sleep(min(params["poll_interval"], max(0.0, limit - waited)))
