# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Plans that span several nodes: the link between the nodes, where vLLM puts each rank, which traffic
crosses that link and what it costs, vLLM's multi-node rules with their messages, and the command line of
each node.

vLLM numbers its ranks (dp, pp, tp) with TP innermost: rank = (dp x PP + pp) x TP + tp
(vllm/distributed/parallel_state.py), and a node holds ``world / nnodes`` consecutive ranks
(vllm/v1/executor/multiproc_executor.py: node r owns ranks r x local_world_size + i). A TP group stays on one
node while TP divides the GPUs of a node; PP stages and DP replicas are what usually crosses nodes.

Two launches (read from vllm 0.32.0, docs/multi-node.md):

* ``dp`` - every node runs whole engines (TP x PP fits a node): data parallel across nodes, the head with
  ``--data-parallel-size-local`` engines and the API server, each worker ``--headless`` with its
  ``--data-parallel-start-rank`` (vllm/entrypoints/cli/serve.py); the engines meet at the head's
  ``--data-parallel-address:--data-parallel-rpc-port``.
* ``nnodes`` - an engine spans nodes (TP or PP across them): every node runs ``--nnodes N --node-rank r
  --master-addr HEAD``, the others ``--headless``; torch.distributed meets at ``tcp://HEAD:--master-port``.

With ``--distributed-executor-backend ray`` the head alone runs ``vllm serve`` over a Ray cluster of the nodes
(``ray`` launch); vLLM refuses ``--nnodes`` > 1 with Ray.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import numbers

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    is_finite_number,
    is_int,
    json_type_name,
    short_text,
)

# The planner plans at most this many nodes: the plans over N nodes of G GPUs are every split of N x G into
# TP x PP x DP (with and without EP), about 30 per node count at 8 GPUs, each evaluated at every concurrency
# level; 16 nodes keep a plan run under a second or two. Wider deployments (wide expert parallel over tens of
# nodes) are out of this planner's reach.
MAX_NODES = 16

# The link between nodes, per node: GB/s each way over all its NICs (line rate / 8), the latency of a small
# message between two nodes, and the share of the line rate a collective reaches. Line rates are the NICs'
# (25/100 GbE, ConnectX-6/7 HDR 200 Gb/s and NDR 400 Gb/s); latencies and efficiencies are typical nccl-tests
# figures over sockets (TCP, no GPUDirect) and over RDMA, not measured here: give a measured link as a dict.
INTERNODE_LINKS = {
    "ethernet-25g": {"bandwidth_gbs": 3.125, "latency_us": 35.0, "efficiency": 0.6},
    "ethernet-100g": {"bandwidth_gbs": 12.5, "latency_us": 25.0, "efficiency": 0.6},
    "roce-200g": {"bandwidth_gbs": 25.0, "latency_us": 8.0, "efficiency": 0.8},
    "roce-400g": {"bandwidth_gbs": 50.0, "latency_us": 8.0, "efficiency": 0.8},
    "infiniband-hdr": {"bandwidth_gbs": 25.0, "latency_us": 5.0, "efficiency": 0.85},
    "infiniband-ndr": {"bandwidth_gbs": 50.0, "latency_us": 5.0, "efficiency": 0.85},
    # One 400 Gb/s NIC per GPU on an 8-GPU node (rail-optimised DGX/HGX fabrics).
    "infiniband-ndr-x8": {"bandwidth_gbs": 400.0, "latency_us": 5.0, "efficiency": 0.85},
}
DEFAULT_INTERNODE_LINK = "ethernet-100g"
# Bounds on a link given as a dict: no NIC set moves a TB/s per node, no link takes 10 ms for a message.
MAX_LINK_GBS = 1000.0
MAX_LINK_LATENCY_US = 10000.0
EXECUTOR_BACKENDS = ("mp", "ray")
# vLLM's defaults (vllm/config/parallel.py): --master-port 29501, --data-parallel-rpc-port 29550.
MASTER_PORT = 29501
DP_RPC_PORT = 29550
HEAD_PLACEHOLDER = "HEAD_ADDRESS"
# No GPU holds a PiB: a larger memory_total_bytes in gpu facts is no byte count.
MAX_DEVICE_BYTES = 1 << 50


class NodesError(ValueError):
    """A node count, link or backend the planner cannot use; the message names it."""


def _positive_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_nodes(nodes):
    """The node count: an int from 1 to MAX_NODES."""
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= MAX_NODES:
        raise NodesError("nodes must be a whole number from 1 to %d, got %r" % (MAX_NODES, nodes))
    return nodes


def check_internode_link(link):
    """``link``: a preset name (INTERNODE_LINKS) or a dict of bandwidth_gbs, latency_us and optionally efficiency;
    None is DEFAULT_INTERNODE_LINK. Returns the settled link with its ``name``."""
    if link is None:
        link = DEFAULT_INTERNODE_LINK
    if isinstance(link, str):
        if link not in INTERNODE_LINKS:
            raise NodesError("internode_link must be one of %s or a dict of bandwidth_gbs and latency_us, got %r"
                             % (", ".join(sorted(INTERNODE_LINKS)), link))
        return dict(INTERNODE_LINKS[link], name=link)
    if not isinstance(link, dict):
        raise NodesError("internode_link must be a preset name or a dict, got %r" % (link,))
    unknown = sorted(set(link) - {"name", "bandwidth_gbs", "latency_us", "efficiency"})
    if unknown:
        raise NodesError("internode_link has unknown keys %s (known: bandwidth_gbs, latency_us, efficiency, name)"
                         % ", ".join(unknown))
    settled = {"name": str(link.get("name") or "custom"), "efficiency": link.get("efficiency", 1.0)}
    for key, upper in (("bandwidth_gbs", MAX_LINK_GBS), ("latency_us", MAX_LINK_LATENCY_US), ("efficiency", 1.0)):
        value = link.get(key, settled.get(key))
        if not _positive_number(value) or value > upper:
            raise NodesError("internode_link.%s must be a number above 0 and at most %s, got %r" % (key, upper, value))
        settled[key] = float(value)
    return settled


def check_executor_backend(backend):
    if backend not in EXECUTOR_BACKENDS:
        raise NodesError("executor_backend must be mp or ray, got %r" % (backend,))
    return backend


def _wrong(where, expected, value):
    return NodesError("%s must be %s, got %s %s" % (where, expected, json_type_name(value), short_text(repr(value), 80)))


def _check_devices(devices, where):
    """gpu_facts' ``devices``: a list of dicts whose memory_total_bytes (a byte count) and name (a string) may be
    null, as gpu_facts reports a GPU it could not fully read."""
    if not isinstance(devices, list):
        raise _wrong(where, "a list of GPUs (dicts with name and memory_total_bytes)", devices)
    for index, device in enumerate(devices):
        field = "%s[%d]" % (where, index)
        if not isinstance(device, dict):
            raise _wrong(field, "a dict with name and memory_total_bytes", device)
        memory = device.get("memory_total_bytes")
        # is_int first: a huge int is no float, and is_finite_number would overflow on it.
        if memory is not None and not ((is_int(memory) or is_finite_number(memory)) and 0 <= memory <= MAX_DEVICE_BYTES):
            raise _wrong(field + ".memory_total_bytes", "a number of bytes from 0 to 2**50", memory)
        if device.get("name") is not None and not isinstance(device["name"], str):
            raise _wrong(field + ".name", "a string", device["name"])
    return devices


def check_gpu_facts(facts, where):
    """One host's gpu_facts result (gauntlet.vllm.gpu_facts' ``gpus``), every field the planner reads checked:
    ``{"count", "devices", "nvlink"}`` (count None when not reported, nvlink None without a topology). NodesError
    names ``where`` and the field, rather than a traceback on a string where a list or dict belongs."""
    if facts is None:
        facts = {}
    if not isinstance(facts, dict):
        raise _wrong(where, "the gpus facts of gauntlet.vllm.gpu_facts (a dict)", facts)
    devices = _check_devices([] if facts.get("devices") is None else facts["devices"], where + ".devices")
    count = facts.get("count")
    if count is not None and not (is_int(count) and count >= 0):
        raise _wrong(where + ".count", "a whole number of GPUs", count)
    topology = facts.get("topology")
    if topology is not None and not isinstance(topology, dict):
        raise _wrong(where + ".topology", "a dict (nvlink, links)", topology)
    return {"count": count, "devices": devices, "nvlink": bool(topology.get("nvlink")) if topology else None}


def nodes_from_facts(facts_list):
    """``(nodes, gpus_per_node, smallest memory in GiB, first GPU's name)`` from each host's gpu_facts result.
    vLLM runs the same number of ranks on every node, so the node with the fewest GPUs sets it."""
    if not isinstance(facts_list, list) or not facts_list:
        raise NodesError("nodes_gpu_facts must be a list with one gpu_facts result per node")
    counts, memories, names = [], [], []
    for index, facts in enumerate(facts_list):
        checked = check_gpu_facts(facts, "nodes_gpu_facts[%d]" % index)
        devices = checked["devices"]
        count = len(devices) if checked["count"] is None else checked["count"]
        if count < 1:
            raise NodesError("nodes_gpu_facts[%d] reports no GPUs (count %r)" % (index, count))
        counts.append(count)
        memories += [d.get("memory_total_bytes") for d in devices if d.get("memory_total_bytes")]
        names += [d.get("name") for d in devices if d.get("name")]
    memory = min(memories) / float(1024 ** 3) if memories else None
    return check_nodes(len(facts_list)), min(counts), memory, (names[0] if names else None)


# ---- where the ranks land ---------------------------------------------------------------------------------

def _rank(plan, dp, pp, tp):
    return (dp * plan["pp"] + pp) * plan["tp"] + tp


def _nodes_of(plan, local, ranks):
    return len(set(rank // local for rank in ranks))


def layout(plan):
    """Where ``plan``'s ranks land on its ``nodes`` (a plan without ``nodes`` is on one): the ranks per node,
    the nodes a TP group, a DP group and the MoE group (DP x TP) span, the PP stage boundaries that cross nodes,
    and the launch (single, dp or nnodes)."""
    nodes = plan.get("nodes", 1)
    world = plan["tp"] * plan["pp"] * plan["dp"]
    local = max(1, world // nodes)
    tp_span = max(_nodes_of(plan, local, [_rank(plan, d, p, t) for t in range(plan["tp"])])
                  for d in range(plan["dp"]) for p in range(plan["pp"]))
    dp_span = max(_nodes_of(plan, local, [_rank(plan, d, p, t) for d in range(plan["dp"])])
                  for p in range(plan["pp"]) for t in range(plan["tp"]))
    moe_span = max(_nodes_of(plan, local, [_rank(plan, d, p, t) for d in range(plan["dp"]) for t in range(plan["tp"])])
                   for p in range(plan["pp"]))
    crossings = max(sum(1 for p in range(plan["pp"] - 1)
                        if _rank(plan, d, p, t) // local != _rank(plan, d, p + 1, t) // local)
                    for d in range(plan["dp"]) for t in range(plan["tp"]))
    engine = plan["tp"] * plan["pp"]
    if nodes == 1:
        launch = "single"
    elif engine <= local and local % engine == 0:
        launch = "dp"
    else:
        launch = "nnodes"
    return {"nodes": nodes, "ranks_per_node": local, "tp_nodes": tp_span, "dp_nodes": dp_span,
            "moe_nodes": moe_span, "pp_crossings": crossings, "launch": launch}


# ---- what crosses the link costs ---------------------------------------------------------------------------

def _wire_us(nbytes, link):
    return nbytes / (link["bandwidth_gbs"] * link["efficiency"] * 1e3)


def internode_allreduce_us(nodes, nbytes, link):
    """The inter-node leg of a hierarchical all-reduce of ``nbytes`` over ``nodes`` nodes (ring: 2 (n - 1)
    latencies, 2 (n - 1) / n of the message through each node's NICs); 0 on one node."""
    if nodes < 2:
        return 0.0
    return 2 * (nodes - 1) * link["latency_us"] + 2.0 * (nodes - 1) / nodes * _wire_us(nbytes, link)


def internode_collective_us(nodes, nbytes, link):
    """The inter-node leg of an all-gather or reduce-scatter of ``nbytes`` in all over ``nodes`` nodes."""
    if nodes < 2:
        return 0.0
    return (nodes - 1) * link["latency_us"] + (nodes - 1.0) / nodes * _wire_us(nbytes, link)


def internode_p2p_us(nbytes, link):
    """One pipeline send of ``nbytes`` from a stage on one node to the next stage on another."""
    return link["latency_us"] + _wire_us(nbytes, link)


# ---- vLLM's multi-node rules ---------------------------------------------------------------------------------

def rule_nnodes_world_size(plan, gpus_per_node, backend):
    # vllm/engine/arg_utils.py EngineArgs.create_engine_config
    nodes, world = plan.get("nodes", 1), plan["tp"] * plan["pp"] * plan["dp"]
    if nodes > 1 and world % nodes:
        return ("ValueError",
                "Invalid data-parallel launch options: `--nnodes %d` must evenly divide the total world size (%d). "
                "Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, `--tensor-parallel-size`, "
                "or `--prefill-context-parallel-size`." % (nodes, world),
                "vllm/engine/arg_utils.py EngineArgs.create_engine_config")
    return None


def rule_dp_node_groups(plan, gpus_per_node, backend):
    # vllm/config/parallel.py ParallelConfig.nnodes_within_dp: with --nnodes, each node runs
    # max(ranks per node // (TP x PP), 1) DP engines (vllm/engine/arg_utils.py infers --data-parallel-size-local
    # so), and the nodes must split evenly into the DP groups that makes.
    nodes, engine = plan.get("nodes", 1), plan["tp"] * plan["pp"]
    world = engine * plan["dp"]
    if nodes < 2 or plan["dp"] < 2 or world % nodes or backend == "ray":
        return None
    local_engines = max((world // nodes) // engine, 1)
    groups = plan["dp"] // local_engines
    if nodes % groups:
        return ("ValueError", "Invalid data parallel configuration: nnodes (%d) must be divisible by the number of "
                "data parallel node groups (%d = data_parallel_size %d / data_parallel_size_local %d)"
                % (nodes, groups, plan["dp"], local_engines), "vllm/config/parallel.py ParallelConfig.nnodes_within_dp")
    return None


def rule_node_gpus(plan, gpus_per_node, backend):
    # vllm/v1/worker/gpu_worker.py Worker.init_device: a node's ranks past its GPUs
    nodes, world = plan.get("nodes", 1), plan["tp"] * plan["pp"] * plan["dp"]
    local = world // nodes
    if nodes > 1 and local > gpus_per_node:
        return ("AssertionError", "DP adjusted local rank %d is out of bounds for %d devices."
                % (gpus_per_node, gpus_per_node), "vllm/v1/worker/gpu_worker.py Worker.init_device")
    return None


# (name, function, when vLLM fails) in the order vLLM reaches them.
MULTINODE_RULES = (
    ("nnodes_world_size", rule_nnodes_world_size, "config validation"),
    ("dp_node_groups", rule_dp_node_groups, "config validation"),
    ("node_gpus", rule_node_gpus, "startup"),
)


def check_multinode(plan, gpus_per_node, backend="mp"):
    """The failing multi-node checks of ``plan`` in check_plan's format, first failing first."""
    errors = []
    for name, rule, when in MULTINODE_RULES:
        failure = rule(plan, gpus_per_node, backend)
        if failure:
            errors.append({"check": name, "exception": failure[0], "message": failure[1], "source": failure[2],
                           "when": when})
    return errors


# ---- each node's command line --------------------------------------------------------------------------------

def node_args(plan, node_rank, head=HEAD_PLACEHOLDER, backend="mp", master_port=MASTER_PORT, rpc_port=DP_RPC_PORT,
              placed=None):
    """The arguments node ``node_rank`` adds to the plan's own (vllm_plan.vllm_args) so that the nodes make one
    deployment; [] on one node. Node 0 is the head (the API server); the others run --headless. ``placed`` is
    layout(plan), when the caller has it."""
    placed = placed or layout(plan)
    if placed["launch"] == "single":
        return []
    if backend == "ray":
        # The head alone runs vLLM, over the Ray cluster of every node; vLLM refuses --nnodes with Ray.
        if node_rank:
            return None
        return ["--distributed-executor-backend", "ray"] + (["--data-parallel-backend", "ray"] if plan["dp"] > 1 else [])
    if placed["launch"] == "dp":
        local = plan["dp"] // plan["nodes"]
        args = ["--data-parallel-size-local", str(local), "--data-parallel-address", head,
                "--data-parallel-rpc-port", str(rpc_port)]
        if node_rank:
            args += ["--data-parallel-start-rank", str(node_rank * local), "--headless"]
        return args
    args = ["--nnodes", str(plan["nodes"]), "--node-rank", str(node_rank), "--master-addr", head,
            "--master-port", str(master_port)]
    return args + (["--headless"] if node_rank else [])


def launch(plan, backend="mp", placed=None):
    """How the plan starts: its launch mode and each node's extra arguments (the head's address as
    HEAD_PLACEHOLDER). With Ray the workers run no vLLM command, only a Ray worker (role ray_cluster)."""
    placed = placed or layout(plan)
    mode = "ray" if backend == "ray" and placed["launch"] != "single" else placed["launch"]
    nodes = []
    for rank in range(plan.get("nodes", 1)):
        args = node_args(plan, rank, backend=backend, placed=placed)
        nodes.append({"node_rank": rank, "role": "head" if rank == 0 else "worker",
                      "runs": "vllm serve" if args is not None else "ray worker", "args": args or []})
    return {"mode": mode, "nodes": nodes}
