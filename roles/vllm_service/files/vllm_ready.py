# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ExecStartPost readiness probe of gauntlet.vllm's vLLM units.

Keeps the unit "activating" until the server answers a real one-token completion, so that
systemd's TimeoutStartSec bounds the whole load and `systemctl is-active` means "serves".
Exits 0 once a completion comes back, 1 as soon as the main process (--main-pid, systemd's
$MAINPID) has exited, and loops otherwise. systemd does not stop an ExecStartPost= command when
the main process dies, so without that check a server that crashed on a bad argument would
leave the unit "activating" until TimeoutStartSec. With --once it makes a single attempt and exits 0 or 1
(the watchdog's look, vllm_watchdog.py). The API key comes from VLLM_API_KEY (the unit's
0600 EnvironmentFile), never from the command line; an https URL's certificate is verified, and a
redirect is never followed, so the key goes nowhere but --url.

With --tool-check and/or --reasoning-check (servers started with --enable-auto-tool-choice and a
--tool-call-parser, or a --reasoning-parser), the completion is not enough: a chat completion offering
one tool with tool_choice "auto" must come back 200 with a well-formed assistant message, and with the
reasoning separated from content. A 400 to that request (vLLM refuses "auto" tool choice without its
flags) exits 1 at once with vLLM's message; anything else short of passing keeps the unit "activating".
The checks' logic is the same as gauntlet.vllm.vllm_wait's (plugins/module_utils/serving/vllm_probe.py), copied
here because this script runs on the stdlib alone; a unit test keeps the copies identical.
"""

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request


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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would resend the Authorization header to wherever a redirect points, http included."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener():
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context()), _NoRedirect())


def _error_body(exc):
    try:
        return json.loads(exc.read().decode("utf-8"))
    except (OSError, ValueError):
        return None


def _post(url, path, payload, timeout):
    """(HTTP status or None, the JSON answer or error body, what went wrong or None) of one POST."""
    request = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(payload).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    key = os.environ.get("VLLM_API_KEY")
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with _opener().open(request, timeout=timeout) as response:
            return response.status, json.load(response), None
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return exc.code, None, "HTTP %d: a redirect, not followed (the API key stays with --url)" % exc.code
        return exc.code, _error_body(exc), "HTTP %d" % exc.code
    except (OSError, ValueError) as exc:
        return None, None, str(getattr(exc, "reason", exc))


def completion_works(url, model, timeout):
    status, answer, error = _post(url, "/v1/completions",
                                  {"model": model, "prompt": "ready?", "max_tokens": 1, "temperature": 0}, timeout)
    if error:
        return False, error
    tokens = (answer.get("usage") or {}).get("completion_tokens")
    return bool(tokens), "ok" if tokens else "no tokens in the answer"


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


def _server_message(body):
    """vLLM's own words from an error body ({"error": {"message": ...}})."""
    detail = body.get("error", body) if isinstance(body, dict) else body
    return detail.get("message", detail) if isinstance(detail, dict) else detail


def recipe_works(url, model, timeout, tool_check, reasoning_check):
    """(ok, why, refused): refused when the server answered the chat request 400, which no wait mends."""
    status, answer, error = _post(url, "/v1/chat/completions", recipe_request(model, tool_check), timeout)
    if error:
        detail = _server_message(answer)
        return False, "%s: %s" % (error, detail) if detail else error, status == REFUSED_STATUS
    message, problem = chat_message(answer)
    if problem:
        return False, problem, False
    found = []
    if tool_check:
        found.append("tool choice accepted")
    if reasoning_check:
        ok, dummy, why = reasoning_found(message)
        if not ok:
            return False, "reasoning: %s" % why, False
        found.append(why)
    return True, ", ".join(found), False


def ready_now(args):
    """(ok, why, refused) of one look: the completion, then the recipe check when one is asked for."""
    ok, reason = completion_works(args.url, args.model, args.request_timeout)
    if not ok or not (args.tool_check or args.reasoning_check):
        return ok, reason, False
    return recipe_works(args.url, args.model, args.request_timeout, args.tool_check, args.reasoning_check)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between attempts")
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument("--main-pid", type=int, default=0, help="the server's pid ($MAINPID); 0 to skip the check")
    parser.add_argument("--tool-check", action="store_true",
                        help="also require a chat completion with tool_choice auto to be accepted (--enable-auto-tool-choice)")
    parser.add_argument("--reasoning-check", action="store_true",
                        help="also require the reasoning separated from content (--reasoning-parser; not for parsers that keep "
                             "the thinking in content on purpose, such as minimax_m2_append_think)")
    parser.add_argument("--once", action="store_true", help="one attempt: exit 0 when it passes, 1 with the reason otherwise")
    args = parser.parse_args(argv)

    started = time.monotonic()
    last_reason = None
    while True:
        if args.main_pid and not os.path.exists("/proc/%d" % args.main_pid):
            print("vllm-ready: the server (pid %d) exited before it answered" % args.main_pid, file=sys.stderr)
            return 1
        ok, reason, refused = ready_now(args)
        if refused:
            print("vllm-ready: %s answers completions but refuses the recipe check's chat request: %s" % (args.model, reason),
                  file=sys.stderr)
            return 1
        if ok:
            checked = "" if reason == "ok" else " (recipe check: %s)" % reason
            print("vllm-ready: %s answered a completion%s after %.0f s of probing" % (args.model, checked, time.monotonic() - started))
            return 0
        if args.once:
            print("vllm-ready: not ready (%s)" % reason, file=sys.stderr)
            return 1
        # Log only changes, so a 36-minute load does not fill the journal with connection refusals.
        if reason != last_reason:
            print("vllm-ready: not ready yet (%s)" % reason, file=sys.stderr)
            last_reason = reason
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
