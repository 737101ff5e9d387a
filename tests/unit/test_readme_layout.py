# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's Layout names every part a newcomer looks for: a module, role, playbook or doc added without a line
there fails here (issue 33: the Layout had fallen 5 modules, 4 roles, 2 playbooks, a scenario and 5 docs behind)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def layout():
    """The text of the README's Layout block (between '## Layout' and the end of its code block)."""
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    start = text.index("## Layout")
    block = text.index("```", start) + 3
    return text[block:text.index("```", block)]


def names(folder, suffix=None, dirs=False):
    path = os.path.join(ROOT, folder)
    found = []
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        if entry.startswith(("_", ".")):
            continue
        if dirs and os.path.isdir(full):
            found.append(entry)
        elif not dirs and suffix and entry.endswith(suffix) and os.path.isfile(full):
            found.append(entry[:-len(suffix)] if suffix == ".py" else entry)
    return found


PARTS = (
    [("module", name) for name in names("plugins/modules", ".py")]
    + [("module_utils package", name + "/") for name in names("plugins/module_utils", dirs=True)]
    + [("module_utils", name) for package in names("plugins/module_utils", dirs=True)
       for name in names("plugins/module_utils/" + package, ".py")]
    + [("filter plugin file", name) for name in names("plugins/filter", ".py")]
    + [("role", name) for name in names("roles", dirs=True)]
    + [("playbook", name) for name in names("playbooks", ".yml")]
    + [("molecule scenario", name) for name in names("extensions/molecule", dirs=True)]
    + [("doc", name) for name in names("docs", ".md")]
)


def test_the_tree_has_the_parts_this_test_looks_for():
    kinds = set(kind for kind, dummy in PARTS)
    assert kinds == {"module", "module_utils package", "module_utils", "filter plugin file", "role", "playbook",
                     "molecule scenario", "doc"}
    assert len(PARTS) > 90


@pytest.mark.parametrize("kind, name", PARTS, ids=["%s:%s" % part for part in PARTS])
def test_the_readme_layout_names_every_part(kind, name):
    # A filter plugin file is named by what it holds (vllm_secrets: redaction, ...); the rest by their own names.
    assert re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(name), layout()), (
        "README.md's Layout does not name the %s %r: add it where a newcomer would look" % (kind, name))
