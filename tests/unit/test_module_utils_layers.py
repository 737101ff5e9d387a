# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils is one package per domain, layered as docs/ARCHITECTURE.md ("Where the Python lives")
says: a package imports from the packages above it, never from one below (issue 33: the flat folder of 29 files hid
the architecture). An import against the order fails here, naming the file and the package."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "plugins", "module_utils")
# Top to bottom, as in docs/ARCHITECTURE.md's table.
LAYERS = ["io", "host", "planning", "checkpoint", "install", "serving", "bench", "fleet"]
# The one import against the order: the traffic shapes the bench sends are what the planner predicts.
ALLOWED = {("planning", "bench/bench_traffic")}
IMPORT = re.compile(r"ansible_collections\.gauntlet\.vllm\.plugins\.module_utils\.([a-z_]+)(?:\.([a-z_]+)| import ([a-z_]+))")


def imports(path):
    with open(path) as handle:
        text = handle.read()
    return sorted(set((match.group(1), match.group(2) or match.group(3)) for match in IMPORT.finditer(text)))


def sources():
    found = []
    for package in sorted(os.listdir(ROOT)):
        folder = os.path.join(ROOT, package)
        if os.path.isdir(folder) and not package.startswith(("_", ".")):
            found += [(package, name) for name in sorted(os.listdir(folder)) if name.endswith(".py")]
    return found


def test_every_package_has_a_layer_and_no_file_sits_outside_one():
    assert sorted(set(package for package, dummy in sources())) == sorted(LAYERS)
    assert [name for name in os.listdir(ROOT) if name.endswith(".py")] == []


@pytest.mark.parametrize("package, name", sources(), ids=["%s/%s" % source for source in sources()])
def test_imports_go_up_the_layers(package, name):
    for imported, module in imports(os.path.join(ROOT, package, name)):
        assert imported in LAYERS, "%s/%s imports module_utils.%s, which is not a package" % (package, name, imported)
        if imported == package or (package, "%s/%s" % (imported, module)) in ALLOWED:
            continue
        assert LAYERS.index(imported) < LAYERS.index(package), (
            "%s/%s imports %s/%s: %s/ sits below %s/ (docs/ARCHITECTURE.md, 'Where the Python lives')"
            % (package, name, imported, module, imported, package))
