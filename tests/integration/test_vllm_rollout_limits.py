# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_rollout refuses health-gate limits that are not fractions before it touches the host (issue 34): the
argument spec makes them floats, and "nan" or "inf" convert, so without the role's check a NaN limit would make
the gate judge with no limit at all."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

PLAY = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - ansible.builtin.include_role:
        name: gauntlet.vllm.vllm_rollout
      vars:
        vllm_rollout_hosts: [localhost]
"""
REFUSAL = "vllm_rollout_gate_max_regression must be a fraction"


def _run(tmp_path, extra):
    play = tmp_path / "rollout.yml"
    play.write_text(PLAY)
    return run_playbook(["-i", "localhost,", str(play), "-e", json.dumps(extra)])


@pytest.mark.parametrize("extra", [{"vllm_rollout_gate_max_error_rate": "nan"},
                                   {"vllm_rollout_gate_max_regression": "inf"},
                                   {"vllm_rollout_gate_max_regression": 1.0},
                                   {"vllm_rollout_gate_max_error_rate": -0.1}])
def test_a_gate_limit_that_is_not_a_fraction_is_refused_before_anything_runs(tmp_path, extra):
    run = _run(tmp_path, extra)
    assert run.returncode != 0
    assert REFUSAL in run.stdout, run.stdout[-3000:]
    assert "Drain" not in run.stdout and "snapshot" not in run.stdout.lower()


def test_the_default_limits_pass_the_check(tmp_path):
    run = _run(tmp_path, {})
    assert REFUSAL not in run.stdout
    assert "Check the health gate's limits are fractions" in run.stdout
