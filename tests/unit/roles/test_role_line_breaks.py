# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values that vllm_watchdog writes into its units and vllm_install into the constraints file are refused with a
line break, naming the variable, before anything is written (issue 34). Each case is one real ansible-playbook run
on localhost that stops at the role's first check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

import pytest
import yaml

from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

WATCHDOG = {"vllm_watchdog_unit": "vllm-tiny-llama.service", "vllm_watchdog_url": "http://127.0.0.1:9",
            "vllm_watchdog_model": "tiny-llama", "vllm_watchdog_env_file": "/nonexistent"}


def _run(tmp_path, role, role_vars):
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "connection": "local",
                                     "tasks": [{"ansible.builtin.include_role": {"name": role}, "vars": role_vars}]}]))
    run = run_playbook(["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable, str(play)])
    return run, " ".join(run.stdout.split())


@pytest.mark.parametrize("name, value, says", [
    ("vllm_watchdog_unit", "vllm-a.service\nExecStartPre=/bin/true", "vllm_watchdog_unit must be a service unit's name"),
    ("vllm_watchdog_unit", "vllm-a.service\n", "vllm_watchdog_unit must be a service unit's name"),
    ("vllm_watchdog_model", "m\nExecStartPre=/bin/true", "vllm_watchdog_model must be one line"),
    ("vllm_watchdog_env_file", "/etc/x\n[Service]", "vllm_watchdog_env_file must be one line"),
    ("vllm_watchdog_url", "http://127.0.0.1:9\r", "vllm_watchdog_url must be one line"),
])
def test_a_line_break_in_a_watchdog_value_is_refused_naming_it(tmp_path, name, value, says):
    run, text = _run(tmp_path, "gauntlet.vllm.vllm_watchdog", dict(WATCHDOG, **{name: value}))
    assert run.returncode != 0 and says in text, run.stdout[-2000:]
    assert "Install the watchdog script" not in run.stdout


def test_a_constraint_with_a_line_break_is_refused_naming_the_variable(tmp_path):
    run, text = _run(tmp_path, "gauntlet.vllm.vllm_install",
                     {"vllm_install_version": "0.32.0", "vllm_install_constraints": ["torch==2.5\n--index-url http://x"]})
    assert run.returncode != 0, run.stdout[-2000:]
    assert "vllm_install_constraints: each item is one line" in text, run.stdout[-2000:]
