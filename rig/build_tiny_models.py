"""Build the rig's two tiny, real, deterministic models (no hub access needed), and a LoRA adapter.

- ``tiny-llama``: a dense GQA model (LlamaForCausalLM: 4 attention heads, 2 KV heads).
- ``tiny-qwen3-moe``: a mixture-of-experts model (Qwen3MoeForCausalLM: 8 experts, top-2).
- ``tiny-llama-lora``: a LoRA adapter for tiny-llama in PEFT's format (``adapter_config.json`` and
  ``adapter_model.safetensors``: rank 8 on q_proj and v_proj, float32), written without peft.

Each model is written as several safetensors shards plus ``model.safetensors.index.json`` and a
byte-level BPE tokenizer with a ChatML chat template, so vLLM serves it like a hub checkpoint.
The tokenizer holds Qwen3's reasoning and tool-call markup (``<think>``, ``<tool_call>``, ...) as
single non-special tokens and the template renders tools the way Qwen3's does, so the rig can
serve these models with Qwen3's reasoning and tool-call parsers.
Weights are random but seeded, the tokenizer is trained on a generated corpus: the same
versions of torch/transformers/tokenizers give byte-identical files, and so does the adapter's
seeded generator. A ``MANIFEST.sha256`` in each directory records every file's hash.

Usage: python build_tiny_models.py OUTPUT_DIR
"""

import hashlib
import json
import random
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM

SEED = 1234
VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The markup Qwen3's reasoning and tool-call parsers look for, as single tokens. Added with
# special=False, as in Qwen3's own tokenizer: decoding with skip_special_tokens keeps them in the
# text, where vLLM's parsers search for them.
PARSER_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
# Small shards so even a 1 MB model is a multi-shard checkpoint with an index.
MAX_SHARD_SIZE = "300KB"
# ChatML with tool calling in the shape Qwen3's parsers expect (written for the rig, not copied):
# the tools' JSON signatures in the system turn, calls as <tool_call> JSON, tool results as
# <tool_response> blocks in a user turn, and enable_thinking=false closing an empty <think> block
# in the generation prompt. All output text sits in {{ }} so the layout adds no whitespace. The
# collection ships the same file for any model of this shape (vllm_service_serving.chat_template: chatml-tools.jinja).
CHAT_TEMPLATE_FILE = Path(__file__).resolve().parent.parent / "roles" / "vllm_service" / "files" / "chat_templates" / "chatml-tools.jinja"
CHAT_TEMPLATE = "\n" + CHAT_TEMPLATE_FILE.read_text()

# Shared shape: head_dim 32 is supported by vLLM's CPU attention backend.
COMMON = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    intermediate_size=256,
    max_position_embeddings=2048,
    bos_token_id=0,
    eos_token_id=2,
    pad_token_id=0,
    tie_word_embeddings=False,
)

MODELS = {
    "tiny-llama": (LlamaConfig, LlamaForCausalLM, {}),
    "tiny-qwen3-moe": (
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
        dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, decoder_sparse_step=1,
             mlp_only_layers=[], norm_topk_prob=True),
    ),
}

# The LoRA adapter (PEFT's layout, as `peft` would save it): rank, scaling and the modules it adapts.
# B is random too (PEFT starts it at zero), so the adapter really changes what the model answers.
LORA_ADAPTERS = {
    "tiny-llama-lora": dict(base="tiny-llama", r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], std=0.02),
}


def _corpus():
    """A deterministic corpus of plain English-ish text and chat turns."""
    rng = random.Random(SEED)
    words = ("the model serves tokens on every gpu while the planner checks heads experts and "
             "shards before launch a fleet of hosts runs vllm under systemd with tensor pipeline "
             "and expert parallel plans measured by throughput latency and energy").split()
    lines = []
    for _line in range(2000):
        length = rng.randint(4, 16)
        lines.append(" ".join(rng.choice(words) for _word in range(length)) + ".")
    lines += ["<|im_start|>user\nhello<|im_end|>", "<|im_start|>assistant\nhi there<|im_end|>"] * 50
    return lines


def build_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Leave room for the parser tokens so every id stays below the models' vocab_size.
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(PARSER_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PARSER_TOKENS])
    if tok.get_vocab_size(with_added_tokens=True) > VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {tok.get_vocab_size(with_added_tokens=True)} tokens, more than vocab_size {VOCAB_SIZE}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=COMMON["max_position_embeddings"],
    )


def build_model(name, out_dir, tokenizer):
    config_cls, model_cls, extra = MODELS[name]
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = config_cls(**{**COMMON, **extra,
                           "bos_token_id": ids["<|endoftext|>"],
                           "eos_token_id": ids["<|im_end|>"],
                           "pad_token_id": ids["<|endoftext|>"]})
    torch.manual_seed(SEED)
    model = model_cls(config).to(torch.bfloat16)
    target = Path(out_dir) / name
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.iterdir():
        stale.unlink()
    model.save_pretrained(target, max_shard_size=MAX_SHARD_SIZE, safe_serialization=True)
    tokenizer.save_pretrained(target)
    shards = sorted(target.glob("model-*.safetensors"))
    if len(shards) < 2 or not (target / "model.safetensors.index.json").is_file():
        raise SystemExit(f"{target}: expected a sharded checkpoint with an index, got {shards}")
    write_manifest(target)
    return target, len(shards)


def write_manifest(target):
    """Make every file in ``target`` world-readable and record its sha256 in ``MANIFEST.sha256``."""
    manifest = []
    for path in sorted(p for p in target.iterdir() if p.name != "MANIFEST.sha256"):
        # safetensors writes shards 0600; a model directory is meant to be world-readable.
        path.chmod(0o644)
        manifest.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    (target / "MANIFEST.sha256").write_text("\n".join(manifest) + "\n")


def build_lora_adapter(name, out_dir):
    """Write the LoRA adapter ``name`` for its base model, already built under ``out_dir``.

    PEFT's tensor names and shapes: ``base_model.model.<module>.lora_A.weight`` [r, in_features] and
    ``.lora_B.weight`` [out_features, r], for each target module of each layer. The shapes come from the
    base model's config.json as written; the values are normal(0, std) from a generator seeded with SEED,
    drawn in a fixed order (layer, module, A then B).
    """
    spec = LORA_ADAPTERS[name]
    config = json.loads((Path(out_dir) / spec["base"] / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    out_features = {"q_proj": config["num_attention_heads"] * head_dim, "v_proj": config["num_key_value_heads"] * head_dim}
    generator = torch.Generator().manual_seed(SEED)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for module in spec["target_modules"]:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            shapes = {"lora_A": (spec["r"], config["hidden_size"]), "lora_B": (out_features[module], spec["r"])}
            for part, shape in shapes.items():
                tensors[f"{prefix}.{part}.weight"] = torch.randn(shape, generator=generator, dtype=torch.float32) * spec["std"]
    adapter_config = {
        "alpha_pattern": {},
        "base_model_name_or_path": spec["base"],
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": spec["lora_alpha"],
        "lora_dropout": 0.0,
        "modules_to_save": None,
        "peft_type": "LORA",
        "r": spec["r"],
        "rank_pattern": {},
        "revision": None,
        "target_modules": spec["target_modules"],
        "task_type": "CAUSAL_LM",
        "use_dora": False,
        "use_rslora": False,
    }
    target = Path(out_dir) / name
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.iterdir():
        stale.unlink()
    (target / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(target / "adapter_model.safetensors"), metadata={"format": "pt"})
    write_manifest(target)
    return target, len(tensors)


def main(out_dir):
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    for name in MODELS:
        target, n_shards = build_model(name, out_dir, tokenizer)
        size = sum(p.stat().st_size for p in target.iterdir())
        print(json.dumps({"model": name, "path": str(target), "shards": n_shards, "bytes": size}))
    for name in LORA_ADAPTERS:
        target, n_tensors = build_lora_adapter(name, out_dir)
        size = sum(p.stat().st_size for p in target.iterdir())
        print(json.dumps({"adapter": name, "base": LORA_ADAPTERS[name]["base"], "path": str(target),
                          "tensors": n_tensors, "bytes": size}))


if __name__ == "__main__":
    main(sys.argv[1])
