# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how fast model_verify hashes a checkpoint, next to `openssl dgst -sha256` on the same files
(goal: at least 0.9 of openssl's speed per core), and how long re-verifying 100 unchanged shards
from the digest cache takes (goal: under 1 s). Figures to read, not a pass/fail test; it fails only
if a run gives a wrong answer. Files are written to a temporary directory, removed afterwards."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import default_workers
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.verify import verify_checkpoint

MIB = 1024 * 1024
OLD_MTIME = 1700000000  # digests of files modified in the last seconds are not cached


def write_shard(path, tensors, block):
    """A safetensors file of U8 tensors ``{name: nbytes}`` filled with ``block`` repeated."""
    header = {}
    offset = 0
    for name, nbytes in tensors:
        header[name] = {"dtype": "U8", "shape": [nbytes], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for name, nbytes in tensors:
            left = nbytes
            while left:
                chunk = block[:min(left, len(block))]
                handle.write(chunk)
                left -= len(chunk)
    os.utime(path, (OLD_MTIME, OLD_MTIME))


def write_checkpoint(directory, shards, shard_bytes, block):
    os.makedirs(directory)
    weight_map = {}
    for number in range(1, shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (number, shards)
        tensor = "layers.%d.weight" % number
        write_shard(os.path.join(directory, name), [(tensor, shard_bytes)], block)
        weight_map[tensor] = name
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as handle:
        json.dump({"weight_map": weight_map}, handle)
    return sorted(os.path.join(directory, name) for name in set(weight_map.values()))


def best_of(repeat, run):
    """Shortest wall time of ``repeat`` calls of ``run``."""
    times = []
    for _count in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def ours(directory, workers, expect_bytes):
    def run():
        result = verify_checkpoint(directory, checksum="true", cache=False, workers=workers)
        if not result["ok"] or result["bytes_hashed"] != expect_bytes:
            raise SystemExit("model_verify gave a wrong answer: %s" % result["errors"])
    return run


def openssl(paths, processes):
    groups = [paths[index::processes] for index in range(processes)]

    def run():
        if processes == 1:
            subprocess.run(["openssl", "dgst", "-sha256"] + paths, check=True, stdout=subprocess.DEVNULL)
            return
        running = [subprocess.Popen(["openssl", "dgst", "-sha256"] + group, stdout=subprocess.DEVNULL) for group in groups if group]
        for process in running:
            if process.wait() != 0:
                raise SystemExit("openssl dgst failed")
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=8, help="files hashed (default 8)")
    parser.add_argument("--mib", type=int, default=128, help="MiB per file (default 128)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure, the best is shown (default 3)")
    parser.add_argument("--workers", type=int, default=default_workers(), help="parallel workers (default min(8, CPUs))")
    parser.add_argument("--cached-shards", type=int, default=100, help="shards re-verified from the cache (default 100)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-verify-")
    try:
        block = os.urandom(MIB)
        big = os.path.join(workdir, "big")
        paths = write_checkpoint(big, args.files, args.mib * MIB, block)
        total = sum(os.path.getsize(path) for path in paths)
        # Warm the page cache so that every run below measures hashing, not the disk.
        ours(big, args.workers, total)()

        rows = []
        counts = sorted(set([1, args.workers]))
        for workers in counts:
            rows.append(("model_verify (threads)", workers, best_of(args.repeat, ours(big, workers, total))))
        have_openssl = shutil.which("openssl") is not None
        if have_openssl:
            for processes in counts:
                rows.append(("openssl dgst -sha256 (processes)", processes, best_of(args.repeat, openssl(paths, processes))))

        print("sha256 over %d files x %d MiB (%.2f GB), page cache warm, best of %d; %d CPU(s), default workers %d"
              % (args.files, args.mib, total / 1e9, args.repeat, os.cpu_count() or 1, default_workers()))
        print("%-34s %7s %9s %8s %10s" % ("", "workers", "seconds", "GB/s", "GB/s/core"))
        speed = {}
        for label, workers, seconds in rows:
            rate = total / seconds / 1e9
            speed[(label.split()[0], workers)] = rate
            print("%-34s %7d %9.3f %8.2f %10.2f" % (label, workers, seconds, rate, rate / workers))
        if have_openssl:
            ratios = ", ".join("%d worker%s %.2f" % (workers, "" if workers == 1 else "s",
                                                     speed[("model_verify", workers)] / speed[("openssl", workers)])
                               for workers in counts)
            print("ratio ours/openssl per core: %s (goal >= 0.9)" % ratios)
        else:
            print("openssl not found: no comparison")

        small = os.path.join(workdir, "small")
        write_checkpoint(small, args.cached_shards, 64 * 1024, block)
        first = verify_checkpoint(small, checksum="true", workers=args.workers)
        started = time.perf_counter()
        again = verify_checkpoint(small, checksum="true", workers=args.workers)
        seconds = time.perf_counter() - started
        if not (first["ok"] and again["ok"] and again["hashed"] == [] and len(again["from_cache"]) == args.cached_shards):
            raise SystemExit("the cache did not serve every unchanged shard: hashed %d" % len(again["hashed"]))
        print("re-verify %d unchanged shards from the cache: %.3f s (goal < 1 s); %d hashed, %d from cache"
              % (args.cached_shards, seconds, len(again["hashed"]), len(again["from_cache"])))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
