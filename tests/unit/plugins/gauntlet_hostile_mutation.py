# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pytest plugin that weakens one of safe_io's shared checks, named by GAUNTLET_HOSTILE_MUTATION, for the whole
session (test_hostile_mutations.py runs the hostile-input tests under it and expects some to fail).

Each mutant is what the code did before issue 34: ``re.match`` with its trailing-newline ``$``, numbers taken
without a finiteness test, free text written unchecked, a file opened whatever it is, ``json.loads`` bare. The
function's code object is swapped in place, so every ``from ... import name`` already made sees the mutant too.
The mutant runs with safe_io's globals; every global name it uses is imported here as well, so both resolve it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.io import safe_io
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import READ_FLAGS, number_in_bounds


def _full_match(pattern, value):
    if not isinstance(value, str):
        return False
    return re.match(getattr(pattern, "pattern", pattern), value) is not None


def _is_finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_number(value, where, error=None, minimum=None, maximum=None, above=None):
    # The type test without the finiteness test; the bounds are safe_io's own.
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise error("%s must be a number, got %r" % (where, value))
    return number_in_bounds(value, where, error, minimum, maximum, above)


def _single_line(value, where, error=None, forbidden=""):
    return value


def _open_regular(path, error):
    try:
        descriptor = os.open(path, READ_FLAGS)
    except (IOError, OSError, TypeError, ValueError) as exc:
        raise error("%s: cannot read file: %s" % (path, exc))
    return os.fdopen(descriptor, "rb")


def _parse_json(text, where, error=None):
    return json.loads(text)


MUTANTS = {
    "full_match": ("full_match", _full_match),
    "is_finite_number": ("is_finite_number", _is_finite_number),
    "finite_number": ("finite_number", _finite_number),
    "single_line": ("single_line", _single_line),
    "open_regular": ("open_regular", _open_regular),
    "parse_json": ("parse_json", _parse_json),
}


def pytest_configure(config):
    name = os.environ.get("GAUNTLET_HOSTILE_MUTATION")
    if not name:
        return
    target, mutant = MUTANTS[name]
    getattr(safe_io, target).__code__ = mutant.__code__
