#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_router_server
short_description: Drain, ready or maintain one vLLM server behind the HAProxy router, and wait until it is idle or UP
version_added: 0.1.0
description:
  - Sets the administrative state of one server of the router's HAProxy backend over HAProxy's runtime API (the
    admin UNIX socket the role M(gauntlet.vllm.vllm_router) opens), with C(set server <backend>/<server> state ...).
  - C(drain) sends the server no new request and lets its sessions finish; C(ready) puts it back in the rotation
    (its health check decides when it gets traffic); C(maint) takes it out and stops its health checks.
  - Then waits, when asked, until the server has no session and none queued (O(wait=idle)), or until HAProxy's
    health check (a real completion) reports it C(UP) (O(wait=up)). A wait that runs out fails naming the server and
    what was last seen.
  - Talks to the socket with Python's standard library; no C(socat) is needed.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  socket:
    description: HAProxy's admin socket (C(stats socket ... level admin)).
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description:
      - The HAProxy backend (letters, digits, C(.), C(_), C(:) and C(-), as HAProxy names are).
      - C(*) acts on every backend that holds a server of this name (the role M(gauntlet.vllm.vllm_router) keeps one
        backend per served model, so a host serving two models is a server in two backends); the state is set in each
        and the wait covers each in turn.
    type: str
    default: vllm
  server:
    description:
      - The server's name in the backend (the role names each server after its inventory host); letters, digits,
        C(.), C(_), C(:) and C(-).
      - An unknown name fails, listing the backend's servers.
    type: str
    required: true
  state:
    description: The administrative state to set.
    type: str
    choices: [ready, drain, maint]
    required: true
  wait:
    description:
      - C(none) returns at once; C(idle) waits until the server's current sessions and queue are 0; C(up) waits until
        its status is C(UP) (health check passing, not drained).
    type: str
    choices: [none, idle, up]
    default: none
  timeout:
    description:
      - Seconds to wait before failing; 0 looks once. A negative, NaN or infinite value fails naming the option (a NaN
        would never run out).
    type: float
    default: 300
extends_documentation_fragment:
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Predicts C(changed) from the current state; sets nothing and does not wait.
notes:
  - HAProxy keeps a state set over the runtime API until it is changed again or HAProxy restarts; a reload of the
    role's configuration does not carry it over to the new process (the role's C(ready) entry point sets it again).
seealso:
  - module: gauntlet.vllm.vllm_router_info
"""

EXAMPLES = r"""
- name: Take the host out of the router and wait until its requests finished
  gauntlet.vllm.vllm_router_server:
    server: "{{ inventory_hostname }}"
    state: drain
    wait: idle
    timeout: 600
  delegate_to: "{{ groups['vllm_router_hosts'][0] }}"

- name: Put it back once its health check passes
  gauntlet.vllm.vllm_router_server:
    server: "{{ inventory_hostname }}"
    state: ready
    wait: up
    timeout: 300
  delegate_to: "{{ groups['vllm_router_hosts'][0] }}"
"""

RETURN = r"""
server:
  description: The server.
  returned: always
  type: str
  sample: gpu-01
backend:
  description: The backend asked for (C(*) for every backend holding the server).
  returned: always
  type: str
  sample: vllm
backends:
  description: The backends acted on.
  returned: always
  type: list
  elements: str
  sample: [vllm, vllm_model_1]
state_before:
  description: Its administrative state before (ready, drain or maint; C(mixed) when its backends differed).
  returned: always
  type: str
  sample: ready
state:
  description: Its administrative state after (in check mode, the one it would have).
  returned: always
  type: str
  sample: drain
operational_state:
  description: First word of HAProxy's status (UP, DOWN, DRAIN, MAINT, NOLB); over several backends, the first that is not UP.
  returned: always
  type: str
  sample: DRAIN
current_sessions:
  description: Its current sessions (C(scur)) when the module returned, summed over its backends.
  returned: always
  type: int
  sample: 0
check_status:
  description: HAProxy's last health check status (C(L7OK), C(L4CON), C(L7STS), C(L4TOUT), ...).
  returned: always
  type: str
  sample: L7OK
waited_s:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 2.5
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router import (
    DEFAULT_BACKEND, DEFAULT_SOCKET, STATES, WAITS, RouterError, router_server)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type="path", default=DEFAULT_SOCKET),
            backend=dict(type="str", default=DEFAULT_BACKEND),
            server=dict(type="str", required=True),
            state=dict(type="str", required=True, choices=list(STATES)),
            wait=dict(type="str", default="none", choices=list(WAITS)),
            timeout=dict(type="float", default=300),
        ),
        supports_check_mode=True,
    )
    try:
        result = router_server(module.params, check_mode=module.check_mode)
    except RouterError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
