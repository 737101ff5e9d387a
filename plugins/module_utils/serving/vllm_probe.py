# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One look at a vLLM unit: its systemd state, its journal, and whether a real completion works.

The ``vllm_wait`` module runs ``probe`` once on the target; the ``vllm_wait`` action plugin calls it
again and again from the controller and decides with ``verdict`` whether to go on waiting.
``/health`` answers as soon as the API server is up, which says nothing about whether the model
can generate; only a completion that comes back with tokens counts as ready. With ``tool_check`` or
``reasoning_check`` on, the server must also pass the recipe check: a chat completion offering a tool
with ``tool_choice: auto`` (refused with HTTP 400 unless vLLM runs with ``--enable-auto-tool-choice`` and
a ``--tool-call-parser``) whose answer is a well-formed assistant message, carrying the reasoning
separated from ``content`` when a reasoning parser is set.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import load_phase, redact_text

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
    tool_check=dict(type="bool", default=False),
    reasoning_check=dict(type="bool", default=False),
)

# The recipe check's chat request. ignore_eos (vLLM's extension) makes a random tiny model generate too.
RECIPE_PROMPT = "What is the weather in Paris? Think first."
RECIPE_MAX_TOKENS = 16
RECIPE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# vLLM 0.32's ChatMessage always serialises ``reasoning`` (null when nothing was separated); older releases
# named it ``reasoning_content``.
REASONING_FIELDS = ("reasoning", "reasoning_content")
THINK_MARKUP = ("<think>", "</think>")
# A chat request the server refuses outright: waiting longer does not change its answer.
REFUSED_STATUS = 400

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


def recipe_request(model, tool_check):
    """The recipe check's chat request: one tool offered with ``tool_choice: auto`` when ``tool_check``."""
    payload = {"model": model, "messages": [{"role": "user", "content": RECIPE_PROMPT}],
               "max_tokens": RECIPE_MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    if tool_check:
        payload.update(tools=[RECIPE_TOOL], tool_choice="auto")
    return payload


def _tool_call_ok(call):
    function = call.get("function") if isinstance(call, dict) else None
    return (isinstance(function, dict) and isinstance(call.get("id"), str) and call.get("type") == "function"
            and isinstance(function.get("name"), str) and isinstance(function.get("arguments"), str))


def chat_message(body):
    """(the answer's ``choices[0].message``, None) when it is a well-formed assistant message, else (None, what is wrong)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, "the chat answer has no choices"
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None, "choices[0].message of the chat answer is not an object: %r" % (message,)
    if message.get("role") != "assistant":
        return None, "choices[0].message.role is %r, not 'assistant'" % (message.get("role"),)
    # vLLM leaves tool_calls out when there are none.
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list) or not all(_tool_call_ok(call) for call in tool_calls):
        return None, "choices[0].message.tool_calls is not a list of {id, type: function, function: {name, arguments}}"
    content = message.get("content")
    if "content" not in message and not tool_calls:
        return None, "choices[0].message has neither content nor tool_calls"
    if content is not None and not isinstance(content, str):
        return None, "choices[0].message.content is neither a string nor null: %r" % (content,)
    return message, None


def reasoning_found(message):
    """(ok, the field holding the reasoning, why) for one well-formed message of a server with a reasoning parser."""
    field = None
    for name in REASONING_FIELDS:
        if isinstance(message.get(name), str) and message[name]:
            field = name
            break
    content = message.get("content") or ""
    markup = [tag for tag in THINK_MARKUP if tag in content]
    if markup:
        return False, field, "raw %s markup in content: the reasoning parser did not separate it" % " and ".join(markup)
    if field:
        return True, field, "reasoning in %s" % field
    if message.get("tool_calls"):
        return True, "tool_calls", "no reasoning before the tool call"
    return False, None, "no reasoning separated: %s empty or null; content: %r" % (" and ".join(REASONING_FIELDS), content[:80])


def judge_recipe(status, body, error, tool_check, reasoning_check):
    """The recipe check's parts (only those that are on) from the chat answer's status, JSON body and error."""
    message, problem = chat_message(body) if status == 200 and not error else (None, error)
    parts = {}
    if tool_check:
        accepted = message is not None and "accepted, answered with %s" % ("a tool call" if message.get("tool_calls") else "content")
        parts["tool_choice"] = {"status": status, "ok": message is not None, "message": problem or accepted}
    if reasoning_check:
        ok, field, why = reasoning_found(message) if message is not None else (False, None, problem)
        parts["reasoning"] = {"status": status, "ok": ok, "field": field, "message": why}
    return parts


def try_recipe(params):
    """Send the recipe check's chat request; its parts, as ``judge_recipe`` makes them."""
    payload = recipe_request(params["model"], params.get("tool_check"))
    answer = _request(params["base_url"].rstrip("/") + "/v1/chat/completions", payload, params.get("api_key"),
                      params["request_timeout"], params.get("validate_certs", True))
    return judge_recipe(answer["status"], answer.get("json"), answer["error"], params.get("tool_check"),
                        params.get("reasoning_check"))


def recipe_problem(look):
    """None when the recipe check passed or was not asked for, else the first failing part's message."""
    for name, part in sorted((look.get("recipe_check") or {}).items()):
        if not part.get("ok"):
            return "%s: %s" % (name, part.get("message"))
    return None


def _refusal(look):
    for part in (look.get("recipe_check") or {}).values():
        if part.get("status") == REFUSED_STATUS:
            return part.get("message")
    return None


def _ask_server(params, state):
    """(health, completion, recipe_check) of a unit that runs: each only when the one before it worked."""
    health = completion = recipe_check = None
    if state["active_state"] in ("active", "activating", "reloading"):
        health = _request(params["base_url"].rstrip("/") + "/health", None, params.get("api_key"),
                          min(10, params["request_timeout"]), params.get("validate_certs", True))
        health.pop("json", None)
        if health["status"] == 200:
            completion = try_completion(params)
        if (completion or {}).get("ok") and (params.get("tool_check") or params.get("reasoning_check")):
            recipe_check = try_recipe(params)
    return health, completion, recipe_check


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
    health, completion, recipe_check = _ask_server(params, state)
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
        "recipe_check": recipe_check,
        "running_s": running_s,
        "ready_after_s": ready_after_s,
    }


def verdict(look, initial_restarts):
    """``ready``, ``failed`` (with why) or ``waiting``, from one probe result."""
    state = look["unit_state"]
    completion = look.get("completion") or {}
    if completion.get("ok"):
        if recipe_problem(look) is None:
            return "ready", None
        # The server is up and answered the chat request with a refusal that no wait mends.
        if _refusal(look):
            return "failed", "the server answers completions but refuses the recipe check's chat request: %s" % _refusal(look)
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


def _not_ready_detail(look, separator):
    """Why a server that answers /health is not ready yet: its completion, or then its recipe check."""
    completion = look.get("completion")
    if (look.get("health") or {}).get("status") != 200 or not completion:
        return ""
    if not completion.get("ok"):
        return "%scompletion not yet: %s" % (separator, completion.get("error"))
    problem = recipe_problem(look)
    return "%srecipe check not passed: %s" % (separator, problem) if problem else ""


def _clock(seconds):
    seconds = int(seconds)
    return "%dm%02ds" % (seconds // 60, seconds % 60) if seconds >= 60 else "%ds" % seconds


def wait_until_ready(look_once, params, progress, sleep=time.sleep, clock=time.monotonic):
    """Look at the target until the server answers, fails, or the limit passes; never longer.

    ``look_once()`` returns one ``probe`` result (or a failed module result); ``progress(line)``
    shows a line on the controller. Returns the task result.
    """
    if params["poll_interval"] < 1:
        # 0 would look at the host as fast as modules can run, and a negative sleep raises.
        return dict(failed=True, ready=False,
                    msg="poll_interval must be at least 1 second, got %r" % (params["poll_interval"],))
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
        if look.get("recipe_check"):
            base["recipe_check"] = look["recipe_check"]

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
                why = "not ready after %s (limit %d s; scale it with checkpoint_bytes or set timeout)%s" % (
                    _clock(waited), limit, _not_ready_detail(look, "; "))
            # Redacted on the target already; again here, where the action plugin's result is not masked.
            tail = redact_text(look.get("journal_tail") or [], [params.get("api_key")])
            base.update(failed=True, ready=False, journal_tail=tail, msg="%s: %s; state %s/%s, last phase: %s. Last journal lines:\n%s" % (
                unit, why, state["active_state"], state["sub_state"], phase or "none seen",
                "\n".join(tail) or "(journal empty)"))
            return base

        if last_print is None or new_phase or waited - last_print >= params["progress_interval"]:
            last_print = waited
            detail = _not_ready_detail(look, ", ")
            progress("%s: %s elapsed of %s, %s/%s, %s%s" % (
                unit, _clock(waited), _clock(limit), state["active_state"], state["sub_state"],
                phase or "starting", detail))
        sleep(min(params["poll_interval"], max(0.0, limit - waited)))
