# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.systemd_quote: the one quoting of every unit template."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_systemd import FilterModule, systemd_quote

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
UNIT_TEMPLATES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "templates", "*.service.j2")))


def test_a_command_line_word_doubles_specifiers_and_variables():
    # systemd.service(5): % specifiers and $VARIABLES expand on command lines; "\" and '"' end a quoted word.
    assert systemd_quote('50%-$HOME "x" \\y') == '"50%%-$$HOME \\"x\\" \\\\y"'
    assert systemd_quote(8000) == '"8000"'
    assert FilterModule().filters()["systemd_quote"] is systemd_quote


@pytest.mark.parametrize("context", ["assignment", "path"])
def test_an_assignment_or_a_path_doubles_specifiers_only(context):
    # Environment= and ReadWritePaths= expand specifiers, not variables.
    assert systemd_quote("KEY=50%$X", context) == '"KEY=50%%$X"'


@pytest.mark.parametrize("value", ["a\nExecStartPre=/bin/rm -rf /", "a\rb", "a\x00b"])
def test_a_line_break_or_nul_is_refused_before_it_writes_a_setting(value):
    with pytest.raises(AnsibleFilterError, match="newline or NUL"):
        systemd_quote(value)


@pytest.mark.parametrize("value, context, message", [
    ("x", "shell", "context must be one of exec, assignment, path"),
    ({"a": 1}, "exec", "takes a string or a number"),
    (None, "exec", "takes a string or a number"),
])
def test_bad_input_names_what_is_wrong(value, context, message):
    with pytest.raises(AnsibleFilterError, match=message):
        systemd_quote(value, context)


def test_every_unit_template_quotes_through_the_filter():
    # The unit templates (the server, its watchdog, the group watch, a Ray node, the GPU metrics collector): three
    # carried copies of this quoting as macros, two quoted by hand or not at all; each now calls the filter.
    names = [os.path.basename(path) for path in UNIT_TEMPLATES]
    assert names == ["gauntlet-ray.service.j2", "gauntlet-gpu-textfile.service.j2", "vllm.service.j2",
                     "vllm-group.service.j2", "vllm-watchdog.service.j2"]
    for path in UNIT_TEMPLATES:
        with open(path) as handle:
            text = handle.read()
        assert "gauntlet.vllm.systemd_quote" in text, path
        assert "replace('%', '%%')" not in text and "macro word" not in text, path
        # Every word of a command line is one filtered expression: no hand-made quotes around a template value.
        for line in text.splitlines():
            if line.startswith(("ExecStart", "ReadWritePaths", "    ")):
                for expression in re.findall(r"\{\{(.*?)\}\}", line):
                    if "systemd_quote" not in expression and "loop.last" not in expression:
                        pytest.fail("%s writes a word without the filter: %s" % (path, line))
        assert not re.search(r'^Environment="', text, re.M), path
