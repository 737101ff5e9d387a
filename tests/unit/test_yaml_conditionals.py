# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every conditional in the collection's YAML is a string (or a bool).

An unquoted list item such as ``- msg is search('field: value')`` holds ``: ``, so YAML reads it as a
mapping; ansible-core 2.19 then fails the task with "Conditional expressions must be strings" at run
time, while ansible-lint and ``--syntax-check`` pass. Checks that only run inside molecule would find
it after 20 minutes; this finds it in a second.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONDITIONAL_KEYS = ("that", "when", "failed_when", "changed_when", "until")
SKIPPED_DIRS = {".git", ".rig", "reports", "node_modules"}


def yaml_files():
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = [name for name in dirs if name not in SKIPPED_DIRS]
        for name in files:
            if name.endswith((".yml", ".yaml")):
                yield os.path.relpath(os.path.join(directory, name), ROOT)


def non_string_conditionals(node, where=""):
    """(path, key, value) for every conditional that YAML did not read as a string or bool."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONAL_KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, (str, bool)):
                        found.append((where, key, item))
            found.extend(non_string_conditionals(value, "%s/%s" % (where, key)))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.extend(non_string_conditionals(item, "%s[%d]" % (where, index)))
    return found


def test_the_check_finds_an_unquoted_colon():
    document = yaml.safe_load("- ansible.builtin.assert:\n    that:\n      - msg is search('field: value')\n")
    assert non_string_conditionals(document) == [
        ("[0]/ansible.builtin.assert", "that", {"msg is search('field": "value')"})]


@pytest.mark.parametrize("path", sorted(yaml_files()))
def test_every_conditional_is_a_string(path):
    with open(os.path.join(ROOT, path)) as handle:
        document = yaml.safe_load(handle)
    assert non_string_conditionals(document) == []
