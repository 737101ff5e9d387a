#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_config_info
short_description: Read a Hugging Face model config and report normalised model facts
version_added: 0.1.0
description:
  - Reads a Hugging Face C(config.json) (a file, or a model directory containing one) and returns the
    model dimensions, mixture-of-experts layout, multi-head latent attention (MLA) dimensions and
    quantization in one normalised form, for sizing and planning vLLM deployments.
  - If an NVIDIA ModelOpt C(hf_quant_config.json) sits in the same directory as the config, its path is
    reported and it is used for RV(model.quantization) when C(config.json) has no
    C(quantization_config) (the same precedence vLLM applies).
  - Multimodal wrappers that keep the language model under C(text_config) (for example Kimi-K2.5) are
    supported; every language-model field is then read from C(text_config). C(quantization_config) is
    looked for at the top level first, then inside C(text_config).
  - Mixture-of-experts models without a C(moe_intermediate_size) key (Mixtral, MiniMax, gpt-oss) use
    C(intermediate_size) as the expert width, so RV(model.moe_intermediate_size) is set to
    C(intermediate_size) for them.
  - For MLA models (C(kv_lora_rank) present, for example DeepSeek-V3, Kimi-K2, GLM-5) RV(model.head_dim)
    and RV(model.num_key_value_heads) are reported as configured (or derived); the real attention
    dimensions are in RV(model.mla). Note that vLLM caches MLA keys and values as a single latent head of
    C(kv_lora_rank + qk_rope_head_dim) elements per token and layer, whatever C(num_key_value_heads) says.
  - This module only reads files; it never changes anything.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  path:
    description:
      - Path to a C(config.json) file, or to a model directory that contains C(config.json).
      - An C(hf_quant_config.json) in the same directory as the config file is picked up automatically.
    type: path
    required: true
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The module reads the file on the managed node. Use C(delegate_to) to read a copy kept on the controller.
  - Quantization method names follow vLLM's C(--quantization) names; ModelOpt checkpoints are reported as
    C(modelopt) (FP8) or C(modelopt_fp4) (NVFP4).
"""

EXAMPLES = r"""
- name: Read the Kimi-K2.5 config from a downloaded model directory
  gauntlet.vllm.model_config_info:
    path: /models/moonshotai/Kimi-K2.5
  register: kimi

- name: Work out the KV cache elements per token and layer that vLLM will store
  ansible.builtin.set_fact:
    kv_elements_per_token_layer: >-
      {{ (kimi.model.mla.kv_lora_rank + kimi.model.mla.qk_rope_head_dim)
         if kimi.model.mla else
         (2 * kimi.model.num_key_value_heads * kimi.model.head_dim) }}

- name: Refuse to plan tensor parallelism that does not divide the attention heads
  ansible.builtin.assert:
    that:
      - kimi.model.num_attention_heads % (tensor_parallel_size | int) == 0
    fail_msg: "{{ kimi.model.num_attention_heads }} heads cannot be split over TP={{ tensor_parallel_size }}"

- name: Pass the quantization method on to vLLM when the checkpoint is quantized
  ansible.builtin.set_fact:
    vllm_quantization_args: "{{ ['--quantization', kimi.model.quantization.method] if kimi.model.quantization else [] }}"

- name: Read a single config.json kept on the controller
  gauntlet.vllm.model_config_info:
    path: "{{ playbook_dir }}/files/nvidia--GLM-5-NVFP4/config.json"
  delegate_to: localhost
  register: glm5
"""

RETURN = r"""
model:
  description: Normalised facts about the model.
  returned: success
  type: dict
  contains:
    architecture:
      description: First entry of the top-level C(architectures) list (what vLLM loads); the C(text_config) one if the top level has none.
      type: str
      returned: success
      sample: KimiK25ForConditionalGeneration
    model_type:
      description: Top-level C(model_type), or that of C(text_config) if the top level has none; null when neither is set.
      type: str
      returned: success
      sample: kimi_k25
    text_architecture:
      description: First entry of C(text_config.architectures); null without C(text_config).
      type: str
      returned: success
      sample: DeepseekV3ForCausalLM
    text_model_type:
      description: C(text_config.model_type); null without C(text_config).
      type: str
      returned: success
      sample: kimi_k2
    text_config:
      description: Whether the language-model fields were read from C(text_config).
      type: bool
      returned: success
      sample: true
    num_attention_heads:
      description: Number of attention (query) heads.
      type: int
      returned: success
      sample: 64
    num_key_value_heads:
      description:
        - Number of key/value heads as configured; equals RV(model.num_attention_heads) when not set.
        - For MLA models vLLM stores a single latent KV head regardless of this value.
      type: int
      returned: success
      sample: 64
    head_dim:
      description: C(head_dim) if set, else C(hidden_size // num_attention_heads). Not meaningful for MLA models, see RV(model.mla).
      type: int
      returned: success
      sample: 112
    hidden_size:
      description: Model (residual stream) width.
      type: int
      returned: success
      sample: 7168
    intermediate_size:
      description:
        - C(intermediate_size) as configured. For dense models the MLP width; for DeepSeek-style MoE models
          the width of the dense layers; for Mixtral/MiniMax/gpt-oss the expert width. Null when a MoE model does not set it.
      type: int
      returned: success
      sample: 18432
    moe_intermediate_size:
      description: Width of one routed expert; C(intermediate_size) for MoE models without C(moe_intermediate_size); null for dense models.
      type: int
      returned: success
      sample: 2048
    num_experts:
      description: Number of routed experts (C(num_experts), C(n_routed_experts) or C(num_local_experts)); null for dense models.
      type: int
      returned: success
      sample: 384
    num_experts_per_tok:
      description: Routed experts used per token (C(num_experts_per_tok) or C(experts_per_token)); null for dense models.
      type: int
      returned: success
      sample: 8
    num_shared_experts:
      description: C(n_shared_experts); 1 for Qwen2-MoE style models with a non-zero C(shared_expert_intermediate_size); otherwise 0.
      type: int
      returned: success
      sample: 1
    shared_expert_intermediate_size:
      description:
        - Total shared-expert width. As stated by C(shared_expert_intermediate_size) (Qwen2-MoE) or
          C(shared_intermediate_size) (MiniMax, where it is 0); otherwise C(n_shared_experts * moe_intermediate_size)
          for DeepSeek-style models; null for dense models and MoE models without shared experts.
      type: int
      returned: success
      sample: 2048
    first_k_dense:
      description: Number of leading dense (non-MoE) layers, from C(first_k_dense_replace); 0 when absent.
      type: int
      returned: success
      sample: 1
    num_hidden_layers:
      description: Number of transformer layers (without multi-token-prediction layers).
      type: int
      returned: success
      sample: 61
    vocab_size:
      description: Vocabulary size.
      type: int
      returned: success
      sample: 163840
    max_position_embeddings:
      description: Maximum context length the config states; null when not set.
      type: int
      returned: success
      sample: 262144
    tie_word_embeddings:
      description: Whether input and output embeddings are tied; null when the config does not say.
      type: bool
      returned: success
      sample: false
    mla:
      description: Multi-head latent attention dimensions; null unless the config sets C(kv_lora_rank).
      type: dict
      returned: success
      contains:
        kv_lora_rank:
          description: Rank of the compressed KV latent.
          type: int
          returned: when MLA
          sample: 512
        q_lora_rank:
          description: Rank of the compressed query; null when queries are not compressed.
          type: int
          returned: when MLA
          sample: 1536
        qk_rope_head_dim:
          description: Rotary part of each query/key head.
          type: int
          returned: when MLA
          sample: 64
        qk_nope_head_dim:
          description: Non-rotary part of each query/key head.
          type: int
          returned: when MLA
          sample: 128
        v_head_dim:
          description: Value head size.
          type: int
          returned: when MLA
          sample: 128
    sliding_window:
      description:
        - The layers that attend only to the last C(window) tokens, from C(layer_types) and C(sliding_window)
          (for gpt-oss every other layer, 128 tokens); null when every layer attends to the whole context.
        - vLLM 0.24 windows only the layers C(layer_types) names C(sliding_attention); a C(sliding_window)
          without C(layer_types) windows none.
      type: dict
      returned: success
      contains:
        window:
          description: Tokens a windowed layer attends to.
          type: int
          returned: when a layer is windowed
          sample: 128
        layers:
          description: How many layers are windowed.
          type: int
          returned: when a layer is windowed
          sample: 18
    quantization:
      description: Weight quantization; null for unquantized checkpoints.
      type: dict
      returned: success
      contains:
        method:
          description:
            - vLLM quantization method name, for example C(fp8), C(compressed-tensors), C(modelopt) (ModelOpt FP8),
              C(modelopt_fp4) (ModelOpt NVFP4) or C(mxfp4). Other methods are passed through lower-cased.
          type: str
          returned: when quantized
          sample: compressed-tensors
        scheme:
          description: Human-readable scheme, for example C(int4 pack-quantized), C(nvfp4), C(fp8), C(fp8 block), C(mxfp4).
          type: str
          returned: when quantized
          sample: int4 pack-quantized
        bits:
          description: Bits per weight (8 for FP8, 4 for INT4, NVFP4 and MXFP4); null if unknown.
          type: int
          returned: when quantized
          sample: 4
        group_size:
          description: Weights per scale group (NVFP4 16, MXFP4 32, compressed-tensors C(group_size)); null if not grouped.
          type: int
          returned: when quantized
          sample: 32
        block_size:
          description: Weight scale block shape for block-wise FP8 (C(weight_block_size)); null otherwise.
          type: list
          elements: int
          returned: when quantized
          sample: [128, 128]
        kv_cache_dtype:
          description: KV cache quantization stated by the checkpoint (for example C(fp8)); null when none.
          type: str
          returned: when quantized
          sample: fp8
        ignored_modules:
          description: Modules left unquantized (C(ignore), C(modules_to_not_convert) or C(exclude_modules)); may be empty.
          type: list
          elements: str
          returned: when quantized
          sample: [lm_head]
        origin:
          description: Where the quantization came from.
          type: str
          returned: when quantized
          choices: [quantization_config, text_config.quantization_config, hf_quant_config]
          sample: text_config.quantization_config
    source:
      description: Files that were read.
      type: dict
      returned: success
      contains:
        config:
          description: Path of the C(config.json) that was read.
          type: str
          returned: success
          sample: /models/moonshotai/Kimi-K2.5/config.json
        hf_quant_config:
          description: Path of the C(hf_quant_config.json) beside it, or null when there is none.
          type: str
          returned: success
          sample: null
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import (
    ModelConfigError,
    load_model_config,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    try:
        model = load_model_config(module.params["path"])
    except ModelConfigError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, model=model)


if __name__ == "__main__":
    main()
