# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation check for the hostile-input tests (issue 34), the way test_vllm_rules_mutation.py checks the planner's
rules: weaken any one of safe_io's shared checks (gauntlet_hostile_mutation.py says how) and some test in
tests/unit/plugins/test_hostile_*.py must fail. A check no test notices is a check nothing guards."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
HOSTILE_FILES = sorted(glob.glob(os.path.join(HERE, "test_hostile_*.py")))
sys.path.insert(0, HERE)
import gauntlet_hostile_mutation  # noqa: E402


def _run_hostile_tests(mutation):
    env = dict(os.environ, GAUNTLET_HOSTILE_MUTATION=mutation,
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in sys.path if p]))
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "gauntlet_hostile_mutation", "-p", "no:cacheprovider"] + HOSTILE_FILES
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_there_are_hostile_tests_to_mutate():
    assert len(HOSTILE_FILES) >= 4, HOSTILE_FILES


@pytest.mark.parametrize("mutation", sorted(gauntlet_hostile_mutation.MUTANTS))
def test_weakening_a_shared_check_fails_a_hostile_test(mutation):
    run = _run_hostile_tests(mutation)
    assert run.returncode == 1, (
        "with safe_io's %s weakened, tests/unit/plugins/test_hostile_*.py still pass (rc %d): add a test that "
        "needs it.\n%s" % (mutation, run.returncode, (run.stdout + run.stderr)[-3000:]))
    # A test that failed, not one that could not run (a fixture or import error would also give rc 1).
    summary = run.stdout.strip().splitlines()[-1]
    assert " failed" in summary and " error" not in summary, run.stdout[-3000:]
