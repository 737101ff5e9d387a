# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measuring all-reduce on the GPUs a plan would use, and what the planner makes of it.

Tensor parallelism pays two all-reduces per layer per decoded token, each of ``hidden_size`` bf16
values: a few KB, so latency-bound. The planner's estimate (``vllm_memory.decode_estimate``) takes
their cost from a table by link type; this module measures it instead, one process per GPU through
``torch.distributed`` (NCCL on GPUs, gloo on CPUs for tests), for message sizes from that per-token
all-reduce up to megabytes, and for each GPU count.

Figures follow nccl-tests' definitions: ``algbw = bytes / time`` and ``busbw = algbw * 2 (n - 1) / n``
(the bytes each link carries in a ring all-reduce, comparable across GPU counts).

``WORKER`` is the program run with a Python that has torch; it prints one JSON line per GPU count.
NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``): a program using it can take a shared host's GPUs
out of service.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import tempfile

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_hardware import gpu_spec, table_allreduce_us

BF16_BYTES = 2
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# Environment every probe runs with, whatever the caller's environment says.
FORCED_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class ProbeError(ValueError):
    pass


def message_sizes(hidden_size, max_bytes=DEFAULT_MAX_BYTES, factor=4):
    """From one decode step's all-reduce (hidden_size bf16 values) up to ``max_bytes``, times ``factor``."""
    if hidden_size < 1:
        raise ProbeError("hidden_size: must be 1 or more (got %s)" % hidden_size)
    size = hidden_size * BF16_BYTES
    sizes = []
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    if not sizes or sizes[-1] != max_bytes and max_bytes > sizes[-1]:
        sizes.append(max_bytes)
    return sizes


def bus_bandwidth_gbs(size_bytes, seconds, world_size):
    """(algbw, busbw) in GB/s, nccl-tests' definitions."""
    if seconds <= 0:
        return None, None
    algbw = size_bytes / seconds / 1e9
    return round(algbw, 6), round(algbw * 2.0 * (world_size - 1) / world_size, 6)


def summarize(world_size, timings):
    """One GPU count's figures from ``[(bytes, seconds per all-reduce), ...]``."""
    rows = []
    for size, seconds in sorted(timings):
        algbw, busbw = bus_bandwidth_gbs(size, seconds, world_size)
        rows.append({"bytes": size, "time_us": round(seconds * 1e6, 3), "algbw_gbs": algbw, "busbw_gbs": busbw})
    if not rows:
        raise ProbeError("no timings for %d GPUs" % world_size)
    return {"world_size": world_size, "sizes": rows, "latency_us": rows[0]["time_us"],
            "peak_busbw_gbs": max(row["busbw_gbs"] or 0.0 for row in rows)}


def measured_us(probe, world_size, size_bytes):
    """The all-reduce time the probe measured for ``world_size`` GPUs at ``size_bytes``, interpolated
    log-linearly between the sizes measured (clamped at both ends); None when that count was not probed."""
    entry = ((probe or {}).get("by_gpu_count") or {}).get(str(world_size))
    if not entry or not entry.get("sizes"):
        return None
    rows = sorted(entry["sizes"], key=lambda row: row["bytes"])
    if size_bytes <= rows[0]["bytes"]:
        return rows[0]["time_us"]
    if size_bytes >= rows[-1]["bytes"]:
        return rows[-1]["time_us"] * size_bytes / rows[-1]["bytes"]
    for low, high in zip(rows, rows[1:]):
        if low["bytes"] <= size_bytes <= high["bytes"]:
            share = (math.log(size_bytes) - math.log(low["bytes"])) / (math.log(high["bytes"]) - math.log(low["bytes"]))
            return low["time_us"] + share * (high["time_us"] - low["time_us"])
    return None


def predicted_us(world_size, size_bytes, gpu_name=None, link=None):
    """The planner's table estimate of one all-reduce (vllm_hardware.table_allreduce_us: aiconfigurator's profiled curve
    at that size where the device has one, else a latency by link type plus the ring's bytes over the link)."""
    dummy, spec = gpu_spec(gpu_name)
    link = link or spec["link"]
    if world_size < 2:
        return 0.0
    return table_allreduce_us(world_size, size_bytes, spec, link)


def compare(probe, hidden_size, gpu_name=None, link=None):
    """Per GPU count probed (2 or more), the planner's table figure against the measured one for one decode
    step's all-reduce, and their ratio (predicted / measured)."""
    size = hidden_size * BF16_BYTES
    rows = []
    for count in sorted((probe.get("by_gpu_count") or {}), key=int):
        world = int(count)
        if world < 2:
            continue
        measured = measured_us(probe, world, size)
        predicted = predicted_us(world, size, gpu_name, link)
        rows.append({"gpus": world, "bytes": size, "predicted_us": round(predicted, 3), "measured_us": round(measured, 3),
                     "ratio": round(predicted / measured, 3) if measured else None})
    return rows


# Run as ``python - --world N --backend nccl|gloo --sizes a,b,c --iterations I --warmup W`` with torch.
WORKER = r'''
import argparse, json, os, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, args, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    use_cuda = args.backend == "nccl"
    if use_cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group(args.backend, rank=rank, world_size=args.world)
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    timings = []
    for size in args.sizes:
        tensor = torch.ones(max(1, size // 2), dtype=torch.bfloat16 if use_cuda else torch.float16, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        if use_cuda:
            torch.cuda.synchronize()
        dist.barrier()
        started = time.perf_counter()
        for _ in range(args.iterations):
            dist.all_reduce(tensor)
        if use_cuda:
            torch.cuda.synchronize()
        elapsed = (time.perf_counter() - started) / args.iterations
        # The slowest rank sets the pace of a collective.
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        timings.append([size, slowest.item()])
    # Every rank takes part in a collective; rank 0 reports.
    check = torch.ones(4, device=device)
    dist.all_reduce(check)
    if rank == 0:
        queue.put({"world_size": args.world, "backend": args.backend, "timings": timings,
                   "sum_ok": bool((check == args.world).all().item()),
                   "torch": torch.__version__,
                   "nccl": ".".join(map(str, torch.cuda.nccl.version())) if use_cuda else None})
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--backend", choices=["nccl", "gloo"], required=True)
    parser.add_argument("--sizes", type=lambda text: [int(item) for item in text.split(",")], required=True)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    mp.spawn(run, args=(args, args.port, queue), nprocs=args.world, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
'''


class ProbeRunError(ProbeError):
    """A worker run that failed; ``stderr`` is the tail of its error output, returned with the module's result."""

    def __init__(self, msg, stderr):
        super(ProbeRunError, self).__init__(msg)
        self.stderr = stderr


def probe_counts(params, facts):
    """The GPU (or process) counts to probe: ``gpu_counts``, else 1, 2, 4 and 8 up to the GPUs NVML reports in
    ``facts``; checked against NVML's count (nccl), iterations and warmup (ProbeError names the input)."""
    counts = params["gpu_counts"]
    if not counts:
        if params["backend"] == "gloo":
            raise ProbeError("gpu_counts: required with backend gloo (the number of CPU processes)")
        counts = [count for count in (1, 2, 4, 8) if count <= facts.get("count", 0)]
        if not counts:
            raise ProbeError("gpu_counts: NVML reports no GPUs on this host; name the counts or use backend gloo")
    if params["backend"] == "nccl" and facts.get("count") and max(counts) > facts["count"]:
        raise ProbeError("gpu_counts: %d GPUs asked for, NVML reports %d" % (max(counts), facts["count"]))
    if min(counts) < 1 or params["iterations"] < 1 or params["warmup"] < 0:
        raise ProbeError("gpu_counts must be 1 or more (got %s), iterations 1 or more and warmup 0 or more"
                         % counts)
    return counts


def worker_command(params, worker, count, sizes, port):
    """The command line that runs ``WORKER`` (written to ``worker``) on ``count`` ranks."""
    return [params["python"], worker, "--world", str(count), "--backend", params["backend"],
            "--sizes", ",".join(str(size) for size in sizes), "--iterations", str(params["iterations"]),
            "--warmup", str(params["warmup"]), "--port", str(port)]


def read_reply(params, count, rc, out, err):
    """The worker's last JSON line; ProbeRunError when it failed, printed none or its sum was wrong."""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        raise ProbeRunError("the all-reduce probe on %d %s failed (rc %s): %s"
                            % (count, "GPUs" if params["backend"] == "nccl" else "processes", rc,
                               (err.strip().splitlines() or ["no output"])[-1]), err[-4000:])
    reply = json.loads(lines[-1])
    if not reply.get("sum_ok"):
        raise ProbeError("the all-reduce on %d ranks returned a wrong sum" % count)
    return reply


def run_workers(params, counts, sizes, run_command, free_port):
    """Run ``WORKER`` once per distinct count, smallest first, from a temporary file removed afterwards.
    ``run_command(command, environ_update=..., check_rc=False)`` returns ``(rc, out, err)`` as
    AnsibleModule.run_command does; ``free_port()`` a TCP port for the ranks' rendezvous.
    Returns ``(by_count, versions)``: the summary per count and the worker's torch and NCCL versions."""
    environment = dict(os.environ, **FORCED_ENVIRONMENT)
    handle, worker = tempfile.mkstemp(prefix="gauntlet-allreduce-", suffix=".py")
    with os.fdopen(handle, "w") as stream:
        stream.write(WORKER)
    by_count = {}
    versions = {}
    try:
        for count in sorted(set(counts)):
            command = worker_command(params, worker, count, sizes, free_port())
            if params["backend"] == "nccl":
                environment["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in range(count))
            rc, out, err = run_command(command, environ_update=environment, check_rc=False)
            reply = read_reply(params, count, rc, out, err)
            by_count[str(count)] = summarize(count, [tuple(item) for item in reply["timings"]])
            versions = {"torch": reply.get("torch"), "nccl": reply.get("nccl")}
    finally:
        os.unlink(worker)
    return by_count, versions


def run(params, facts, run_command, free_port):
    """The module's work: the counts to probe, the message sizes, one worker run per count, then the
    ``allreduce_probe`` fact and its comparison with the planner's table. ``facts`` is gpu_facts' result
    (``{"count": 0, "devices": []}`` without NVML). Returns ``(result, comparison)``; ProbeError (ProbeRunError
    with the worker's stderr) says why it could not."""
    counts = probe_counts(params, facts)
    sizes = message_sizes(params["hidden_size"], params["max_bytes"])
    by_count, versions = run_workers(params, counts, sizes, run_command, free_port)
    devices = facts.get("devices") or []
    gpu_name = params["gpu_name"] or (devices[0].get("name") if devices else None)
    link = params["link"] or ("nvlink" if (facts.get("topology") or {}).get("nvlink") else None)
    result = dict(backend=params["backend"], hidden_size=params["hidden_size"], by_gpu_count=by_count, **versions)
    return result, compare(result, params["hidden_size"], gpu_name, link)
