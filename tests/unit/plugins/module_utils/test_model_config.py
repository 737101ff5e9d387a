# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import os
import shutil

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import (
    INT_FIELDS,
    MLA_INT_FIELDS,
    ModelConfigError,
    load_model_config,
    normalize_model_config,
    resolve_config_path,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "model_configs"))
SIDECAR_SUFFIX = "_hf_quant.json"

ALL_JSON = sorted(f for f in os.listdir(FIXTURES) if f.endswith(".json"))
CONFIGS = [f for f in ALL_JSON if not f.endswith(SIDECAR_SUFFIX)]
SIDECARS = [f for f in ALL_JSON if f.endswith(SIDECAR_SUFFIX)]


def is_int(value):
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def sidecar_for(name):
    candidate = name[:-len(".json")] + SIDECAR_SUFFIX
    return os.path.join(FIXTURES, candidate) if candidate in ALL_JSON else None


def load(name, with_sidecar=True):
    """Normalise fixture ``<name>.json``, paired with ``<name>_hf_quant.json`` if present."""
    filename = name + ".json"
    hf_quant = sidecar_for(filename) if with_sidecar else None
    return load_model_config(os.path.join(FIXTURES, filename), hf_quant_path=hf_quant,
                             discover_hf_quant=False)


def raw(name):
    with open(os.path.join(FIXTURES, name + ".json")) as handle:
        return json.load(handle)


def write_json(path, data):
    with open(str(path), "w") as handle:
        json.dump(data, handle)
    return str(path)


# ---------------------------------------------------------------------------
# Fixture bookkeeping
# ---------------------------------------------------------------------------

def test_fixtures_present():
    assert "moonshotai--Kimi-K2.5.json" in CONFIGS
    assert SIDECARS, "expected *_hf_quant.json sidecars among the fixtures"
    for sidecar in SIDECARS:
        assert sidecar[:-len(SIDECAR_SUFFIX)] + ".json" in CONFIGS, sidecar


def test_fixtures_are_the_shared_model_configs_as_recorded():
    """SHA256SUMS holds the hashes of ../shared/model-configs/*.json (the real config.json files of the models
    we target) as they were copied here. This test runs wherever the checkout is, with or without ../shared,
    and fails on a fixture that was edited, added or removed without the record. Whether ../shared has moved
    on since: ``cd ../shared/model-configs && sha256sum --strict -c <checkout>/tests/unit/fixtures/model_configs/SHA256SUMS``.
    """
    recorded = {}
    with open(os.path.join(FIXTURES, "SHA256SUMS")) as handle:
        for line in handle:
            digest, name = line.rstrip("\n").split("  ", 1)
            recorded[name] = digest
    assert set(recorded) == set(ALL_JSON), (
        "SHA256SUMS and the fixtures differ: not recorded %s, recorded but missing %s"
        % (sorted(set(ALL_JSON) - set(recorded)), sorted(set(recorded) - set(ALL_JSON))))
    for name in ALL_JSON:
        with open(os.path.join(FIXTURES, name), "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == recorded[name], name


# ---------------------------------------------------------------------------
# Every real config normalises
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("filename", CONFIGS)
def test_every_fixture_normalizes(filename):
    model = load(filename[:-len(".json")])

    for field in ("num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
                  "num_hidden_layers", "vocab_size", "num_shared_experts", "first_k_dense"):
        assert is_int(model[field]), field
    for field in INT_FIELDS:
        assert model[field] is None or is_int(model[field]), field
    for field in ("num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
                  "num_hidden_layers", "vocab_size"):
        assert model[field] > 0, field
    assert isinstance(model["architecture"], str) and model["architecture"]
    assert isinstance(model["text_config"], bool)
    assert model["tie_word_embeddings"] in (True, False, None)
    assert model["source"]["config"].endswith(filename)

    if model["num_experts"] is None:
        assert model["moe_intermediate_size"] is None
        assert model["num_experts_per_tok"] is None
        assert is_int(model["intermediate_size"])
    else:
        assert is_int(model["moe_intermediate_size"])
        assert 0 < model["num_experts_per_tok"] <= model["num_experts"]

    if model["mla"] is not None:
        assert set(model["mla"]) == set(MLA_INT_FIELDS)
        for field in MLA_INT_FIELDS:
            assert model["mla"][field] is None or is_int(model["mla"][field]), field

    quant = model["quantization"]
    if quant is not None:
        assert isinstance(quant["method"], str) and quant["method"]
        assert isinstance(quant["scheme"], str) and quant["scheme"]
        assert quant["bits"] in (4, 8)
        assert quant["group_size"] is None or is_int(quant["group_size"])
        assert quant["block_size"] is None or all(is_int(v) for v in quant["block_size"])
        assert isinstance(quant["ignored_modules"], list)
        assert all(isinstance(m, str) for m in quant["ignored_modules"])

    # the result must be plain JSON data (it is returned by a module)
    assert json.loads(json.dumps(model)) == model


@pytest.mark.parametrize("filename", CONFIGS)
def test_quantization_presence_matches_name(filename):
    model = load(filename[:-len(".json")])
    quantized_name = any(tag in filename for tag in ("FP8", "NVFP4")) and "ABRIDGED" not in filename
    if quantized_name:
        assert model["quantization"] is not None


# ---------------------------------------------------------------------------
# Concrete values per real model
# ---------------------------------------------------------------------------

KIMI_K2_MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
               "qk_nope_head_dim": 128, "v_head_dim": 128}


def assert_kimi_k2_language_model(model):
    assert model["num_attention_heads"] == 64
    assert model["num_key_value_heads"] == 64
    assert model["head_dim"] == 7168 // 64
    assert model["hidden_size"] == 7168
    assert model["intermediate_size"] == 18432
    assert model["moe_intermediate_size"] == 2048
    assert model["num_experts"] == 384
    assert model["num_experts_per_tok"] == 8
    assert model["num_shared_experts"] == 1
    assert model["shared_expert_intermediate_size"] == 2048
    assert model["first_k_dense"] == 1
    assert model["num_hidden_layers"] == 61
    assert model["vocab_size"] == 163840
    assert model["mla"] == KIMI_K2_MLA
    assert model["tie_word_embeddings"] is False


def test_kimi_k25_int4():
    model = load("moonshotai--Kimi-K2.5")
    assert model["architecture"] == "KimiK25ForConditionalGeneration"
    assert model["model_type"] == "kimi_k25"
    assert model["text_architecture"] == "DeepseekV3ForCausalLM"
    assert model["text_model_type"] == "kimi_k2"
    assert model["text_config"] is True
    assert model["max_position_embeddings"] == 262144
    assert_kimi_k2_language_model(model)
    assert model["quantization"] == {
        "method": "compressed-tensors",
        "scheme": "int4 pack-quantized",
        "bits": 4,
        "group_size": 32,
        "block_size": None,
        "kv_cache_dtype": None,
        "ignored_modules": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                            "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "origin": "text_config.quantization_config",
    }
    assert model["source"] == {
        "config": os.path.join(FIXTURES, "moonshotai--Kimi-K2.5.json"),
        "hf_quant_config": None,
    }


def test_kimi_k25_nvfp4_top_level_quantization():
    model = load("nvidia--Kimi-K2.5-NVFP4")
    assert model["architecture"] == "KimiK25ForConditionalGeneration"
    assert model["text_config"] is True
    assert model["text_model_type"] == "deepseek_v3"
    assert_kimi_k2_language_model(model)
    quant = model["quantization"]
    assert quant["method"] == "modelopt_fp4"
    assert quant["scheme"] == "nvfp4"
    assert quant["bits"] == 4
    assert quant["group_size"] == 16
    assert quant["block_size"] is None
    assert quant["kv_cache_dtype"] == "fp8"
    assert quant["origin"] == "quantization_config"
    assert "language_model.lm_head" in quant["ignored_modules"]
    assert len(quant["ignored_modules"]) == len(raw("nvidia--Kimi-K2.5-NVFP4")["quantization_config"]["ignore"])


@pytest.mark.parametrize("name", ["moonshotai--Kimi-K2-Instruct", "moonshotai--Kimi-K2-Thinking.ABRIDGED"])
def test_kimi_k2(name):
    model = load(name)
    assert model["architecture"] == "DeepseekV3ForCausalLM"
    assert model["model_type"] == "kimi_k2"
    assert model["text_config"] is False
    assert model["text_architecture"] is None
    assert_kimi_k2_language_model(model)


def test_kimi_k2_instruct_fp8():
    quant = load("moonshotai--Kimi-K2-Instruct")["quantization"]
    assert (quant["method"], quant["scheme"], quant["bits"], quant["block_size"]) == ("fp8", "fp8 block", 8, [128, 128])
    assert load("moonshotai--Kimi-K2-Thinking.ABRIDGED")["quantization"] is None


def test_minimax_m25_fp8():
    model = load("MiniMaxAI--MiniMax-M2.5")
    assert model["architecture"] == "MiniMaxM2ForCausalLM"
    assert model["model_type"] == "minimax_m2"
    assert model["num_attention_heads"] == 48
    assert model["num_key_value_heads"] == 8
    assert model["head_dim"] == 128
    assert model["hidden_size"] == 3072
    # no moe_intermediate_size key: intermediate_size is the expert width
    assert model["intermediate_size"] == 1536
    assert model["moe_intermediate_size"] == 1536
    assert model["num_experts"] == 256
    assert model["num_experts_per_tok"] == 8
    assert model["num_shared_experts"] == 0
    assert model["shared_expert_intermediate_size"] == 0
    assert model["first_k_dense"] == 0
    assert model["num_hidden_layers"] == 62
    assert model["vocab_size"] == 200064
    assert model["max_position_embeddings"] == 196608
    assert model["mla"] is None
    assert model["quantization"] == {
        "method": "fp8",
        "scheme": "fp8 block",
        "bits": 8,
        "group_size": None,
        "block_size": [128, 128],
        "kv_cache_dtype": None,
        "ignored_modules": ["gate", "e_score_correction_bias", "lm_head"],
        "origin": "quantization_config",
    }


def test_minimax_m25_nvfp4_config_wins_over_sidecar():
    model = load("nvidia--MiniMax-M2.5-NVFP4")
    assert model["num_experts"] == 256
    assert model["moe_intermediate_size"] == 1536
    quant = model["quantization"]
    assert quant["origin"] == "quantization_config"
    assert (quant["method"], quant["scheme"], quant["bits"], quant["group_size"]) == ("modelopt_fp4", "nvfp4", 4, 16)
    assert quant["kv_cache_dtype"] == "fp8"
    assert model["source"]["hf_quant_config"] == os.path.join(FIXTURES, "nvidia--MiniMax-M2.5-NVFP4_hf_quant.json")


@pytest.mark.parametrize("name", ["deepseek-ai--DeepSeek-V3", "deepseek-ai--DeepSeek-R1"])
def test_deepseek_v3(name):
    model = load(name)
    assert model["architecture"] == "DeepseekV3ForCausalLM"
    assert model["model_type"] == "deepseek_v3"
    assert model["num_attention_heads"] == 128
    assert model["num_key_value_heads"] == 128
    assert model["head_dim"] == 56  # derived 7168 // 128; the real dims are in mla
    assert model["hidden_size"] == 7168
    assert model["intermediate_size"] == 18432
    assert model["moe_intermediate_size"] == 2048
    assert model["num_experts"] == 256
    assert model["num_experts_per_tok"] == 8
    assert model["num_shared_experts"] == 1
    assert model["shared_expert_intermediate_size"] == 2048
    assert model["first_k_dense"] == 3
    assert model["num_hidden_layers"] == 61
    assert model["vocab_size"] == 129280
    assert model["max_position_embeddings"] == 163840
    assert model["mla"] == {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
                            "qk_nope_head_dim": 128, "v_head_dim": 128}
    assert model["quantization"] == {
        "method": "fp8", "scheme": "fp8 block", "bits": 8, "group_size": None,
        "block_size": [128, 128], "kv_cache_dtype": None, "ignored_modules": [],
        "origin": "quantization_config",
    }


def assert_llama_31_70b(model):
    assert model["architecture"] == "LlamaForCausalLM"
    assert model["model_type"] == "llama"
    assert model["num_attention_heads"] == 64
    assert model["num_key_value_heads"] == 8
    assert model["head_dim"] == 128
    assert model["hidden_size"] == 8192
    assert model["intermediate_size"] == 28672
    assert model["moe_intermediate_size"] is None
    assert model["num_experts"] is None
    assert model["num_experts_per_tok"] is None
    assert model["num_shared_experts"] == 0
    assert model["shared_expert_intermediate_size"] is None
    assert model["first_k_dense"] == 0
    assert model["num_hidden_layers"] == 80
    assert model["vocab_size"] == 128256
    assert model["max_position_embeddings"] == 131072
    assert model["mla"] is None


def test_llama_31_70b_dense():
    model = load("meta-llama--Meta-Llama-3.1-70B")
    assert_llama_31_70b(model)
    assert model["quantization"] is None
    assert model["source"]["hf_quant_config"] is None


def test_llama_31_70b_instruct_fp8_with_sidecar():
    model = load("nvidia--Llama-3.1-70B-Instruct-FP8")
    assert_llama_31_70b(model)
    assert model["quantization"] == {
        "method": "modelopt",
        "scheme": "fp8",
        "bits": 8,
        "group_size": None,
        "block_size": None,
        "kv_cache_dtype": "fp8",
        "ignored_modules": ["lm_head"],
        "origin": "hf_quant_config",
    }
    assert model["source"]["hf_quant_config"] == os.path.join(
        FIXTURES, "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant.json")


def test_llama_31_70b_instruct_fp8_without_sidecar_is_unquantized():
    model = load("nvidia--Llama-3.1-70B-Instruct-FP8", with_sidecar=False)
    assert model["quantization"] is None
    assert model["source"]["hf_quant_config"] is None


def test_mixtral():
    model = load("mistralai--Mixtral-8x7B-v0.1")
    assert model["architecture"] == "MixtralForCausalLM"
    assert model["num_attention_heads"] == 32
    assert model["num_key_value_heads"] == 8
    assert model["head_dim"] == 128  # derived 4096 // 32
    assert model["hidden_size"] == 4096
    assert model["intermediate_size"] == 14336
    assert model["moe_intermediate_size"] == 14336
    assert model["num_experts"] == 8
    assert model["num_experts_per_tok"] == 2
    assert model["num_shared_experts"] == 0
    assert model["shared_expert_intermediate_size"] is None
    assert model["first_k_dense"] == 0
    assert model["num_hidden_layers"] == 32
    assert model["vocab_size"] == 32000
    assert model["quantization"] is None


@pytest.mark.parametrize("name", ["Qwen--Qwen3-30B-A3B", "Qwen--Qwen3-30B-A3B-FP8"])
def test_qwen3_30b_a3b(name):
    model = load(name)
    assert model["architecture"] == "Qwen3MoeForCausalLM"
    assert model["model_type"] == "qwen3_moe"
    assert model["num_attention_heads"] == 32
    assert model["num_key_value_heads"] == 4
    assert model["head_dim"] == 128  # explicit (2048 // 32 would be 64)
    assert model["hidden_size"] == 2048
    assert model["intermediate_size"] == 6144
    assert model["moe_intermediate_size"] == 768
    assert model["num_experts"] == 128
    assert model["num_experts_per_tok"] == 8
    assert model["num_shared_experts"] == 0
    assert model["shared_expert_intermediate_size"] is None
    assert model["first_k_dense"] == 0
    assert model["num_hidden_layers"] == 48
    assert model["vocab_size"] == 151936
    assert model["tie_word_embeddings"] is False
    if name.endswith("-FP8"):
        quant = model["quantization"]
        assert (quant["method"], quant["scheme"], quant["bits"]) == ("fp8", "fp8 block", 8)
        assert quant["block_size"] == [128, 128]
        assert quant["ignored_modules"][0] == "lm_head"
        assert len(quant["ignored_modules"]) == 1 + 3 * 48
    else:
        assert model["quantization"] is None


@pytest.mark.parametrize("name", ["Qwen--Qwen3-235B-A22B", "Qwen--Qwen3-235B-A22B-FP8"])
def test_qwen3_235b_a22b(name):
    model = load(name)
    assert (model["num_attention_heads"], model["num_key_value_heads"], model["head_dim"]) == (64, 4, 128)
    assert (model["hidden_size"], model["moe_intermediate_size"]) == (4096, 1536)
    assert (model["num_experts"], model["num_experts_per_tok"], model["num_hidden_layers"]) == (128, 8, 94)
    assert (model["quantization"] is not None) == name.endswith("-FP8")


def test_gpt_oss_120b_mxfp4():
    model = load("openai--gpt-oss-120b")
    assert model["architecture"] == "GptOssForCausalLM"
    assert model["model_type"] == "gpt_oss"
    assert model["num_attention_heads"] == 64
    assert model["num_key_value_heads"] == 8
    assert model["head_dim"] == 64
    assert model["hidden_size"] == 2880
    assert model["intermediate_size"] == 2880
    assert model["moe_intermediate_size"] == 2880
    assert model["num_experts"] == 128
    assert model["num_experts_per_tok"] == 4
    assert model["num_shared_experts"] == 0
    assert model["num_hidden_layers"] == 36
    assert model["vocab_size"] == 201088
    assert model["max_position_embeddings"] == 131072
    assert model["quantization"] == {
        "method": "mxfp4",
        "scheme": "mxfp4",
        "bits": 4,
        "group_size": 32,
        "block_size": None,
        "kv_cache_dtype": None,
        "ignored_modules": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                            "model.embed_tokens", "lm_head"],
        "origin": "quantization_config",
    }


def test_gpt_oss_windows_every_other_layer():
    # layer_types alternates sliding_attention and full_attention over 36 layers; vLLM's gpt_oss.py windows the
    # even layers (128 tokens).
    assert load("openai--gpt-oss-120b")["sliding_window"] == {"window": 128, "layers": 18}
    # A window without layer_types (Qwen3, Mixtral: null) or none at all windows no layer.
    for name in ("Qwen--Qwen3-30B-A3B", "mistralai--Mixtral-8x7B-v0.1", "meta-llama--Meta-Llama-3.1-70B"):
        assert load(name)["sliding_window"] is None, name


def test_a_window_without_layer_types_or_without_a_sliding_layer_windows_none():
    config = raw("openai--gpt-oss-120b")
    del config["layer_types"]
    assert normalize_model_config(config)["sliding_window"] is None
    config = raw("openai--gpt-oss-120b")
    config["layer_types"] = ["full_attention"] * 36
    assert normalize_model_config(config)["sliding_window"] is None
    config = raw("openai--gpt-oss-120b")
    config["sliding_window"] = 0
    assert normalize_model_config(config)["sliding_window"] is None


def test_error_layer_types_of_another_length():
    config = raw("openai--gpt-oss-120b")
    config["layer_types"] = config["layer_types"][:35]
    with pytest.raises(ModelConfigError, match=r"config.json: field 'layer_types' lists 35 layers, 'num_hidden_layers' says 36"):
        normalize_model_config(config)


def test_error_layer_types_not_strings():
    config = raw("openai--gpt-oss-120b")
    config["layer_types"] = [1] * 36
    with pytest.raises(ModelConfigError, match=r"field 'layer_types' must be a list of strings"):
        normalize_model_config(config)


def test_gpt_oss_experts_per_token_alias():
    config = raw("openai--gpt-oss-120b")
    del config["num_experts_per_tok"]
    assert normalize_model_config(config)["num_experts_per_tok"] == 4


GLM5_MLA = {"kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 192, "v_head_dim": 256}


@pytest.mark.parametrize("name", ["zai-org--GLM-5", "zai-org--GLM-5-FP8", "nvidia--GLM-5-NVFP4"])
def test_glm5(name):
    model = load(name)
    assert model["architecture"] == "GlmMoeDsaForCausalLM"
    assert model["model_type"] == "glm_moe_dsa"
    assert model["num_attention_heads"] == 64
    assert model["num_key_value_heads"] == 64
    assert model["head_dim"] == 64
    assert model["hidden_size"] == 6144
    assert model["intermediate_size"] == 12288
    assert model["moe_intermediate_size"] == 2048
    assert model["num_experts"] == 256
    assert model["num_experts_per_tok"] == 8
    assert model["num_shared_experts"] == 1
    assert model["shared_expert_intermediate_size"] == 2048
    assert model["first_k_dense"] == 3
    assert model["num_hidden_layers"] == 78
    assert model["vocab_size"] == 154880
    assert model["max_position_embeddings"] == 202752
    assert model["mla"] == GLM5_MLA


def test_glm5_unquantized():
    assert load("zai-org--GLM-5")["quantization"] is None


def test_glm5_fp8():
    quant = load("zai-org--GLM-5-FP8")["quantization"]
    assert (quant["method"], quant["scheme"], quant["bits"], quant["block_size"]) == ("fp8", "fp8 block", 8, [128, 128])
    assert quant["ignored_modules"][:2] == ["lm_head", "model.embed_tokens"]


def test_glm5_nvfp4_with_sidecar():
    model = load("nvidia--GLM-5-NVFP4")
    quant = model["quantization"]
    sidecar = raw("nvidia--GLM-5-NVFP4_hf_quant")["quantization"]
    assert quant["method"] == "modelopt_fp4"
    assert quant["scheme"] == "nvfp4"
    assert quant["bits"] == 4
    assert quant["group_size"] == 16
    assert quant["block_size"] is None
    assert quant["kv_cache_dtype"] == "fp8"
    assert quant["ignored_modules"] == sidecar["exclude_modules"]
    assert quant["origin"] == "hf_quant_config"
    assert load("nvidia--GLM-5-NVFP4", with_sidecar=False)["quantization"] is None


def test_glm47_abridged():
    model = load("zai-org--GLM-4.7-FP8.ABRIDGED")
    assert (model["num_attention_heads"], model["num_key_value_heads"], model["head_dim"]) == (96, 8, 128)
    assert (model["num_experts"], model["moe_intermediate_size"], model["first_k_dense"]) == (160, 1536, 3)
    assert model["mla"] is None
    assert model["quantization"] is None


# ---------------------------------------------------------------------------
# Pairing with dicts, directories and sidecar discovery
# ---------------------------------------------------------------------------

def test_normalize_dicts_pairing():
    model = normalize_model_config(raw("nvidia--GLM-5-NVFP4"), hf_quant=raw("nvidia--GLM-5-NVFP4_hf_quant"),
                                   config_path="glm/config.json", hf_quant_path="glm/hf_quant_config.json")
    assert model["quantization"]["method"] == "modelopt_fp4"
    assert model["source"] == {"config": "glm/config.json", "hf_quant_config": "glm/hf_quant_config.json"}


def test_directory_with_sidecar_discovered(tmp_path):
    shutil.copy(os.path.join(FIXTURES, "nvidia--Llama-3.1-70B-Instruct-FP8.json"), str(tmp_path / "config.json"))
    shutil.copy(os.path.join(FIXTURES, "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant.json"),
                str(tmp_path / "hf_quant_config.json"))
    model = load_model_config(str(tmp_path))
    assert model["source"] == {"config": str(tmp_path / "config.json"),
                               "hf_quant_config": str(tmp_path / "hf_quant_config.json")}
    assert model["quantization"]["method"] == "modelopt"
    # the same when pointing at the file; and discovery can be switched off
    assert load_model_config(str(tmp_path / "config.json")) == model
    assert load_model_config(str(tmp_path), discover_hf_quant=False)["quantization"] is None


def test_resolve_config_path(tmp_path):
    config = write_json(tmp_path / "config.json", {})
    assert resolve_config_path(str(tmp_path)) == config
    assert resolve_config_path(config) == config


def test_embedded_modelopt_hf_layout():
    config = raw("nvidia--Llama-3.1-70B-Instruct-FP8")
    config["quantization_config"] = raw("nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant")
    quant = normalize_model_config(config)["quantization"]
    assert (quant["method"], quant["scheme"], quant["kv_cache_dtype"]) == ("modelopt", "fp8", "fp8")
    assert quant["origin"] == "quantization_config"


def test_qwen2_moe_style_shared_expert():
    config = raw("Qwen--Qwen3-30B-A3B")
    config["shared_expert_intermediate_size"] = 5632
    model = normalize_model_config(config)
    assert model["num_shared_experts"] == 1
    assert model["shared_expert_intermediate_size"] == 5632


def test_dense_when_num_experts_zero():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config["num_experts"] = 0
    model = normalize_model_config(config)
    assert model["num_experts"] is None
    assert model["moe_intermediate_size"] is None


def test_num_key_value_heads_defaults_to_attention_heads():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    del config["num_key_value_heads"]
    assert normalize_model_config(config)["num_key_value_heads"] == 64


def test_compressed_tensors_fp8_kv_cache():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "group_size": None}}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float"},
        "ignore": ["lm_head"],
    }
    quant = normalize_model_config(config)["quantization"]
    assert quant == {"method": "compressed-tensors", "scheme": "fp8 float-quantized", "bits": 8,
                     "group_size": None, "block_size": None, "kv_cache_dtype": "fp8",
                     "ignored_modules": ["lm_head"], "origin": "quantization_config"}


def test_other_quant_method_passthrough():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config["quantization_config"] = {"quant_method": "GPTQ", "bits": 4, "group_size": -1}
    quant = normalize_model_config(config)["quantization"]
    assert (quant["method"], quant["scheme"], quant["bits"], quant["group_size"]) == ("gptq", "gptq int4", 4, None)
    assert quant["ignored_modules"] == []


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def test_error_missing_path(tmp_path):
    missing = str(tmp_path / "nope" / "config.json")
    with pytest.raises(ModelConfigError, match="no such file or directory") as err:
        load_model_config(missing)
    assert missing in str(err.value)


def test_error_directory_without_config(tmp_path):
    with pytest.raises(ModelConfigError, match="does not contain config.json") as err:
        load_model_config(str(tmp_path))
    assert str(tmp_path) in str(err.value)


def test_error_invalid_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"architectures": ["X"],')
    with pytest.raises(ModelConfigError, match="invalid JSON") as err:
        load_model_config(str(path))
    assert str(err.value).startswith(str(path) + ":")


@pytest.mark.parametrize("payload", ["[1, 2]", '"config"', "42", "null"])
def test_error_json_not_an_object(tmp_path, payload):
    path = tmp_path / "config.json"
    path.write_text(payload)
    with pytest.raises(ModelConfigError, match="expected a JSON object") as err:
        load_model_config(str(path))
    assert str(path) in str(err.value)


def test_error_not_utf8(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ModelConfigError, match="not UTF-8"):
        load_model_config(str(path))


@pytest.mark.parametrize("field", ["hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size"])
def test_error_missing_required_field(tmp_path, field):
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    del config[field]
    path = write_json(tmp_path / "config.json", config)
    with pytest.raises(ModelConfigError) as err:
        load_model_config(path)
    assert str(err.value) == "%s: missing required field '%s'" % (path, field)


def test_error_missing_field_in_text_config(tmp_path):
    config = raw("moonshotai--Kimi-K2.5")
    del config["text_config"]["num_attention_heads"]
    config["num_attention_heads"] = 64  # top level does not count when text_config exists
    path = write_json(tmp_path / "config.json", config)
    with pytest.raises(ModelConfigError) as err:
        load_model_config(path)
    assert str(err.value) == "%s: missing required field 'num_attention_heads' (looked in text_config)" % path


def test_error_missing_architectures(tmp_path):
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    del config["architectures"]
    path = write_json(tmp_path / "config.json", config)
    with pytest.raises(ModelConfigError, match="missing required field 'architectures'") as err:
        load_model_config(path)
    assert path in str(err.value)


def test_error_empty_architectures():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config["architectures"] = []
    with pytest.raises(ModelConfigError, match="'architectures' must be a non-empty list"):
        normalize_model_config(config)


def test_error_dense_without_intermediate_size():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    del config["intermediate_size"]
    with pytest.raises(ModelConfigError, match="missing required field 'intermediate_size'"):
        normalize_model_config(config, config_path="/m/config.json")


def test_moe_without_intermediate_size_is_fine():
    config = raw("Qwen--Qwen3-30B-A3B")
    del config["intermediate_size"]
    model = normalize_model_config(config)
    assert model["intermediate_size"] is None
    assert model["moe_intermediate_size"] == 768


def test_error_moe_without_any_expert_width():
    config = raw("mistralai--Mixtral-8x7B-v0.1")
    del config["intermediate_size"]
    with pytest.raises(ModelConfigError, match="missing required field 'moe_intermediate_size'"):
        normalize_model_config(config)


def test_error_moe_without_experts_per_token():
    config = raw("mistralai--Mixtral-8x7B-v0.1")
    del config["num_experts_per_tok"]
    with pytest.raises(ModelConfigError, match="missing required field 'num_experts_per_tok'"):
        normalize_model_config(config)


def test_error_experts_per_token_above_experts():
    config = raw("mistralai--Mixtral-8x7B-v0.1")
    config["num_experts_per_tok"] = 9
    with pytest.raises(ModelConfigError, match="'num_experts_per_tok' \\(9\\) exceeds"):
        normalize_model_config(config)


def test_error_mla_incomplete():
    config = raw("deepseek-ai--DeepSeek-V3")
    del config["qk_rope_head_dim"]
    with pytest.raises(ModelConfigError, match="missing required field 'qk_rope_head_dim'"):
        normalize_model_config(config)


def test_error_head_dim_not_derivable():
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config["num_attention_heads"] = 60
    with pytest.raises(ModelConfigError, match="cannot derive head_dim"):
        normalize_model_config(config)


@pytest.mark.parametrize("field, value, rendered, type_name", [
    ("num_attention_heads", "64", '"64"', "str"),
    ("num_attention_heads", -64, "-64", "int"),
    ("num_attention_heads", 0, "0", "int"),
    ("hidden_size", 8192.0, "8192.0", "float"),
    ("num_hidden_layers", True, "true", "bool"),
    ("vocab_size", [128256], "[128256]", "array"),
])
def test_error_bad_field_type(tmp_path, field, value, rendered, type_name):
    config = raw("meta-llama--Meta-Llama-3.1-70B")
    config[field] = value
    path = write_json(tmp_path / "config.json", config)
    with pytest.raises(ModelConfigError) as err:
        load_model_config(path)
    assert str(err.value) == "%s: field '%s' must be a positive integer, got %s (%s)" % (
        path, field, rendered, type_name)


def test_error_bad_field_type_in_text_config(tmp_path):
    config = raw("moonshotai--Kimi-K2.5")
    config["text_config"]["n_routed_experts"] = "384"
    path = write_json(tmp_path / "config.json", config)
    with pytest.raises(ModelConfigError) as err:
        load_model_config(path)
    assert str(err.value) == (
        "%s: field 'text_config.n_routed_experts' must be a non-negative integer, got \"384\" (str)" % path)


def test_error_negative_first_k_dense():
    config = raw("deepseek-ai--DeepSeek-V3")
    config["first_k_dense_replace"] = -1
    with pytest.raises(ModelConfigError, match="'first_k_dense_replace' must be a non-negative integer, got -1"):
        normalize_model_config(config)


def test_error_text_config_not_object():
    config = raw("moonshotai--Kimi-K2.5")
    config["text_config"] = "oops"
    with pytest.raises(ModelConfigError, match="field 'text_config' must be an object"):
        normalize_model_config(config)


def test_error_bad_block_size():
    config = raw("MiniMaxAI--MiniMax-M2.5")
    config["quantization_config"]["weight_block_size"] = ["128", 128]
    with pytest.raises(ModelConfigError, match="'quantization_config.weight_block_size' must be a list"):
        normalize_model_config(config)


def test_error_quantization_without_method():
    config = raw("MiniMaxAI--MiniMax-M2.5")
    del config["quantization_config"]["quant_method"]
    with pytest.raises(ModelConfigError, match="missing required field 'quantization_config.quant_method'"):
        normalize_model_config(config)


def test_error_bad_hf_quant_json(tmp_path):
    config = write_json(tmp_path / "config.json", raw("nvidia--GLM-5-NVFP4"))
    sidecar = tmp_path / "hf_quant_config.json"
    sidecar.write_text("{nope")
    with pytest.raises(ModelConfigError, match="invalid JSON") as err:
        load_model_config(config)
    assert str(err.value).startswith(str(sidecar) + ":")


def test_error_hf_quant_without_quantization_block(tmp_path):
    write_json(tmp_path / "config.json", raw("nvidia--GLM-5-NVFP4"))
    sidecar = write_json(tmp_path / "hf_quant_config.json", {"producer": {"name": "modelopt"}})
    with pytest.raises(ModelConfigError) as err:
        load_model_config(str(tmp_path))
    assert str(err.value) == "%s: missing required field 'quantization'" % sidecar


def test_error_explicit_hf_quant_missing(tmp_path):
    config = write_json(tmp_path / "config.json", raw("nvidia--GLM-5-NVFP4"))
    with pytest.raises(ModelConfigError, match="no such file"):
        load_model_config(config, hf_quant_path=str(tmp_path / "absent.json"))


def test_error_normalize_non_dict():
    with pytest.raises(ModelConfigError, match="x.json: expected a JSON object"):
        normalize_model_config([], config_path="x.json")


def test_input_not_mutated():
    config = raw("moonshotai--Kimi-K2.5")
    before = copy.deepcopy(config)
    normalize_model_config(config)
    assert config == before


# --------------------------------------------------------------------------
# Hostile files: an error naming the file (and the cap), never a traceback (issue 14)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("content,says", [
    (b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}", "invalid JSON: nested too deeply"),
    (b'{"hidden_size": ' + b"1" * 5000 + b"}", "invalid JSON"),
    (b'{"model_type": "\xff"}', "not UTF-8"),
])
@pytest.mark.parametrize("file_name", ["config.json", "hf_quant_config.json"])
def test_hostile_json_is_an_error_naming_the_file(tmp_path, content, says, file_name):
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import ModelConfigError, load_model_config
    good = b'{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256, "intermediate_size": 128}'
    (tmp_path / "config.json").write_bytes(good)
    (tmp_path / file_name).write_bytes(content)
    with pytest.raises(ModelConfigError) as err:
        load_model_config(str(tmp_path))
    assert str(err.value).startswith(str(tmp_path / file_name) + ": ") and says in str(err.value), str(err.value)


@pytest.mark.parametrize("file_name,cap", [("config.json", "16 MiB"), ("hf_quant_config.json", "64 MiB")])
def test_oversized_config_is_refused_without_reading_it_whole(tmp_path, monkeypatch, file_name, cap):
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import model_config
    good = b'{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256, "intermediate_size": 128}'
    (tmp_path / "config.json").write_bytes(good)
    limit = {"config.json": model_config.MAX_CONFIG_BYTES, "hf_quant_config.json": model_config.MAX_HF_QUANT_BYTES}[file_name]
    with open(str(tmp_path / file_name), "r+b" if file_name == "config.json" else "wb") as handle:
        handle.truncate(limit + 1)  # sparse: a config.json of limit + 1 bytes
    with pytest.raises(model_config.ModelConfigError) as err:
        model_config.load_model_config(str(tmp_path))
    assert str(err.value) == "%s: larger than %s, the most this file may hold; refusing to read it" % (tmp_path / file_name, cap)


# ---------------------------------------------------------------------------
# Order of the checks (normalize_model_config's steps): with two problems at once, the earlier step names its own
# ---------------------------------------------------------------------------

def _break(config, change):
    """Apply ``{field: value}`` to ``config`` (a value of None deletes the field)."""
    for field, value in change.items():
        if value is None:
            config.pop(field, None)
        else:
            config[field] = value


@pytest.mark.parametrize("name, first, second, says", [
    ("moonshotai--Kimi-K2.5", {"text_config": "oops"}, {"model_type": 3}, "field 'text_config' must be an object"),
    ("meta-llama--Meta-Llama-3.1-70B", {"architectures": []}, {"hidden_size": "8192"}, "'architectures' must be a non-empty list"),
    ("meta-llama--Meta-Llama-3.1-70B", {"architectures": []}, {"model_type": 3}, "'architectures' must be a non-empty list"),
    ("meta-llama--Meta-Llama-3.1-70B", {"model_type": 3}, {"vocab_size": 0}, "field 'model_type' must be a string"),
    ("meta-llama--Meta-Llama-3.1-70B", {"vocab_size": 0}, {"num_key_value_heads": "8"}, "field 'vocab_size' must be a positive integer"),
    ("mistralai--Mixtral-8x7B-v0.1", {"num_attention_heads": 60}, {"num_local_experts": "8"}, "cannot derive head_dim"),
    ("meta-llama--Meta-Llama-3.1-70B", {"intermediate_size": None}, {"n_shared_experts": -1}, "missing required field 'intermediate_size'"),
    ("deepseek-ai--DeepSeek-V3", {"n_shared_experts": -1}, {"first_k_dense_replace": -1}, "'n_shared_experts' must be a non-negative"),
    ("deepseek-ai--DeepSeek-V3", {"first_k_dense_replace": -1}, {"moe_intermediate_size": 0}, "'first_k_dense_replace' must be a non-negative"),
    ("deepseek-ai--DeepSeek-V3", {"moe_intermediate_size": 0}, {"num_experts_per_tok": 999}, "'moe_intermediate_size' must be a positive"),
    ("deepseek-ai--DeepSeek-V3", {"num_experts_per_tok": 999}, {"intermediate_size": None}, "'num_experts_per_tok' (999) exceeds"),
    ("deepseek-ai--DeepSeek-V3", {"intermediate_size": None}, {"shared_expert_intermediate_size": -1},
     "missing required field 'intermediate_size'"),
    ("Qwen--Qwen3-30B-A3B", {"shared_expert_intermediate_size": -1}, {"tie_word_embeddings": "no"},
     "'shared_expert_intermediate_size' must be a non-negative"),
    ("deepseek-ai--DeepSeek-V3", {"qk_rope_head_dim": None}, {"tie_word_embeddings": "no"}, "missing required field 'qk_rope_head_dim'"),
    ("MiniMaxAI--MiniMax-M2.5", {"tie_word_embeddings": "no"}, {"quantization_config": {"weight_block_size": ["128", 128]}},
     "field 'tie_word_embeddings' must be a boolean"),
    ("MiniMaxAI--MiniMax-M2.5", {"quantization_config": {"quant_method": "fp8", "weight_block_size": ["128", 128]}},
     {"max_position_embeddings": "big"}, "'quantization_config.weight_block_size' must be a list"),
])
def test_the_first_failing_check_is_the_one_reported(name, first, second, says):
    both = raw(name)
    _break(both, first)
    _break(both, second)
    with pytest.raises(ModelConfigError) as err:
        normalize_model_config(both)
    assert says in str(err.value)
    # The second problem alone is an error too (so the first one really hid it).
    alone = raw(name)
    _break(alone, second)
    with pytest.raises(ModelConfigError) as err:
        normalize_model_config(alone)
    assert says not in str(err.value)
