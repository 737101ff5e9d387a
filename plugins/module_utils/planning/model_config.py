# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read a Hugging Face ``config.json`` (plus an optional ModelOpt
``hf_quant_config.json`` sidecar) and normalise the facts a vLLM deployment
planner needs into one flat, documented dictionary.

Only the Python standard library is used, so this runs on any managed node
with Python 3.8 or later.

Normalisation rules (see also the module documentation of
``gauntlet.vllm.model_config_info``):

* Multimodal wrappers (for example Kimi-K2.5) keep the language model under
  ``text_config``; when a ``text_config`` object exists every language-model
  field is read from it (as vLLM's ``get_hf_text_config`` does), while
  ``architecture`` and ``model_type`` come from the top level, which is what
  vLLM loads.  ``text_architecture`` / ``text_model_type`` report the inner
  values.
* ``quantization_config`` is looked up at the top level first, then inside
  ``text_config``.  A ModelOpt ``hf_quant_config.json`` is only used when
  ``config.json`` has no ``quantization_config`` (vLLM's precedence); its path
  is reported in ``source`` whenever it exists.
* Experts: ``num_experts`` | ``n_routed_experts`` | ``num_local_experts``; a
  missing, null or zero count means a dense model (``num_experts`` null).
  Per-token experts: ``num_experts_per_tok`` | ``experts_per_token``.
* Mixtral, MiniMax and gpt-oss have no ``moe_intermediate_size``: their
  ``intermediate_size`` *is* the expert FFN width, so for MoE models without
  ``moe_intermediate_size`` it is copied from ``intermediate_size``.
* ``head_dim``: explicit ``head_dim``, else ``hidden_size //
  num_attention_heads``.  For MLA models (``kv_lora_rank`` present) the real
  attention dimensions are in ``mla``; ``num_key_value_heads`` is reported as
  configured even though vLLM caches MLA KV as a single latent "head" of
  ``kv_lora_rank + qk_rope_head_dim`` elements.
* ``num_key_value_heads`` defaults to ``num_attention_heads`` when absent
  (the Hugging Face convention for models without GQA).
* ``sliding_window``: the layers that attend to the last ``sliding_window``
  tokens only, as vLLM 0.24 builds them: the ``sliding_attention`` entries
  of ``layer_types`` (gpt-oss: every other layer; Llama-family models in
  ``vllm/model_executor/models/llama.py``). A ``sliding_window`` without
  ``layer_types`` (Mistral-7B-v0.1) windows no layer there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import is_int, json_type_name, read_json_object

CONFIG_FILE_NAME = "config.json"
HF_QUANT_FILE_NAME = "hf_quant_config.json"

# The most bytes read from a file read whole (safe_io.read_json_object): a config.json is a few KiB; an
# hf_quant_config.json listing every layer of a mixed-precision model a few MiB.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_HF_QUANT_BYTES = 64 * 1024 * 1024

# Fields every language model config must carry (``intermediate_size`` is
# additionally required for dense models).
REQUIRED_FIELDS = (
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "vocab_size",
)

EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "experts_per_token")
SHARED_INTERMEDIATE_KEYS = ("shared_expert_intermediate_size", "shared_intermediate_size")
IGNORED_MODULE_KEYS = ("ignore", "modules_to_not_convert", "exclude_modules", "ignored_layers")

# Keys of ``model`` whose value is an int (or null where documented).
INT_FIELDS = (
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_experts",
    "num_experts_per_tok",
    "num_shared_experts",
    "shared_expert_intermediate_size",
    "first_k_dense",
    "num_hidden_layers",
    "vocab_size",
    "max_position_embeddings",
)
MLA_INT_FIELDS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")

# vLLM's quantization method names for ModelOpt checkpoints, by quant_algo.
MODELOPT_METHODS = {
    "FP8": "modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN": "modelopt",
    "FP8_PB_WO": "modelopt",
    "NVFP4": "modelopt_fp4",
    "MXFP8": "modelopt_mxfp8",
    "MIXED_PRECISION": "modelopt_mixed",
}
# Weight bits and default group size implied by a ModelOpt quant_algo.
MODELOPT_ALGO_BITS = {
    "FP8": 8,
    "FP8_PER_CHANNEL_PER_TOKEN": 8,
    "FP8_PB_WO": 8,
    "MXFP8": 8,
    "NVFP4": 4,
    "NVFP4_AWQ": 4,
    "INT4_AWQ": 4,
    "W4A8_AWQ": 4,
    "INT8_SQ": 8,
}
MODELOPT_ALGO_GROUP = {"NVFP4": 16, "NVFP4_AWQ": 16, "MXFP8": 32}


class ModelConfigError(Exception):
    """A model configuration could not be read or is not usable.

    The message always names the file and, where one is at fault, the field.
    """


# --------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------

def resolve_config_path(path):
    """Return the ``config.json`` path for ``path`` (a file or a model directory)."""
    if path is None or path == "":
        raise ModelConfigError("no model config path given")
    path = os.path.expanduser(str(path))
    if os.path.isdir(path):
        candidate = os.path.join(path, CONFIG_FILE_NAME)
        if not os.path.isfile(candidate):
            raise ModelConfigError(
                "%s: directory does not contain %s" % (path, CONFIG_FILE_NAME))
        return candidate
    if not os.path.exists(path):
        raise ModelConfigError("%s: no such file or directory" % path)
    if not os.path.isfile(path):
        raise ModelConfigError("%s: not a regular file or directory" % path)
    return path


def find_hf_quant_path(config_path):
    """Return the ``hf_quant_config.json`` beside ``config_path``, or None."""
    candidate = os.path.join(os.path.dirname(config_path), HF_QUANT_FILE_NAME)
    if os.path.isfile(candidate):
        return candidate
    return None


def load_model_config(path, hf_quant_path=None, discover_hf_quant=True):
    """Read and normalise a model config.

    :arg path: a ``config.json`` file or a directory holding one.
    :kwarg hf_quant_path: explicit ModelOpt ``hf_quant_config.json`` to pair
        with the config (it must exist); when None and ``discover_hf_quant``
        is true, ``hf_quant_config.json`` beside the config is used if present.
    :returns: the normalised ``model`` dictionary.
    :raises ModelConfigError: on any unreadable or unusable input.
    """
    config_path = resolve_config_path(path)
    if hf_quant_path is not None:
        hf_quant_path = os.path.expanduser(str(hf_quant_path))
        if not os.path.isfile(hf_quant_path):
            raise ModelConfigError("%s: no such file" % hf_quant_path)
    elif discover_hf_quant:
        hf_quant_path = find_hf_quant_path(config_path)
    config = read_json_object(config_path, ModelConfigError, MAX_CONFIG_BYTES)
    hf_quant = read_json_object(hf_quant_path, ModelConfigError, MAX_HF_QUANT_BYTES) if hf_quant_path else None
    return normalize_model_config(config, hf_quant=hf_quant,
                                  config_path=config_path, hf_quant_path=hf_quant_path)


# --------------------------------------------------------------------------
# Field helpers
# --------------------------------------------------------------------------

class _Reader(object):
    """Typed access to one JSON object, with error messages naming the file."""

    def __init__(self, data, filename, prefix="", looked_in=None):
        self.data = data
        self.filename = filename
        self.prefix = prefix
        self.looked_in = looked_in

    def name(self, key):
        return "'%s%s'" % (self.prefix, key)

    def fail(self, msg):
        raise ModelConfigError("%s: %s" % (self.filename, msg))

    def has(self, key):
        return self.data.get(key) is not None

    def first_key(self, keys):
        for key in keys:
            if self.has(key):
                return key
        return None

    def missing(self, key):
        if self.looked_in and self.prefix == self.looked_in + ".":
            self.fail("missing required field '%s' (looked in %s)" % (key, self.looked_in))
        self.fail("missing required field %s" % self.name(key))

    def bad(self, key, value, expected):
        self.fail("field %s must be %s, got %s (%s)"
                  % (self.name(key), expected, json.dumps(value), json_type_name(value)))

    def get_int(self, key, required=False, minimum=1, default=None):
        value = self.data.get(key)
        if value is None:
            if required:
                self.missing(key)
            return default
        if not is_int(value) or value < minimum:
            expected = "a positive integer" if minimum >= 1 else "a non-negative integer"
            self.bad(key, value, expected)
        return value

    def get_bool(self, key):
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.bad(key, value, "a boolean")
        return value

    def get_str(self, key, required=False):
        value = self.data.get(key)
        if value is None:
            if required:
                self.missing(key)
            return None
        if not isinstance(value, str):
            self.bad(key, value, "a string")
        return value

    def get_obj(self, key):
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.bad(key, value, "an object")
        return value

    def get_str_list(self, key):
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.bad(key, value, "a list of strings")
        return list(value)

    def get_int_list(self, key):
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(is_int(v) and v > 0 for v in value):
            self.bad(key, value, "a list of positive integers")
        return list(value)

    def child(self, key):
        """Reader for the nested object ``key`` (None when absent)."""
        value = self.get_obj(key)
        if value is None:
            return None
        return _Reader(value, self.filename, prefix="%s%s." % (self.prefix, key),
                       looked_in=self.looked_in)


# --------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------

def normalize_model_config(config, hf_quant=None, config_path=CONFIG_FILE_NAME, hf_quant_path=None):
    """Normalise an already-loaded ``config.json`` dictionary.

    :arg config: the parsed ``config.json``.
    :kwarg hf_quant: the parsed ``hf_quant_config.json`` or None.
    :kwarg config_path: file name used in messages and in ``source``.
    :kwarg hf_quant_path: file name of ``hf_quant`` (messages and ``source``).
    """
    _require_objects(config, hf_quant, config_path, hf_quant_path)
    top = _Reader(config, config_path)
    text = _text_config(top, config_path)
    lm = text if text is not None else top
    architecture, text_architecture = _architectures(top, text)
    model_type, text_model_type = _model_types(top, text)
    dims = _dimensions(lm)
    experts = _experts(lm)
    mla = _mla(lm)
    sliding_window = _sliding_window(lm, dims["num_hidden_layers"])
    tie = _tie_word_embeddings(top, text)
    quantization = _quantization(top, text, hf_quant, hf_quant_path)

    return {
        "architecture": architecture,
        "model_type": model_type,
        "text_architecture": text_architecture,
        "text_model_type": text_model_type,
        "text_config": text is not None,
        "num_attention_heads": dims["num_attention_heads"],
        "num_key_value_heads": dims["num_key_value_heads"],
        "head_dim": dims["head_dim"],
        "hidden_size": dims["hidden_size"],
        "intermediate_size": experts["intermediate_size"],
        "moe_intermediate_size": experts["moe_intermediate_size"],
        "num_experts": experts["num_experts"],
        "num_experts_per_tok": experts["num_experts_per_tok"],
        "num_shared_experts": experts["num_shared_experts"],
        "shared_expert_intermediate_size": experts["shared_expert_intermediate_size"],
        "first_k_dense": experts["first_k_dense"],
        "num_hidden_layers": dims["num_hidden_layers"],
        "vocab_size": dims["vocab_size"],
        "max_position_embeddings": lm.get_int("max_position_embeddings"),
        "tie_word_embeddings": tie,
        "mla": mla,
        "sliding_window": sliding_window,
        "quantization": quantization,
        "source": {
            "config": config_path,
            "hf_quant_config": hf_quant_path if hf_quant is not None else None,
        },
    }


def _require_objects(config, hf_quant, config_path, hf_quant_path):
    """``config`` (and ``hf_quant`` when given) must be JSON objects."""
    if not isinstance(config, dict):
        raise ModelConfigError("%s: expected a JSON object at the top level, got %s"
                               % (config_path, json_type_name(config)))
    if hf_quant is not None and not isinstance(hf_quant, dict):
        raise ModelConfigError("%s: expected a JSON object at the top level, got %s"
                               % (hf_quant_path or HF_QUANT_FILE_NAME, json_type_name(hf_quant)))


def _text_config(top, config_path):
    """A reader for the multimodal wrapper's ``text_config`` (where the language model is), or None."""
    text_config = top.get_obj("text_config")
    if text_config is None:
        return None
    return _Reader(text_config, config_path, prefix="text_config.", looked_in="text_config")


def _model_types(top, text):
    """Return (model_type, text_model_type); the top level's model_type falls back to text_config's."""
    model_type = top.get_str("model_type")
    text_model_type = text.get_str("model_type") if text is not None else None
    if model_type is None:
        model_type = text_model_type
    return model_type, text_model_type


def _dimensions(lm):
    """The attention and embedding dimensions, ``head_dim`` derived when it is not set."""
    hidden_size = lm.get_int("hidden_size", required=True)
    num_heads = lm.get_int("num_attention_heads", required=True)
    num_layers = lm.get_int("num_hidden_layers", required=True)
    vocab_size = lm.get_int("vocab_size", required=True)
    num_kv_heads = lm.get_int("num_key_value_heads", default=num_heads)

    head_dim = lm.get_int("head_dim")
    if head_dim is None:
        if hidden_size % num_heads:
            lm.fail("cannot derive head_dim: %s %d is not divisible by %s %d and no %s is set"
                    % (lm.name("hidden_size"), hidden_size, lm.name("num_attention_heads"),
                       num_heads, lm.name("head_dim")))
        head_dim = hidden_size // num_heads
    return {"hidden_size": hidden_size, "num_attention_heads": num_heads, "num_hidden_layers": num_layers,
            "vocab_size": vocab_size, "num_key_value_heads": num_kv_heads, "head_dim": head_dim}


def _experts(lm):
    """The FFN and expert fields; ``num_experts`` None for a dense model."""
    experts_key = lm.first_key(EXPERT_COUNT_KEYS)
    num_experts = lm.get_int(experts_key, minimum=0) if experts_key else None
    if not num_experts:
        num_experts = None
    fields = {
        "num_experts": num_experts,
        "intermediate_size": lm.get_int("intermediate_size", required=num_experts is None),
        "moe_intermediate_size": None,
        "num_experts_per_tok": None,
        "shared_expert_intermediate_size": None,
        "num_shared_experts": lm.get_int("n_shared_experts", minimum=0, default=0),
        "first_k_dense": lm.get_int("first_k_dense_replace", minimum=0, default=0),
    }
    if num_experts is not None:
        _moe(lm, experts_key, fields)
    return fields


def _moe(lm, experts_key, fields):
    """Fill ``fields``' MoE sizes: expert width, experts per token and shared experts."""
    intermediate_size = fields["intermediate_size"]
    moe_intermediate_size = lm.get_int("moe_intermediate_size")
    if moe_intermediate_size is None:
        # Mixtral / MiniMax / gpt-oss: intermediate_size is the expert width.
        if intermediate_size is None:
            lm.missing("moe_intermediate_size")
        moe_intermediate_size = intermediate_size
    fields["moe_intermediate_size"] = moe_intermediate_size
    per_tok_key = lm.first_key(EXPERTS_PER_TOKEN_KEYS)
    if per_tok_key is None:
        lm.missing(EXPERTS_PER_TOKEN_KEYS[0])
    num_experts_per_tok = lm.get_int(per_tok_key)
    if num_experts_per_tok > fields["num_experts"]:
        lm.fail("field %s (%d) exceeds the number of experts %s (%d)"
                % (lm.name(per_tok_key), num_experts_per_tok, lm.name(experts_key), fields["num_experts"]))
    fields["num_experts_per_tok"] = num_experts_per_tok
    if fields["first_k_dense"] and intermediate_size is None:
        lm.missing("intermediate_size")
    _shared_experts(lm, fields)


def _shared_experts(lm, fields):
    """Fill ``fields``' shared expert count and width."""
    shared_key = lm.first_key(SHARED_INTERMEDIATE_KEYS)
    if shared_key is not None:
        shared_intermediate = lm.get_int(shared_key, minimum=0)
        fields["shared_expert_intermediate_size"] = shared_intermediate
        if not lm.has("n_shared_experts"):
            # Qwen2-MoE: one shared expert of the stated width; MiniMax: 0 -> none.
            fields["num_shared_experts"] = 1 if shared_intermediate else 0
    elif fields["num_shared_experts"]:
        fields["shared_expert_intermediate_size"] = fields["num_shared_experts"] * fields["moe_intermediate_size"]


def _tie_word_embeddings(top, text):
    """``tie_word_embeddings`` of the language model, else (for a wrapper) of the top level."""
    tie = (text if text is not None else top).get_bool("tie_word_embeddings")
    if tie is None and text is not None:
        tie = top.get_bool("tie_word_embeddings")
    return tie


def _architectures(top, text):
    """Return (architecture, text_architecture)."""
    text_arch = None
    if text is not None:
        archs = text.get_str_list("architectures")
        text_arch = archs[0] if archs else None
    archs = top.get_str_list("architectures")
    if archs:
        return archs[0], text_arch
    if text_arch is not None:
        return text_arch, text_arch
    if archs is not None:
        top.bad("architectures", archs, "a non-empty list of strings")
    where = " (looked in text_config)" if text is not None else ""
    top.fail("missing required field 'architectures'%s" % where)


def _mla(lm):
    if not lm.has("kv_lora_rank"):
        return None
    mla = {
        "kv_lora_rank": lm.get_int("kv_lora_rank"),
        "q_lora_rank": lm.get_int("q_lora_rank"),  # null for DeepSeek-V2-Lite style models
    }
    for key in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        mla[key] = lm.get_int(key, required=True)
    return mla


def _sliding_window(lm, num_layers):
    """{"window": tokens, "layers": how many layers attend within it}, or None (every layer sees the whole context)."""
    window = lm.get_int("sliding_window", minimum=0)
    layer_types = lm.get_str_list("layer_types")
    if not window or layer_types is None:
        return None
    if len(layer_types) != num_layers:
        lm.fail("field %s lists %d layers, %s says %d"
                % (lm.name("layer_types"), len(layer_types), lm.name("num_hidden_layers"), num_layers))
    layers = layer_types.count("sliding_attention")
    return {"window": window, "layers": layers} if layers else None


# --------------------------------------------------------------------------
# Quantization
# --------------------------------------------------------------------------

def _quantization(top, text, hf_quant, hf_quant_path):
    quant = top.child("quantization_config")
    origin = "quantization_config"
    if quant is None and text is not None:
        quant = text.child("quantization_config")
        origin = "text_config.quantization_config"
    if quant is not None:
        # ModelOpt's hf_quant_config.json layout copied verbatim into config.json.
        producer = quant.get_obj("producer") or {}
        if producer.get("name") == "modelopt" and quant.get_obj("quantization") is not None:
            return _modelopt(quant.child("quantization"), quant, origin)
        return _from_quant_method(quant, origin)
    if hf_quant is not None:
        reader = _Reader(hf_quant, hf_quant_path or HF_QUANT_FILE_NAME)
        inner = reader.child("quantization")
        if inner is None:
            reader.missing("quantization")
        return _modelopt(inner, inner, "hf_quant_config")
    return None


def _result(method, scheme, bits, group_size, block_size, kv_cache_dtype, ignored, origin):
    return {
        "method": method,
        "scheme": scheme,
        "bits": bits,
        "group_size": group_size,
        "block_size": block_size,
        "kv_cache_dtype": kv_cache_dtype,
        "ignored_modules": ignored or [],
        "origin": origin,
    }


def _ignored(reader):
    for key in IGNORED_MODULE_KEYS:
        value = reader.get_str_list(key)
        if value is not None:
            return value
    return []


def _fmt_prefix(kind):
    return {"int": "int", "float": "fp"}.get(kind, kind or "")


def _kv_from_scheme(reader):
    """kv_cache_scheme ({num_bits, type}) -> 'fp8' / 'int8' / None."""
    scheme = reader.child("kv_cache_scheme")
    if scheme is None:
        return None
    bits = scheme.get_int("num_bits", required=True)
    kind = scheme.get_str("type") or "float"
    return "%s%d" % (_fmt_prefix(kind), bits)


def _kv_from_algo(reader):
    algo = reader.get_str("kv_cache_quant_algo")
    return algo.lower() if algo else None


def _weights(reader):
    """First (by name) compressed-tensors style config group's weight args."""
    groups = reader.child("config_groups")
    if groups is None or not groups.data:
        return None
    name = sorted(groups.data)[0]
    group = groups.child(name)
    return group.child("weights") if group is not None else None


def _from_quant_method(quant, origin):
    method_raw = quant.get_str("quant_method", required=True)
    method = method_raw.lower()
    if method == "modelopt":
        return _modelopt(quant, quant, origin)
    ignored = _ignored(quant)

    if method == "fp8":
        block = quant.get_int_list("weight_block_size")
        scheme = "fp8 block" if block else "fp8 per-tensor"
        kv = _kv_from_scheme(quant)
        return _result("fp8", scheme, 8, None, block, kv, ignored, origin)

    if method == "mxfp4":
        return _result("mxfp4", "mxfp4", 4, 32, None, _kv_from_scheme(quant), ignored, origin)

    if method == "compressed-tensors":
        weights = _weights(quant)
        bits = group = block = None
        scheme = quant.get_str("format") or "compressed-tensors"
        if weights is not None:
            bits = weights.get_int("num_bits")
            group = weights.get_int("group_size")
            block = weights.get_int_list("block_structure")
            kind = weights.get_str("type") or "int"
            if bits is not None:
                scheme = "%s%d %s" % (_fmt_prefix(kind), bits, scheme)
        return _result("compressed-tensors", scheme, bits, group, block,
                       _kv_from_scheme(quant), ignored, origin)

    # Other methods (awq, gptq, bitsandbytes, ...): report what is stated.
    bits = quant.get_int(quant.first_key(("bits", "w_bit")) or "bits")
    group_key = quant.first_key(("group_size", "q_group_size")) or "group_size"
    if quant.data.get(group_key) == -1:
        group = None  # GPTQ: -1 means per-channel
    else:
        group = quant.get_int(group_key)
    scheme = method if bits is None else "%s int%d" % (method, bits)
    return _result(method, scheme, bits, group, quant.get_int_list("weight_block_size"),
                   _kv_from_scheme(quant), ignored, origin)


def _modelopt(algo_reader, top_reader, origin):
    """ModelOpt: ``algo_reader`` holds quant_algo/group_size/kv_cache_quant_algo/
    exclude_modules (hf_quant ``quantization`` block); ``top_reader`` may also hold
    config_groups/ignore/kv_cache_scheme (config.json embedded form)."""
    algo = algo_reader.get_str("quant_algo")
    if algo is None and top_reader is not algo_reader:
        algo = top_reader.get_str("quant_algo")
    if algo is None:
        algo_reader.missing("quant_algo")
    key = algo.upper()
    method = MODELOPT_METHODS.get(key, "modelopt")

    weights = _weights(top_reader)
    bits = weights.get_int("num_bits") if weights is not None else None
    if bits is None:
        bits = MODELOPT_ALGO_BITS.get(key)
    group = algo_reader.get_int("group_size")
    if group is None and weights is not None:
        group = weights.get_int("group_size")
    if group is None:
        group = MODELOPT_ALGO_GROUP.get(key)

    kv = _kv_from_algo(algo_reader) or _kv_from_scheme(top_reader)
    ignored = _ignored(algo_reader)
    if not ignored and top_reader is not algo_reader:
        ignored = _ignored(top_reader)
    return _result(method, algo.lower(), bits, group, None, kv, ignored, origin)
