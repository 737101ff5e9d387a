# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_args_check through run_module, with AnsibleModule.run_command replaced by a fake checker
reply (no vLLM on the controller): an accepted command line, a refusal that fails the task with vLLM's message,
check mode with and without the venv, check=false, a crashed checker, and a setting the builder refuses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_args_check

ACCEPTED = {"ok": True, "message": "vllm serve accepts this command line", "vllm_version": "0.32.0",
            "non_default": {"enable_auto_tool_choice": True, "tool_call_parser": "hermes", "max_num_seqs": 8},
            "elapsed_s": 6.6}
REFUSED = {"ok": False, "message": "invalid tool call parser: hermez (chose from { hermes,qwen3_xml })",
           "vllm_version": "0.32.0", "non_default": {"tool_call_parser": "hermez"}, "elapsed_s": 6.5}


@pytest.fixture
def venv(tmp_path):
    """A venv folder with a bin/python (never run: run_command is faked)."""
    os.makedirs(str(tmp_path / "venv" / "bin"))
    (tmp_path / "venv" / "bin" / "python").write_text(u"")
    return str(tmp_path / "venv")


@pytest.fixture
def checker(monkeypatch):
    """Replace run_command; ``checker.answer`` is (rc, out, err), ``checker.calls`` the (argv, data) seen."""

    class Checker(object):
        answer = (0, json.dumps({"vllm_version": "0.32.0", "replies": [ACCEPTED]}), "")
        calls = []

    def run_command(self, argv, data=None, **kwargs):
        Checker.calls.append((argv, data))
        return Checker.answer

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return Checker


def _args(venv, serving=None, **extra):
    return dict({"venv": venv, "model": "/srv/models/tiny", "port": 8000,
                 "serving": dict({"max_num_seqs": 8, "tool_call_parser": "hermes", "enable_auto_tool_choice": True},
                                 **(serving or {}))}, **extra)


ARGS = ["/srv/models/tiny", "--port", "8000", "--max-num-seqs", "8", "--tool-call-parser", "hermes",
        "--enable-auto-tool-choice"]


def test_accepted_command_line(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv))
    assert not failed
    assert result == {"changed": False, "args": ARGS, "argv": [venv + "/bin/vllm", "serve"] + ARGS, "checked": True, "cached": False,
                      "vllm_version": "0.32.0", "non_default": ACCEPTED["non_default"], "elapsed_s": 6.6,
                      "message": "vllm serve accepts this command line"}
    (argv, data), = checker.calls
    assert argv == [venv + "/bin/python", "-"]
    assert json.dumps(ARGS) in data


def test_refusal_fails_the_task_with_vllms_message(run_module, checker, venv):
    checker.answer = (0, json.dumps({"vllm_version": "0.32.0", "replies": [REFUSED]}), "")
    result, failed = run_module(vllm_args_check.main, _args(venv, {"tool_call_parser": "hermez"}))
    assert failed
    assert result["msg"] == ("vllm serve would refuse this command line (vLLM 0.32.0): invalid tool call parser: hermez "
                             "(chose from { hermes,qwen3_xml })")
    assert result["args"][5:7] == ["--tool-call-parser", "hermez"]
    assert result["argv"][:2] == [venv + "/bin/vllm", "serve"] and result["vllm_version"] == "0.32.0"


def test_check_mode_still_checks(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv, _ansible_check_mode=True))
    assert not failed and result["checked"] is True and result["changed"] is False
    assert len(checker.calls) == 1


def test_check_mode_without_vllm_yet_builds_unchecked(run_module, checker, tmp_path):
    missing = str(tmp_path / "not-yet")
    result, failed = run_module(vllm_args_check.main, _args(missing, _ansible_check_mode=True))
    assert not failed
    assert result["checked"] is False and result["args"] == ARGS and result["vllm_version"] is None
    assert result["message"] == ("%s/bin/python does not exist: vLLM is not installed there yet, so the command line "
                                 "is built but not checked" % missing)
    assert checker.calls == []


def test_missing_venv_fails_outside_check_mode(run_module, checker, tmp_path):
    missing = str(tmp_path / "not-yet")
    result, failed = run_module(vllm_args_check.main, _args(missing))
    assert failed
    assert result["msg"] == "%s/bin/python does not exist: no vLLM venv to check the command line against" % missing
    assert checker.calls == []


def test_check_false_only_builds(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv, check=False))
    assert not failed and result["checked"] is False and result["args"] == ARGS
    assert checker.calls == []


def test_crashed_checker_fails_with_its_stderr(run_module, checker, venv):
    checker.answer = (1, "", "Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'\n")
    result, failed = run_module(vllm_args_check.main, _args(venv))
    assert failed
    assert result["msg"] == ("the vLLM args checker run by %s/bin/python failed (rc 1, no JSON reply): "
                             "ModuleNotFoundError: No module named 'torch'" % venv)
    assert result["stderr"].endswith("No module named 'torch'")


def test_bad_setting_fails_naming_it(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv, {"chat_template": "x\nExecStartPre=/bin/sh"}))
    assert failed and result["msg"].startswith("arguments may not hold newlines or NUL")
    assert checker.calls == []


def test_options_match_the_builder_settings():
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import IDENTITY, SERVING
    assert set(IDENTITY) | {"serving", "venv", "check", "timeout", "record"} == set(vllm_args_check.ARGUMENT_SPEC)
    assert set(SERVING) == set(vllm_args_check.ARGUMENT_SPEC["serving"]["options"])


def test_an_unknown_serving_field_is_refused_naming_it(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv, {"max_num_seqz": 8}))
    assert failed and "max_num_seqz" in result["msg"]
    assert checker.calls == []


def test_serving_fields_take_ansibles_types(run_module, checker, venv):
    result, failed = run_module(vllm_args_check.main, _args(venv, {"max_num_seqs": "8", "enable_auto_tool_choice": "yes",
                                                                   "env": {"VLLM_USE_DEEP_GEMM": "1"}}))
    assert not failed and result["args"] == ARGS
