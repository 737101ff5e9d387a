# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing report files on the controller: whole or not at all, readable by everyone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes


def write_atomic(module, path, data, unless_unchanged=False):
    """Write ``data`` to ``path`` through a temporary file and ``atomic_move``, so a reader never sees half a
    report. With ``unless_unchanged``, a file that already holds exactly ``data`` is left alone (a re-run then
    reports no change). Returns whether it wrote."""
    data = to_bytes(data)
    if unless_unchanged:
        try:
            with open(path, "rb") as handle:
                if handle.read() == data:
                    return False
        except (IOError, OSError):
            pass
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.chmod(temp, 0o644)
    module.atomic_move(temp, path)
    return True
