# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's "already done?" records: one JSON file per thing done (a fetch, a measurement), saying
what was done (``key``: the request, the server instance and workload, the fingerprint) and what came of it
(``content``), so that a later run that asks for the same thing reads the result instead of doing it again.

Format (JSON, keys sorted, indented by 2, a trailing newline)::

    {"generator": "gauntlet.vllm.<writer>", "format": 1, "key": {...}, "recorded_at": "<UTC ISO-8601>",
     "content": {...}}

A file whose top level is not a JSON object carrying a ``generator`` that starts with ``gauntlet.vllm.``
belongs to somebody else: it is never read as a record nor overwritten (StateRecordError names it); so does one
holding NaN or an infinity anywhere (the collection writes finite numbers only). A record of
the collection in another format (those written before this module have no ``format`` key) is ours: it matches nothing, and
writing replaces it.

Only the Python standard library and the collection's bounded JSON reader are used (Python 3.8 or later); the
module ``gauntlet.vllm.vllm_record`` is a thin layer over :func:`read_record` and :func:`write_record`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import json
import os
import re
import stat
import tempfile

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    full_match,
    is_finite_number,
    json_type_name,
    parse_json,
    read_text,
    short_text,
)

MARKER_PREFIX = "gauntlet.vllm."
RECORD_FORMAT = 1
# Records hold requests, results and file hashes: a few KiB to a few MiB. A larger file is nobody's record.
MAX_RECORD_BYTES = 16 * 1024 * 1024
DIRECTORY_MODE = 0o750
GENERATOR_NAME = re.compile(r"[a-z][a-z0-9_]*")


class StateRecordError(Exception):
    """A record could not be read or written; the message names the file or the option at fault."""


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def marker_of(generator):
    """``gauntlet.vllm.<generator>``; a generator that is not a module or role name raises StateRecordError."""
    if not full_match(GENERATOR_NAME, generator):
        raise StateRecordError(
            "generator: %r is not the name of a module or role of the collection (lower-case letters, digits and _, "
            "such as vllm_bench)" % (generator,))
    return MARKER_PREFIX + generator


def check_path(path):
    """``path`` when it can name a record file: a str without NUL (the OS cannot take one) that does not end in
    ``/`` (a folder's name, not a file's); otherwise StateRecordError naming it."""
    if not isinstance(path, str) or not path:
        raise StateRecordError("path: %r is not a file path" % (path,))
    if "\x00" in path:
        raise StateRecordError("path: %s holds a NUL byte, which no file path can hold"
                               % short_text(repr(path), 200))
    if path.endswith("/"):
        raise StateRecordError("path: %s ends in '/': a record is a file, give the file's path (such as "
                               "<folder>/<name>.json)" % short_text(repr(path), 200))
    return path


def json_value(field, value):
    """``value`` (a dict) as JSON would give it back (tuples as lists, and so on); anything JSON cannot hold
    raises StateRecordError naming ``field``."""
    if not isinstance(value, dict):
        raise StateRecordError("%s: must be a dict, got %s" % (field, type(value).__name__))
    try:
        return json.loads(json.dumps(value, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise StateRecordError("%s: not JSON-serialisable: %s" % (field, exc))
    except RecursionError:
        raise StateRecordError("%s: not JSON-serialisable: nested too deeply" % field)


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------

def _not_ours(path, marker, why):
    return StateRecordError(
        "%s exists but was not written by %s (%s); it is left alone. Move it away, or choose another path."
        % (path, marker, why))


def _file_kind(path, marker):
    """Whether a file is at ``path`` (False when nothing is there); anything else than a regular file is refused."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise StateRecordError("%s: cannot examine the record: %s" % (path, exc.strerror or exc))
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours(path, marker, "it is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise _not_ours(path, marker, "it is not a regular file")
    return True


def load_record(path, marker):
    """The JSON object stored at ``path``, or None when there is no file.

    :raises StateRecordError: when the file there is not a record of the collection (not JSON, too large, nested
        too deeply, not an object, no ``gauntlet.vllm.`` generator), or cannot be read.
    """
    if not _file_kind(path, marker):
        return None
    if not os.access(path, os.R_OK):
        raise StateRecordError("%s: cannot read the record: permission denied" % path)
    try:
        data = parse_json(read_text(path, StateRecordError, MAX_RECORD_BYTES), path, StateRecordError)
    except StateRecordError as exc:
        raise _not_ours(path, marker, str(exc)[len(path) + 2:])
    if not isinstance(data, dict):
        raise _not_ours(path, marker, "its top level is %s, not a JSON object" % json_type_name(data))
    generator = data.get("generator")
    if not isinstance(generator, str) or not generator.startswith(MARKER_PREFIX):
        why = "no generator key" if generator is None else "its generator is %s" % json.dumps(generator)[:200]
        raise _not_ours(path, marker, why)
    # The collection writes records with allow_nan=False: NaN or an infinity (NaN, Infinity, 1e999 in the file) was
    # put there by somebody else, and a NaN baseline compares false with every threshold. Not ours, like a file
    # without a generator: refused and left alone, never read as a match.
    found = non_finite_number(data)
    if found is not None:
        raise _not_ours(path, marker, "%s is %s, and the collection writes finite numbers only"
                        % (short_text(found[0], 200), found[1]))
    return data


def non_finite_number(data):
    """Where the first NaN or infinite number in ``data`` (parsed JSON) sits, as ``(path, value)`` with a path such
    as ``content.result.levels[0].output_tokens_per_s``; None when every number is finite. Walked without recursion:
    the parser allows nesting as deep as Python's recursion limit."""
    pending = [("", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, dict):
            pending.extend(("%s.%s" % (where, key) if where else str(key), child)
                           for key, child in reversed(list(value.items())))
        elif isinstance(value, list):
            pending.extend(("%s[%d]" % (where, index), child) for index, child in reversed(list(enumerate(value))))
        elif isinstance(value, float) and not is_finite_number(value):
            return where, value
    return None


def is_current(record):
    """Whether ``record`` (ours) is in this format; older ones (no ``format`` key) hold nothing usable."""
    return (record.get("format") == RECORD_FORMAT and isinstance(record.get("key"), dict)
            and isinstance(record.get("content"), dict))


def describe(path, record, marker, key):
    """What the module returns for ``record`` (None: no file) read at ``path`` for ``key``."""
    current = record is not None and is_current(record)
    return {
        "path": path,
        "exists": record is not None,
        "record": record,
        "matches": current and record.get("generator") == marker and record["key"] == key,
        "content": record["content"] if current else {},
    }


def read_record(path, generator, key=None):
    """Read the record at ``path`` for the writer ``generator`` and compare it with ``key``; see :func:`describe`."""
    marker = marker_of(generator)
    check_path(path)
    key = json_value("key", {} if key is None else key)
    return describe(path, load_record(path, marker), marker, key)


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------

def utc_now():
    """The time now, UTC, ISO-8601 to the second (``2026-12-03T14:24:10Z``)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def record_text(record):
    """The file's text: keys sorted, indented by 2, a trailing newline."""
    return json.dumps(record, indent=2, sort_keys=True, allow_nan=False) + "\n"


def make_parent(path):
    """Create the folders missing above ``path`` (each 0750, whatever the umask)."""
    parent = os.path.dirname(os.path.abspath(path))
    missing = []
    while not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIRECTORY_MODE)
        except OSError as exc:
            raise StateRecordError("%s: cannot create the record's folder %s: %s" % (path, folder, exc.strerror or exc))
        os.chmod(folder, DIRECTORY_MODE)


def replace_file(path, text, move):
    """Write ``text`` to a temporary file beside ``path`` and ``move(temp, path)`` it into place."""
    make_parent(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path), suffix=".tmp")
    except OSError as exc:
        raise StateRecordError("%s: cannot write the record: %s" % (path, exc.strerror or exc))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(text.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
        move(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def write_record(path, generator, key, content, check_mode=False, move=os.replace, now=utc_now):
    """Make the record at ``path`` hold ``key`` and ``content``; the same result as :func:`read_record` afterwards,
    with ``changed``.

    A record of ``generator`` with an equal key and content is left untouched (``recorded_at`` kept): changed is
    False. Otherwise the record is written whole through a temporary file in the same folder and ``move``
    (``AnsibleModule.atomic_move`` in the module), creating missing folders 0750; in check mode nothing is written
    and changed says whether it would be. A file that is not ours raises StateRecordError and is left alone.
    """
    marker = marker_of(generator)
    check_path(path)
    key = json_value("key", key)
    content = json_value("content", content)
    result = describe(path, load_record(path, marker), marker, key)
    if result["matches"] and result["content"] == content:
        return dict(result, changed=False)
    record = {"generator": marker, "format": RECORD_FORMAT, "key": key, "recorded_at": now(), "content": content}
    if not check_mode:
        replace_file(path, record_text(record), move)
    return dict(describe(path, record, marker, key), changed=True)
