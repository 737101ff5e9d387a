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

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_playbook(args, json_results=False, **env):
    """ansible-playbook ``args`` from the checkout's root with its ansible.cfg and no colour; task results as
    JSON when ``json_results`` (so a debug ``msg`` can be read back); ``env`` adds environment variables."""
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
