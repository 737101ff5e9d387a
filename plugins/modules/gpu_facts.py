#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather facts about the NVIDIA GPUs of a host through NVML
version_added: 0.1.0
description:
  - Queries the NVIDIA Management Library (NVML) through the C(pynvml) Python bindings (PyPI package C(nvidia-ml-py))
    and returns, as RV(ansible_facts.gpus), the driver and CUDA versions, one entry per GPU (name, UUID, memory,
    compute capability, PCIe link, power, NUMA node, active NVLinks) and the GPU-to-GPU topology in the terms of
    C(nvidia-smi topo -m).
  - Every value NVML cannot report on a given GPU (C(Not Supported), C(Insufficient Permissions), ...) is returned
    as null; it never fails the module.
  - A host without C(nvidia-ml-py), without the NVIDIA driver or without C(libnvidia-ml.so.1) is not an error
    either; the module then returns RV(ansible_facts.gpus.count=0), no devices and RV(ansible_facts.gpus.reason)
    saying why. This makes the module safe to run against every host of an inventory.
  - This module only reads; it never changes anything.
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - nvidia-ml-py (on the target, for GPU hosts)
options:
  include_processes:
    description:
      - Also list the compute processes running on each GPU (RV(ansible_facts.gpus.devices[].processes)), for
        example to check that a GPU is free before handing it to a new vLLM server.
    type: bool
    default: false
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  facts:
    support: full
notes:
  - NVML is queried once per run, between C(nvmlInit) and C(nvmlShutdown); memory and power values are a snapshot.
  - The current PCIe generation and width drop while a GPU idles (power saving); compare
    RV(ansible_facts.gpus.devices[].pcie_generation_max) and RV(ansible_facts.gpus.devices[].pcie_width_max) when
    checking how a GPU is slotted.
  - Memory values are those of C(nvmlDeviceGetMemoryInfo) (version 1), in which the used memory includes the
    memory the driver reserves, so a GPU without processes still shows some used memory.
  - GPUs joined through NVSwitches (HGX boards) are reported as C(NVLINK) pairs with the smaller of the two GPUs'
    switch-link counts, matching C(NV18) in C(nvidia-smi topo -m) on HGX H100/H200.
  - Process ids are those NVML reports, which are host pids; inside a container they may not match the
    container's pid namespace.
seealso:
  - name: NVML API reference
    description: The NVIDIA Management Library functions this module calls.
    link: https://docs.nvidia.com/deploy/nvml-api/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gauntlet.vllm.gpu_facts:

- name: Require eight GPUs with at least 96 GB each
  ansible.builtin.assert:
    that:
      - ansible_facts.gpus.count == 8
      - ansible_facts.gpus.devices | map(attribute='memory_total_bytes') | min >= 96 * 1000 ** 3
    fail_msg: "{{ inventory_hostname }}: {{ ansible_facts.gpus.reason or (ansible_facts.gpus.count ~ ' GPU(s)') }}"

- name: Use tensor parallelism over all GPUs when they are NVLinked, else over the largest power of two
  ansible.builtin.set_fact:
    vllm_tensor_parallel_size: >-
      {{ ansible_facts.gpus.count
         if ansible_facts.gpus.topology.nvlink
         else [1, 2, 4, 8] | select('le', ansible_facts.gpus.count) | max }}
  when: ansible_facts.gpus.count > 0

- name: Refuse a Blackwell-only quantization on older GPUs
  ansible.builtin.assert:
    that:
      - ansible_facts.gpus.devices | map(attribute='compute_capability_major') | min >= 10
    fail_msg: NVFP4 needs compute capability 10.0 or later
  when: vllm_quantization | default('') == 'modelopt_fp4'

- name: List the processes still holding GPU memory before a handover
  gauntlet.vllm.gpu_facts:
    include_processes: true

- name: Stop when a GPU is busy
  ansible.builtin.assert:
    that:
      - ansible_facts.gpus.devices | map(attribute='processes') | flatten | length == 0
    fail_msg: "GPU processes (null: unknown): {{ ansible_facts.gpus.devices | map(attribute='processes') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    gpus:
      description: NVIDIA GPU facts of the host.
      returned: always
      type: dict
      contains:
        count:
          description: Number of GPUs NVML sees; 0 when pynvml, the driver or GPUs are missing (see RV(ansible_facts.gpus.reason)).
          type: int
          returned: always
          sample: 8
        driver_version:
          description: NVIDIA driver version; null when NVML could not be used.
          type: str
          returned: always
          sample: "580.95.05"
        cuda_version:
          description: Highest CUDA version the driver supports, as C(major.minor) (C(nvmlSystemGetCudaDriverVersion_v2)); null when unknown.
          type: str
          returned: always
          sample: "13.0"
        nvml_version:
          description: NVML library version; null when NVML could not be used.
          type: str
          returned: always
          sample: "13.580.95.05"
        reason:
          description: Why RV(ansible_facts.gpus.count) is 0 (pynvml missing, NVML initialisation failed, no GPUs); null when GPUs were found.
          type: str
          returned: always
          sample: "NVML could not be initialised: NVML Shared Library Not Found (NVMLError_LibraryNotFound)"
        devices:
          description: One entry per GPU, in NVML index order. Any value NVML cannot report is null.
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: NVML device index (the order of C(nvidia-smi), which can differ from C(CUDA_VISIBLE_DEVICES) order).
              type: int
              returned: always
              sample: 0
            name:
              description: Product name.
              type: str
              returned: always
              sample: NVIDIA H200
            uuid:
              description: GPU UUID.
              type: str
              returned: always
              sample: GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901
            serial:
              description: Board serial number; null when NVML does not report one (for example on consumer GPUs).
              type: str
              returned: always
              sample: "1650124000000"
            pci_bus_id:
              description: PCI bus id as NVML writes it (32-bit domain).
              type: str
              returned: always
              sample: "00000000:19:00.0"
            numa_node:
              description:
                - NUMA node closest to the GPU, the C(NUMA Affinity) of C(nvidia-smi topo -m) (C(nvmlDeviceGetMemoryAffinity));
                  the lowest one if several are equally close; null when NVML cannot tell.
                - Use it to pin a vLLM server's CPU threads and host memory next to its GPUs.
              type: int
              returned: always
              sample: 0
            memory_total_bytes:
              description: Total GPU memory in bytes.
              type: int
              returned: always
              sample: 150754820096
            memory_used_bytes:
              description: Used GPU memory in bytes, including the memory the driver reserves.
              type: int
              returned: always
              sample: 583532544
            memory_free_bytes:
              description: Free GPU memory in bytes.
              type: int
              returned: always
              sample: 150171287552
            compute_capability:
              description: CUDA compute capability as C(major.minor).
              type: str
              returned: always
              sample: "9.0"
            compute_capability_major:
              description: Major part of the compute capability.
              type: int
              returned: always
              sample: 9
            compute_capability_minor:
              description: Minor part of the compute capability.
              type: int
              returned: always
              sample: 0
            pcie_generation:
              description: Current PCIe link generation (drops while the GPU idles).
              type: int
              returned: always
              sample: 5
            pcie_generation_max:
              description: Highest PCIe generation the GPU and the slot support together.
              type: int
              returned: always
              sample: 5
            pcie_width:
              description: Current PCIe link width (lanes).
              type: int
              returned: always
              sample: 16
            pcie_width_max:
              description: Highest PCIe link width (lanes).
              type: int
              returned: always
              sample: 16
            power_limit_watts:
              description: Enforced power limit in watts (the power management limit when the enforced one is not available).
              type: float
              returned: always
              sample: 700.0
            power_draw_watts:
              description: Power drawn at the time of the query, in watts.
              type: float
              returned: always
              sample: 76.123
            nvlink_active_links:
              description: Number of NVLinks whose state is enabled; 0 when the GPU has no NVLink (NVML says Not Supported).
              type: int
              returned: always
              sample: 18
            processes:
              description: Compute processes on the GPU; null when NVML cannot list them.
              type: list
              elements: dict
              returned: when include_processes is true
              contains:
                pid:
                  description: Process id (as the host sees it).
                  type: int
                  returned: always
                  sample: 4242
                used_memory_bytes:
                  description: GPU memory the process uses, in bytes; null when NVML cannot tell.
                  type: int
                  returned: always
                  sample: 135291469824
        topology:
          description: How the GPUs are connected.
          type: dict
          returned: always
          contains:
            nvlink:
              description: Whether any NVLink of any GPU is active.
              type: bool
              returned: always
              sample: true
            links:
              description: One entry per pair of GPUs RV(ansible_facts.gpus.topology.links[].a) < RV(ansible_facts.gpus.topology.links[].b).
              type: list
              elements: dict
              returned: always
              contains:
                a:
                  description: Index of the first GPU.
                  type: int
                  returned: always
                  sample: 0
                b:
                  description: Index of the second GPU.
                  type: int
                  returned: always
                  sample: 1
                type:
                  description:
                    - How the pair is connected, in the terms of C(nvidia-smi topo -m). C(NVLINK) when NVLinks join the two
                      GPUs (directly or through NVSwitches); otherwise the closest common PCIe ancestor from
                      C(nvmlDeviceGetTopologyCommonAncestor) - C(SAME_BOARD) (same board, for example dual-GPU cards),
                      C(PIX) (one PCIe switch), C(PXB) (several PCIe switches), C(PHB) (PCIe host bridge), C(NODE)
                      (host bridges within one NUMA node) or C(SYS) (across NUMA nodes / the SMP interconnect).
                    - Null when NVML cannot tell.
                  type: str
                  returned: always
                  choices: [NVLINK, SAME_BOARD, PIX, PXB, PHB, NODE, SYS]
                  sample: NVLINK
                nvlink_count:
                  description: Number of NVLinks between the two GPUs (for NVSwitch systems, the smaller number of switch links of the two); 0 without NVLink.
                  type: int
                  returned: always
                  sample: 18
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.host.gpu_info import collect_gpu_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            include_processes=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    try:
        gpus = collect_gpu_facts(include_processes=module.params["include_processes"])
    except Exception as exc:
        module.fail_json(msg="Unexpected error while reading NVML: %s" % exc)
    module.exit_json(changed=False, ansible_facts={"gpus": gpus})


if __name__ == "__main__":
    main()
