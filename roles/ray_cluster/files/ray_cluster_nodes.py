# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until a Ray cluster has its nodes, then run one task on each of them (the ray_cluster role's readiness).

Usage: <venv>/bin/python ray-cluster-nodes ADDRESS NODES TIMEOUT_S

Connects to the cluster the way vLLM's driver does (ray.init at the head's GCS address, as the user Ray runs as),
waits until NODES nodes are alive, then runs a task pinned to every alive node and prints one JSON line:
{"alive": N, "nodes": [{"address", "hostname", "cpus", "gpus"}], "waited_s"}. A node that joined but cannot run
work fails it. Exit 1 with the reason on stderr when the nodes are not there within TIMEOUT_S seconds.
Runs with the Python of the venv Ray is installed in.
"""

import json
import socket
import sys
import time


def alive_nodes(ray):
    return [node for node in ray.nodes() if node.get("Alive")]


def wait_for_nodes(ray, want, timeout_s):
    started = time.monotonic()
    while True:
        nodes = alive_nodes(ray)
        if len(nodes) >= want:
            return nodes, time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError("%d of %d Ray nodes alive after %d s: %s" % (
                len(nodes), want, timeout_s, ", ".join(sorted(n["NodeManagerAddress"] for n in nodes)) or "none"))
        time.sleep(1)


def run_on_each(ray, nodes):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def where():
        return socket.gethostname()

    refs = [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
            for node in nodes]
    hostnames = ray.get(refs, timeout=120)
    return [{"address": node["NodeManagerAddress"], "hostname": hostname,
             "cpus": node["Resources"].get("CPU", 0), "gpus": node["Resources"].get("GPU", 0)}
            for node, hostname in zip(nodes, hostnames)]


def main(argv):
    address, want, timeout_s = argv[1], int(argv[2]), float(argv[3])
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
    try:
        nodes, waited = wait_for_nodes(ray, want, timeout_s)
        print(json.dumps({"alive": len(nodes), "nodes": run_on_each(ray, nodes), "waited_s": round(waited, 1)}))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (TimeoutError, ConnectionError) as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(1)
