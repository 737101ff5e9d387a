# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Serving recipes: the flags a model family needs to be a usable endpoint
(tool-call parser, reasoning parser, auto tool choice, multimodal encoder mode,
speculative decoding ...), kept as data, and their resolution against a
normalised model (``model_config.normalize_model_config``), a vLLM release and
a catalogue entry's own fields.

A recipe is a plain dict::

    {"name": "kimi-k2.5", "title": "...",
     "match": {"architectures": [...], "model_types": [...], "config": {"vocab_size": 128256}},
     "vllm": {"min": "0.15.0", "max": None},
     "fields": {"tool_call_parser": "kimi_k2", ...},
     "sources": ["https://..."], "notes": "..."}

``match.architectures`` is compared with the model's top-level ``architecture``
(what vLLM loads), ``match.model_types`` with ``model_type`` and every
``match.config`` key with the normalised model's value of that key. ``vllm``
is the range of releases the recipe's parser names and option values exist in
(``max`` inclusive, None for open). Every name below was read from vLLM's own
registries (``vllm/tool_parsers/__init__.py``, ``vllm/reasoning/__init__.py``,
``vllm/config/speculative.py``) of the releases named in the notes; the
authority on a given host stays the installed vLLM (``vllm_args_check``).

Resolution (``resolve_serving``): the recipe's fields, then the entry's over
them. An entry value of None means "not given"; "" / False / {} mean
"explicitly off" and are kept. ``env`` is the recipe's, then the entry's on top
(an entry ``env: {}`` clears it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match, is_int, single_line


RECIPE_FIELDS = ("tool_call_parser", "reasoning_parser", "enable_auto_tool_choice", "chat_template", "speculative",
                 "mm_encoder_tp_mode", "all2all_backend", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens",
                 "gpu_memory_utilization", "env")
STR_FIELDS = ("tool_call_parser", "reasoning_parser", "chat_template", "mm_encoder_tp_mode", "all2all_backend",
              "kv_cache_dtype")
POSITIVE_INT_FIELDS = ("max_num_seqs", "max_num_batched_tokens")
RECIPE_KEYS = ("name", "title", "match", "vllm", "fields", "sources", "notes")
MATCH_KEYS = ("architectures", "model_types", "config")
VLLM_RANGE_KEYS = ("min", "max")
SPECULATIVE_REQUIRED = ("method", "num_speculative_tokens")

# Names are matched whole (safe_io.full_match, re.fullmatch): ``$`` alone also accepts one trailing newline, and an
# env name "FOO\n" renders an Environment= line systemd ignores, so the variable silently disappears.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RECIPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A vLLM release as pip and `vllm --version` write it: 0.28.0, v0.30, 0.11.1rc2, 0.31.0.post1,
# 0.32.0.dev5+g0123abc, 0.32.0+cpu (the local part after '+' is ignored).
_VERSION = re.compile(r"v?(\d+(?:\.\d+){0,3})(?:(a|b|rc)(\d+))?(?:\.?post(\d+))?(?:\.?dev(\d+))?(?:\+[0-9A-Za-z][0-9A-Za-z._-]*)?")
_PRE_RANK = {"a": 0, "b": 1, "rc": 2}


class RecipeError(ValueError):
    """A recipe, an entry's recipe fields or a recipe name is unusable; the message names where and what."""


# --------------------------------------------------------------------------
# Built-in recipes (data). Sources are cited per recipe; docs/recipes.md has the table.
# --------------------------------------------------------------------------

_VLLM_RECIPES = "https://github.com/vllm-project/recipes/blob/main/"
_TOOL_DOCS = "https://docs.vllm.ai/en/latest/features/tool_calling/"
_REASONING_DOCS = "https://docs.vllm.ai/en/latest/features/reasoning_outputs/"

RECIPES = [
    {
        "name": "kimi-k2.5",
        "title": "Kimi-K2.5 (Moonshot AI), also nvidia/Kimi-K2.5-NVFP4",
        "match": {"architectures": ["KimiK25ForConditionalGeneration"], "model_types": ["kimi_k25"]},
        "vllm": {"min": "0.15.0", "max": None},
        "fields": {"tool_call_parser": "kimi_k2", "reasoning_parser": "kimi_k2", "enable_auto_tool_choice": True,
                   "mm_encoder_tp_mode": "data"},
        "sources": [
            "https://docs.vllm.ai/projects/recipes/en/latest/moonshotai/Kimi-K2.5.html",
            "https://recipes.vllm.ai/moonshotai/Kimi-K2.5",
        ],
        "notes": (
            "vLLM's Kimi-K2.5 guide (8xH200, GB200, NVFP4 on Blackwell, MI300X/MI355X) runs every deployment with "
            "--tool-call-parser kimi_k2 --reasoning-parser kimi_k2 --enable-auto-tool-choice --mm-encoder-tp-mode "
            "data: the two parsers move <think> text into the reasoning field and Kimi's <|tool_calls_section_begin|> "
            "markup into tool_calls; 'data' runs the MoonViT encoder data-parallel instead of sharding its small "
            "weights over the TP group (harmless for text-only traffic). The guide asks for vLLM >= 0.15.0 (the "
            "first release with KimiK25ForConditionalGeneration); the parser names exist since 0.11.1. Left out: "
            "--trust-remote-code (the guide uses it; not a recipe field: set the service's trust_remote_code), "
            "Eagle3 speculative decoding (needs a separate draft checkpoint and vLLM >= 0.18.0), ROCm-only "
            "variables and --moe-backend flydsl (MI355X only). Thinking is on by default; clients turn it off per "
            "request with chat_template_kwargs {\"thinking\": false}."),
    },
    {
        "name": "minimax-m2",
        "title": "MiniMax-M2 / M2.1 / M2.5 (MiniMax), also nvidia/MiniMax-M2.5-NVFP4",
        "match": {"architectures": ["MiniMaxM2ForCausalLM"], "model_types": ["minimax_m2"]},
        "vllm": {"min": "0.11.1", "max": None},
        "fields": {"tool_call_parser": "minimax_m2", "reasoning_parser": "minimax_m2_append_think",
                   "enable_auto_tool_choice": True},
        "sources": [
            _VLLM_RECIPES + "MiniMax/MiniMax-M2.md",
            _VLLM_RECIPES + "MiniMax/MiniMax-M2.5.md",
            "https://huggingface.co/MiniMaxAI/MiniMax-M2.5/blob/main/docs/vllm_deploy_guide.md",
            _REASONING_DOCS,
        ],
        "notes": (
            "vLLM's MiniMax-M2 series guide and MiniMax's own vLLM deploy guide both serve M2.5 with "
            "--tool-call-parser minimax_m2 --reasoning-parser minimax_m2_append_think --enable-auto-tool-choice, "
            "and vLLM's reasoning table lists minimax_m2_append_think for MiniMax-M2. That parser keeps the "
            "<think>...</think> block at the start of content (no separate reasoning field) on purpose: MiniMax "
            "asks clients to send the reasoning back in later turns (interleaved thinking), and OpenAI-style "
            "clients resend content but drop a reasoning field. For a separate reasoning field set "
            "reasoning_parser: minimax_m2 in the entry (the guide offers it for the Responses API). No "
            "speculative decoding: the checkpoint's config ships MTP modules (use_mtp, num_mtp_modules: 3) but "
            "vLLM has no MTP drafter for MiniMax-M2 (0.32.0's speculative methods have minimax_m3_mtp only, and no "
            "MiniMaxM2 MTP architecture is registered), so enabling it would fail at load. The parsers appeared "
            "in vLLM 0.11.1 (absent from 0.11.0's registries). Left out: SAFETENSORS_FAST_GPU=1 (MiniMax's guide "
            "sets it; a load-speed switch of the safetensors library, not needed for correct serving), "
            "--trust-remote-code (the architecture is native in vLLM), B200-only variables. The guide notes pure "
            "TP8 is not supported (use TP4, TP8+EP or DP+EP): that is the planner's concern."),
    },
    {
        "name": "qwen3",
        "title": "Qwen3 dense and MoE (Qwen), e.g. Qwen3-30B-A3B, Qwen3-235B-A22B and their FP8 checkpoints",
        "match": {"architectures": ["Qwen3ForCausalLM", "Qwen3MoeForCausalLM"], "model_types": ["qwen3", "qwen3_moe"]},
        "vllm": {"min": "0.9.0", "max": None},
        "fields": {"tool_call_parser": "hermes", "reasoning_parser": "qwen3", "enable_auto_tool_choice": True},
        "sources": [
            _TOOL_DOCS,
            _REASONING_DOCS,
            "https://qwen.readthedocs.io/en/latest/framework/function_call.html#vllm",
        ],
        "notes": (
            "Qwen3 calls tools as JSON inside <tool_call>...</tool_call> (Hermes style): vLLM's tool-calling docs "
            "and Qwen's function-calling guide use --tool-call-parser hermes --enable-auto-tool-choice. vLLM 0.32 "
            "also registers qwen3_json, which is an alias of the same Hermes parser (tool_parsers/__init__.py) but "
            "does not exist in 0.28.0, so hermes is kept; qwen3_xml / qwen3_coder parse the XML "
            "<function=...><parameter=...> format of Qwen3-Coder, not of these models. Reasoning: vLLM's reasoning "
            "table lists qwen3 for the Qwen3 series (it needs both <think> and </think>, so output without a think "
            "block stays content); qwen3 first appears in vLLM 0.9.0 (0.8.5 has only deepseek_r1, which older "
            "guides used for Qwen3). Qwen3-Coder (also Qwen3MoeForCausalLM) needs tool_call_parser qwen3_coder and "
            "no reasoning parser: set them in its entry. Thinking is on by default; clients turn it off per "
            "request with chat_template_kwargs {\"enable_thinking\": false}."),
    },
    {
        "name": "kimi-k2",
        "title": "Kimi-K2-Instruct (Moonshot AI)",
        "match": {"architectures": ["DeepseekV3ForCausalLM"], "model_types": ["kimi_k2"]},
        "vllm": {"min": "0.10.0", "max": None},
        "fields": {"tool_call_parser": "kimi_k2", "enable_auto_tool_choice": True},
        "sources": [
            _VLLM_RECIPES + "Moonshotai/Kimi-K2.md",
            "https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/docs/deploy_guidance.md",
            _TOOL_DOCS,
        ],
        "notes": (
            "Kimi-K2 uses the DeepSeek-V3 architecture with model_type kimi_k2 (which is how it is told apart from "
            "DeepSeek-V3/R1). vLLM's Kimi-K2 guide: --enable-auto-tool-choice and --tool-call-parser kimi_k2 are "
            "required for tool use. Kimi-K2-Instruct is not a thinking model, so no reasoning parser. "
            "Kimi-K2-Thinking has the same architecture and model_type and cannot be told apart from config data: "
            "choose recipe: kimi-k2-thinking for it. kimi_k2 first appears in vLLM 0.10.0 (absent from 0.9.2)."),
    },
    {
        "name": "kimi-k2-thinking",
        "title": "Kimi-K2-Thinking (Moonshot AI); choose by name",
        "match": {"architectures": ["DeepseekV3ForCausalLM"], "model_types": ["kimi_k2"]},
        "vllm": {"min": "0.11.1", "max": None},
        "fields": {"tool_call_parser": "kimi_k2", "reasoning_parser": "kimi_k2", "enable_auto_tool_choice": True},
        "sources": [
            _VLLM_RECIPES + "moonshotai/Kimi-K2-Think.md",
            "https://huggingface.co/moonshotai/Kimi-K2-Thinking/blob/main/docs/deploy_guidance.md",
        ],
        "notes": (
            "Same architecture and model_type as Kimi-K2-Instruct, so 'auto' picks kimi-k2 first; select this "
            "recipe by name for Kimi-K2-Thinking. Adds --reasoning-parser kimi_k2, which first appears in vLLM "
            "0.11.1 (absent from 0.11.0's registry)."),
    },
    {
        "name": "deepseek-v3",
        "title": "DeepSeek-V3 / V3-0324 (DeepSeek)",
        "match": {"architectures": ["DeepseekV3ForCausalLM"], "model_types": ["deepseek_v3"]},
        "vllm": {"min": "0.9.0", "max": None},
        "fields": {"tool_call_parser": "deepseek_v3", "enable_auto_tool_choice": True},
        "sources": [
            _TOOL_DOCS,
            _VLLM_RECIPES + "DeepSeek/DeepSeek-V3.md",
        ],
        "notes": (
            "vLLM's tool-calling docs: DeepSeek-V3 models use --tool-call-parser deepseek_v3 with vLLM's "
            "examples/tool_chat_template_deepseekv3.jinja. That template is a file of vLLM's repository and is not "
            "copied here: chat_template is left unset; set chat_template to its path (from a vLLM checkout) in the "
            "entry for tool definitions to reach the prompt the way vLLM tested. No reasoning parser: V3 does not "
            "think. DeepSeek-R1 has the same architecture, model_type and config (the two config.json files differ "
            "only in transformers_version), so it cannot be told apart from config data: choose recipe: "
            "deepseek-r1 for it. MTP (num_nextn_predict_layers: 1) is not enabled: vLLM's DeepSeek-V3/R1 guide "
            "does not use speculative decoding, and one MTP token helps single-stream latency but costs KV memory "
            "and throughput at high concurrency; an entry can set speculative: {method: mtp, "
            "num_speculative_tokens: 1}. deepseek_v3 first appears in vLLM 0.9.0 (absent from 0.8.5)."),
    },
    {
        "name": "deepseek-r1",
        "title": "DeepSeek-R1 / R1-0528 (DeepSeek); choose by name",
        "match": {"architectures": ["DeepseekV3ForCausalLM"], "model_types": ["deepseek_v3"]},
        "vllm": {"min": "0.9.0", "max": None},
        "fields": {"tool_call_parser": "deepseek_v3", "reasoning_parser": "deepseek_r1",
                   "enable_auto_tool_choice": True},
        "sources": [
            _REASONING_DOCS,
            _TOOL_DOCS,
            _VLLM_RECIPES + "DeepSeek/DeepSeek-V3.md",
        ],
        "notes": (
            "Same match as deepseek-v3 ('auto' picks that one): select by name for R1. vLLM's reasoning docs use "
            "--reasoning-parser deepseek_r1 for the R1 series; its tool-calling docs list DeepSeek-R1-0528 with "
            "--tool-call-parser deepseek_v3 and examples/tool_chat_template_deepseekr1.jinja (vLLM's file, not "
            "copied: set chat_template to its path in the entry). The original DeepSeek-R1 was not trained for "
            "function calling: its entry can turn tools off with tool_call_parser: '' and "
            "enable_auto_tool_choice: false. MTP left off as for deepseek-v3."),
    },
    {
        "name": "gpt-oss",
        "title": "gpt-oss-20b / gpt-oss-120b (OpenAI)",
        "match": {"architectures": ["GptOssForCausalLM"], "model_types": ["gpt_oss"]},
        "vllm": {"min": "0.10.2", "max": None},
        "fields": {"tool_call_parser": "openai", "reasoning_parser": "openai_gptoss", "enable_auto_tool_choice": True,
                   "max_num_batched_tokens": 8192},
        "sources": [
            _VLLM_RECIPES + "OpenAI/GPT-OSS.md",
            _TOOL_DOCS,
        ],
        "notes": (
            "vLLM's GPT-OSS guide: function calling needs --tool-call-parser openai --enable-auto-tool-choice; its "
            "Hopper and Blackwell configs both set max-num-batched-tokens 8192. reasoning_parser openai_gptoss is "
            "what vLLM selects by itself for gpt_oss models (model_executor/models/config.py); it is written out so "
            "the preflight and readiness know the endpoint returns a reasoning field. Left out: kv-cache-dtype fp8 "
            "(Blackwell config only), no-enable-prefix-caching and stream-interval (benchmark settings, not recipe "
            "fields), Eagle3 (separate draft checkpoint). openai / openai_gptoss are first both present in the "
            "0.10.2 registries checked."),
    },
    {
        "name": "glm-4.x",
        "title": "GLM-4.5 / 4.6 / 4.7 (Z.ai), e.g. GLM-4.7-FP8",
        "match": {"architectures": ["Glm4MoeForCausalLM"], "model_types": ["glm4_moe"]},
        "vllm": {"min": "0.14.0", "max": None},
        "fields": {"tool_call_parser": "glm47", "reasoning_parser": "glm45", "enable_auto_tool_choice": True,
                   "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
        "sources": [
            _VLLM_RECIPES + "GLM/GLM.md",
            _TOOL_DOCS,
            _REASONING_DOCS,
        ],
        "notes": (
            "vLLM's GLM-4.X guide serves GLM-4.7-FP8 with --tool-call-parser glm47 --reasoning-parser glm45 "
            "--enable-auto-tool-choice and MTP speculative decoding (--speculative-config.method mtp "
            "--speculative-config.num_speculative_tokens 1), recommending 1 token because higher values lower the "
            "acceptance rate and the overall throughput. GLM-4.5/4.6 share the architecture and cannot be told "
            "apart from config data; glm47 parses both tool-call layouts (0.32 registers glm45 and glm47 to the "
            "same class). glm47 first appears in vLLM 0.14.0 (absent from 0.13.0). A checkpoint without the MTP "
            "layer (num_nextn_predict_layers 0, or a quantization that dropped it) needs speculative: {} in its "
            "entry."),
    },
    {
        "name": "glm-5",
        "title": "GLM-5 / GLM-5.1 (Z.ai), also GLM-5-FP8 and nvidia/GLM-5-NVFP4",
        "match": {"architectures": ["GlmMoeDsaForCausalLM"], "model_types": ["glm_moe_dsa"]},
        "vllm": {"min": "0.18.0", "max": None},
        "fields": {"tool_call_parser": "glm47", "reasoning_parser": "glm45", "enable_auto_tool_choice": True,
                   "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
        "sources": [
            _VLLM_RECIPES + "GLM/GLM5.md",
            _VLLM_RECIPES + "GLM/GLM.md",
        ],
        "notes": (
            "vLLM's GLM-5 guide (vllm >= 0.18.0 with transformers >= 5.4.0) serves GLM-5-FP8 with "
            "--tool-call-parser glm47 --reasoning-parser glm45 --enable-auto-tool-choice and MTP. Its 8xH200 "
            "command uses 3 speculative tokens, but its own benchmark shows 21% acceptance at 3 (acceptance length "
            "1.64) and the GLM-4.X guide recommends 1 token for throughput, so this recipe uses 1; an entry can set "
            "speculative: {method: mtp, num_speculative_tokens: 3}. If a quantized checkpoint lacks the MTP layer "
            "set speculative: {} in its entry."),
    },
    {
        "name": "llama-3.1",
        "title": "Llama 3.1 / 3.2 / 3.3 (Meta), e.g. Llama-3.1-70B-Instruct and its FP8 checkpoints",
        "match": {"architectures": ["LlamaForCausalLM"], "model_types": ["llama"],
                  "config": {"vocab_size": 128256, "max_position_embeddings": 131072}},
        "vllm": {"min": "0.8.5", "max": None},
        "fields": {"tool_call_parser": "llama3_json", "enable_auto_tool_choice": True},
        "sources": [
            _TOOL_DOCS,
        ],
        "notes": (
            "Matched on vocab_size 128256 (the Llama 3 tokenizer) and max_position_embeddings 131072 (3.1 and "
            "later; Llama 3.0 has 8192 and no tool calling), so other LlamaForCausalLM models (Llama 2, TinyLlama, "
            "the rig's tiny-llama with vocab 512) get no recipe. vLLM's tool-calling docs: --tool-call-parser "
            "llama3_json with examples/tool_chat_template_llama3.1_json.jinja (vLLM's file, not copied: "
            "chat_template is left unset; set it to that path in the entry to use it; the model's own template "
            "also supports JSON tool calls). Parallel tool calls are not supported for Llama 3. Base checkpoints "
            "(Meta-Llama-3.1-70B) have no chat template and cannot serve chat requests at all. llama3_json is "
            "present in 0.8.5, the oldest release checked."),
    },
    {
        "name": "mixtral-8x22b",
        "title": "Mixtral-8x22B-Instruct-v0.1 (Mistral AI)",
        "match": {"architectures": ["MixtralForCausalLM"], "model_types": ["mixtral"], "config": {"vocab_size": 32768}},
        "vllm": {"min": "0.8.5", "max": None},
        "fields": {"tool_call_parser": "mistral", "enable_auto_tool_choice": True},
        "sources": [
            _TOOL_DOCS,
            "https://huggingface.co/mistralai/Mixtral-8x22B-Instruct-v0.1",
        ],
        "notes": (
            "vLLM's tool-calling docs: Mistral function-calling models use --tool-call-parser mistral (Mistral's "
            "own tokenizer format, the default 'auto' tokenizer mode). Only the v3-tokenizer Mixtral (vocab 32768, "
            "with the [TOOL_CALLS] token) calls tools. mistral is present in 0.8.5, the oldest release checked."),
    },
    {
        "name": "mixtral-8x7b",
        "title": "Mixtral-8x7B v0.1 (Mistral AI): nothing to set",
        "match": {"architectures": ["MixtralForCausalLM"], "model_types": ["mixtral"], "config": {"vocab_size": 32000}},
        "vllm": {"min": "0.8.5", "max": None},
        "fields": {},
        "sources": [
            _TOOL_DOCS,
            "https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1",
        ],
        "notes": (
            "Mixtral-8x7B (v1 tokenizer, vocab 32000) has no tool-call tokens and no reasoning: vLLM's mistral "
            "parser looks for [TOOL_CALLS], which this tokenizer lacks, so no parser is set and tool_choice 'auto' "
            "stays refused. The recipe exists so the preflight says why nothing is set."),
    },
]


# --------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------

def parse_version(text, where="vLLM version"):
    """'0.28.0' -> (0, 28, 0, 0, 3, 0, -1, 1, 0); '0.11.1rc2' sorts before '0.11.1'; '+cpu' is ignored.

    Raises RecipeError naming ``where`` for anything that is not a release number."""
    match = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise RecipeError("%s: bad vLLM version %r (expected a release like 0.28.0, 0.11.1rc2 or 0.32.0+cpu)"
                          % (where, text))
    release, pre, pre_n, post_n, dev_n = match.groups()
    parts = [int(part) for part in release.split(".")]
    parts = (parts + [0, 0, 0])[:4]
    pre_rank = _PRE_RANK[pre] if pre else 3
    if pre is None and post_n is None and dev_n is not None:
        pre_rank = -1  # 0.32.0.dev5 comes before 0.32.0a1
    return tuple(parts) + (pre_rank, int(pre_n or 0), int(post_n) if post_n is not None else -1,
                           0 if dev_n is not None else 1, int(dev_n or 0))


def range_text(vllm_range):
    """'>= 0.15.0' or '>= 0.15.0 and <= 0.20.0' for a recipe's ``vllm`` dict."""
    text = ">= %s" % vllm_range["min"]
    if vllm_range.get("max"):
        text += " and <= %s" % vllm_range["max"]
    return text


def holds_for(recipe, vllm_version):
    """Whether ``vllm_version`` is inside the recipe's range (True when the recipe has none)."""
    vllm_range = recipe.get("vllm")
    if not vllm_range:
        return True
    version = parse_version(vllm_version)
    if version < parse_version(vllm_range["min"]):
        return False
    return not vllm_range.get("max") or version <= parse_version(vllm_range["max"])


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------

def _type_name(value):
    if value is None:
        return "null"
    return type(value).__name__


def _fail(where, field, expected, value):
    raise RecipeError("%s.%s must be %s, got %r (%s)" % (where, field, expected, value, _type_name(value)))


def check_field(where, field, value):
    """RecipeError unless ``value`` suits recipe field ``field``; None is accepted (not given)."""
    if field not in RECIPE_FIELDS:
        raise RecipeError("%s: unknown field %r (known: %s)" % (where, field, ", ".join(RECIPE_FIELDS)))
    if value is None:
        return
    if field in STR_FIELDS:
        if not isinstance(value, str):
            _fail(where, field, "a string", value)
        _check_one_line(where, field, value)
    elif field == "enable_auto_tool_choice":
        if not isinstance(value, bool):
            _fail(where, field, "a boolean", value)
    elif field in POSITIVE_INT_FIELDS:
        if not is_int(value) or value <= 0:
            _fail(where, field, "an integer > 0", value)
    elif field == "gpu_memory_utilization":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            _fail(where, field, "a number in (0, 1]", value)
    elif field == "speculative":
        _check_speculative(where, value)
    else:
        _check_env(where, value)


def _check_speculative(where, value):
    """{} (off) or {method: str, num_speculative_tokens: int > 0, model: str, other str/int/float/bool keys}."""
    if not isinstance(value, dict):
        _fail(where, "speculative", "a dict like {method: mtp, num_speculative_tokens: 1}", value)
    if not value:
        return
    for key in SPECULATIVE_REQUIRED:
        if key not in value:
            raise RecipeError("%s.speculative: missing required key %r (needs %s)"
                              % (where, key, " and ".join(SPECULATIVE_REQUIRED)))
    if not isinstance(value["method"], str) or not value["method"]:
        _fail(where, "speculative.method", "a non-empty string", value["method"])
    if not is_int(value["num_speculative_tokens"]) or value["num_speculative_tokens"] <= 0:
        _fail(where, "speculative.num_speculative_tokens", "an integer > 0", value["num_speculative_tokens"])
    if "model" in value and not isinstance(value["model"], str):
        _fail(where, "speculative.model", "a string", value["model"])
    for key, item in value.items():
        if not full_match(_SPEC_KEY, key):
            raise RecipeError("%s.speculative: bad key %r (expected a name like num_speculative_tokens)" % (where, key))
        if item is None or not isinstance(item, (str, int, float)):
            _fail(where, "speculative.%s" % key, "a string, integer, float or boolean", item)


def _check_env(where, value):
    """A dict of variable name (like a shell variable) -> string value."""
    if not isinstance(value, dict):
        _fail(where, "env", "a dict of NAME: 'value' strings", value)
    for name, item in value.items():
        if not full_match(_ENV_NAME, name):
            raise RecipeError("%s.env: bad variable name %r (letters, digits and _, not starting with a digit)"
                              % (where, name))
        if not isinstance(item, str):
            _fail(where, "env.%s" % name, "a string (quote numbers in YAML)", item)
        _check_one_line(where, "env.%s" % name, item)


def _check_one_line(where, field, value):
    """A value written into the unit (an Environment= line, a word of ExecStart=) holds no line break or NUL: one
    would end that line and make the rest a directive of its own."""
    single_line(value, "%s.%s" % (where, field), RecipeError)


def check_fields(where, fields):
    """RecipeError unless ``fields`` is a dict of known recipe fields with suitable values."""
    if not isinstance(fields, dict):
        raise RecipeError("%s must be a dict of recipe fields (%s), got %r" % (where, ", ".join(RECIPE_FIELDS), fields))
    for field in fields:
        check_field(where, field, fields[field])
    return fields


def _check_keys(where, value, known):
    if not isinstance(value, dict):
        raise RecipeError("%s must be a dict, got %r (%s)" % (where, value, _type_name(value)))
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise RecipeError("%s: unknown key(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(known)))


def _check_str_list(where, value, required):
    if value is None and not required:
        return
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise RecipeError("%s must be a non-empty list of strings, got %r" % (where, value))


def _check_match(where, match):
    _check_keys(where + ".match", match, MATCH_KEYS)
    if "architectures" not in match:
        raise RecipeError("%s.match: missing required key 'architectures'" % where)
    _check_str_list(where + ".match.architectures", match["architectures"], True)
    _check_str_list(where + ".match.model_types", match.get("model_types"), False)
    config = match.get("config")
    if config is None:
        return
    if not isinstance(config, dict):
        raise RecipeError("%s.match.config must be a dict of normalised model keys, got %r" % (where, config))
    for key, item in config.items():
        if not isinstance(key, str) or isinstance(item, (dict, list)):
            raise RecipeError("%s.match.config: %r must be a model key with a plain value (string, number, boolean "
                              "or null), got %r" % (where, key, item))


def _check_vllm_range(where, vllm_range):
    _check_keys(where + ".vllm", vllm_range, VLLM_RANGE_KEYS)
    if "min" not in vllm_range:
        raise RecipeError("%s.vllm: missing required key 'min' (the first vLLM release the recipe holds for)" % where)
    low = parse_version(vllm_range["min"], where + ".vllm.min")
    if vllm_range.get("max") is not None:
        high = parse_version(vllm_range["max"], where + ".vllm.max")
        if high < low:
            raise RecipeError("%s.vllm: max %s is below min %s" % (where, vllm_range["max"], vllm_range["min"]))


def check_recipe(recipe, where):
    """RecipeError naming ``where`` and the key or field at fault; returns the recipe."""
    _check_keys(where, recipe, RECIPE_KEYS)
    name = recipe.get("name")
    if not full_match(_RECIPE_NAME, name) or name in ("auto", "none"):
        raise RecipeError("%s.name must be a recipe name like kimi-k2.5 (letters, digits, '.', '_', '-'; not "
                          "'auto' or 'none'), got %r" % (where, name))
    where = "%s (recipe %s)" % (where, name)
    for key in ("title", "notes"):
        if recipe.get(key) is not None and not isinstance(recipe[key], str):
            _fail(where, key, "a string", recipe[key])
    if "match" not in recipe:
        raise RecipeError("%s: missing required key 'match' (with architectures)" % where)
    _check_match(where, recipe["match"])
    if recipe.get("vllm") is not None:
        _check_vllm_range(where, recipe["vllm"])
    _check_str_list(where + ".sources", recipe.get("sources"), False)
    fields = recipe.get("fields")
    check_fields(where + ".fields", {} if fields is None else fields)
    return recipe


def check_user_recipes(user_recipes, where="vllm_deploy_recipes"):
    """Check every user recipe (RecipeError names ``where[i]``) and refuse duplicate names; returns a list."""
    if user_recipes is None:
        return []
    if not isinstance(user_recipes, (list, tuple)):
        raise RecipeError("%s must be a list of recipes, got %r" % (where, user_recipes))
    seen = {}
    for index, recipe in enumerate(user_recipes):
        check_recipe(recipe, "%s[%d]" % (where, index))
        if recipe["name"] in seen:
            raise RecipeError("%s[%d]: recipe name %r is already used by %s[%d]"
                              % (where, index, recipe["name"], where, seen[recipe["name"]]))
        seen[recipe["name"]] = index
    return list(user_recipes)


# --------------------------------------------------------------------------
# Matching and resolution
# --------------------------------------------------------------------------

def matches(recipe, model):
    """Whether ``recipe`` is for ``model`` (a normalised model dict)."""
    match = recipe["match"]
    if model.get("architecture") not in match["architectures"]:
        return False
    if match.get("model_types") and model.get("model_type") not in match["model_types"]:
        return False
    config = match.get("config") or {}
    return all(key in model and model[key] == config[key] for key in config)


def _describe(model):
    text = "architecture %s" % model.get("architecture")
    if model.get("model_type"):
        text += " (model_type %s)" % model["model_type"]
    return text


def _out_of_range(recipe, vllm_version):
    return "recipe %s holds for vLLM %s; %s gets none" % (recipe["name"], range_text(recipe["vllm"]), vllm_version)


def _in_range_text(recipe, vllm_version):
    if vllm_version is None:
        return "vLLM version unknown, range not checked"
    if not recipe.get("vllm"):
        return "no vLLM range given"
    return "holds for vLLM %s, %s is in range" % (range_text(recipe["vllm"]), vllm_version)


def _find_auto(model, vllm_version, candidates):
    """First candidate that matches the model and holds for the version; else why none."""
    skipped = []
    for recipe in candidates:
        if not matches(recipe, model):
            continue
        if vllm_version is None or holds_for(recipe, vllm_version):
            reason = "recipe %s matches %s; %s" % (recipe["name"], _describe(model), _in_range_text(recipe, vllm_version))
            if skipped:
                reason += " (skipped: %s)" % "; ".join(skipped)
            return recipe, reason
        skipped.append(_out_of_range(recipe, vllm_version))
    if skipped:
        return None, "; ".join(skipped)
    return None, "no recipe for %s" % _describe(model)


def _find_named(model, vllm_version, name, candidates):
    """The candidate called ``name`` (RecipeError if none, or if it does not hold for the version)."""
    for recipe in candidates:
        if recipe["name"] != name:
            continue
        if vllm_version is not None and not holds_for(recipe, vllm_version):
            raise RecipeError("recipe %r was chosen by name but holds for vLLM %s, not %s: upgrade vLLM, set "
                              "recipe: none, or give the fields in the entry"
                              % (name, range_text(recipe["vllm"]), vllm_version))
        if matches(recipe, model):
            how = "matches %s" % _describe(model)
        else:
            how = "applied although it is for architectures %s, not %s" % (
                ", ".join(recipe["match"]["architectures"]), _describe(model))
        return recipe, "recipe %s chosen by name; %s; %s" % (name, how, _in_range_text(recipe, vllm_version))
    known = sorted(set(recipe["name"] for recipe in candidates))
    raise RecipeError("unknown recipe %r (known: %s)" % (name, ", ".join(known)))


def find_recipe(model, vllm_version, name="auto", user_recipes=()):
    """(recipe or None, reason) for ``model`` on ``vllm_version`` (None: unknown, range not checked).

    ``name``: 'auto' (user recipes first, then the built-ins; the first that matches the model and holds
    for the version), 'none' (no recipe), or a recipe's name (user's, then built-in)."""
    if name is None:
        name = "auto"
    if not isinstance(name, str) or not name:
        raise RecipeError("recipe must be 'auto', 'none' or a recipe name, got %r" % (name,))
    if not isinstance(model, dict):
        raise RecipeError("model must be a normalised model dict, got %r" % (model,))
    if vllm_version is not None:
        parse_version(vllm_version)
    candidates = check_user_recipes(user_recipes) + list(RECIPES)
    if name == "none":
        return None, "recipes turned off"
    if name == "auto":
        return _find_auto(model, vllm_version, candidates)
    return _find_named(model, vllm_version, name, candidates)


def _recipe_info(recipe, reason):
    if recipe is None:
        return {"name": None, "title": None, "applied": False, "reason": reason, "sources": [], "vllm": None,
                "notes": None}
    return {"name": recipe["name"], "title": recipe.get("title") or recipe["name"], "applied": True,
            "reason": reason, "sources": list(recipe.get("sources") or []),
            "vllm": copy.deepcopy(recipe.get("vllm")), "notes": recipe.get("notes")}


def merge_fields(recipe_fields, entry_fields):
    """(serving, origin): the recipe's fields, then the entry's (None = not given) over them."""
    serving = dict((field, None) for field in RECIPE_FIELDS)
    serving["env"] = {}
    origin = {}
    for field, value in (recipe_fields or {}).items():
        if value is not None:
            serving[field] = copy.deepcopy(value)
            origin[field] = "recipe"
    for field, value in (entry_fields or {}).items():
        if value is None:
            continue
        if field == "env" and value:
            merged = dict(serving["env"])
            merged.update(value)
            value = merged
        serving[field] = copy.deepcopy(value)
        origin[field] = "entry"
    return serving, origin


def resolve_serving(model, vllm_version, entry_fields, name="auto", user_recipes=()):
    """The recipe that applies and the effective value of every recipe field.

    Returns {"recipe": {name, title, applied, reason, sources, vllm, notes}, "serving": {field: value for
    every RECIPE_FIELDS entry}, "origin": {field: "recipe" | "entry"} for the fields that are set}."""
    check_fields("entry", entry_fields or {})
    recipe, reason = find_recipe(model, vllm_version, name, user_recipes)
    serving, origin = merge_fields(recipe.get("fields") if recipe else None, entry_fields)
    return {"recipe": _recipe_info(recipe, reason), "serving": serving, "origin": origin}
