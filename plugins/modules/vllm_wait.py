#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_wait
short_description: Wait until a vLLM unit answers a real completion, showing its load phase while it waits
version_added: 0.1.0
description:
  - Waits until the vLLM server of a systemd unit answers a real completion with generated tokens. C(/health) answers
    as soon as the API server is up, which is not the same as a model that generates, so it is only a cheap first
    check before each completion attempt.
  - Runs on the controller (an action plugin) and looks at the target every O(poll_interval) seconds, over the normal
    connection, so the server's port need not be reachable from the controller. While it waits it prints the elapsed
    time, the unit's state and the load phase read from the journal (for example
    C(loading weights (shards 29/64, 45%))) every O(progress_interval) seconds and whenever the phase changes.
  - Fails at once, with the unit's state and the last O(journal_lines) journal lines, when the unit fails, when the
    server exits and systemd restarts it, or when the unit stops with nothing starting it. Fails the same way when
    O(timeout) passes.
  - Returns the time from the server's start to the first working completion (RV(time_to_ready_s)) and that
    completion's latency (RV(first_completion_latency_s)).
  - With O(tool_check) or O(reasoning_check) a completion is not enough; the server must also pass the recipe check,
    a chat completion that proves tool calling is accepted and the reasoning is separated from C(content)
    (RV(recipe_check)).
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  unit:
    description: The systemd unit running the server, for example C(vllm-kimi-k25-int4.service).
    type: str
    required: true
  base_url:
    description: Where the server answers, seen from the target.
    type: str
    default: http://127.0.0.1:8000
  model:
    description: The served model name to ask for (C(--served-model-name)).
    type: str
    required: true
  api:
    description: Ask through C(/v1/completions) or C(/v1/chat/completions) (which also exercises the chat template).
    type: str
    choices: [completions, chat]
    default: completions
  api_key:
    description:
      - The server's API key (C(VLLM_API_KEY)), sent as a bearer token. Never logged or returned.
      - A redirect is never followed, so the key never goes to another address or from C(https) to C(http); the
        redirect is reported as the completion's error instead.
    type: str
  validate_certs:
    description:
      - Verify the server's TLS certificate when O(base_url) is C(https), so the key goes only to the server it is meant
        for. Turn it off only for a self-signed certificate on a trusted network.
    type: bool
    default: true
  prompt:
    description: Prompt of the readiness completion.
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens to generate.
    type: int
    default: 8
  timeout:
    description:
      - Seconds to wait in all. When unset it is O(timeout_base) plus O(timeout_per_gib) seconds for every GiB of
        O(checkpoint_bytes), so a 550 GB checkpoint gets about 75 minutes and a tiny one 10.
    type: int
  checkpoint_bytes:
    description: Size of the checkpoint the server loads, to scale the timeout.
    type: int
    default: 0
  timeout_base:
    description: Seconds allowed beyond loading the weights (engine start, compilation, CUDA graphs).
    type: int
    default: 600
  timeout_per_gib:
    description: Seconds allowed per GiB of checkpoint (about twice the 4 s/GiB measured loading Kimi-K2.5 from local NVMe).
    type: float
    default: 8.0
  poll_interval:
    description: Seconds between looks at the target.
    type: int
    default: 5
  progress_interval:
    description: At most this many seconds between progress lines on the controller (a change of phase prints at once).
    type: int
    default: 30
  request_timeout:
    description: Seconds one HTTP request may take.
    type: int
    default: 60
  journal_lines:
    description: Journal lines shown when the wait fails.
    type: int
    default: 40
  tool_check:
    description:
      - Also require the server to accept tool calling, for a server started with C(--enable-auto-tool-choice) and a
        C(--tool-call-parser). Once a completion works, it sends a chat completion offering one tool (C(get_weather),
        with a C(city) string parameter) with C(tool_choice=auto), C(max_tokens=16) and vLLM's C(ignore_eos), and is
        ready only when that comes back HTTP 200 with a well-formed assistant message (C(content) a string or null,
        or C(tool_calls) a list of C({id, type=function, function={name, arguments}})). The model need not call the
        tool; the endpoint must accept the request.
      - vLLM answers HTTP 400 without those flags; the wait then fails at once with vLLM's message rather than waiting
        for O(timeout), since waiting does not change that answer. So does any other HTTP 400 to this request.
    type: bool
    default: false
  reasoning_check:
    description:
      - Also require the reasoning to come separated from the answer, for a server started with C(--reasoning-parser).
        It sends the same chat completion as O(tool_check) (one request when both are on; without the tool when
        O(tool_check) is off) and is ready only when the message carries a non-empty C(reasoning) (vLLM 0.32 and later)
        or C(reasoning_content) (older releases), or a tool call, and C(content) holds no raw C(<think>) or
        C(</think>) markup. The chat template must start the model in thinking mode, as Qwen3's and Kimi-K2's do by
        default.
      - Leave it off for a reasoning parser that keeps the thinking in C(content) on purpose, such as vLLM's
        C(minimax_m2_append_think) (MiniMax-M2's recipe), which never fills the reasoning field.
      - A message that fails this keeps the wait going (the reason shows in the progress lines and in the failure when
        O(timeout) passes); an HTTP 400 to the request fails the wait at once.
    type: bool
    default: false
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
  async:
    description: Supports being used with the C(async) keyword.
    support: none
  check_mode:
    details: It only reads; in check mode it still waits, since nothing is changed either way.
notes:
  - The role M(gauntlet.vllm.vllm_service) starts units without blocking (a unit stays C(activating) until its own
    readiness probe passes, which can take most of an hour) and then calls this module.
  - Needs C(systemctl) and C(journalctl) on the target.
seealso:
  - module: gauntlet.vllm.vllm_service_info
"""

EXAMPLES = r"""
- name: Wait for Kimi-K2.5 (547 GB) to answer
  gauntlet.vllm.vllm_wait:
    unit: vllm-kimi-k25-int4.service
    model: kimi-k2.5
    base_url: http://127.0.0.1:8000
    api_key: "{{ vault_vllm_api_key }}"
    checkpoint_bytes: 587000000000
  register: kimi_ready

- name: Wait for MiniMax-M2.5, which must also accept tool calls and separate its reasoning
  gauntlet.vllm.vllm_wait:
    unit: vllm-minimax-m25.service
    model: minimax-m2.5
    api_key: "{{ vault_vllm_api_key }}"
    checkpoint_bytes: 230000000000
    tool_check: true
    reasoning_check: true
  register: minimax_ready

- name: Show how long it took
  ansible.builtin.debug:
    msg: "ready after {{ kimi_ready.time_to_ready_s }} s, first completion {{ kimi_ready.first_completion_latency_s }} s"
"""

RETURN = r"""
ready:
  description: Whether a completion succeeded.
  returned: always
  type: bool
time_to_ready_s:
  description: Seconds from the server's main process start to the first working completion.
  returned: success
  type: float
  sample: 2161.4
first_completion_latency_s:
  description: Latency of that first completion, in seconds.
  returned: success
  type: float
  sample: 0.84
waited_s:
  description: Seconds this task waited.
  returned: always
  type: float
timeout_s:
  description: The limit the task waited under.
  returned: always
  type: int
phase:
  description: The last load phase read from the journal.
  returned: always
  type: str
  sample: API server up
phases:
  description: Each phase seen, with the seconds into the wait when it was first seen.
  returned: always
  type: list
  elements: dict
completion:
  description: The first working completion (text, token counts, latency).
  returned: success
  type: dict
recipe_check:
  description:
    - The recipe check's last result, one entry for each of O(tool_check) and O(reasoning_check) that is on.
  returned: when O(tool_check) or O(reasoning_check) is on and a completion worked
  type: dict
  contains:
    tool_choice:
      description: Whether the chat completion with C(tool_choice=auto) was accepted.
      returned: when O(tool_check) is on
      type: dict
      sample: {"status": 400, "ok": false, "message": "HTTP 400: \"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"}
      contains:
        status:
          description: HTTP status of the chat completion; null when no answer came.
          returned: always
          type: int
          sample: 200
        ok:
          description: Whether the answer was HTTP 200 with a well-formed assistant message.
          returned: always
          type: bool
        message:
          description: What was wrong (vLLM's own message for a refusal), or how the request was answered.
          returned: always
          type: str
          sample: accepted, answered with content
    reasoning:
      description: Whether the answer carried its reasoning separated from C(content).
      returned: when O(reasoning_check) is on
      type: dict
      sample: {"status": 200, "ok": true, "field": "reasoning", "message": "reasoning in reasoning"}
      contains:
        status:
          description: HTTP status of the chat completion; null when no answer came.
          returned: always
          type: int
          sample: 200
        ok:
          description: Whether the message held a non-empty reasoning (or a tool call) and no raw C(<think>) markup in C(content).
          returned: always
          type: bool
        field:
          description: The field the reasoning was found in (C(reasoning), C(reasoning_content), or C(tool_calls) for a tool call); null when none.
          returned: always
          type: str
          sample: reasoning
        message:
          description: What was wrong, or where the reasoning was.
          returned: always
          type: str
          sample: "no reasoning separated: reasoning and reasoning_content empty or null; content: 'Okay, the user'"
unit_state:
  description: The unit's last state (ActiveState, SubState, Result, NRestarts, MainPID).
  returned: always
  type: dict
journal_tail:
  description:
    - The unit's last journal lines (on failure), with secrets hidden as C(********) (O(api_key), the values of
      C(--api-key), C(--hf-token) and C(--watermark-config), secret-looking C(NAME=value), bearer tokens, URL passwords).
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_probe import ARGUMENT_SPEC, probe


def main():
    # The action plugin runs this once per look at the target; the loop and the verdict live there.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(changed=False, **probe(module, module.params))


if __name__ == "__main__":
    main()
