# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventory/production.example.yml plans correctly for the three reference models: ``--check`` shows
the verdicts without contacting the host (192.0.2.10 is a documentation address nobody answers on, so
any contact would fail the run). The models' config.json come from a local Hub stand-in that speaks the
Hub's HTTP API, holding the real configs of the three repos."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gauntlet.vllm.tests.fakehub.fakehub import FakeHub
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIGS = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs")
REPOS = {"moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5.json",
         "nvidia/Kimi-K2.5-NVFP4": "nvidia--Kimi-K2.5-NVFP4.json",
         "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5.json"}


@pytest.fixture(scope="module")
def hub():
    repos = {}
    for repo_id, name in REPOS.items():
        with open(os.path.join(CONFIGS, name), "rb") as handle:
            repos[repo_id] = {"config.json": handle.read()}
    with FakeHub(repos) as server:
        yield server


def play(hub, tmp_path, playbook, *args):
    return run_playbook(["-i", "inventory/production.example.yml", "playbooks/" + playbook,
                         "--check", "-e", "vllm_deploy_hf_endpoint=" + hub.endpoint,
                         # Reports would go here; check mode must write none.
                         "-e", "vllm_gauntlet_report_dir=%s" % (tmp_path / "reports")] + list(args),
                        json_results=True, ANSIBLE_TIMEOUT="5")


def verdicts(output):
    """candidate -> the verdict line the gauntlet printed."""
    found = {}
    for match in re.finditer(r'"msg": "([a-z0-9.-]+): ([^"]*(?:will be measured|SKIPPED)[^"]*)"', output):
        found[match.group(1)] = match.group(2)
    return found


def test_gauntlet_check_shows_every_verdict_without_touching_the_host(hub, tmp_path):
    result = play(hub, tmp_path, "gauntlet.yml")
    assert result.returncode == 0, result.stdout[-4000:]
    found = verdicts(result.stdout)
    assert sorted(found) == ["kimi-int4-tp8", "kimi-nvfp4-tp8", "minimax-tp4", "minimax-tp8", "minimax-tp8-ep"]
    assert found["kimi-int4-tp8"] == "kimi-k25-int4 with plan TP8 will be measured (vllm serve --tensor-parallel-size 8)"
    assert found["kimi-nvfp4-tp8"].startswith("kimi-k25-nvfp4 with plan TP8 will be measured")
    assert found["minimax-tp8-ep"] == ("minimax-m25 with plan TP8-EP will be measured "
                                       "(vllm serve --tensor-parallel-size 8 --enable-expert-parallel)")
    assert found["minimax-tp4"].startswith("minimax-m25 with plan TP4 will be measured")
    assert found["minimax-tp8"] == (
        "minimax-m25 with plan TP8 is SKIPPED, never launched: vLLM would raise ValueError at weight creation: "
        "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128.")
    assert re.search(r"gpu-box-01 +: ok=\d+ +changed=0 +unreachable=0 +failed=0", result.stdout)
    assert not (tmp_path / "reports").exists()
    # Each plan came from the config the Hub served, fetched once per candidate.
    assert {request[1] for request in hub.requests if request[1].endswith("config.json")} >= {
        "/%s/resolve/main/config.json" % repo_id for repo_id in REPOS}


@pytest.mark.parametrize("playbook, extra, plan, args", [
    ("deploy_kimi_int4.yml", {}, "TP8", ["--tensor-parallel-size", "8"]),
    ("deploy_kimi_nvfp4.yml", {}, "TP8", ["--tensor-parallel-size", "8"]),
    ("deploy_minimax_m25.yml", {}, "TP8-EP", ["--tensor-parallel-size", "8", "--enable-expert-parallel"]),
    ("deploy_minimax_m25.yml", {"vllm_deploy_plan": {"tp": 4}}, "TP4", ["--tensor-parallel-size", "4"]),
])
def test_deploy_playbooks_plan_check(hub, tmp_path, playbook, extra, plan, args):
    result = play(hub, tmp_path, playbook, "--tags", "plan", "-e", json.dumps(extra))
    assert result.returncode == 0, result.stdout[-4000:]
    assert "plan %s" % plan in result.stdout and "loads and fits" in result.stdout
    assert "vllm serve %s" % " ".join(args) in result.stdout


def test_deploy_refuses_the_plan_that_crashed_by_hand(hub, tmp_path):
    result = play(hub, tmp_path, "deploy_minimax_m25.yml", "--tags", "plan", "-e", json.dumps({"vllm_deploy_plan": {"tp": 8}}))
    assert result.returncode != 0
    assert "Not deploying minimax-m25 with plan TP8" in result.stdout
    assert "block_n = 128." in result.stdout and "TP8-EP" in result.stdout
    assert "unreachable=0" in result.stdout


def test_a_misspelt_catalogue_entry_is_named_field_by_field(hub, tmp_path):
    # The entry's spec names the unknown field and the fields it knows ...
    entry = {"repo_id": "moonshotai/Kimi-K2.5", "max_model_length": 65536}
    result = play(hub, tmp_path, "deploy_kimi_int4.yml", "-e", json.dumps({"vllm_deploy_models": {"kimi-k25-int4": entry}}))
    assert result.returncode != 0
    assert "vllm_deploy_models.kimi-k25-int4.max_model_length. Supported parameters include: all2all_backend, allow_patterns, " in result.stdout
    assert "unreachable=0" in result.stdout
    # ... and a plan that is neither auto nor a dict is named with what it got.
    entry = {"repo_id": "moonshotai/Kimi-K2.5", "plan": "tp8"}
    result = play(hub, tmp_path, "deploy_kimi_int4.yml", "-e", json.dumps({"vllm_deploy_models": {"kimi-k25-int4": entry}}))
    assert result.returncode != 0
    assert "vllm_deploy_models.kimi-k25-int4.plan (or vllm_deploy_plan) must be 'auto' or a dict like {tp: 8, ep: true}, got \\\"tp8\\\"." in result.stdout
    assert "unreachable=0" in result.stdout


def test_bad_gauntlet_candidates_are_named_by_index(hub, tmp_path):
    # A field no candidate has is refused by the role's argument spec ...
    candidates = [{"name": "minimax-tp4", "model": "minimax-m25", "tp": 4}]
    result = play(hub, tmp_path, "gauntlet.yml", "-e", json.dumps({"vllm_gauntlet_candidates": candidates}))
    assert result.returncode != 0
    assert "vllm_gauntlet_candidates.tp. Supported parameters include: model, name, nccl_environment, plan" in result.stdout
    # ... a name used twice by the gauntlet's check, with the names ...
    candidates = [{"name": "kimi", "model": "kimi-k25-int4"}, {"name": "kimi", "model": "kimi-k25-nvfp4"}]
    result = play(hub, tmp_path, "gauntlet.yml", "-e", json.dumps({"vllm_gauntlet_candidates": candidates}))
    assert result.returncode != 0
    assert "each name once (names: kimi, kimi)" in result.stdout
    # ... a bad name by the candidate's index, the name as JSON (a trailing newline shows) ...
    candidates = [{"name": "kimi", "model": "kimi-k25-int4"}, {"name": "minimax tp4", "model": "kimi-k2"}]
    result = play(hub, tmp_path, "gauntlet.yml", "-e", json.dumps({"vllm_gauntlet_candidates": candidates}))
    assert result.returncode != 0
    assert "vllm_gauntlet_candidates[1].name must be a plain file name - letters, digits, '.', '_' and '-' (got " in result.stdout
    assert "minimax tp4" in result.stdout
    # ... and an unknown model by the candidate's index and name.
    candidates = [{"name": "kimi", "model": "kimi-k25-int4"}, {"name": "minimax-tp4", "model": "kimi-k2"}]
    result = play(hub, tmp_path, "gauntlet.yml", "-e", json.dumps({"vllm_gauntlet_candidates": candidates}))
    assert result.returncode != 0
    assert ("vllm_gauntlet_candidates[1] (minimax-tp4): the model must be a key of vllm_deploy_models (got \\\"kimi-k2\\\"; "
            "known: kimi-k25-int4, kimi-k25-nvfp4, minimax-m25).") in result.stdout


# The command line each reference playbook would run, as --check prints it at planning time (the host is never
# contacted). The serving flags are those of the model's recipe, as its sources publish them:
# Kimi-K2.5: https://docs.vllm.ai/projects/recipes/en/latest/moonshotai/Kimi-K2.5.html
#   (vllm serve moonshotai/Kimi-K2.5 -tp 8 --mm-encoder-tp-mode data --tool-call-parser kimi_k2
#    --reasoning-parser kimi_k2 --enable-auto-tool-choice --trust-remote-code)
# MiniMax-M2.5: https://huggingface.co/MiniMaxAI/MiniMax-M2.5/blob/main/docs/vllm_deploy_guide.md
#   (vllm serve MiniMaxAI/MiniMax-M2.5 --tensor-parallel-size 8 --enable-expert-parallel --tool-call-parser minimax_m2
#    --reasoning-parser minimax_m2_append_think --enable-auto-tool-choice --trust-remote-code)
KIMI_RECIPE = ["--tool-call-parser", "kimi_k2", "--enable-auto-tool-choice", "--reasoning-parser", "kimi_k2",
               "--mm-encoder-tp-mode", "data"]
MINIMAX_RECIPE = ["--tool-call-parser", "minimax_m2", "--enable-auto-tool-choice", "--reasoning-parser", "minimax_m2_append_think"]
SERVE = ["/opt/vllm/venv/bin/vllm", "serve"]


def command_line(output):
    """The argv the plan step printed ("vllm-<name>.service would run: ... (recipe: ...)")."""
    found = re.findall(r'would run: (.*?) \(recipe: ([^;]*);', output)
    assert len(found) == 1, output[-3000:]
    return found[0][0].split(" "), found[0][1]


@pytest.mark.parametrize("playbook, recipe, argv", [
    ("deploy_kimi_int4.yml", "kimi-k2.5",
     SERVE + ["/opt/models/moonshotai--Kimi-K2.5", "--served-model-name", "kimi-k2.5", "--host", "127.0.0.1", "--port", "8000",
              "--tensor-parallel-size", "8", "--max-model-len", "65536", "--trust-remote-code"] + KIMI_RECIPE),
    ("deploy_kimi_nvfp4.yml", "kimi-k2.5",
     SERVE + ["/opt/models/nvidia--Kimi-K2.5-NVFP4", "--served-model-name", "kimi-k2.5-nvfp4", "--host", "127.0.0.1", "--port",
              "8000", "--tensor-parallel-size", "8", "--max-model-len", "65536", "--trust-remote-code"] + KIMI_RECIPE),
    ("deploy_minimax_m25.yml", "minimax-m2",
     SERVE + ["/opt/models/MiniMaxAI--MiniMax-M2.5", "--served-model-name", "minimax-m2.5", "--host", "127.0.0.1", "--port", "8000",
              "--tensor-parallel-size", "8", "--enable-expert-parallel", "--trust-remote-code"] + MINIMAX_RECIPE),
])
def test_check_prints_the_full_command_line_with_the_models_recipe(hub, tmp_path, playbook, recipe, argv):
    result = play(hub, tmp_path, playbook, "--tags", "plan")
    assert result.returncode == 0, result.stdout[-4000:]
    printed, applied = command_line(result.stdout)
    assert applied == recipe
    assert printed == argv
    assert re.search(r"gpu-box-01 +: ok=\d+ +changed=0 +unreachable=0 +failed=0", result.stdout)


def test_an_entry_overrides_its_recipe_field_by_field_and_can_turn_it_off(hub, tmp_path):
    # MiniMax with a separate reasoning field instead of the <think> block in content ...
    entry = {"repo_id": "MiniMaxAI/MiniMax-M2.5", "service_name": "minimax-m25", "plan": {"tp": 8, "ep": True},
             "trust_remote_code": True, "reasoning_parser": "minimax_m2", "max_num_seqs": 256,
             "chat_template": "chatml-tools.jinja"}
    result = play(hub, tmp_path, "deploy_minimax_m25.yml", "--tags", "plan",
                  "-e", json.dumps({"vllm_deploy_models": {"minimax-m25": entry}}))
    assert result.returncode == 0, result.stdout[-4000:]
    printed, applied = command_line(result.stdout)
    assert applied == "minimax-m2"
    assert printed[printed.index("--reasoning-parser") + 1] == "minimax_m2"
    assert printed[printed.index("--max-num-seqs") + 1] == "256"
    # A chat template the collection ships is shown where vllm_service copies it.
    assert printed[printed.index("--chat-template") + 1] == "/etc/vllm/chat-templates/chatml-tools.jinja"
    assert printed[printed.index("--tool-call-parser") + 1] == "minimax_m2"
    # ... and without any recipe.
    entry = dict(entry, recipe="none")
    del entry["reasoning_parser"]
    result = play(hub, tmp_path, "deploy_minimax_m25.yml", "--tags", "plan",
                  "-e", json.dumps({"vllm_deploy_models": {"minimax-m25": entry}}))
    assert result.returncode == 0, result.stdout[-4000:]
    printed, applied = command_line(result.stdout)
    assert applied == "none"
    assert not [word for word in printed if word in ("--tool-call-parser", "--reasoning-parser", "--enable-auto-tool-choice")]


def test_a_bad_recipe_field_is_refused_before_the_host_is_touched(hub, tmp_path):
    entry = {"repo_id": "moonshotai/Kimi-K2.5", "plan": {"tp": 8}, "speculative": {"method": "mtp"}}
    result = play(hub, tmp_path, "deploy_kimi_int4.yml", "--tags", "plan", "-e", json.dumps({"vllm_deploy_models": {"kimi-k25-int4": entry}}))
    assert result.returncode != 0
    assert "num_speculative_tokens" in result.stdout and "unreachable=0" in result.stdout


def test_two_node_example_shows_the_plan_and_each_nodes_command_line_without_touching_a_host(hub, tmp_path):
    result = play(hub, tmp_path, "serve_multinode.yml", "--tags", "plan")
    assert result.returncode == 0, result.stdout[-4000:]
    shown = re.search(r'"msg": "(\S+) over 2 nodes \((dp|nnodes)\), head gpu-box-01 at 10\.0\.0\.10; predicted peak ([0-9.]+) '
                      r'output tok/s\. ([^"]*)"', result.stdout)
    assert shown, result.stdout[-4000:]
    plan, mode = shown.group(1), shown.group(2)
    assert plan.endswith("@2nodes")
    assert float(shown.group(3)) > 0
    assert shown.group(4).startswith("1 node: ") and "2 nodes: %s" % plan in shown.group(4)
    lines = dict(re.findall(r'"msg": "node (\d) \((?:head|worker), 10\.0\.0\.1\d\): vllm serve ([^"]*)"', result.stdout))
    assert sorted(lines) == ["0", "1"], result.stdout[-4000:]
    head, worker = lines["0"].split(" "), lines["1"].split(" ")
    address = "--data-parallel-address" if mode == "dp" else "--master-addr"
    assert head[head.index(address) + 1] == worker[worker.index(address) + 1] == "10.0.0.10"
    assert "--headless" in worker and "--headless" not in head
    for host in ("gpu-box-01", "gpu-box-02"):
        assert re.search(host + r" +: ok=\d+ +changed=0 +unreachable=0 +failed=0", result.stdout), result.stdout[-3000:]


def test_two_node_example_over_ray_runs_vllm_on_the_head_alone(hub, tmp_path):
    planner = {"vllm_version": "0.28.0", "gpus": 8, "gpu_memory_gib": 95.6,
               "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "link": "pcie",
               "internode_link": "ethernet-100g", "executor_backend": "ray"}
    result = play(hub, tmp_path, "serve_multinode.yml", "--tags", "plan", "-e", json.dumps({"multinode_planner": planner}))
    assert result.returncode == 0, result.stdout[-4000:]
    assert re.search(r'"msg": "\S+@2nodes over 2 nodes \(ray\), head gpu-box-01 at 10\.0\.0\.10', result.stdout), \
        result.stdout[-4000:]
    head = re.search(r'"msg": "node 0 \(head, 10\.0\.0\.10\): vllm serve ([^"]*)"', result.stdout)
    assert head, result.stdout[-4000:]
    assert "--distributed-executor-backend ray" in head.group(1) and "--headless" not in head.group(1)
    assert "--nnodes" not in head.group(1) and "--data-parallel-address" not in head.group(1)
    assert re.search(r'"msg": "node 1 \(worker, 10\.0\.0\.11\): a Ray worker only"', result.stdout), result.stdout[-4000:]


@pytest.mark.parametrize("listen, refused", [("127.0.0.1", True), ("0.0.0.0", False)])
def test_the_router_of_the_two_node_example_refuses_a_head_it_cannot_reach(hub, tmp_path, listen, refused):
    """serve_multinode.yml's last play alone (--limit to the router host): the head's report as the serve play
    leaves it, given as extra vars. A head on loopback is refused, naming the settings; one on every address
    passes the check and reaches the router role (which then finds the example's router host unreachable)."""
    served = {"multinode_serving": True, "vllm_preflight_nodes": {"address": "10.0.0.10"},
              "vllm_service_report": {"host": listen, "served_model_name": "kimi-k25-int4-2nodes"}}
    result = play(hub, tmp_path, "serve_multinode.yml", "--limit", "lb-02", "-e", json.dumps(served))
    assert result.returncode != 0, result.stdout[-4000:]
    message = " ".join(result.stdout.split())
    said = "listens on 127.0.0.1 only" in message and "vllm_service_api_key" in message and "router lb-02" in message
    assert said == refused, result.stdout[-4000:]
    reached_the_role = "TASK [gauntlet.vllm.vllm_router : Check the backends]" in result.stdout
    assert reached_the_role != refused, result.stdout[-4000:]
