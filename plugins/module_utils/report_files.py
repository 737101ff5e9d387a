# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing report files on the controller: whole or not at all, owner and group only, and never over a file
that some other program wrote.

Every file a report module writes carries a marker, the module's name (``gauntlet.vllm.<module>``): a
``generator`` key in JSON, an HTML comment on the first line of Markdown, the ``Software`` text chunk of a PNG,
a ``generator`` key on each history line. Before it replaces or appends to a file, the module looks for its
marker near the start of that file; a file without it belongs to somebody else and is left alone, and the
module fails naming it. Reports may hold the workload and unit details of a deployment, so they are 0640.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes

REPORT_MODE = 0o640
# A marker is written at the start (JSON sorts "generator" among the first keys only by luck, so look far
# enough): PNG text chunks come before the image data, Markdown's comment is its first line.
MARKER_WINDOW = 64 * 1024


class ReportFileError(Exception):
    """A report file cannot be written without destroying something that is not ours."""


def marker_of(module_name):
    return "gauntlet.vllm.%s" % module_name


def markdown_marker(module_name):
    return "<!-- written by %s: edits are overwritten -->\n" % marker_of(module_name)


def is_ours(path, marker):
    """True when ``path`` is absent or holds ``marker`` near its start; False for anything else there
    (another file, a directory, a link to elsewhere, a file we cannot read)."""
    if not os.path.lexists(path):
        return True
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(MARKER_WINDOW)
    except (IOError, OSError):
        return False
    return to_bytes(marker) in head


def check_ours(path, marker):
    if not is_ours(path, marker):
        raise ReportFileError(
            "refusing to overwrite %s: it was not written by %s (no '%s' marker in it). Move it away, or choose "
            "another output_dir or name." % (path, marker, marker))


def would_change(path, data):
    """Whether writing ``data`` to ``path`` would change it (check mode's prediction)."""
    try:
        with open(path, "rb") as handle:
            return handle.read() != to_bytes(data)
    except (IOError, OSError):
        return True


def write_atomic(module, path, data, unless_unchanged=False, marker=None):
    """Write ``data`` to ``path`` through a temporary file and ``atomic_move``, so a reader never sees half a
    report. With ``marker``, a file already at ``path`` that does not carry it is refused (ReportFileError).
    With ``unless_unchanged``, a file that already holds exactly ``data`` is left alone (a re-run then
    reports no change). Returns whether it wrote."""
    if marker is not None:
        check_ours(path, marker)
    data = to_bytes(data)
    if unless_unchanged and not would_change(path, data):
        return False
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.chmod(temp, REPORT_MODE)
    module.atomic_move(temp, path)
    # atomic_move gives a new file the umask's mode and an old one its old mode: reports are 0640 either way.
    os.chmod(path, REPORT_MODE)
    return True


def append_line(path, line, marker):
    """Append one line to a history file that is ours (or new, then created 0640)."""
    check_ours(path, marker)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, REPORT_MODE)
    with os.fdopen(descriptor, "ab") as stream:
        stream.write(to_bytes(line))
