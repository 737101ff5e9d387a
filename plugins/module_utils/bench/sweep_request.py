# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a sweep is asked, as one value: ``SweepRequest`` in place of the module's raw params dict, which was
handed four calls deep and read by key in forty places.

Its fields are the vllm_bench module's options, with the same defaults (tests/unit/plugins/module_utils/
test_sweep_request.py compares them with the module's argument spec). Nothing here checks values:
``vllm_bench.validate_options`` does, naming the bad option, so a request can be built from a module's raw
options (or a test's few) and checked in one place.
"""

from __future__ import absolute_import, division, print_function
from __future__ import annotations

__metaclass__ = type

import dataclasses
from typing import Any, Dict, List, Mapping, Optional

DEFAULT_CONCURRENCY = (1, 8, 32, 128, 256, 1024)


@dataclasses.dataclass(frozen=True)
class SweepRequest:
    """One sweep of a vLLM server: where, which model, what load (closed-loop levels and/or request rates) with
    which prompts, and what is measured beside the requests (server counters, GPU power)."""

    model: str
    base_url: str = "http://127.0.0.1:8000"
    api: str = "completions"
    # Never printed with the request (repr), as the module never logs it (no_log).
    api_key: Optional[str] = dataclasses.field(default=None, repr=False)
    validate_certs: bool = True
    concurrency: List[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    requests_per_level: int = 0
    duration: float = 0
    input_len: int = 512
    output_len: int = 128
    ignore_eos: bool = True
    warmup_requests: int = 2
    request_timeout: float = 600
    max_failure_ratio: float = 0.05
    seed: int = 0
    vocab_size: Optional[int] = None
    reserved_token_ids: int = 16
    scrape_metrics: bool = True
    power: bool = True
    power_gpus: Optional[List[int]] = None
    request_rate: List[Any] = dataclasses.field(default_factory=list)
    burstiness: float = 1.0
    max_concurrency: int = 0
    range_ratio: float = 0.0
    prefix_len: int = 0
    dataset: Optional[Dict[str, Any]] = None
    goodput: Optional[Dict[str, Any]] = None
    rate_search_steps: int = 0

    @classmethod
    def from_module_params(cls, params: Mapping[str, Any]) -> "SweepRequest":
        """The request of the module's ``params`` (absent options take their defaults); ValueError names an unknown
        option or a missing model."""
        known = set(field.name for field in dataclasses.fields(cls))
        unknown = sorted(str(name) for name in params if name not in known)
        if unknown:
            raise ValueError("unknown vllm_bench options: %s" % ", ".join(unknown))
        if not params.get("model"):
            raise ValueError("model: required (the served model name to send requests for)")
        return cls(**dict(params))
