# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the integration tests run ansible-playbook on the controller, and read what a play printed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def skip_under_mutation():
    """Skip the calling test inside test_hostile_mutations.py's runs: a mutation of safe_io is made in the pytest
    process, which an ansible-playbook child never sees, so running the play there would only cost time."""
    if os.environ.get("GAUNTLET_HOSTILE_MUTATION"):
        pytest.skip("ansible-playbook runs in a child process, which the in-process mutation does not reach")


def run_playbook(args, json_results=False, **env):
    """ansible-playbook ``args`` from the checkout's root with its ansible.cfg and no colour; task results as
    JSON when ``json_results`` (so a debug ``msg`` can be read back); ``env`` adds environment variables."""
    skip_under_mutation()
    command = [shutil.which("ansible-playbook")] + [str(arg) for arg in args]
    assert command[0], "ansible-playbook is not on PATH: run through scripts/test.sh"
    extra = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg")}
    if json_results:
        extra["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    extra.update(env)
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False, env=dict(os.environ, **extra))


def printed_messages(stdout, prefix):
    """Every debug ``msg`` starting with ``prefix`` in a JSON-results play's output, in order."""
    return [json.loads(found) for found in re.findall(r'"msg": ("%s.*")' % re.escape(prefix), stdout)]


def printed_json(stdout, marker):
    """The value the play printed last as ``msg: "<marker>=<json>"``, or None."""
    found = printed_messages(stdout, marker + "=")
    return json.loads(found[-1][len(marker) + 1:]) if found else None
