#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_args_check
short_description: Build the exact vllm serve command line of a unit and check it against the installed vLLM
version_added: 0.1.0
description:
  - Builds the arguments after C(vllm serve) from structured settings, in the order the C(vllm_service) role puts
    them in the unit's C(ExecStart=) (model, name, listener, parallelism, memory, the serving recipe's flags, then
    O(serving.extra_args)).
  - Then checks them with the vLLM installed in O(venv), run by C(<venv>/bin/python) - vLLM's own C(vllm serve)
    argument parser (an unknown flag, a bad choice, a bad type, with the message vLLM prints),
    vLLM's C(validate_parsed_serve_args) (for example C(--enable-auto-tool-choice) without C(--tool-call-parser)),
    and the installed tool-call and reasoning parser registries (a parser name this vLLM does not know).
  - A command line vLLM would refuse fails the task with vLLM's message; nothing is started or changed.
  - It also refuses a flag vLLM takes only as an abbreviation of a longer one (argparse prefix matching, for example
    C(--max-num-seq) for C(--max-num-seqs)), which a later vLLM release may stop accepting.
  - Importing vLLM (and torch) is most of its time, a few seconds.
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - vLLM 0.10 or later installed in O(venv) (vLLM 0.32 moved the serve parser; both layouts are known).
options:
  venv:
    description: The vLLM virtual environment; the check runs C(<venv>/bin/python) and RV(argv) starts with C(<venv>/bin/vllm).
    type: path
    required: true
  model:
    description: The model to serve, a Hub id or a directory (the positional argument of C(vllm serve)).
    type: str
    required: true
  served_model_name:
    description: C(--served-model-name); left out when unset.
    type: str
  host:
    description: C(--host); left out when unset.
    type: str
  port:
    description: C(--port); left out when unset.
    type: int
  plan_args:
    description:
      - The planner's parallelism arguments (a plan's C(vllm_args)), put on the command line as given.
      - When set, the parallel sizes of O(serving) are ignored.
    type: list
    elements: str
  serving:
    description:
      - How the server serves, as one value - the C(vllm_service) role's C(vllm_service_serving), the same fields as
        a C(vllm_deploy) verdict's C(serving). Absent fields take their defaults.
      - A number that is NaN or infinite (C(gpu_memory_utilization=nan)), or a whole-number field given a fraction,
        fails the task naming the field, rather than leaving the flag out.
    type: dict
    default: {}
    suboptions:
      tensor_parallel_size:
        description: C(--tensor-parallel-size) when above 1 and O(plan_args) is unset.
        type: int
        default: 1
      pipeline_parallel_size:
        description: C(--pipeline-parallel-size) when above 1 and O(plan_args) is unset.
        type: int
        default: 1
      data_parallel_size:
        description: C(--data-parallel-size) when above 1 and O(plan_args) is unset.
        type: int
        default: 1
      enable_expert_parallel:
        description: C(--enable-expert-parallel) when true and O(plan_args) is unset.
        type: bool
        default: false
      max_model_len:
        description: C(--max-model-len); C(0) leaves it to vLLM.
        type: int
        default: 0
      gpu_memory_utilization:
        description: C(--gpu-memory-utilization); C(0) leaves it to vLLM.
        type: float
        default: 0.0
      kv_cache_dtype:
        description: C(--kv-cache-dtype); C(auto) or empty leaves it out.
        type: str
        default: auto
      trust_remote_code:
        description: C(--trust-remote-code) when true.
        type: bool
        default: false
      speculative:
        description:
          - C(--speculative-config), written as JSON with its keys in the order given, for example
            C(method=mtp) and C(num_speculative_tokens=1) for multi-token prediction; empty leaves it out.
        type: dict
        default: {}
      max_num_seqs:
        description: C(--max-num-seqs); C(0) leaves it to vLLM.
        type: int
        default: 0
      max_num_batched_tokens:
        description: C(--max-num-batched-tokens); C(0) leaves it to vLLM.
        type: int
        default: 0
      tool_call_parser:
        description: C(--tool-call-parser); checked against the installed vLLM's tool parser registry. Empty leaves it out.
        type: str
        default: ""
      enable_auto_tool_choice:
        description: C(--enable-auto-tool-choice) when true (vLLM requires O(serving.tool_call_parser) with it).
        type: bool
        default: false
      reasoning_parser:
        description: C(--reasoning-parser); checked against the installed vLLM's reasoning parser registry. Empty leaves it out.
        type: str
        default: ""
      chat_template:
        description: C(--chat-template), a file on the host or a template name vLLM ships; vLLM checks it exists.
        type: str
        default: ""
      mm_encoder_tp_mode:
        description: C(--mm-encoder-tp-mode) (vLLM 0.32 knows C(weights) and C(data)).
        type: str
        default: ""
      all2all_backend:
        description: C(--all2all-backend).
        type: str
        default: ""
      sleep_mode:
        description: C(--enable-sleep-mode) (the server also needs C(VLLM_SERVER_DEV_MODE=1) in its environment).
        type: bool
        default: false
      env:
        description: The server's engine variables. Not part of the command line; accepted so that the whole value can be handed over.
        type: dict
        default: {}
      lora_adapters:
        description:
          - LoRA adapters served beside the model - C(--enable-lora), C(--lora-modules name=path ...), C(--max-loras) (one
            slot per adapter) and the smallest C(--max-lora-rank) vLLM allows that holds every rank.
          - A name is letters, digits and C(.), C(_), C(:), C(/), C(@), C(+), C(-); a path is absolute, without spaces, C(=)
            or C(,) (vLLM splits C(name=path) at the first C(=)); names are unique.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: The model name clients ask for.
            type: str
            required: true
          path:
            description: The adapter's directory.
            type: str
            required: true
          rank:
            description: The adapter's rank (C(r)).
            type: int
      extra_args:
        description: Further arguments, appended last as given.
        type: list
        elements: str
        default: []
  check:
    description: Check the command line with vLLM; C(false) only builds it.
    type: bool
    default: true
  timeout:
    description: Seconds the check may take (importing vLLM and torch is most of it).
    type: int
    default: 120
  record:
    description:
      - A file recording the last command line the installed vLLM accepted, keyed by the command line, O(venv) and the
        vLLM install (a sha256 over its distributions' RECORD files, which any reinstall changes). When the key matches,
        the answer is that record's (RV(cached)) and vLLM is not imported again; an accepted check writes it (the task
        then reports a change). A refusal is never recorded.
      - A file at that path the collection did not write fails the task and is left alone.
      - Unset, every run checks.
    type: path
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - It changes nothing, so it checks in check mode too.
      - In check mode a O(venv) without C(bin/python) (vLLM not installed yet) returns the command line with
        RV(checked=false) instead of failing.
notes:
  - The check parses with the vLLM in O(venv) under the environment of the task, not the unit's; engine variables
    that change vLLM's argument defaults may differ.
  - A C(--tool-parser-plugin) or C(--reasoning-parser-plugin) given in O(serving.extra_args) is imported before the parser
    names are looked up, as C(vllm serve) does.
seealso:
  - module: gauntlet.vllm.vllm_plan
  - module: gauntlet.vllm.vllm_service_info
"""

EXAMPLES = r"""
- name: Check a Qwen3 recipe against the installed vLLM before writing the unit
  gauntlet.vllm.vllm_args_check:
    venv: /opt/vllm/venv
    model: /srv/models/Qwen3-30B-A3B
    served_model_name: qwen3
    host: 127.0.0.1
    port: 8000
    plan_args: [--tensor-parallel-size, "2", --enable-expert-parallel]
    serving:
      max_num_seqs: 64
      tool_call_parser: hermes
      enable_auto_tool_choice: true
      reasoning_parser: qwen3
  register: serve_args

- name: MiniMax-M2.5 with its multi-token prediction, built only
  gauntlet.vllm.vllm_args_check:
    venv: /opt/vllm/venv
    model: MiniMaxAI/MiniMax-M2.5
    serving:
      speculative: {method: mtp, num_speculative_tokens: 1}
    check: false
"""

RETURN = r"""
args:
  description: The arguments after C(vllm serve), as the unit runs them.
  returned: always
  type: list
  elements: str
  sample: [/srv/models/Qwen3-30B-A3B, --served-model-name, qwen3, --host, 127.0.0.1, --port, "8000",
           --tool-call-parser, hermes, --enable-auto-tool-choice, --reasoning-parser, qwen3]
argv:
  description: The whole command line, C(<venv>/bin/vllm serve) then RV(args).
  returned: always
  type: list
  elements: str
  sample: [/opt/vllm/venv/bin/vllm, serve, /srv/models/Qwen3-30B-A3B, --tool-call-parser, hermes]
cached:
  description: Whether the answer came from O(record) (the same command line accepted before by the same vLLM install).
  returned: always
  type: bool
  sample: false
checked:
  description: Whether the installed vLLM checked RV(args) (false with O(check=false), or in check mode without a venv yet).
  returned: always
  type: bool
  sample: true
vllm_version:
  description: The version of the vLLM that checked RV(args); null when not checked.
  returned: always
  type: str
  sample: 0.32.0
non_default:
  description: Every value vLLM's parser read from RV(args) that differs from its default for the model alone, by its name.
  returned: always
  type: dict
  sample: {enable_auto_tool_choice: true, tool_call_parser: hermes, reasoning_parser: qwen3, served_model_name: [qwen3]}
elapsed_s:
  description: Seconds the check took inside the vLLM venv's Python (imports included); 0 when not checked.
  returned: always
  type: float
  sample: 6.6
message:
  description: vLLM's verdict (its refusal message when it refuses), or why the command line was not checked.
  returned: always
  type: str
  sample: vllm serve accepts this command line
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_args
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.state_record import StateRecordError

ARGUMENT_SPEC = dict(
    venv=dict(type="path", required=True),
    model=dict(type="str", required=True),
    served_model_name=dict(type="str"),
    host=dict(type="str"),
    port=dict(type="int"),
    plan_args=dict(type="list", elements="str"),
    serving=dict(type="dict", default={}, options=vllm_args.serving_argument_spec()),
    check=dict(type="bool", default=True),
    timeout=dict(type="int", default=vllm_args.DEFAULT_TIMEOUT),
    record=dict(type="path"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    def run_command(argv, data):
        return module.run_command(argv, data=data)

    try:
        result, failure = vllm_args.run_module_check(module.params, run_command, module.check_mode, move=module.atomic_move)
    except (vllm_args.ArgsBuildError, StateRecordError) as exc:
        module.fail_json(msg=str(exc))
    except vllm_args.ArgsCheckError as exc:
        module.fail_json(msg=str(exc), stderr=exc.stderr)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
