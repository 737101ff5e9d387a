# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_gauntlet role's planning (the vllm_deploy preflight for every candidate), in check mode on the
controller: the candidates are measured best predicted first, those with no usable plan last."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook, printed_json, printed_messages

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MINIMAX = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs", "MiniMaxAI--MiniMax-M2.5.json")

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gauntlet.vllm.vllm_gauntlet
"""

CANDIDATES = [
    {"name": "tp8", "model": "minimax", "plan": {"tp": 8}},          # vLLM 0.28 rejects it
    {"name": "tp2", "model": "minimax", "plan": {"tp": 2}},          # does not fit
    {"name": "tp4", "model": "minimax", "plan": {"tp": 4}},
    {"name": "tp1-dp8-ep", "model": "minimax", "plan": {"tp": 1, "dp": 8, "ep": True}},
    {"name": "tp8-ep", "model": "minimax", "plan": {"tp": 8, "ep": True}},
]


def plan_gauntlet(tmp_path, candidates, objective="throughput", **more):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    extra_vars = dict({
        "vllm_deploy_models": {"minimax": {"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX,
                                           "max_model_len": 32768, "objective": objective}},
        "vllm_gauntlet_candidates": candidates, "vllm_gauntlet_report_dir": str(tmp_path / "reports"),
        "vllm_deploy_vllm_version": "0.28.0", "vllm_deploy_gpus": 8, "vllm_deploy_gpu_memory_gib": 95.6,
        "vllm_deploy_allreduce_probe": False}, **more)
    result = run_playbook([playbook, "--check", "-e", json.dumps(extra_vars)], json_results=True)
    assert result.returncode == 0, result.stdout[-4000:]
    found = printed_messages(result.stdout, "Measuring in predicted order: ")
    assert found, "the gauntlet showed no predicted order: " + result.stdout[-2000:]
    message = found[-1]
    order = re.findall(r"([a-z0-9.-]+) \(([^)]*)\)", message[len("Measuring in predicted order: "):])
    assert not (tmp_path / "reports").exists()
    return order


def score(note):
    found = re.search(r"score ([0-9.]+)", note)
    return float(found.group(1)) if found else None


def test_candidates_are_measured_best_predicted_first_and_unusable_ones_last(tmp_path):
    order = plan_gauntlet(tmp_path, CANDIDATES)
    assert [name for name, note in order][-2:] == ["tp8", "tp2"]
    assert [note for name, note in order][-2:] == ["no usable plan", "no usable plan"]
    usable = [(name, score(note)) for name, note in order[:-2]]
    assert sorted(name for name, dummy in usable) == ["tp1-dp8-ep", "tp4", "tp8-ep"]
    assert all(value is not None for name, value in usable)
    assert [value for name, value in usable] == sorted((value for name, value in usable), reverse=True)
    assert all(note.startswith("throughput score ") for name, note in order[:-2])


def test_a_call_too_close_to_make_puts_the_runner_up_among_the_candidates(tmp_path):
    # MiniMax-M2.5 on 8 GPUs: the planner's best two plans lie within the model's MoE throughput band of each other
    # (vllm_plan's too_close_to_call), so the candidate without a plan is measured with both.
    order = plan_gauntlet(tmp_path, [{"name": "auto", "model": "minimax"}, CANDIDATES[2]])
    names = [name for name, note in order]
    runner_up = [name for name in names if name.startswith("auto-")]
    assert sorted(names) == sorted(["auto", "tp4"] + runner_up) and len(runner_up) == 1
    assert all(note.startswith("throughput score ") for name, note in order)
    off = plan_gauntlet(tmp_path, [{"name": "auto", "model": "minimax"}], vllm_gauntlet_measure_close_calls=False)
    assert [name for name, note in off] == ["auto"]
    # A candidate with a plan is measured as given, close or not.
    assert [name for name, note in plan_gauntlet(tmp_path, CANDIDATES[2:3])] == ["tp4"]


def test_the_entrys_objective_decides_the_order(tmp_path):
    order = plan_gauntlet(tmp_path, CANDIDATES[2:], objective="latency")
    assert all(note.startswith("latency score ") for name, note in order)
    values = [score(note) for name, note in order]
    assert values == sorted(values, reverse=True)


# After each candidate the gauntlet learns from its record's content (tasks/learn.yml, included by run_candidate.yml).
LEARN_PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Start from what the inventory gave
      ansible.builtin.set_fact:
        __vllm_gauntlet_calibration: {}
        __vllm_gauntlet_calibration_from: ""
    - name: Learn
      ansible.builtin.include_role:
        name: gauntlet.vllm.vllm_gauntlet
        tasks_from: learn
      vars:
        vllm_gauntlet_name: arena
        __vllm_gauntlet_candidate: {name: tp4, model: minimax}
        __vllm_gauntlet_verdict: {estimate: "{{ test_estimate }}"}
        __vllm_gauntlet_record: "{{ test_record }}"
    - name: Show
      ansible.builtin.debug:
        msg: "LEARNT={{ {'calibration': __vllm_gauntlet_calibration, 'from': __vllm_gauntlet_calibration_from} | to_json }}"
"""


def tp4_estimate():
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import plan_model
    planned = plan_model(load_model_config(MINIMAX), 8, 95.6, "0.28.0", max_model_len=32768,
                         workload={"input_len": 512, "output_len": 128, "concurrency": [1, 8, 32]})
    return [plan for plan in planned["plans"] if plan["name"] == "TP4"][0]["estimate"]


def swept(estimate, slower=1.3):
    """A vllm_bench sweep of the plan: TPOT `slower` times the estimate's, TTFT as predicted."""
    def stats(value):
        return {"mean": value, "median": value, "p90": value, "p99": value}
    return [{"concurrency": level["concurrency"], "output_tokens_per_s": level["output_tokens_per_s"] / slower,
             "completed": 16, "failed": 0, "tpot_ms": stats(level["tpot_ms"] * slower), "ttft_ms": stats(level["ttft_ms"])}
            for level in estimate["levels"]]


def learn(tmp_path, estimate, record):
    playbook = tmp_path / "learn.yml"
    playbook.write_text(LEARN_PLAYBOOK)
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"test_estimate": estimate, "test_record": record}))
    result = run_playbook([playbook, "-e", "@" + str(extra)], json_results=True)
    assert result.returncode == 0, result.stdout[-4000:]
    return printed_json(result.stdout, "LEARNT"), result.stdout


def test_a_measured_record_calibrates_the_planner_for_the_next_candidates(tmp_path):
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_perf import calibration_from_levels
    estimate = tp4_estimate()
    levels = swept(estimate)
    learnt, dummy = learn(tmp_path, estimate, {"status": "measured", "result": {"levels": levels}})
    source = "gauntlet arena, candidate tp4 on localhost"
    assert learnt == {"calibration": calibration_from_levels(estimate, levels, source=source), "from": "tp4"}
    assert learnt["calibration"]["ratios"]["step_fixed"] > 1.0 and learnt["calibration"]["source"] == source


def test_a_record_that_was_not_measured_or_does_not_match_teaches_nothing(tmp_path):
    estimate = tp4_estimate()
    failed = {"status": "failed", "reason": "did not become ready", "result": {"levels": swept(estimate)}}
    assert learn(tmp_path, estimate, failed)[0] == {"calibration": {}, "from": ""}
    other_levels = [dict(level, concurrency=level["concurrency"] + 3) for level in swept(estimate)]
    learnt, output = learn(tmp_path, estimate, {"status": "measured", "result": {"levels": other_levels}})
    assert learnt == {"calibration": {}, "from": ""}
    assert re.search(r"No calibration from tp4: [^\n]*calibration: no measured level matches a predicted concurrency level", output)


def test_ranking_by_the_max_rate_needs_rates_and_slos_in_every_candidates_workload(tmp_path):
    """Checked once every candidate is planned, before anything is launched (here: in check mode)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    models = {"minimax": {"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX, "max_model_len": 32768, "ttft_p99_ms": 2000},
              "minimax-no-slo": {"repo_id": "MiniMaxAI/MiniMax-M2.5", "source_dir": MINIMAX, "max_model_len": 32768}}
    candidates = [{"name": "tp4", "model": "minimax", "plan": {"tp": 4}},
                  {"name": "tp8-ep", "model": "minimax-no-slo", "plan": {"tp": 8, "ep": True}}]

    def run(**extra):
        extra_vars = dict({"vllm_deploy_models": models, "vllm_gauntlet_candidates": candidates,
                           "vllm_gauntlet_report_dir": str(tmp_path / "reports"), "vllm_gauntlet_rank_by": "max_rate_within_slo",
                           "vllm_deploy_vllm_version": "0.28.0", "vllm_deploy_gpus": 8, "vllm_deploy_gpu_memory_gib": 95.6,
                           "vllm_deploy_allreduce_probe": False}, **extra)
        return run_playbook([playbook, "--check", "-e", json.dumps(extra_vars)], json_results=True)

    # No request rates: the first candidate is named.
    result = run()
    assert result.returncode != 0
    assert "candidate tp4 would be measured with request rates [] (vllm_bench_request_rate) and SLOs {\\\"ttft_ms\\\": 2000.0}" \
        in result.stdout, result.stdout[-3000:]
    # Rates, but one entry sets no SLO (and the inventory none): that candidate is named.
    result = run(vllm_bench_request_rate=[1, 4])
    assert result.returncode != 0
    assert "candidate tp8-ep would be measured with request rates [1.0, 4.0] (vllm_bench_request_rate) and SLOs {}" in result.stdout
    assert "candidate tp4 would" not in result.stdout
    # Both: planned and ordered as usual.
    candidates[1]["model"] = "minimax"
    result = run(vllm_bench_request_rate=[1, 4])
    assert result.returncode == 0, result.stdout[-3000:]
    assert printed_messages(result.stdout, "Measuring in predicted order: ")
    assert not (tmp_path / "reports").exists()
