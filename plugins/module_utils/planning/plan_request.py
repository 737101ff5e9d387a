# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the planner is asked, as one value: ``PlanRequest`` in place of plan_model's twenty parameters.

The hardware (per node), the vLLM release, what the deployment must meet and what a sweep of the host taught
(calibration, the measured all-reduce). ``None`` means the planner's default, which ``vllm_plan.settle_inputs``
applies; nothing here checks values (``vllm_plan`` does, naming the bad one), so a request can be built from a
module's raw options and checked in one place.
"""

from __future__ import absolute_import, division, print_function
from __future__ import annotations

__metaclass__ = type

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional

# Options of the vllm_plan module that are a request's fields of the same name (the rest come from facts).
MODULE_OPTIONS = ("gpu_memory_utilization", "max_model_len", "kv_cache_dtype", "objective", "workload", "ttft_p99_ms",
                  "min_user_tokens_per_s", "calibration", "device_spec", "enforce_eager", "nodes", "internode_link",
                  "executor_backend")


@dataclasses.dataclass(frozen=True)
class PlanRequest:
    """One planning question. ``gpus`` and ``gpu_memory_gib`` are per node; ``measured_allreduce_us`` is a
    function ``(world, bytes) -> us or None`` from an allreduce_probe fact."""

    gpus: int
    gpu_memory_gib: Optional[float]
    vllm_version: str
    gpu_memory_utilization: Optional[float] = None
    max_model_len: Optional[int] = None
    kv_cache_dtype: Optional[str] = None
    gpu_name: Optional[str] = None
    link: Optional[str] = None
    measured_allreduce_us: Optional[Callable[[int, float], Optional[float]]] = None
    objective: Optional[str] = None
    workload: Optional[Dict[str, Any]] = None
    ttft_p99_ms: Optional[float] = None
    min_user_tokens_per_s: Optional[float] = None
    calibration: Optional[Dict[str, Any]] = None
    device_spec: Optional[Dict[str, Any]] = None
    enforce_eager: bool = False
    nodes: Optional[int] = None
    internode_link: Optional[str] = None
    executor_backend: Optional[str] = None

    @classmethod
    def from_module_options(cls, params: Mapping[str, Any], gpus: int, gpu_memory_gib: Optional[float],
                            gpu_name: Optional[str], link: Optional[str],
                            measured_allreduce_us: Optional[Callable] = None) -> "PlanRequest":
        """The request of the vllm_plan module's ``params``, with the hardware the module settled from its facts."""
        options = dict((name, params.get(name)) for name in MODULE_OPTIONS)
        options["enforce_eager"] = bool(options["enforce_eager"])
        return cls(gpus=gpus, gpu_memory_gib=gpu_memory_gib, vllm_version=params["vllm_version"], gpu_name=gpu_name,
                   link=link, measured_allreduce_us=measured_allreduce_us, **options)
