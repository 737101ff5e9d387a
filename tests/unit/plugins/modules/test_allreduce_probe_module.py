# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.allreduce_probe through run_module, with real torch.distributed all-reduces over gloo (the
rig's model-builder venv has CPU torch): the same worker that runs NCCL across GPUs, one process per rank."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gauntlet.vllm.plugins.modules import allreduce_probe, vllm_plan

RIG_DIR = os.environ.get("GAUNTLET_RIG_DIR", os.path.expanduser("~/.cache/gauntlet-vllm-rig"))
TORCH_PYTHON = os.path.join(RIG_DIR, "builder-venv", "bin", "python")


def test_gloo_probe_on_one_and_two_ranks(run_module):
    assert os.path.exists(TORCH_PYTHON), "no torch venv at %s: run scripts/rig.sh first" % TORCH_PYTHON
    result, failed = run_module(allreduce_probe.main, {
        "python": TORCH_PYTHON, "backend": "gloo", "gpu_counts": [2, 1], "hidden_size": 512,
        "max_bytes": 65536, "iterations": 3, "warmup": 1})
    assert not failed, result.get("msg")
    facts = result["ansible_facts"]["allreduce_probe"]
    assert facts["backend"] == "gloo" and facts["torch"] and facts["nccl"] is None
    assert sorted(facts["by_gpu_count"]) == ["1", "2"]
    for count, entry in facts["by_gpu_count"].items():
        assert [row["bytes"] for row in entry["sizes"]] == [1024, 4096, 16384, 65536]
        assert all(row["time_us"] > 0 for row in entry["sizes"])
        assert entry["latency_us"] == entry["sizes"][0]["time_us"]
    assert all(row["busbw_gbs"] == 0.0 for row in facts["by_gpu_count"]["1"]["sizes"])
    assert all(row["busbw_gbs"] > 0.0 for row in facts["by_gpu_count"]["2"]["sizes"])
    [row] = result["comparison"]
    assert row["gpus"] == 2 and row["bytes"] == 1024 and row["measured_us"] == facts["by_gpu_count"]["2"]["latency_us"]
    assert row["ratio"] == round(row["predicted_us"] / row["measured_us"], 3)


def test_a_failing_worker_is_reported_with_its_error(run_module):
    result, failed = run_module(allreduce_probe.main, {
        "python": "/bin/false", "backend": "gloo", "gpu_counts": [1], "hidden_size": 512, "max_bytes": 1024})
    assert failed and result["msg"].startswith("the all-reduce probe on 1 processes failed (rc 1)")


def test_gloo_needs_the_counts(run_module):
    result, failed = run_module(allreduce_probe.main, {"backend": "gloo"})
    assert failed and result["msg"] == "gpu_counts: required with backend gloo (the number of CPU processes)"


def test_vllm_plan_takes_the_probe(run_module, model_configs_dir):
    rows = [{"bytes": 14336, "time_us": 100.0}, {"bytes": 57344, "time_us": 120.0}]
    probe = {"by_gpu_count": {"8": {"world_size": 8, "sizes": rows}}}
    result, failed = run_module(vllm_plan.main, {
        "model": os.path.join(model_configs_dir, "MiniMaxAI--MiniMax-M2.5.json"), "gpus": 8, "gpu_memory_gib": 89.4,
        "vllm_version": "0.28.0", "allreduce_probe": probe, "plan": {"tp": 8, "ep": True}})
    assert not failed, result.get("msg")
    basis = result["selected"]["estimate"]["basis"]
    assert basis["allreduce_source"] == "measured on 8 GPUs" and basis["tp_allreduce_us"] == 100.0


def test_a_failing_worker_returns_its_stderr_and_a_bad_input_returns_none(run_module, tmp_path):
    crashing = tmp_path / "python"
    crashing.write_text("#!/bin/sh\necho 'loading' >&2\necho 'RuntimeError: boom' >&2\nexit 3\n")
    crashing.chmod(0o755)
    result, failed = run_module(allreduce_probe.main, {
        "python": str(crashing), "backend": "gloo", "gpu_counts": [2], "hidden_size": 512, "max_bytes": 1024})
    assert failed and result["msg"] == "the all-reduce probe on 2 processes failed (rc 3): RuntimeError: boom"
    assert result["stderr"] == "loading\nRuntimeError: boom\n"
    refused, failed = run_module(allreduce_probe.main, {"backend": "gloo", "gpu_counts": [1], "iterations": 0})
    assert failed and refused["msg"].startswith("gpu_counts must be 1 or more (got [1])") and "stderr" not in refused
