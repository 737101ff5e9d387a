#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_sleep
short_description: Put a vLLM server to sleep (its GPU memory freed) or wake it up, over vLLM's sleep mode
version_added: 0.3.0
description:
  - Puts a running vLLM server to sleep or wakes it up with vLLM's sleep-mode endpoints (C(POST /sleep),
    C(POST /wake_up), C(GET /is_sleeping)), so two servers can take turns on one GPU without a cold start.
  - Reads C(/is_sleeping) first and does nothing when the server is already in O(state). After the change it reads
    C(/is_sleeping) again and returns what the server says.
  - Level 1 copies the weights to the host's CPU memory and drops the KV cache; level 2 drops the weights too.
  - With O(model) set, waking waits until the server answers a real completion (C(POST /v1/completions)).
  - Before a sleep it reads C(GET /server_info) and fails when the server runs without C(--enable-sleep-mode), since
    vLLM would answer the sleep with 200 and report itself sleeping, but free no GPU memory.
  - Talks HTTP with Python's standard library; a redirect is never followed.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  base_url:
    description: Where the server answers, seen from the target, for example C(http://127.0.0.1:8000).
    type: str
    required: true
  state:
    description: C(asleep) frees the server's GPU memory; C(awake) maps it again.
    type: str
    choices: [asleep, awake]
    required: true
  level:
    description:
      - Sleep level. C(1) keeps the weights in CPU memory (the host needs that much free RAM) and wakes in under a
        second (Llama-3.1-8B on an H100, docs/sleep-mode.md).
      - C(2) discards them. A server woken from level 2 answers completions with HTTP 200 from whatever its weights'
        memory then holds (all token id 0 in the measurement) until its weights are loaded again (vLLM's
        C(reload_weights) over C(POST /collective_rpc)), which this module does not do; the completion check after
        waking cannot tell.
      - A server that already sleeps is left as it is, whatever its level (vLLM does not report the level).
    type: int
    choices: [1, 2]
    default: 1
  mode:
    description:
      - What happens to requests still running when the server goes to sleep (vLLM's C(mode) of C(/sleep)).
      - C(abort) (vLLM's default) ends them at once; their clients get HTTP 200 with the tokens so far and
        C(finish_reason) C(abort). C(wait) lets them finish first, so the sleep takes as long as they do. C(keep)
        pauses them until the server wakes.
    type: str
    choices: [abort, wait, keep]
    default: abort
  model:
    description:
      - The served model name (C(--served-model-name)). When set, O(state=awake) waits until a completion for it comes
        back with tokens.
    type: str
  api_key:
    description:
      - The server's API key, sent as a bearer token with the completion. Never logged or returned.
      - The sleep endpoints themselves take no key (see the notes).
    type: str
  timeout:
    description: Seconds each request, and the wait for the first completion, may take.
    type: int
    default: 120
extends_documentation_fragment:
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads C(/is_sleeping) and predicts C(changed) and RV(is_sleeping); sends no sleep or wake.
notes:
  - The server must run with C(--enable-sleep-mode) and with C(VLLM_SERVER_DEV_MODE=1) in its environment; without the
    variable vLLM 0.24 has no sleep routes and they answer 404, which fails naming both.
  - vLLM checks the API key only on paths under C(/v1), C(/v2) and C(/inference); C(/sleep), C(/wake_up) and the
    other development routes (C(/collective_rpc), C(/server_info)) answer anyone who reaches the port. Keep such a
    server on a private address.
  - A sleeping server still accepts completions and holds them, unanswered, until it is woken; take it out of the
    router before it sleeps.
  - The first sleep of a server took 11 to 12 s in the measurement, later ones about 0.35 s.
  - vLLM also reports C(is_sleeping) true while its scheduler is only paused.
seealso:
  - module: gauntlet.vllm.vllm_wait
  - module: gauntlet.vllm.vllm_router_server
"""

EXAMPLES = r"""
- name: Give the GPU to the second model, keeping the first one's weights in CPU memory
  gauntlet.vllm.vllm_sleep:
    base_url: http://127.0.0.1:8001
    state: asleep
    level: 1

- name: Wake the second model and wait until it answers
  gauntlet.vllm.vllm_sleep:
    base_url: http://127.0.0.1:8002
    state: awake
    model: qwen3-30b-a3b
    api_key: "{{ vault_vllm_api_key }}"
  register: woken

- name: Show how long it took
  ansible.builtin.debug:
    msg: "awake in {{ woken.seconds.wake_s }} s, first completion after {{ woken.seconds.first_completion_s }} s"
"""

RETURN = r"""
changed:
  description: Whether the server was (in check mode, would be) put to sleep or woken.
  returned: always
  type: bool
was_sleeping:
  description: What C(/is_sleeping) said before.
  returned: always
  type: bool
  sample: false
is_sleeping:
  description: What C(/is_sleeping) said after (in check mode, the state it would reach).
  returned: always
  type: bool
  sample: true
seconds:
  description: Seconds each step took; null for a step that did not run.
  returned: always
  type: dict
  contains:
    sleep_s:
      description: The C(POST /sleep) request (vLLM answers once the memory is freed).
      type: float
      sample: 1.9
    wake_s:
      description: The C(POST /wake_up) request (vLLM answers once the memory is mapped and the weights copied back).
      type: float
      sample: 0.9
    first_completion_s:
      description: From the wake to the first completion that came back with tokens (with O(model) only).
      type: float
      sample: 0.05
    total_s:
      description: The whole task, its C(/is_sleeping) reads included.
      type: float
      sample: 1.1
completion:
  description: The first completion after waking (text, completion_tokens, finish_reason, seconds); null when none ran.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_sleep import (
    LEVELS, MODES, STATES, SleepModeError, reach_state)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", required=True),
            state=dict(type="str", required=True, choices=list(STATES)),
            level=dict(type="int", default=1, choices=list(LEVELS)),
            mode=dict(type="str", default="abort", choices=list(MODES)),
            model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    try:
        result = reach_state(module.params, check_mode=module.check_mode)
    except SleepModeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
