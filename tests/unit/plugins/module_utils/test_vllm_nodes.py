# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plans over several nodes: where vLLM puts the ranks, what crosses the inter-node link and its cost, vLLM's
multi-node rules with their messages, each node's command line, and when more nodes stop paying."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_nodes import (
    NodesError,
    check_internode_link,
    check_multinode,
    check_nodes,
    launch,
    layout,
    node_args,
    nodes_from_facts,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import PlanError, enumerate_plans, plan_model

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "model_configs")


def load(name):
    return load_model_config(os.path.join(FIXTURES, name + ".json"), discover_hf_quant=False)


def plan(tp=1, pp=1, dp=1, ep=False, nodes=1):
    return {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "nodes": nodes}


# ---- where the ranks land ------------------------------------------------------------------------------------

@pytest.mark.parametrize("the_plan, expected", [
    # TP inside each node, a pipeline stage per node: one send crosses, vLLM's --nnodes launch.
    (plan(tp=8, pp=2, nodes=2), {"ranks_per_node": 8, "tp_nodes": 1, "pp_crossings": 1, "dp_nodes": 1, "launch": "nnodes"}),
    # TP across both nodes.
    (plan(tp=16, nodes=2), {"tp_nodes": 2, "pp_crossings": 0, "launch": "nnodes"}),
    # Whole engines per node: data parallel across nodes, its MoE group spans both.
    (plan(tp=8, dp=2, ep=True, nodes=2), {"tp_nodes": 1, "dp_nodes": 2, "moe_nodes": 2, "launch": "dp"}),
    (plan(tp=2, dp=8, nodes=2), {"ranks_per_node": 8, "tp_nodes": 1, "dp_nodes": 2, "launch": "dp"}),
    # Two stages on each of two nodes: the boundary between the nodes is the only crossing.
    (plan(tp=4, pp=4, nodes=2), {"pp_crossings": 1, "launch": "nnodes"}),
    (plan(tp=8), {"ranks_per_node": 8, "tp_nodes": 1, "launch": "single"}),
])
def test_layout_follows_vllms_rank_order(the_plan, expected):
    placed = layout(the_plan)
    assert dict((key, placed[key]) for key in expected) == expected


def test_each_nodes_arguments_for_data_parallel_across_nodes():
    the_plan = plan(tp=2, dp=8, nodes=2)
    assert node_args(the_plan, 0, head="10.0.0.1") == [
        "--data-parallel-size-local", "4", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port", "29550"]
    assert node_args(the_plan, 1, head="10.0.0.1") == [
        "--data-parallel-size-local", "4", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port", "29550",
        "--data-parallel-start-rank", "4", "--headless"]


def test_each_nodes_arguments_for_an_engine_over_nodes():
    the_plan = plan(tp=8, pp=2, nodes=2)
    assert node_args(the_plan, 0, head="h") == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "h",
                                                "--master-port", "29501"]
    assert node_args(the_plan, 1, head="h")[-3:] == ["--master-port", "29501", "--headless"]
    assert node_args(plan(tp=8), 0) == []


def test_with_ray_only_the_head_runs_vllm():
    described = launch(plan(tp=8, dp=2, nodes=2), backend="ray")
    assert described["mode"] == "ray"
    assert described["nodes"][0]["args"] == ["--distributed-executor-backend", "ray", "--data-parallel-backend", "ray"]
    assert described["nodes"][1] == {"node_rank": 1, "role": "worker", "runs": "ray worker", "args": []}


# ---- vLLM's multi-node rules --------------------------------------------------------------------------------

def test_a_world_size_the_node_count_does_not_divide_gets_vllms_message():
    errors = check_multinode(plan(pp=3, nodes=2), 8)
    assert errors[0]["check"] == "nnodes_world_size"
    assert errors[0]["message"] == (
        "Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (3). Adjust "
        "`--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, `--tensor-parallel-size`, or "
        "`--prefill-context-parallel-size`.")


def test_dp_engines_that_do_not_split_evenly_over_the_nodes_get_vllms_message():
    # 24 ranks on 3 nodes of 8: an engine is 3 ranks, so vLLM infers 2 DP engines per node and 4 DP node groups.
    errors = check_multinode(plan(pp=3, dp=8, nodes=3), 8)
    assert [e["check"] for e in errors] == ["dp_node_groups"]
    assert errors[0]["message"] == ("Invalid data parallel configuration: nnodes (3) must be divisible by the number "
                                    "of data parallel node groups (4 = data_parallel_size 8 / "
                                    "data_parallel_size_local 2)")


def test_more_ranks_per_node_than_gpus_is_out_of_bounds():
    errors = check_multinode(plan(tp=8, dp=4, nodes=2), 8)
    assert errors[0]["check"] == "node_gpus"
    assert errors[0]["message"] == "DP adjusted local rank 8 is out of bounds for 8 devices."


def test_enumerated_plans_over_nodes_use_every_gpu_of_each_node():
    plans = enumerate_plans(8, nodes=3)
    over = [p for p in plans if p.get("nodes")]
    assert set(p["nodes"] for p in over) == {2, 3}
    assert all(p["tp"] * p["pp"] * p["dp"] == 8 * p["nodes"] for p in over)
    assert not [p for p in plans if not p.get("nodes") and p["tp"] * p["pp"] * p["dp"] > 8]


# ---- inputs -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("link, message", [
    ("myrinet", "internode_link must be one of ethernet-100g, ethernet-25g, infiniband-hdr"),
    ({"bandwidth_gbs": 0, "latency_us": 5}, "internode_link.bandwidth_gbs must be a number above 0"),
    ({"bandwidth_gbs": 50, "latency_us": -1}, "internode_link.latency_us must be a number above 0"),
    ({"bandwidth_gbs": 50, "latency_us": 5, "efficiency": 1.5}, "internode_link.efficiency must be a number above 0 and at most 1.0"),
    ({"bandwidth_gbs": 50, "latency": 5}, "internode_link has unknown keys latency"),
    (42, "internode_link must be a preset name or a dict"),
])
def test_a_bad_link_is_named(link, message):
    with pytest.raises(NodesError) as caught:
        check_internode_link(link)
    assert message in str(caught.value)


def test_a_measured_link_is_taken_as_given():
    assert check_internode_link({"bandwidth_gbs": 42, "latency_us": 3.5}) == {
        "name": "custom", "bandwidth_gbs": 42.0, "latency_us": 3.5, "efficiency": 1.0}


@pytest.mark.parametrize("nodes", [0, 17, True, 2.0, "2"])
def test_a_bad_node_count_is_refused(nodes):
    with pytest.raises(NodesError, match="nodes must be a whole number from 1 to 16"):
        check_nodes(nodes)


def test_the_node_with_fewest_gpus_sets_the_ranks_per_node():
    gib = 1024 ** 3
    facts = [{"count": 8, "devices": [{"name": "NVIDIA H200", "memory_total_bytes": 141 * gib}] * 8},
             {"count": 4, "devices": [{"name": "NVIDIA H200", "memory_total_bytes": 140 * gib}] * 4}]
    assert nodes_from_facts(facts) == (2, 4, 140.0, "NVIDIA H200")
    with pytest.raises(NodesError, match=r"nodes_gpu_facts\[1\] reports no GPUs"):
        nodes_from_facts([facts[0], {"count": 0, "devices": []}])


def test_plan_model_names_a_bad_node_input():
    with pytest.raises(PlanError, match="internode_link must be one of"):
        plan_model(load("meta-llama--Meta-Llama-3.1-70B"), 8, None, "0.32.0", gpu_name="H200", nodes=2,
                   internode_link="carrier-pigeon")


# ---- what crosses the link costs, and when more nodes stop paying ------------------------------------------------

def by_name(result):
    return dict((p["name"], p) for p in result["plans"])


def kimi(link, nodes=2):
    return plan_model(load("moonshotai--Kimi-K2.5"), 8, None, "0.32.0", gpu_name="H200", nodes=nodes,
                      internode_link=link)


def test_traffic_over_a_slower_link_costs_more_and_traffic_within_a_node_does_not():
    fast, slow = by_name(kimi("infiniband-ndr-x8")), by_name(kimi("ethernet-25g"))
    for crossing in ("TP16@2nodes", "TP8-PP2@2nodes", "TP8-DP2-EP@2nodes"):
        assert slow[crossing]["estimate"]["ms_per_token"] > fast[crossing]["estimate"]["ms_per_token"], crossing
    # On one node the link between nodes plays no part.
    assert slow["TP8"]["estimate"] == fast["TP8"]["estimate"]


def test_a_pipeline_boundary_between_nodes_costs_more_than_one_inside_a_node():
    result = by_name(kimi("ethernet-25g"))
    single = result["TP4-PP2"]["estimate"]["basis"]["single_stream_ms"]["pipeline"]
    across = result["TP8-PP2@2nodes"]["estimate"]["basis"]["single_stream_ms"]["pipeline"]
    assert across > single


def test_a_dense_models_dp_across_nodes_keeps_paying_and_says_the_router_does_the_same():
    result = plan_model(load("meta-llama--Meta-Llama-3.1-70B"), 8, None, "0.32.0", gpu_name="H200", nodes=3,
                        internode_link="ethernet-25g", workload={"concurrency": [1, 64, 256, 1024, 4096]})
    scaling = result["nodes_scaling"]
    assert [row["nodes"] for row in scaling["by_nodes"]] == [1, 2, 3]
    assert scaling["pays_up_to"] == 3
    assert scaling["summary"].endswith("Every node up to 3 pays.")
    dense_dp = by_name(result)["TP8-DP2@2nodes"]
    assert any("independent" in note and "vllm_router" in note for note in dense_dp["notes"])


def test_over_a_link_too_slow_for_any_crossing_traffic_more_nodes_stop_paying():
    crawl = {"name": "crawl", "bandwidth_gbs": 0.01, "latency_us": 5000}
    scaling = kimi(crawl, nodes=3)["nodes_scaling"]
    assert scaling["pays_up_to"] == 1
    assert "More nodes stop paying after 1" in scaling["summary"]


def test_a_model_that_needs_two_nodes_says_so():
    # GLM-5 in BF16 does not fit one 8-GPU H200 node.
    scaling = plan_model(load("zai-org--GLM-5"), 8, None, "0.32.0", gpu_name="H200", nodes=2,
                         internode_link="infiniband-ndr-x8")["nodes_scaling"]
    assert scaling["by_nodes"][0]["nodes"] == 2
    assert "Needs at least 2 nodes." in scaling["summary"]


def test_one_node_has_no_scaling_and_no_launch():
    result = plan_model(load("meta-llama--Meta-Llama-3.1-70B"), 8, None, "0.32.0", gpu_name="H200")
    assert result["nodes_scaling"] is None
    assert all(p["nodes"] == 1 and "launch" not in p for p in result["plans"])


def levels(result, name):
    return dict((lv["concurrency"], lv) for lv in result[name]["estimate"]["levels"])


def test_dp_engines_on_other_nodes_do_not_slow_this_nodes_engines():
    # vLLM's DP engines share a node's CPU and PCIe (DP_SCALING_ALPHA: DP8 is about 4x DP1 on one node); engines on
    # another node share nothing. Two engines per node, each with 128 clients: the same step on one node or two.
    result = by_name(plan_model(load("meta-llama--Meta-Llama-3.1-70B"), 8, None, "0.32.0", gpu_name="H200", nodes=2,
                                internode_link="infiniband-ndr", workload={"concurrency": [256, 512]}))
    one_node = levels(result, "TP4-DP2")[256]
    two_nodes = levels(result, "TP4-DP4@2nodes")[512]
    assert one_node["running"] == two_nodes["running"] == 128
    assert two_nodes["tpot_ms"] / one_node["tpot_ms"] < 1.05
    # Four engines on one node are stretched more than two.
    assert levels(result, "TP2-DP4")[512]["tpot_ms"] > levels(result, "TP2-DP2")[256]["tpot_ms"]
