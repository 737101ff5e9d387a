# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_deploy role's preflight, run by ansible-playbook on the controller: the plan is made for the
entry's GPU subset (CUDA_VISIBLE_DEVICES), for the entry's objective and limits on the bench's workload, with
the calibration given, and the verdict carries the planner's estimate and why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook, printed_json

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MINIMAX = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs", "MiniMaxAI--MiniMax-M2.5.json")

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Plan
      ansible.builtin.include_role:
        name: gauntlet.vllm.vllm_deploy
        tasks_from: plan
      vars:
        vllm_deploy_model: minimax
        vllm_deploy_vllm_version: "0.28.0"
        vllm_deploy_gpus: 8
        vllm_deploy_gpu_memory_gib: 95.6
        vllm_deploy_allreduce_probe: false
    - name: Show the verdict
      ansible.builtin.debug:
        msg: "VERDICT={{ vllm_deploy_plan_verdict | to_json }}"
"""


def run_preflight(tmp_path, entry=None, playbook=PLAYBOOK, **extra):
    text, playbook = playbook, tmp_path / "play.yml"
    playbook.write_text(text)
    # The catalogue; the planner reads the model's config.json from the controller copy (source_dir).
    minimax = dict({"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX, "max_model_len": 32768}, **(entry or {}))
    extra_vars = dict({"vllm_deploy_models": {"minimax": minimax}}, **extra)
    result = run_playbook([playbook, "-e", json.dumps(extra_vars)], json_results=True)
    return result, printed_json(result.stdout, "VERDICT")


def test_auto_on_a_gpu_subset_plans_for_the_subset_only(tmp_path):
    result, verdict = run_preflight(tmp_path, {"plan": "auto", "gpus": "0,1,2,3"})
    assert result.returncode == 0, result.stdout[-3000:]
    assert verdict["plan"]["gpus_used"] <= 4, verdict["plan_name"]
    assert verdict["inputs"]["gpus"] == 4 and verdict["gpus"] == 4 and verdict["usable"] is True
    assert verdict["entry"]["gpus"] == ["0", "1", "2", "3"]
    # Without a subset the whole host is planned for, and the plan chosen uses more GPUs than the subset had. (Which
    # plan wins is the performance model's call: with the FP8 MoE share measured on an H100 it is TP2-DP3 on 6 GPUs,
    # 7 % ahead of TP2-PP2-DP2 on 8, which had led by 0.6 % before.)
    result, verdict = run_preflight(tmp_path, {"plan": "auto"})
    assert result.returncode == 0, result.stdout[-3000:]
    assert verdict["gpus"] == 8 and verdict["inputs"]["gpus"] == 8, verdict["plan_name"]
    assert verdict["plan"]["gpus_used"] > 4, verdict["plan_name"]


def test_a_configured_plan_wider_than_the_subset_is_rejected_by_name(tmp_path):
    result, verdict = run_preflight(tmp_path, {"plan": {"tp": 8, "ep": True}, "gpus": [0, 1, 2, 3]})
    assert result.returncode != 0
    # The planner makes the plan for the 4 GPUs the server sees, and vLLM's own world-size check refuses it.
    assert ("Not deploying minimax with plan TP8-EP: vLLM would raise ValueError at startup: World size (8) is larger than "
            "the number of available GPUs (4) in this node.") in result.stdout
    assert verdict is None
    # Recorded only (the gauntlet's way): the verdict says so and is not usable.
    result, verdict = run_preflight(tmp_path, {"plan": {"tp": 8, "ep": True}, "gpus": [0, 1, 2, 3]},
                                    vllm_deploy_fail_on_invalid=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert verdict["usable"] is False and "World size (8) is larger than the number of available GPUs (4)" in verdict["reason"]


def test_a_subset_naming_a_gpu_the_host_lacks_is_an_error(tmp_path):
    result, verdict = run_preflight(tmp_path, {"gpus": [0, 9]})
    assert result.returncode != 0 and verdict is None
    assert "visible_devices '0,9' names GPU 9, but the host has 8 (0 to 7)" in result.stdout


def test_bad_objective_and_limits_are_named(tmp_path):
    # The entry's spec names every field of the wrong kind at once ...
    result, verdict = run_preflight(tmp_path, {"objective": "fastest", "min_user_tokens_per_s": "x"})
    assert result.returncode != 0 and verdict is None
    assert "value of objective must be one of: , latency, throughput, throughput_per_gpu, got: fastest found in vllm_deploy_models.minimax" in result.stdout
    assert "argument 'min_user_tokens_per_s' is of type str found in 'vllm_deploy_models.minimax'" in result.stdout
    # ... and the planner a number out of range.
    result, verdict = run_preflight(tmp_path, {"ttft_p99_ms": -1})
    assert result.returncode != 0 and verdict is None
    assert "ttft_p99_ms must be a number above 0, got -1.0" in result.stdout


def test_the_objective_limits_workload_and_calibration_reach_the_planner(tmp_path):
    calibration = {"ratios": {"step_fixed": 1.5, "step_per_seq": 1.2, "prefill": 0.8}, "points": 3, "source": "test"}
    result, verdict = run_preflight(tmp_path, {"plan": "auto", "objective": "latency", "ttft_p99_ms": 5000},
                                    vllm_bench_concurrency=[1, 8, 64], vllm_bench_input_len=256, vllm_bench_output_len=64,
                                    vllm_deploy_calibration=calibration)
    assert result.returncode == 0, result.stdout[-3000:]
    assert verdict["objective"] == "latency" and verdict["calibration"] == calibration
    assert [level["concurrency"] for level in verdict["estimate"]["levels"]] == [1, 8, 64]
    assert verdict["score"] == verdict["plan"]["score"] and verdict["score"] > 0
    assert verdict["why"] and verdict["ranking"][0] == verdict["plan_name"]
    assert verdict["estimate"]["basis"]["calibration"] == calibration
    # The default objective is throughput, for the bench role's default workload.
    result, verdict = run_preflight(tmp_path, {"plan": "auto"})
    assert verdict["objective"] == "throughput" and verdict["estimate"]["basis"]["calibration"] is None
    assert [level["concurrency"] for level in verdict["estimate"]["levels"]] == [1, 8, 32, 128, 256, 1024]


# The whole role in check mode, its plan and the bench's part only: the workload the plan is made for (the verdict's)
# and the one the bench role's main entry point publishes before it sweeps (tasks/run.yml's import).
SLO_PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [inventory.json]
  roles:
    - role: gauntlet.vllm.vllm_deploy
  tasks:
    - name: Show the workloads
      ansible.builtin.debug:
        msg: "WORKLOADS={{ {'planned': vllm_deploy_plan_verdict.workload, 'swept': vllm_bench_workload} | to_json }}"
      tags: [always]
"""


def workloads(tmp_path, entry, inventory):
    """The planned and swept workloads of the deploy role for the entry, the inventory's vars given as a vars file
    (below the role's own vars: -e would override what the role passes)."""
    (tmp_path / "play.yml").write_text(SLO_PLAYBOOK)
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    minimax = dict({"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX, "max_model_len": 32768}, **entry)
    extra_vars = {"vllm_deploy_models": {"minimax": minimax}, "vllm_deploy_model": "minimax", "vllm_deploy_vllm_version": "0.28.0",
                  "vllm_deploy_gpus": 8, "vllm_deploy_gpu_memory_gib": 95.6, "vllm_deploy_allreduce_probe": False,
                  "vllm_install_version": "0.28.0"}
    result = run_playbook([tmp_path / "play.yml", "--check", "--tags", "plan,vllm_bench", "-e", json.dumps(extra_vars)],
                          json_results=True)
    assert result.returncode == 0, result.stdout[-3000:]
    return printed_json(result.stdout, "WORKLOADS")


def test_the_entrys_slos_are_the_goodput_of_the_planned_and_swept_workload(tmp_path):
    inventory = {"vllm_bench_goodput": {"e2el_ms": 99999}, "vllm_bench_concurrency": [], "vllm_bench_request_rate": [2, "inf"]}
    # ttft_p99_ms, 1000 / min_user_tokens_per_s and e2el_p99_ms, in place of the inventory's SLOs ...
    found = workloads(tmp_path, {"ttft_p99_ms": 500, "min_user_tokens_per_s": 8, "e2el_p99_ms": 60000}, inventory)
    slo = {"ttft_ms": 500.0, "tpot_ms": 125.0, "e2el_ms": 60000.0}
    assert found["planned"]["goodput"] == slo and found["swept"]["goodput"] == slo
    # ... the planned workload is the swept one (the gauntlet fingerprints the former), open-loop only here ...
    assert found["planned"] == found["swept"]
    assert found["swept"]["concurrency"] == [] and found["swept"]["request_rate"] == [2.0, "inf"]
    # ... only those above 0 ...
    found = workloads(tmp_path, {"min_user_tokens_per_s": 20, "e2el_p99_ms": 0}, inventory)
    assert found["planned"]["goodput"] == found["swept"]["goodput"] == {"tpot_ms": 50.0}
    # ... and an entry with none keeps the inventory's.
    found = workloads(tmp_path, {}, inventory)
    assert found["planned"]["goodput"] == found["swept"]["goodput"] == {"e2el_ms": 99999.0}


def test_lora_adapters_reach_the_planned_command_line_under_the_models_dir(tmp_path):
    adapters = [{"name": "minimax-lora", "repo_id": "org/minimax-lora"},
                {"name": "other", "repo_id": "org/other", "path": "/srv/adapters/other"}]
    result, verdict = run_preflight(tmp_path, {"plan": "auto", "lora_adapters": adapters}, vllm_deploy_models_dir="/srv/m")
    assert result.returncode == 0, result.stdout[-3000:]
    argv = verdict["serve_argv"]
    start = argv.index("--enable-lora")
    # The ranks are read from each adapter_config.json once it is fetched: the planned line has vLLM's default.
    assert argv[start:start + 6] == ["--enable-lora", "--lora-modules", "minimax-lora=/srv/m/org--minimax-lora",
                                     "other=/srv/adapters/other", "--max-loras", "2"]
    assert "--max-lora-rank" not in argv


def test_a_lora_adapter_with_a_bad_repo_id_is_refused_naming_it(tmp_path):
    result, _verdict = run_preflight(tmp_path, {"lora_adapters": [{"name": "x", "repo_id": "no-owner"}]})
    assert result.returncode != 0
    assert "vllm_deploy_models.minimax.lora_adapters[0].repo_id" in result.stdout and "owner/name" in result.stdout


# PLAYBOOK with, before the plan, what install.yml leaves behind after an earlier entry with an adapter (a gauntlet's
# candidate before this one).
STALE_ADAPTERS_PLAYBOOK = PLAYBOOK.replace("  tasks:\n", """  tasks:
    - name: An earlier entry's adapters, with their ranks
      ansible.builtin.set_fact:
        __vllm_deploy_lora_adapters: [{name: stale, path: /srv/m/org--stale, rank: 8}]
""", 1)


def test_an_earlier_entrys_adapters_never_reach_the_next_entrys_command_line(tmp_path):
    result, verdict = run_preflight(tmp_path, playbook=STALE_ADAPTERS_PLAYBOOK)
    assert result.returncode == 0, result.stdout[-3000:]
    argv = verdict["serve_argv"]
    assert "--enable-lora" not in argv and not [arg for arg in argv if "stale" in arg], argv
