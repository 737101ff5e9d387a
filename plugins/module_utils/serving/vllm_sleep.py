# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Put a vLLM server to sleep and wake it up again, over vLLM's own HTTP endpoints.

vLLM started with ``--enable-sleep-mode`` can give its GPU memory back without stopping: ``POST /sleep?level=1``
copies the weights to CPU memory and drops the KV cache; level 2 drops the weights too. ``POST /wake_up`` maps the
memory again (and copies level-1 weights back) before it answers; ``GET /is_sleeping`` says which state it is in.
Swapping which of two servers holds the GPU this way takes seconds instead of a cold start.

vLLM 0.24 registers these routes only when the server's environment has ``VLLM_SERVER_DEV_MODE=1`` (without it they
answer 404), and its API-key check covers only paths under ``/v1``, ``/v2`` and ``/inference``: anyone who can reach
the port can put the server to sleep, so keep it on a private address.

A sleeping server still accepts completions: it queues them and answers once it is woken, so a router must stop
sending to a server before it sleeps. ``/sleep`` aborts requests still running (their clients get HTTP 200 with
``finish_reason: abort``) unless ``mode=wait`` is given. docs/sleep-mode.md has the measurements.

Standard library only, so the measurement script (scripts/sleep_mode_eval.py) runs it on a GPU host without Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import time

from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

STATES = ("asleep", "awake")
LEVELS = (1, 2)
# vLLM's own pause modes for /sleep: abort running requests (its default), wait for them, or keep them paused.
MODES = ("abort", "wait", "keep")
DEFAULT_PROMPT = "The capital of France is"

# What a 404 from a sleep route means, and the fix.
NO_DEV_ROUTES = ("the server has no sleep endpoints: start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment "
                 "(the routes exist only then) and with --enable-sleep-mode")


class SleepModeError(Exception):
    """A sleep, wake or completion that did not work; the message names the URL and what to do.

    ``status`` is the HTTP status when the server answered one (None when it did not answer)."""

    def __init__(self, message, status=None):
        super(SleepModeError, self).__init__(message)
        self.status = status


class _NoRedirect(HTTPRedirectHandler):
    # A redirect is never followed, so an API key never goes to another address.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = build_opener(_NoRedirect())


def endpoint(base_url, path, query=None):
    """``base_url`` + ``path`` (+ ``?query``; a list value repeats the key, as vLLM's ``tags`` wants)."""
    parts = urlsplit(base_url or "")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SleepModeError("base_url %r is not an http:// or https:// URL with a host" % (base_url,))
    url = base_url.rstrip("/") + path
    if query:
        url += "?" + urlencode(query, doseq=True)
    return url


def http(method, url, payload=None, api_key=None, timeout=30):
    """(status, body bytes) of one request. Refused connections and timeouts raise SleepModeError naming the URL;
    an HTTP error status is returned, for the caller to explain."""
    headers = {"Content-Type": "application/json"} if payload is not None else {}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    data = json.dumps(payload).encode("utf-8") if payload is not None else None
    request = Request(url, data=data, headers=headers)
    request.get_method = lambda: method
    try:
        response = _OPENER.open(request, timeout=timeout)
        try:
            return response.getcode(), response.read()
        finally:
            response.close()
    except HTTPError as exc:
        return exc.code, exc.read() or b""
    except (socket.timeout, TimeoutError) as exc:
        raise SleepModeError("%s %s: no answer within %s s (%s)" % (method, url, timeout, exc))
    except URLError as exc:
        raise SleepModeError("%s %s: cannot connect (%s); is the server running and listening there?"
                             % (method, url, exc.reason))
    except (OSError, ValueError) as exc:  # a reset connection, a malformed URL
        raise SleepModeError("%s %s: %s" % (method, url, exc))


def explain(method, url, status, body, fix_404=NO_DEV_ROUTES):
    """The error for a non-200 answer: a 404 from a sleep route means the routes are not there; a redirect is not
    followed; anything else carries vLLM's own message."""
    if status == 404 and fix_404:
        message = "%s %s answered 404: %s" % (method, url, fix_404)
    elif 300 <= status < 400:
        message = "%s %s answered a redirect (HTTP %s), not followed: point base_url at the server itself" % (
            method, url, status)
    elif status == 401:
        message = "%s %s answered 401: give the server's API key (api_key)" % (method, url)
    else:
        message = "%s %s answered HTTP %s: %s" % (method, url, status, snippet(body))
    return SleepModeError(message, status)


def snippet(body, limit=300):
    text = " ".join((body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)).split())
    return text[:limit] + ("..." if len(text) > limit else "")


def parse_json(url, body):
    try:
        return json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except ValueError:
        raise SleepModeError("%s answered something that is not JSON: %r; is base_url a vLLM server?"
                             % (url, snippet(body, 120)))


def parse_is_sleeping(url, body):
    """The bool of ``{"is_sleeping": bool}``; anything else is an error naming the URL."""
    answer = parse_json(url, body)
    value = answer.get("is_sleeping") if isinstance(answer, dict) else None
    if not isinstance(value, bool):
        raise SleepModeError('%s answered %r, not {"is_sleeping": true|false}; is base_url a vLLM server?'
                             % (url, snippet(body, 120)))
    return value


def is_sleeping(base_url, timeout=30):
    """Whether the server sleeps (vLLM also says true while its scheduler is paused)."""
    url = endpoint(base_url, "/is_sleeping")
    status, body = http("GET", url, timeout=timeout)
    if status != 200:
        raise explain("GET", url, status, body)
    return parse_is_sleeping(url, body)


def sleep_mode_enabled(base_url, timeout=60):
    """``--enable-sleep-mode`` as the server reports it (GET /server_info, another dev route), None when not said.

    Without the flag vLLM 0.24 still answers /sleep with 200 and reports itself sleeping, but frees no GPU memory
    (nothing was allocated in its sleep-aware pool), so the flag is checked before sleeping rather than trusted."""
    url = endpoint(base_url, "/server_info", {"config_format": "json"})
    status, body = http("GET", url, timeout=timeout)
    if status != 200:
        raise explain("GET", url, status, body)
    return parse_sleep_mode_flag(url, body)


def parse_sleep_mode_flag(url, body):
    """``vllm_config.model_config.enable_sleep_mode`` of a /server_info answer; None when it is not there."""
    answer = parse_json(url, body)
    config = answer.get("vllm_config") if isinstance(answer, dict) else None
    model_config = config.get("model_config") if isinstance(config, dict) else None
    value = model_config.get("enable_sleep_mode") if isinstance(model_config, dict) else None
    return value if isinstance(value, bool) else None


def sleep(base_url, level=1, timeout=120, mode=None):
    """POST /sleep?level=N; vLLM answers once the memory is freed. ``mode`` None keeps vLLM's default (abort)."""
    if level not in LEVELS:
        raise SleepModeError("sleep level %r: vLLM knows 1 (weights to CPU memory) and 2 (weights discarded)" % (level,))
    query = {"level": level}
    if mode is not None:
        if mode not in MODES:
            raise SleepModeError("sleep mode %r: vLLM knows %s" % (mode, ", ".join(MODES)))
        query["mode"] = mode
    url = endpoint(base_url, "/sleep", query)
    status, body = http("POST", url, timeout=timeout)
    if status != 200:
        raise explain("POST", url, status, body)


def wake_up(base_url, tags=None, timeout=120):
    """POST /wake_up (all memory, or only ``tags`` such as ``weights``, ``kv_cache``); vLLM answers once it is mapped
    again and level-1 weights are copied back."""
    url = endpoint(base_url, "/wake_up", {"tags": list(tags)} if tags else None)
    status, body = http("POST", url, timeout=timeout)
    if status != 200:
        raise explain("POST", url, status, body)


def completion_payload(model, prompt=DEFAULT_PROMPT, max_tokens=8, extra=None):
    """A greedy completion; ``prompt`` may be token ids (a server started with --skip-tokenizer-init needs them)."""
    payload = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    payload.update(extra or {})
    return payload


def completion(base_url, model, api_key=None, timeout=60, prompt=DEFAULT_PROMPT, max_tokens=8, extra=None):
    """One POST /v1/completions: {status, text, completion_tokens, token_ids, finish_reason, seconds}; a non-200
    answer raises SleepModeError naming the URL and vLLM's message."""
    url = endpoint(base_url, "/v1/completions")
    started = time.monotonic()
    status, body = http("POST", url, completion_payload(model, prompt, max_tokens, extra), api_key, timeout)
    seconds = time.monotonic() - started
    if status != 200:
        # A 404 here is vLLM's "model does not exist", not a missing route: its message says which.
        raise explain("POST", url, status, body, fix_404=None)
    answer = parse_json(url, body)
    choice = ((answer.get("choices") or [{}]) if isinstance(answer, dict) else [{}])[0]
    usage = (answer.get("usage") if isinstance(answer, dict) else None) or {}
    return {"status": status, "text": choice.get("text"), "completion_tokens": usage.get("completion_tokens"),
            "token_ids": choice.get("token_ids"), "finish_reason": choice.get("finish_reason"),
            "seconds": round(seconds, 3)}


def wait_for_completion(base_url, model, api_key=None, timeout=120, prompt=DEFAULT_PROMPT, max_tokens=8, extra=None):
    """The first completion that comes back with tokens, retried until ``timeout``: a woken server answers at once
    in vLLM 0.24, but a restarted proxy or a slow first step should not fail the swap. A 4xx answer (a wrong key,
    an unknown model, a bad prompt) fails at once, since waiting does not change it."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            answer = completion(base_url, model, api_key, max(1.0, left), prompt, max_tokens, extra)
            if answer["completion_tokens"]:
                return answer
            problem = SleepModeError("%s: the completion came back without tokens" % endpoint(base_url, "/v1/completions"))
        except SleepModeError as exc:
            if exc.status is not None and 300 <= exc.status < 500:
                raise
            problem = exc
        if time.monotonic() + 1 > deadline:
            raise SleepModeError("no completion within %s s: %s" % (timeout, problem))
        time.sleep(1)


def needs_change(state, sleeping):
    """Whether the server must be put to sleep or woken to reach ``state`` (what check mode predicts)."""
    if state not in STATES:
        raise SleepModeError("state %r: use one of %s" % (state, ", ".join(STATES)))
    return (state == "asleep") != sleeping


def switch(sleep_url, wake_url, model, api_key=None, level=1, timeout=120, prompt=DEFAULT_PROMPT, max_tokens=8,
           extra=None):
    """Put the server at ``sleep_url`` to sleep, wake the one at ``wake_url``, and wait until it answers a real
    completion for ``model``. Sleeping first frees the GPU memory the woken one maps again.

    Returns {before, after: {sleep_url, wake_url} is_sleeping states; seconds: {sleep_s, wake_s,
    first_completion_s, total_s}; completion}."""
    started = time.monotonic()
    before = {"sleep_url": is_sleeping(sleep_url, timeout), "wake_url": is_sleeping(wake_url, timeout)}
    seconds = {"sleep_s": None, "wake_s": None}
    if not before["sleep_url"]:
        step = time.monotonic()
        sleep(sleep_url, level, timeout)
        seconds["sleep_s"] = round(time.monotonic() - step, 3)
    if before["wake_url"]:
        step = time.monotonic()
        wake_up(wake_url, timeout=timeout)
        seconds["wake_s"] = round(time.monotonic() - step, 3)
    step = time.monotonic()
    answer = wait_for_completion(wake_url, model, api_key, timeout, prompt, max_tokens, extra)
    seconds["first_completion_s"] = round(time.monotonic() - step, 3)
    seconds["total_s"] = round(time.monotonic() - started, 3)
    after = {"sleep_url": is_sleeping(sleep_url, timeout), "wake_url": is_sleeping(wake_url, timeout)}
    return {"before": before, "after": after, "seconds": seconds, "completion": answer}


def reach_state(params, check_mode=False):
    """The module's work: read the state, predict or make the change, confirm it.

    ``params``: base_url, state, level, mode, model, api_key, timeout. Returns the module's result."""
    base_url, timeout = params["base_url"], params.get("timeout") or 120
    started = time.monotonic()
    was_sleeping = is_sleeping(base_url, timeout)
    changed = needs_change(params["state"], was_sleeping)
    seconds = {"sleep_s": None, "wake_s": None, "first_completion_s": None, "total_s": None}
    result = {"changed": changed, "was_sleeping": was_sleeping, "seconds": seconds, "completion": None}
    if check_mode or not changed:
        result["is_sleeping"] = (params["state"] == "asleep") if changed else was_sleeping
        return result
    if params["state"] == "asleep":
        refuse_without_sleep_mode(base_url, timeout)
        step = time.monotonic()
        sleep(base_url, params.get("level") or 1, timeout, params.get("mode"))
        seconds["sleep_s"] = round(time.monotonic() - step, 3)
    else:
        step = time.monotonic()
        wake_up(base_url, timeout=timeout)
        seconds["wake_s"] = round(time.monotonic() - step, 3)
        if params.get("model"):
            step = time.monotonic()
            result["completion"] = wait_for_completion(base_url, params["model"], params.get("api_key"), timeout)
            seconds["first_completion_s"] = round(time.monotonic() - step, 3)
    result["is_sleeping"] = is_sleeping(base_url, timeout)
    seconds["total_s"] = round(time.monotonic() - started, 3)
    return result


def refuse_without_sleep_mode(base_url, timeout):
    # vLLM would answer 200 and free nothing; say so rather than report a sleep that gave no memory back. A
    # /server_info that fails for another reason than a missing route leaves the question open: sleep anyway.
    try:
        enabled = sleep_mode_enabled(base_url, timeout)
    except SleepModeError as exc:
        if exc.status in (None, 404):
            raise
        enabled = None
    if enabled is False:
        raise SleepModeError("%s runs without --enable-sleep-mode: /sleep would pause it but free no GPU memory; "
                             "restart it with --enable-sleep-mode" % base_url.rstrip("/"))
