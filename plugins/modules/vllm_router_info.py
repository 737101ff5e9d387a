#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_router_info
short_description: Read the state of every vLLM server behind the HAProxy router
version_added: 0.1.0
description:
  - Reads HAProxy's C(show stat) and C(show servers state) over its runtime API (the admin UNIX socket the role
    M(gauntlet.vllm.vllm_router) opens) and reports, per server of the backend, its administrative and operational
    state, its last health check and its sessions.
  - A backend that does not exist fails, naming the backends there are.
  - This module only reads; it sets no facts.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  socket:
    description: HAProxy's admin socket.
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description:
      - The HAProxy backend (letters, digits, C(.), C(_), C(:) and C(-), as HAProxy names are).
      - C(*) reads every backend; RV(servers) then summarizes each server over the backends that hold it and
        RV(backends) has them one by one.
    type: str
    default: vllm
extends_documentation_fragment:
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
seealso:
  - module: gauntlet.vllm.vllm_router_server
"""

EXAMPLES = r"""
- name: Read the router's servers
  gauntlet.vllm.vllm_router_info:
  register: router

- name: Every server serves
  ansible.builtin.assert:
    that: router.servers.values() | map(attribute='operational_state') | unique | list == ['UP']
"""

RETURN = r"""
backend:
  description: The backend read.
  returned: always
  type: str
  sample: vllm
socket:
  description: The socket read.
  returned: always
  type: str
  sample: /run/haproxy/admin.sock
backends:
  description: With O(backend=*), every backend's servers by backend, then by server, with the fields of RV(servers).
  returned: when O(backend=*)
  type: dict
servers:
  description:
    - Each server of the backend, by name.
    - With O(backend=*), each server of any backend, with the first operational state that is not C(UP) among its
      backends, their sessions summed, and C(admin_state) C(mixed) when they differ.
  returned: always
  type: dict
  contains:
    admin_state:
      description: Administrative state, C(ready), C(drain) or C(maint).
      type: str
      sample: ready
    operational_state:
      description: First word of HAProxy's status, C(UP), C(DOWN), C(DRAIN), C(MAINT) or C(NOLB).
      type: str
      sample: UP
    status:
      description: HAProxy's whole status (for example C(DOWN 1/2) while a server goes up).
      type: str
      sample: UP
    check_status:
      description: The last health check's status (C(L7OK), C(L4CON), C(L7STS), C(L4TOUT), ...).
      type: str
      sample: L7OK
    current_sessions:
      description: Sessions on the server now (C(scur)).
      type: int
      sample: 2
    queued:
      description: Requests queued for the server (C(qcur)).
      type: int
      sample: 0
    total_sessions:
      description: Sessions since HAProxy started (C(stot)).
      type: int
      sample: 118
    failed_checks:
      description: Failed health checks since HAProxy started (C(chkfail)).
      type: int
      sample: 3
    address:
      description: The server's C(address:port).
      type: str
      sample: 10.0.0.11:8000
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_router import (
    DEFAULT_BACKEND, DEFAULT_SOCKET, RouterError, router_info)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type="path", default=DEFAULT_SOCKET),
            backend=dict(type="str", default=DEFAULT_BACKEND),
        ),
        supports_check_mode=True,
    )
    try:
        result = router_info(module.params)
    except RouterError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
