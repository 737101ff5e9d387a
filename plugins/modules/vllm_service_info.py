#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_service_info
short_description: List the systemd units that run vLLM servers, and those in the way of a new one
version_added: 0.1.0
description:
  - Reads every service unit systemd knows (installed unit files and loaded units) and reports those whose
    C(ExecStart) runs C(vllm serve) or C(python -m vllm.entrypoints.openai.api_server), whoever wrote them,
    with their state, GPUs (C(CUDA_VISIBLE_DEVICES) of their Environment), port and model.
  - Given the unit about to start (O(name)), its GPUs (O(devices)) and its O(port), it also lists the units that
    must be stopped and disabled first (RV(conflicts)), which are those running or enabled that share a GPU or the port.
    A unit without C(CUDA_VISIBLE_DEVICES) sees every GPU, so it conflicts with every other vLLM unit; on a GPU-less
    host that stands for the CPUs and memory two servers would fight over.
  - This module only reads; the role M(gauntlet.vllm.vllm_service) stops what it reports.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  name:
    description: The unit about to start (for example C(vllm-kimi-k25-int4.service)); it is never its own conflict.
    type: str
  devices:
    description:
      - GPUs the unit about to start will use, as in C(CUDA_VISIBLE_DEVICES) (indices or UUIDs).
      - Empty means every GPU.
    type: list
    elements: str
    default: []
  port:
    description: Port the unit about to start will listen on; units on the same port conflict too.
    type: int
  side_by_side:
    description:
      - Units served beside O(name) on purpose (catalogue entries a host keeps resident together). Sharing GPUs with
        them is no conflict; listening on O(port) still is.
    type: list
    elements: str
    default: []
    version_added: 0.3.0
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - C(systemctl show) in systemd 252 prints the command line with plain spaces, so an argument that holds a space
    comes back split in RV(units[].argv); ports, models and devices are read correctly.
  - vLLM servers run in containers (C(podman run vllm/vllm-openai)) are not recognised.
seealso:
  - module: gauntlet.vllm.gpu_facts
  - module: gauntlet.vllm.vllm_wait
"""

EXAMPLES = r"""
- name: Which vLLM units hold GPUs 0-3 or port 8000?
  gauntlet.vllm.vllm_service_info:
    name: vllm-minimax-m25.service
    devices: ["0", "1", "2", "3"]
    port: 8000
  register: vllm_units

- name: Stop and disable them
  ansible.builtin.systemd_service:
    name: "{{ item.name }}"
    state: stopped
    enabled: false
  loop: "{{ vllm_units.conflicts }}"
"""

RETURN = r"""
units:
  description: Every unit that runs a vLLM server, by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Unit name.
      type: str
      sample: vllm-kimi-k25-int4.service
    active_state:
      description: systemd C(ActiveState).
      type: str
      sample: active
    sub_state:
      description: systemd C(SubState).
      type: str
      sample: running
    unit_file_state:
      description: systemd C(UnitFileState) (C(enabled), C(disabled), C(static), ...).
      type: str
    enabled:
      description: Whether the unit starts at boot.
      type: bool
    running:
      description: Whether the unit holds its resources now (active, activating, reloading or deactivating).
      type: bool
    main_pid:
      description: Main process id; 0 when none.
      type: int
    fragment_path:
      description: The unit file.
      type: str
    devices:
      description: GPUs from C(CUDA_VISIBLE_DEVICES), sorted; the string C(all) when unset.
      type: raw
      sample: ["0", "1"]
    port:
      description: The C(--port) it serves on (vLLM's default 8000 when absent).
      type: int
    model:
      description: The model it serves.
      type: str
      sample: /models/moonshotai/Kimi-K2.5
    served_model_name:
      description: The name clients send as C(model) (the first C(--served-model-name)), the model when not set.
      type: str
      sample: kimi-k25
    argv:
      description:
        - The command line, split on spaces, with the values of vLLM's secret flags (C(--api-key), C(--hf-token),
          C(--watermark-config), also in their C(--flag=value), abbreviated and underscore forms), passwords in URLs and
          secret-looking C(NAME=value) words replaced by C(********).
      type: list
      elements: str
conflicts:
  description: Units to stop and disable before O(name) starts, each with why.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Unit name.
      type: str
    running:
      description: Whether it runs now.
      type: bool
    enabled:
      description: Whether it starts at boot.
      type: bool
    reasons:
      description: What it shares with O(name).
      type: list
      elements: str
      sample: ["shares GPUs 0,1", "listens on port 8000"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import (
    UnitsError,
    find_conflicts,
    find_units,
    parse_devices,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str"),
            devices=dict(type="list", elements="str", default=[]),
            port=dict(type="int"),
            side_by_side=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    systemctl = module.get_bin_path("systemctl", required=True)
    try:
        units = [entry[0] for entry in find_units(lambda args: module.run_command([systemctl] + args))]
    except UnitsError as exc:
        module.fail_json(msg=str(exc))
    conflicts = find_conflicts(units, module.params["name"], parse_devices(module.params["devices"]),
                               module.params["port"], side_by_side=module.params["side_by_side"])
    module.exit_json(changed=False, units=units, conflicts=conflicts)


if __name__ == "__main__":
    main()
