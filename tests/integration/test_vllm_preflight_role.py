# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_preflight role, run by ansible-playbook: a plan vLLM would crash on stops the play
before anything else runs, with vLLM's message and the plans that work."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook, printed_json

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MINIMAX = os.path.join(ROOT, "tests", "unit", "fixtures", "model_configs", "MiniMaxAI--MiniMax-M2.5.json")

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gauntlet.vllm.vllm_preflight
      vars:
        vllm_preflight_model: {model}
        vllm_preflight_vllm_version: "0.28.0"
        vllm_preflight_gpus: 8
        vllm_preflight_gpu_memory_gib: 95.6
        vllm_preflight_max_model_len: 32768
        vllm_preflight_plan: {plan}
        vllm_preflight_allreduce_probe: false
  post_tasks:
    - name: Reached only when the plan passed
      ansible.builtin.copy:
        content: "{{{{ vllm_preflight_verdict.plan.vllm_args | to_json }}}}"
        dest: {marker}
        mode: "0644"
"""


def run_play(tmp_path, plan):
    marker = tmp_path / "args.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(model=MINIMAX, plan=json.dumps(plan), marker=marker))
    return run_playbook([playbook]), marker


def test_invalid_plan_stops_the_play_with_vllms_message(tmp_path):
    result, marker = run_play(tmp_path, {"tp": 8})
    assert result.returncode != 0
    assert "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128." in result.stdout
    assert "TP8-EP" in result.stdout and "TP4" in result.stdout
    assert not marker.exists()


def test_valid_plan_passes_its_vllm_args_on(tmp_path):
    result, marker = run_play(tmp_path, {"tp": 8, "ep": True})
    assert result.returncode == 0, result.stdout[-3000:]
    assert json.loads(marker.read_text()) == ["--tensor-parallel-size", "8", "--enable-expert-parallel"]


def test_no_plan_takes_the_recommendation(tmp_path):
    result, marker = run_play(tmp_path, {})
    assert result.returncode == 0, result.stdout[-3000:]
    args = json.loads(marker.read_text())
    assert args[:1] == ["--tensor-parallel-size"]


# The all-reduce probe (tasks_from allreduce_probe, which vllm_deploy runs before it plans). A fake
# "Python" stands in for the vLLM venv's: it logs each launch and answers like the probe's worker.
FAKE_PYTHON = """#!/usr/bin/env python3
import json, sys
args = sys.argv[2:]
world = int(args[args.index("--world") + 1])
sizes = [int(size) for size in args[args.index("--sizes") + 1].split(",")]
with open(%r, "a") as log:
    log.write("%%d\\n" %% world)
print(json.dumps({"sum_ok": True, "torch": "fake", "nccl": "fake",
                  "timings": [[size, 1e-5 * world + size / 1e11] for size in sizes]}))
"""

PROBE_PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gauntlet.vllm.vllm_preflight
        tasks_from: allreduce_probe
      vars:
        vllm_preflight_gpus: @GPUS@
        vllm_preflight_allreduce_probe: @ENABLED@
        vllm_preflight_allreduce_probe_python: "@PYTHON@"
        vllm_preflight_allreduce_probe_cache: "@CACHE@"
    - ansible.builtin.debug:
        msg: "ALLREDUCE={{ vllm_preflight_allreduce | default({}) | to_json }}"
"""


def run_probe(tmp_path, gpus=8, enabled=True, check=False, version="0.28.0", broken=False, cpu=False):
    launches = tmp_path / "launches.log"
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'NCCL error: unhandled system error' >&2\nexit 3\n" if broken
                      else FAKE_PYTHON % str(launches))
    python.chmod(0o755)
    playbook = tmp_path / "probe.yml"
    text = PROBE_PLAYBOOK.replace("@GPUS@", str(gpus)).replace("@ENABLED@", "true" if enabled else "false")
    playbook.write_text(text.replace("@PYTHON@", str(python)).replace("@CACHE@", str(tmp_path / "state" / "allreduce.json")))
    result = run_playbook([playbook, "-e", "vllm_preflight_vllm_version=" + version, "-e", "vllm_preflight_cpu=%s" % cpu]
                          + (["--check"] if check else []),
                          json_results=True)
    assert result.returncode == 0, result.stdout[-3000:]
    measured = printed_json(result.stdout, "ALLREDUCE")
    counts = launches.read_text().split() if launches.exists() else []
    return measured, counts, result.stdout


def test_probe_measures_once_records_it_on_the_host_and_later_runs_read_the_record(tmp_path):
    measured, counts, dummy = run_probe(tmp_path)
    assert counts == ["1", "2", "4", "8"]
    assert sorted(measured["by_gpu_count"]) == ["1", "2", "4", "8"] and measured["backend"] == "nccl"
    record = json.loads((tmp_path / "state" / "allreduce.json").read_text())
    assert record["generator"] == "gauntlet.vllm.vllm_preflight" and record["content"]["allreduce_probe"] == measured
    again, counts, dummy = run_probe(tmp_path)
    assert again == measured and counts == ["1", "2", "4", "8"]  # nothing launched the second time
    # Another vLLM release (another torch and NCCL) measures again.
    dummy, counts, dummy = run_probe(tmp_path, version="0.32.0")
    assert counts == ["1", "2", "4", "8"] * 2


@pytest.mark.parametrize("case", [
    {"gpus": 1}, {"gpus": 0}, {"enabled": False}, {"check": True}, {"cpu": True}])
def test_probe_is_not_launched(tmp_path, case):
    measured, counts, dummy = run_probe(tmp_path, **case)
    assert measured == {} and counts == []
    assert not (tmp_path / "state").exists()


def test_a_foreign_file_at_the_record_path_is_left_alone(tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "allreduce.json").write_text("{}")
    with pytest.raises(AssertionError) as failed:
        run_probe(tmp_path)
    assert "was not written by gauntlet.vllm.vllm_preflight" in str(failed.value)
    assert (tmp_path / "state" / "allreduce.json").read_text() == "{}"


def test_a_failed_probe_does_not_stop_the_play(tmp_path):
    measured, counts, output = run_probe(tmp_path, gpus=2, broken=True)
    assert measured == {}
    assert "All-reduce measurement on localhost failed (the all-reduce probe on 1 GPUs failed (rc 3): NCCL error" in output
    assert not (tmp_path / "state").exists()


def test_a_record_in_the_older_format_is_measured_again_and_replaced(tmp_path):
    # What this role wrote before gauntlet.vllm.vllm_record: no format key, the measurement at the top level.
    (tmp_path / "state").mkdir()
    old = {"generator": "gauntlet.vllm.vllm_preflight", "key": {"gpus": 8, "vllm_version": "0.28.0"},
           "recorded_at": "2026-12-01T00:00:00", "allreduce_probe": {"backend": "nccl", "by_gpu_count": {}}}
    (tmp_path / "state" / "allreduce.json").write_text(json.dumps(old))
    measured, counts, dummy = run_probe(tmp_path)
    assert counts == ["1", "2", "4", "8"] and sorted(measured["by_gpu_count"]) == ["1", "2", "4", "8"]
    record = json.loads((tmp_path / "state" / "allreduce.json").read_text())
    assert record["format"] == 1 and record["key"] == old["key"] and record["content"] == {"allreduce_probe": measured}
    assert os.stat(str(tmp_path / "state" / "allreduce.json")).st_mode & 0o777 == 0o640
