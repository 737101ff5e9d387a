# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness that checks the recipe (issue 17): vllm_wait's probe (module_utils/serving/vllm_probe) and the
units' ExecStartPost probe (vllm_ready.py) send a chat completion offering a tool with tool_choice auto
and check the answer's shape and its reasoning, against a fake server answering with vLLM 0.32's JSON
(entrypoints/openai/chat_completion/protocol.py: ChatCompletionResponse, ChatMessage, ToolCall;
serve/engine/protocol.py: ErrorResponse)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import importlib.util
import inspect
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_probe
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_wait

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODEL = "tiny-qwen3-moe"
PARAMS = dict((key, spec.get("default")) for key, spec in vllm_probe.ARGUMENT_SPEC.items())
PARAMS.update(unit="vllm-tiny-qwen3-moe.service", model=MODEL, request_timeout=5)

# vLLM's words (renderers/online_renderer.py) when "auto" tool choice comes without its flags.
REFUSAL = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
NO_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
               "template if the tokenizer does not define one.")
TOOL_CALL = {"id": "chatcmpl-tool-9f2e4c1a", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}


def error_body(message, code=400, err_type="BadRequestError"):
    """vLLM's ErrorResponse."""
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def message(content=None, reasoning=None, tool_calls=None, legacy=False):
    """choices[0].message as ChatMessage serialises it: reasoning always there (null when nothing was
    separated), tool_calls left out when empty; ``legacy``: an older release's reasoning_content."""
    result = {"role": "assistant", "content": content, "refusal": None, "annotations": None, "audio": None,
              "function_call": None}
    result["reasoning_content" if legacy else "reasoning"] = reasoning
    if tool_calls:
        result["tool_calls"] = tool_calls
    return result


def chat_answer(one_message, **overrides):
    """A ChatCompletionResponse with one choice."""
    answer = {
        "id": "chatcmpl-8a1f03", "object": "chat.completion", "created": 1767225600, "model": MODEL,
        "choices": [{"index": 0, "message": one_message, "logprobs": None, "finish_reason": "length",
                     "stop_reason": None, "token_ids": None, "routed_experts": None}],
        "service_tier": None, "system_fingerprint": None,
        "usage": {"prompt_tokens": 24, "total_tokens": 40, "completion_tokens": 16, "prompt_tokens_details": None,
                  "completion_tokens_details": None},
        "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None, "kv_transfer_params": None,
        "ec_transfer_params": None, "metrics": None,
    }
    answer.update(overrides)
    return answer


class _FakeVLLM(BaseHTTPRequestHandler):
    """/health, /v1/completions (always works), and /v1/chat/completions answering from ``answers``
    (status, body): each request takes the first, the last one stays. Records the chat requests."""

    answers = [(200, chat_answer(message(content="Sunny")))]
    chats = []

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {}) if self.path == "/health" else self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/completions":
            return self._send(200, {"id": "cmpl-1", "object": "text_completion", "model": MODEL,
                                    "choices": [{"index": 0, "text": " Paris", "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": 5, "total_tokens": 6, "completion_tokens": 1}})
        if self.path != "/v1/chat/completions":
            return self._send(404, {"detail": "Not Found"})
        self.chats.append(request)
        status, body = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        self._send(status, body)


@pytest.fixture
def server(monkeypatch):
    """(URL of the fake server, a function setting its chat answers, the chat requests it received)."""
    chats = []
    monkeypatch.setattr(_FakeVLLM, "chats", chats)

    def answer_with(*answers):
        monkeypatch.setattr(_FakeVLLM, "answers", list(answers))

    httpd = HTTPServer(("127.0.0.1", 0), _FakeVLLM)
    # A short poll, so that shutting the server down after each test takes no half second.
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1], answer_with, chats
    httpd.shutdown()
    httpd.server_close()


def _load_ready_probe():
    spec = importlib.util.spec_from_file_location(
        "gauntlet_vllm_ready_recipe", os.path.join(ROOT, "roles", "vllm_service", "files", "vllm_ready.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READY = _load_ready_probe()


def params(**overrides):
    result = dict(PARAMS)
    result.update(overrides)
    return result


def through_vllm_wait(url, tool_check, reasoning_check):
    """(ok, message, refused, the recipe_check result) from one vllm_wait look at an activating unit."""
    health, completion, recipe_check = vllm_probe._ask_server(
        params(base_url=url, tool_check=tool_check, reasoning_check=reasoning_check), {"active_state": "activating"})
    assert health["status"] == 200 and completion["ok"] is True
    look = {"unit_state": _state(), "completion": completion, "recipe_check": recipe_check, "health": health}
    outcome, why = vllm_probe.verdict(look, 0)
    problem = vllm_probe.recipe_problem(look)
    text = problem or "; ".join(part["message"] for part in recipe_check.values())
    return outcome == "ready", text, outcome == "failed", recipe_check, why


def through_vllm_ready(url, tool_check, reasoning_check):
    """(ok, message, refused) from one look of the unit's probe."""
    args = argparse.Namespace(url=url, model=MODEL, request_timeout=5, tool_check=tool_check,
                              reasoning_check=reasoning_check)
    return READY.ready_now(args)


def _state(active="activating", sub="start-post"):
    return {"active_state": active, "sub_state": sub, "result": "success", "n_restarts": 0, "main_pid": 7,
            "job_pending": False, "invocation_id": "x", "main_started_monotonic": 1.0,
            "active_entered_monotonic": 0.0, "exec_main_status": 0, "exec_main_code": 0}


# (tool_check, reasoning_check, chat answer (status, body), ready, words in the reason, refused for good)
CASES = {
    "tool choice accepted, content": (True, False, (200, chat_answer(message(content="Sunny in"))), True, "accepted", False),
    "tool choice accepted, a tool call": (True, False, (200, chat_answer(message(tool_calls=[TOOL_CALL]))), True, "tool", False),
    "tool choice refused without the flags": (True, False, (400, error_body(REFUSAL)), False, REFUSAL, True),
    "no choices": (True, False, (200, chat_answer(None, choices=[])), False, "has no choices", False),
    "choices missing": (True, False, (200, error_body("bad", 200)), False, "has no choices", False),
    "message not an object": (True, False, (200, chat_answer("Sunny")), False, "message of the chat answer is not an object", False),
    "role not assistant": (True, False, (200, chat_answer(dict(message(content="x"), role="user"))), False, "not 'assistant'", False),
    "content not a string": (True, False, (200, chat_answer(message(content=["x"]))), False, "content is neither a string nor null", False),
    "tool call without arguments": (True, False, (200, chat_answer(message(tool_calls=[dict(TOOL_CALL, function={"name": "get_weather"})]))),
                                    False, "tool_calls is not a list of", False),
    "tool call of another type": (True, False, (200, chat_answer(message(tool_calls=[dict(TOOL_CALL, type="code")]))),
                                  False, "tool_calls is not a list of", False),
    "server error: not ready yet, not refused": (True, False, (500, error_body("EngineCore died", 500, "InternalServerError")),
                                                 False, "HTTP 500: EngineCore died", False),
    "reasoning in reasoning": (False, True, (200, chat_answer(message(reasoning="Okay, the user asks"))), True,
                               "reasoning in reasoning", False),
    "reasoning in an older release's reasoning_content": (False, True, (200, chat_answer(message(reasoning="Okay", legacy=True))),
                                                          True, "reasoning in reasoning_content", False),
    "reasoning null, text in content": (False, True, (200, chat_answer(message(content="Okay, the user asks"))), False,
                                        "no reasoning separated: reasoning and reasoning_content empty or null; content: 'Okay, the user asks'",
                                        False),
    "reasoning empty string": (False, True, (200, chat_answer(message(content="Okay", reasoning=""))), False,
                               "no reasoning separated", False),
    "<think> markup in content": (False, True, (200, chat_answer(message(content="<think>Okay</think> Sunny"))), False,
                                  "raw <think> and </think> markup in content", False),
    "</think> in content beside reasoning": (False, True, (200, chat_answer(message(content="</think>Sunny", reasoning="Okay"))),
                                             False, "raw </think> markup in content", False),
    "both: a tool call counts as the reasoning's place": (True, True, (200, chat_answer(message(tool_calls=[TOOL_CALL]))),
                                                          True, "tool", False),
    "both: reasoning and content": (True, True, (200, chat_answer(message(content="Sunny", reasoning="Okay"))), True,
                                    "reasoning in reasoning", False),
    "both: refused": (True, True, (400, error_body(REFUSAL)), False, REFUSAL, True),
    "reasoning only: no chat template, refused": (False, True, (400, error_body(NO_TEMPLATE)), False, NO_TEMPLATE, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("through", [through_vllm_wait, through_vllm_ready], ids=["vllm_wait", "vllm_ready"])
def test_recipe_check(server, case, through):
    url, answer_with, chats = server
    tool_check, reasoning_check, answer, ready, words, refused = CASES[case]
    answer_with(answer)
    result = through(url, tool_check, reasoning_check)
    assert len(chats) == 1
    assert result[0] is ready, result
    assert words in result[1], result
    assert result[2] is refused, result


def test_vllm_wait_reports_each_part_that_is_on(server):
    url, answer_with, dummy = server
    answer_with((200, chat_answer(message(content="Sunny", reasoning="Okay", legacy=True))))
    ok, dummy, dummy2, recipe_check, dummy3 = through_vllm_wait(url, True, True)
    assert ok is True
    assert recipe_check == {
        "tool_choice": {"status": 200, "ok": True, "message": "accepted, answered with content"},
        "reasoning": {"status": 200, "ok": True, "field": "reasoning_content", "message": "reasoning in reasoning_content"},
    }
    assert set(through_vllm_wait(url, True, False)[3]) == {"tool_choice"}
    only_reasoning = through_vllm_wait(url, False, True)[3]
    assert set(only_reasoning) == {"reasoning"} and only_reasoning["reasoning"]["field"] == "reasoning_content"

    answer_with((200, chat_answer(message(content="Okay, the user asks"))))
    failed = through_vllm_wait(url, True, True)[3]
    assert failed["tool_choice"]["ok"] is True
    assert failed["reasoning"]["ok"] is False and failed["reasoning"]["field"] is None


def test_vllm_wait_stops_with_vllms_message_when_tools_are_refused(server):
    url, answer_with, dummy = server
    answer_with((400, error_body(REFUSAL)))
    ok, dummy, refused, recipe_check, why = through_vllm_wait(url, True, False)
    assert ok is False and refused is True
    assert recipe_check == {"tool_choice": {"status": 400, "ok": False, "message": "HTTP 400: %s" % REFUSAL}}
    assert why == "the server answers completions but refuses the recipe check's chat request: HTTP 400: %s" % REFUSAL


@pytest.mark.parametrize("tool_check, reasoning_check, tools", [(True, False, True), (False, True, False), (True, True, True)])
@pytest.mark.parametrize("through", [through_vllm_wait, through_vllm_ready], ids=["vllm_wait", "vllm_ready"])
def test_the_chat_request(server, through, tool_check, reasoning_check, tools):
    url, dummy, chats = server
    through(url, tool_check, reasoning_check)
    request = chats[0]
    assert request["model"] == MODEL and request["messages"][0]["role"] == "user"
    assert request["max_tokens"] == 16 and request["ignore_eos"] is True
    if tools:
        assert request["tool_choice"] == "auto"
        assert [tool["function"]["name"] for tool in request["tools"]] == ["get_weather"]
        assert request["tools"][0]["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    else:
        assert "tools" not in request and "tool_choice" not in request


class _FakeModule(object):
    """systemctl and journalctl of a unit whose ExecStartPost probe still runs."""

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def run_command(self, args):
        if args[0].endswith("systemctl"):
            return 0, "ActiveState=activating\nSubState=start-post\nResult=success\nMainPID=7\nLoadState=loaded\n", ""
        return 0, "", ""

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


def test_no_chat_request_when_both_checks_are_off(server):
    url, dummy, chats = server
    look = vllm_probe.probe(_FakeModule(), params(base_url=url))
    assert look["completion"]["ok"] is True and look["recipe_check"] is None
    assert vllm_probe.verdict(look, 0) == ("ready", None)
    assert READY.main(["--url", url, "--model", MODEL, "--interval", "0"]) == 0
    assert chats == []


def test_probe_runs_the_recipe_check_when_asked(server):
    url, answer_with, chats = server
    answer_with((400, error_body(REFUSAL)))
    look = vllm_probe.probe(_FakeModule(), params(base_url=url, tool_check=True))
    assert look["recipe_check"]["tool_choice"]["ok"] is False
    assert vllm_probe.verdict(look, 0)[0] == "failed"
    assert len(chats) == 1


def test_the_units_probe_fails_fast_with_vllms_message(server, capsys):
    url, answer_with, chats = server
    # Were it to go on, the next answer would pass (so a probe that does not stop ends too, and this fails).
    answer_with((400, error_body(REFUSAL)), (200, chat_answer(message(content="Sunny"))))
    assert READY.main(["--url", url, "--model", MODEL, "--interval", "0", "--tool-check"]) == 1
    assert len(chats) == 1
    assert "refuses the recipe check's chat request: HTTP 400: %s" % REFUSAL in capsys.readouterr().err


def test_the_units_probe_waits_until_the_recipe_check_passes(server, capsys):
    url, answer_with, chats = server
    answer_with((200, chat_answer(None, choices=[])), (503, error_body("loading", 503, "ServiceUnavailableError")),
                (200, chat_answer(message(content="Sunny"))), (200, chat_answer(message(content="Sunny", reasoning="Okay"))))
    assert READY.main(["--url", url, "--model", MODEL, "--interval", "0", "--tool-check", "--reasoning-check"]) == 0
    assert len(chats) == 4
    out, err = capsys.readouterr()
    assert "not ready yet (the chat answer has no choices)" in err
    assert "not ready yet (HTTP 503: loading)" in err
    assert "not ready yet (reasoning: no reasoning separated" in err
    assert "recipe check: tool choice accepted, reasoning in reasoning" in out


def _look(recipe_check, active="activating", sub="start-post"):
    return {"unit_state": _state(active, sub), "journal_tail": ["vllm[9]: INFO: 127.0.0.1 POST /v1/chat/completions 400"],
            "phase": "API server up", "health": {"status": 200}, "running_s": 30.0, "ready_after_s": None,
            "completion": {"ok": True, "latency_s": 0.2, "error": None}, "recipe_check": recipe_check}


def _wait(looks, **overrides):
    sequence = iter(looks)
    lines = []
    clock = [0.0]

    def sleep(seconds):
        clock[0] += seconds

    result = vllm_probe.wait_until_ready(lambda: next(sequence), params(**overrides), lines.append,
                                         sleep=sleep, clock=lambda: clock[0])
    return result, lines


def test_vllm_wait_keeps_waiting_on_a_recipe_check_that_has_not_passed():
    missing = {"reasoning": {"status": 200, "ok": False, "field": None, "message": "no reasoning separated"}}
    passed = {"reasoning": {"status": 200, "ok": True, "field": "reasoning", "message": "reasoning in reasoning"}}
    result, lines = _wait([_look(missing), _look(passed, "active", "running")], reasoning_check=True)
    assert result["ready"] is True and result["recipe_check"] == passed
    assert "recipe check not passed: reasoning: no reasoning separated" in lines[0]


def test_vllm_wait_gives_up_on_time_naming_the_recipe_check():
    missing = {"reasoning": {"status": 200, "ok": False, "field": None, "message": "no reasoning separated"}}
    result, dummy = _wait(iter(lambda: _look(missing), None), reasoning_check=True, timeout=20)
    assert result["failed"] is True and result["recipe_check"] == missing
    assert "recipe check not passed: reasoning: no reasoning separated" in result["msg"]


def test_vllm_wait_fails_at_once_on_a_refusal():
    refused = {"tool_choice": {"status": 400, "ok": False, "message": "HTTP 400: %s" % REFUSAL}}
    result, dummy = _wait([_look(refused)], tool_check=True, timeout=600)
    assert result["failed"] is True and result["waited_s"] == 0.0
    assert REFUSAL in result["msg"] and result["recipe_check"] == refused


def test_both_probes_share_the_same_checks():
    """vllm_ready.py runs on the stdlib alone, so it carries a copy; the copies must not drift apart."""
    for name in ("recipe_request", "_tool_call_ok", "chat_message", "reasoning_found"):
        assert inspect.getsource(getattr(READY, name)) == inspect.getsource(getattr(vllm_probe, name)), name
    for name in ("RECIPE_PROMPT", "RECIPE_MAX_TOKENS", "RECIPE_TOOL", "REASONING_FIELDS", "THINK_MARKUP", "REFUSED_STATUS"):
        assert getattr(READY, name) == getattr(vllm_probe, name), name


def test_the_options_are_documented():
    options = yaml.safe_load(vllm_wait.DOCUMENTATION)["options"]
    for name in ("tool_check", "reasoning_check"):
        assert vllm_probe.ARGUMENT_SPEC[name] == dict(type="bool", default=False)
        assert options[name]["type"] == "bool" and options[name]["default"] is False
    assert "recipe_check" in yaml.safe_load(vllm_wait.RETURN)
