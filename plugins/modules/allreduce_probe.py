#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: allreduce_probe
short_description: Measure all-reduce latency and bus bandwidth on a host's GPUs, for each GPU count
version_added: 0.1.0
description:
  - Runs an all-reduce benchmark through C(torch.distributed), one process per GPU, for each GPU count of
    O(gpu_counts) and each message size from one decode step's all-reduce (O(hidden_size) bf16 values) up to
    O(max_bytes).
  - Returns the times, the algorithm and bus bandwidths (nccl-tests' definitions) and the latency of the smallest
    message as the fact C(allreduce_probe), which M(gauntlet.vllm.vllm_plan) takes (its C(allreduce_probe) option) in place of its table
    figures for the TP sizes probed.
  - Compares the planner's table figure for one decode step's all-reduce with the measured one, per GPU count.
  - NVLink multicast is always off (C(NCCL_NVLS_ENABLE=0)) - on a shared host a program using it can take the GPUs out
    of service.
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - A Python with PyTorch (CUDA build with NCCL for O(backend=nccl)) on the host, given as O(python).
options:
  python:
    description: The Python interpreter on the host that has torch (for example the vLLM venv's).
    type: str
    default: python3
  backend:
    description: C(nccl) across GPUs; C(gloo) across CPU processes (no GPU needed, for tests of the probe itself).
    type: str
    choices: [nccl, gloo]
    default: nccl
  gpu_counts:
    description:
      - The numbers of processes (GPUs) to probe, each on GPUs 0..n-1.
      - Default for C(nccl) - 1, 2, 4 and 8 up to the number of GPUs NVML reports. Required for C(gloo).
    type: list
    elements: int
  hidden_size:
    description: The model's hidden size; the smallest message is one decode step's all-reduce of it in bf16.
    type: int
    default: 7168
  max_bytes:
    description: The largest message, in bytes (sizes grow by 4x from the smallest up to this).
    type: int
    default: 67108864
  iterations:
    description: Timed all-reduces per message size (after O(warmup) untimed ones); the mean is reported.
    type: int
    default: 20
  warmup:
    description: Untimed all-reduces per message size.
    type: int
    default: 5
  timeout:
    description: Seconds one GPU count's run may take.
    type: int
    default: 600
  gpu_name:
    description: GPU model for the planner's table figure; default the first device NVML reports.
    type: str
  link:
    description: GPU link for the planner's table figure; default C(nvlink) when NVML reports active NVLink, else the GPU's usual.
    type: str
    choices: [pcie, nvlink]
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only measures; it changes nothing on the host, so it runs in check mode too.
notes:
  - One GPU count at a time; the GPUs should be otherwise idle, or the figures include the contention.
  - With one GPU the all-reduce moves nothing between GPUs; its time is the launch floor and its bus bandwidth is 0.
seealso:
  - module: gauntlet.vllm.vllm_plan
  - module: gauntlet.vllm.gpu_facts
"""

EXAMPLES = r"""
- name: Measure all-reduce on 2, 4 and 8 GPUs for Kimi-K2.5's hidden size
  gauntlet.vllm.allreduce_probe:
    python: /opt/vllm/venv/bin/python
    gpu_counts: [2, 4, 8]
    hidden_size: 7168

- name: Plan with the measured all-reduce instead of the table figures
  gauntlet.vllm.vllm_plan:
    model: moonshotai/Kimi-K2.5
    vllm_version: 0.28.0
    gpu_facts: "{{ ansible_facts.gpus }}"
    allreduce_probe: "{{ ansible_facts.allreduce_probe }}"
"""

RETURN = r"""
ansible_facts:
  description: The measurements.
  returned: always
  type: dict
  contains:
    allreduce_probe:
      description: Per GPU count (as a string key), the figures of each message size.
      type: dict
      sample:
        backend: nccl
        hidden_size: 7168
        torch: 2.11.0+cu130
        nccl: 2.28.9
        by_gpu_count:
          "2":
            world_size: 2
            latency_us: 14.2
            peak_busbw_gbs: 361.5
            sizes:
              - {bytes: 14336, time_us: 14.2, algbw_gbs: 1.01, busbw_gbs: 1.01}
comparison:
  description:
    - For each GPU count of 2 or more, the planner's table figure (C(predicted_us)) and the measured time
      (C(measured_us)) of one decode step's all-reduce, and C(ratio) = predicted / measured.
  returned: always
  type: list
  elements: dict
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import allreduce_probe as probe

ARGUMENT_SPEC = dict(
    python=dict(type="str", default="python3"),
    backend=dict(type="str", default="nccl", choices=["nccl", "gloo"]),
    gpu_counts=dict(type="list", elements="int"),
    hidden_size=dict(type="int", default=7168),
    max_bytes=dict(type="int", default=probe.DEFAULT_MAX_BYTES),
    iterations=dict(type="int", default=20),
    warmup=dict(type="int", default=5),
    timeout=dict(type="int", default=600),
    gpu_name=dict(type="str"),
    link=dict(type="str", choices=["pcie", "nvlink"]),
)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nvml_facts():
    try:
        from ansible_collections.gauntlet.vllm.plugins.module_utils.host.gpu_info import collect_gpu_facts
        return collect_gpu_facts()
    except Exception:  # no NVML (GPU-less host): the caller must name the counts
        return {"count": 0, "devices": []}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    facts = nvml_facts() if params["backend"] == "nccl" else {"count": 0, "devices": []}
    try:
        result, comparison = probe.run(params, facts, module.run_command, free_port)
    except probe.ProbeRunError as exc:
        module.fail_json(msg=str(exc), stderr=exc.stderr)
    except probe.ProbeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts={"allreduce_probe": result}, comparison=comparison)


if __name__ == "__main__":
    main()
