# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how long the planner takes to evaluate every plan of each real model on 8 GPUs, with the
performance model's default six-level concurrency workload (goal: under 0.5 s for a 1T-parameter model,
issue 15). A figure to read, not a pass/fail test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import plan_model

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "fixtures", "model_configs")
REPEATS = 5


def main():
    print("goal: every plan of an 8-GPU host, 6 concurrency levels, under 500 ms per model")
    print("%-42s %6s %10s %10s" % ("model", "plans", "best ms", "median ms"))
    for name in sorted(os.listdir(FIXTURES)):
        if not name.endswith(".json") or name.endswith("_hf_quant.json"):
            continue
        sidecar = os.path.join(FIXTURES, name[:-5] + "_hf_quant.json")
        timings = []
        for _repeat in range(REPEATS):
            started = time.perf_counter()
            # Loading is part of what a play pays for, so it is timed too.
            model = load_model_config(os.path.join(FIXTURES, name),
                                      hf_quant_path=sidecar if os.path.exists(sidecar) else None, discover_hf_quant=False)
            result = plan_model(model, 8, 95.6, "0.28.0", max_model_len=32768)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        print("%-42s %6d %10.1f %10.1f" % (name[:-5], len(result["plans"]), timings[0], timings[len(timings) // 2]))


if __name__ == "__main__":
    main()
