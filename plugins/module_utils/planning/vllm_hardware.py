# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the planner knows about a device and its link: memory, bandwidth,
peak matrix rates per data type, and the cost of one all-reduce.

Every figure carries its source (``SOURCES``); ``docs/perf-model.md`` says how
the efficiencies were fitted. A ``device_spec`` given by the caller (a GPU not
in the table, or the rig's CPU) overrides the table entry field by field."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

GIB = 1024 ** 3

# Public specifications (../shared/hardware.md, the vendors' datasheets) and
# NVML's own memory figure where one was read. Peaks are dense (no sparsity)
# tensor-core rates in TFLOP/s; ``fp4`` is absent where the chip has no FP4
# tensor cores (Hopper runs FP4 weights through a BF16 kernel).
#
# All-reduce figures by rank count come from NVIDIA aiconfigurator 0.12's
# profiled databases (tests/unit/fixtures/perf/aiconfigurator-0.12.json):
# ``nccl_us`` the time of a small (decode-sized, <= 8 KiB) NCCL all-reduce,
# ``custom_us`` vLLM's custom all-reduce in a CUDA graph where vLLM enables
# it, ``busbw_gbs`` NCCL's bus bandwidth on a 64 MiB all-reduce. Rank counts
# between the table's rows are interpolated. ``bandwidth_efficiency`` is the
# share of the memory bandwidth a BF16 GEMM at M=1 streams (H200: measured,
# tests/unit/fixtures/perf/h200-micro.json and the 8B decode step; RTX PRO
# 6000: aiconfigurator's GEMM database), ``gemm_floor_us`` the shortest a
# GEMM takes (H200 measured about 4 us; aiconfigurator about 6 us on SM120).
GPU_SPECS = {
    "RTX PRO 6000": {
        # NVML reports 97,887 MiB on the Server Edition (issue 15; 95.6 GiB).
        "memory_gib": 97887 / 1024.0, "memory_bandwidth_gbs": 1792.0,
        "tflops": {"bf16": 467.8, "fp8": 935.6, "fp4": 1871.2},
        "link": "pcie", "bandwidth_efficiency": 0.79, "gemm_floor_us": 6.0,
        "allreduce": {"nccl_us": {2: 6.31, 4: 13.36, 8: 25.53}, "custom_us": {2: 4.17},
                      "busbw_gbs": {2: 36.5, 4: 25.0, 8: 23.8}},
    },
    "H200": {
        "memory_gib": 150754820096 / float(GIB), "memory_bandwidth_gbs": 4800.0,
        "tflops": {"bf16": 989.0, "fp8": 1979.0},
        "link": "nvlink", "bandwidth_efficiency": 0.89, "gemm_floor_us": 4.0,
        "allreduce": {"nccl_us": {2: 6.17, 4: 9.76, 8: 16.59}, "custom_us": {2: 4.50, 4: 4.56, 8: 4.78},
                      "busbw_gbs": {2: 274.0, 4: 312.0, 8: 367.0}},
    },
    "H100": {
        # NVML reports 81,559 MiB on the lent H100 80GB HBM3 (the h100-serve-*.json fixtures; 79.6 GiB, not 80e9 B).
        "memory_gib": 81559 / 1024.0, "memory_bandwidth_gbs": 3350.0,
        "tflops": {"bf16": 989.0, "fp8": 1979.0},
        "link": "nvlink", "bandwidth_efficiency": 0.89, "gemm_floor_us": 4.0,
        "allreduce": {"nccl_us": {2: 6.26, 4: 9.84, 8: 15.84}, "custom_us": {2: 4.21, 4: 4.58, 8: 4.65},
                      "busbw_gbs": {2: 266.0, 4: 311.0, 8: 364.0}},
    },
    "B200": {
        "memory_gib": 180.0e9 / GIB, "memory_bandwidth_gbs": 7700.0,
        "tflops": {"bf16": 2250.0, "fp8": 4500.0, "fp4": 9000.0},
        "link": "nvlink", "bandwidth_efficiency": 0.85, "gemm_floor_us": 4.0,
        "allreduce": {"nccl_us": {2: 9.31, 4: 14.48, 8: 26.47}, "custom_us": {2: 7.0, 4: 7.07, 8: 7.46},
                      "busbw_gbs": {2: 458.0, 4: 555.0, 8: 427.0}},
    },
}
DEFAULT_GPU = "RTX PRO 6000"

SOURCES = {
    "RTX PRO 6000": "memory as NVML reports it on the Server Edition (97,887 MiB, issue 15); bandwidth and peaks from "
                    "aiconfigurator 0.12 systems/rtx_pro_6000_server.yaml (1,792 GB/s; 467.8 / 935.6 / 1871.2 TFLOP/s "
                    "BF16 / FP8 / FP4); all-reduce from its profiled NCCL 2.29.2 database (PCIe, no NVLink)",
    "H200": "memory as NVML reports it on the lent H200 (tests/unit/fixtures/gpu/h200-1gpu.nvml.json); 4.8 TB/s and "
            "989 / 1979 TFLOP/s (datasheet, aiconfigurator h200_sxm); all-reduce from aiconfigurator's NCCL and vLLM "
            "custom all-reduce databases",
    "H100": "memory as NVML reports it on the lent H100 80GB HBM3 (81,559 MiB, tests/unit/fixtures/perf/h100-serve-*.json); "
            "H100 SXM datasheet (3.35 TB/s, 989 TFLOP/s dense BF16); all-reduce from aiconfigurator h100_sxm; "
            "bandwidth efficiency and GEMM floor assumed as measured on the H200 (same chip)",
    "B200": "aiconfigurator 0.12 b200_sxm (7.7 TB/s, 2.25 PFLOP/s dense BF16); all-reduce from its databases; "
            "bandwidth efficiency and GEMM floor assumed, not measured",
}

DEVICE_SPEC_KEYS = ("name", "memory_gib", "memory_bandwidth_gbs", "bandwidth_efficiency", "gemm_floor_us", "tflops",
                    "link", "link_busbw_gbs", "allreduce_latency_us", "custom_allreduce_us", "cuda_graphs",
                    "async_scheduling")
LINKS = ("pcie", "nvlink")
# vLLM's custom all-reduce (vllm/distributed/device_communicators/
# custom_all_reduce.py) serves world sizes 2, 4, 6 and 8, only when the GPUs
# are fully connected over NVLink or when there are just two of them
# ("Custom allreduce is disabled because it's not supported on more than two
# PCIe-only GPUs"), and messages up to 8 MiB; NCCL takes the rest.
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_ALLREDUCE_MAX_BYTES = 8 * 1024 * 1024


class DeviceSpecError(ValueError):
    """A device_spec field the planner cannot use; the message names it."""


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise DeviceSpecError("device_spec.%s must be a number above 0, got %r" % (name, value))
    return float(value)


def check_device_spec(device_spec):
    """``device_spec`` with every field checked (unknown keys, types, links); DeviceSpecError names the field."""
    if device_spec is None:
        return None
    if not isinstance(device_spec, dict):
        raise DeviceSpecError("device_spec must be a dict, got %r" % (device_spec,))
    unknown = sorted(str(key) for key in device_spec if key not in DEVICE_SPEC_KEYS)
    if unknown:
        raise DeviceSpecError("device_spec has unknown key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(DEVICE_SPEC_KEYS)))
    checked = {}
    for key, value in device_spec.items():
        if value is None:
            continue
        if key == "name":
            checked[key] = str(value)
        elif key == "link":
            if value not in LINKS:
                raise DeviceSpecError("device_spec.link must be pcie or nvlink, got %r" % (value,))
            checked[key] = value
        elif key in ("cuda_graphs", "async_scheduling"):
            if not isinstance(value, bool):
                raise DeviceSpecError("device_spec.%s must be true or false, got %r" % (key, value))
            checked[key] = value
        elif key == "tflops":
            if not isinstance(value, dict) or not value:
                raise DeviceSpecError("device_spec.tflops must be a dict of data type to TFLOP/s, e.g. {bf16: 989}, got %r" % (value,))
            checked[key] = dict((str(dtype), _positive("tflops." + str(dtype), rate)) for dtype, rate in value.items())
        else:
            checked[key] = _positive(key, value)
    if checked.get("bandwidth_efficiency", 0) > 1:
        raise DeviceSpecError("device_spec.bandwidth_efficiency must be a share of the bandwidth, above 0 and at most 1, "
                              "got %r" % (checked["bandwidth_efficiency"],))
    return checked


def gpu_spec(gpu_name, device_spec=None):
    """(name, spec) for ``gpu_name`` (substring match on the table's keys, the
    reference box's GPU when nothing matches), overridden by ``device_spec``."""
    name, spec = DEFAULT_GPU, GPU_SPECS[DEFAULT_GPU]
    for key, entry in GPU_SPECS.items():
        if gpu_name and key.lower() in gpu_name.lower():
            name, spec = key, entry
            break
    spec = dict(spec, cuda_graphs=True, source=SOURCES.get(name, ""))
    if device_spec:
        checked = check_device_spec(device_spec)
        name = checked.pop("name", None) or (gpu_name or name)
        allreduce = dict(spec["allreduce"])
        # A flat figure given by the caller stands for every rank count.
        for key, table in (("allreduce_latency_us", "nccl_us"), ("custom_allreduce_us", "custom_us"),
                           ("link_busbw_gbs", "busbw_gbs")):
            if key in checked:
                allreduce[table] = {2: checked.pop(key)}
        spec.update(checked)
        spec["allreduce"] = allreduce
        spec["source"] = "device_spec given by the caller, over %s" % spec["source"]
    return name, spec


def peak_tflops(spec, dtype):
    """The matrix rate for ``dtype``; a type the device lacks runs at the next wider one (FP4 as FP8 as BF16)."""
    rates = spec["tflops"]
    for candidate in {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16")}.get(dtype, (dtype, "bf16")):
        if candidate in rates:
            return rates[candidate]
    return min(rates.values())


def by_ranks(table, ranks):
    """A per-rank-count figure, interpolated between (and held beyond) the table's rows."""
    keys = sorted(table)
    if ranks <= keys[0]:
        return table[keys[0]]
    if ranks >= keys[-1]:
        return table[keys[-1]]
    for low, high in zip(keys, keys[1:]):
        if low <= ranks <= high:
            return table[low] + (table[high] - table[low]) * (ranks - low) / float(high - low)
    return table[keys[-1]]


def uses_custom_allreduce(world_size, size_bytes, link):
    return (world_size in CUSTOM_ALLREDUCE_WORLD_SIZES and size_bytes <= CUSTOM_ALLREDUCE_MAX_BYTES
            and (link == "nvlink" or world_size == 2))


def table_allreduce_us(world_size, size_bytes, spec, link):
    """One all-reduce as vLLM runs it: its custom kernel where vLLM enables it,
    else NCCL; a latency by rank count plus 2 (n - 1) / n of the message at
    the bus bandwidth."""
    if world_size < 2:
        return 0.0
    table = spec["allreduce"]
    wire = 2.0 * (world_size - 1) / world_size * size_bytes / (by_ranks(table["busbw_gbs"], world_size) * 1e3)
    if table.get("custom_us") and uses_custom_allreduce(world_size, size_bytes, link):
        return by_ranks(table["custom_us"], world_size) + wire
    return by_ranks(table["nccl_us"], world_size) + wire


def collective_us(world_size, size_bytes, spec):
    """One NCCL all-gather or reduce-scatter of ``size_bytes`` in all (the MoE dispatch and combine of DP ranks)."""
    if world_size < 2:
        return 0.0
    table = spec["allreduce"]
    wire = (world_size - 1.0) / world_size * size_bytes / (by_ranks(table["busbw_gbs"], world_size) * 1e3)
    return by_ranks(table["nccl_us"], world_size) + wire


def allreduce_us(world_size, size_bytes, spec, link, measured=None):
    """(microseconds, source) of one all-reduce: ``measured(world, bytes)``
    (allreduce_probe's figures) where it has the world size, else the table."""
    if world_size < 2:
        return 0.0, "none"
    if measured is not None:
        value = measured(world_size, size_bytes)
        if value is not None:
            return value, "measured on %d GPUs" % world_size
    return table_allreduce_us(world_size, size_bytes, spec, link), "table"


def p2p_us(size_bytes, spec):
    """One pipeline send/recv of ``size_bytes`` between neighbouring stages: the 2-rank NCCL latency plus the bytes."""
    table = spec["allreduce"]
    return table["nccl_us"][min(table["nccl_us"])] + size_bytes / (by_ranks(table["busbw_gbs"], 2) * 1e3)
