# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""allreduce_probe.run, the module's work, with a fake run_command standing in for the torch worker: which counts
are probed and in which order, the environment each run gets, and how a failed or wrong run is reported."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import allreduce_probe as probe

PARAMS = {"python": "python3", "backend": "nccl", "gpu_counts": None, "hidden_size": 512, "max_bytes": 4096,
          "iterations": 3, "warmup": 1, "timeout": 600, "gpu_name": None, "link": None}
FOUR_GPUS = {"count": 4, "devices": [{"name": "NVIDIA H200"}] * 4, "topology": {"nvlink": True}}


class FakeWorker(object):
    """Answers each run as the worker would (two sizes, sum right), recording the command and environment."""

    def __init__(self, reply=None, rc=0, err=""):
        self.calls = []
        self.reply, self.rc, self.err = reply, rc, err

    def __call__(self, command, environ_update=None, check_rc=True):
        assert check_rc is False
        world = int(command[command.index("--world") + 1])
        self.calls.append({"command": command, "world": world, "visible": environ_update.get("CUDA_VISIBLE_DEVICES"),
                           "nvls": environ_update.get("NCCL_NVLS_ENABLE"), "worker_exists": os.path.exists(command[1])})
        reply = self.reply if self.reply is not None else {
            "sum_ok": True, "torch": "2.9.0", "nccl": "2.27.3",
            "timings": [[1024, 10e-6 * world], [4096, 20e-6 * world]]}
        return self.rc, "loading\n" + json.dumps(reply) + "\n", self.err


def ports():
    numbers = iter(range(29500, 29600))
    return lambda: next(numbers)


def test_counts_default_to_powers_of_two_up_to_the_gpus_and_run_smallest_first():
    worker = FakeWorker()
    result, comparison = probe.run(dict(PARAMS), FOUR_GPUS, worker, ports())
    assert [call["world"] for call in worker.calls] == [1, 2, 4]
    assert [call["visible"] for call in worker.calls] == ["0", "0,1", "0,1,2,3"]
    assert all(call["nvls"] == "0" and call["worker_exists"] for call in worker.calls)
    assert worker.calls[0]["command"][2:] == ["--world", "1", "--backend", "nccl", "--sizes", "1024,4096",
                                              "--iterations", "3", "--warmup", "1", "--port", "29500"]
    assert not os.path.exists(worker.calls[0]["command"][1])
    assert sorted(result["by_gpu_count"]) == ["1", "2", "4"]
    assert result["torch"] == "2.9.0" and result["nccl"] == "2.27.3" and result["backend"] == "nccl"
    assert [row["gpus"] for row in comparison] == [2, 4]


def test_given_counts_run_once_each_in_order_and_gloo_sets_no_devices():
    worker = FakeWorker()
    result, dummy = probe.run(dict(PARAMS, backend="gloo", gpu_counts=[2, 1, 2]), {"count": 0, "devices": []},
                              worker, ports())
    assert [call["world"] for call in worker.calls] == [1, 2]
    assert all(call["visible"] is None for call in worker.calls)
    assert sorted(result["by_gpu_count"]) == ["1", "2"]


@pytest.mark.parametrize("changes, facts, message", [
    ({"backend": "gloo"}, {"count": 0}, "gpu_counts: required with backend gloo (the number of CPU processes)"),
    ({}, {"count": 0, "devices": []}, "gpu_counts: NVML reports no GPUs on this host; name the counts or use backend gloo"),
    ({"gpu_counts": [8]}, FOUR_GPUS, "gpu_counts: 8 GPUs asked for, NVML reports 4"),
    ({"gpu_counts": [0, 2]}, FOUR_GPUS, "gpu_counts must be 1 or more (got [0, 2]), iterations 1 or more and warmup 0 or more"),
    ({"iterations": 0}, FOUR_GPUS, "gpu_counts must be 1 or more (got [1, 2, 4]), iterations 1 or more and warmup 0 or more"),
    ({"warmup": -1}, FOUR_GPUS, "gpu_counts must be 1 or more (got [1, 2, 4]), iterations 1 or more and warmup 0 or more"),
    ({"hidden_size": 0}, FOUR_GPUS, "hidden_size: must be 1 or more (got 0)"),
    # The count check comes before the iterations check, and both before the sizes.
    ({"gpu_counts": [8], "iterations": 0, "hidden_size": 0}, FOUR_GPUS, "gpu_counts: 8 GPUs asked for, NVML reports 4"),
])
def test_bad_inputs_are_refused_before_any_worker_runs(changes, facts, message):
    worker = FakeWorker()
    with pytest.raises(probe.ProbeError) as caught:
        probe.run(dict(PARAMS, **changes), facts, worker, ports())
    assert str(caught.value) == message
    assert not isinstance(caught.value, probe.ProbeRunError)
    assert worker.calls == []


def test_a_failed_run_names_the_count_and_keeps_the_stderr_tail():
    err = "x" * 5000 + "\nRuntimeError: NCCL error: unhandled system error\n"
    worker = FakeWorker(rc=1, err=err)
    with pytest.raises(probe.ProbeRunError) as caught:
        probe.run(dict(PARAMS, gpu_counts=[2, 4]), FOUR_GPUS, worker, ports())
    assert str(caught.value) == "the all-reduce probe on 2 GPUs failed (rc 1): RuntimeError: NCCL error: unhandled system error"
    assert caught.value.stderr == err[-4000:]
    assert [call["world"] for call in worker.calls] == [2]
    assert not os.path.exists(worker.calls[0]["command"][1])


def test_a_run_without_a_reply_says_no_output():
    with pytest.raises(probe.ProbeRunError) as caught:
        probe.read_reply(dict(PARAMS, backend="gloo"), 3, 0, "no json here\n", "")
    assert str(caught.value) == "the all-reduce probe on 3 processes failed (rc 0): no output"


def test_a_wrong_sum_stops_the_probe():
    worker = FakeWorker(reply={"sum_ok": False, "timings": []})
    with pytest.raises(probe.ProbeError) as caught:
        probe.run(dict(PARAMS, gpu_counts=[2]), FOUR_GPUS, worker, ports())
    assert str(caught.value) == "the all-reduce on 2 ranks returned a wrong sum"
    assert not isinstance(caught.value, probe.ProbeRunError)
    assert not os.path.exists(worker.calls[0]["command"][1])


def test_gpu_name_and_link_come_from_the_options_over_the_facts():
    worker = FakeWorker()
    dummy, from_facts = probe.run(dict(PARAMS, gpu_counts=[2]), FOUR_GPUS, worker, ports())
    dummy, given = probe.run(dict(PARAMS, gpu_counts=[2], gpu_name="NVIDIA L40S", link="pcie"), FOUR_GPUS, worker, ports())
    assert from_facts[0]["predicted_us"] == round(probe.predicted_us(2, 1024, "NVIDIA H200", "nvlink"), 3)
    assert given[0]["predicted_us"] == round(probe.predicted_us(2, 1024, "NVIDIA L40S", "pcie"), 3)
    assert from_facts[0]["predicted_us"] != given[0]["predicted_us"]
