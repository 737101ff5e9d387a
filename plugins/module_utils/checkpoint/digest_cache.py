# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""sha256 of shards and the digest cache beside the model (see ``verify.py``'s design notes): keyed on the
file's real path and stat, written atomically, and never replacing a file without its marker."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import stat
import tempfile

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import (
    SHA256_HEX,
    CheckpointError,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    full_match,
    is_int,
    parse_json,
    read_text,
)

# A digest cache is marked by this key (its value is the format version): model_verify never
# replaces a file without it.
CACHE_MARKER = "gauntlet_vllm_verify_cache"

CACHE_VERSION = 1

# The comment of the caches written before the marker existed (also recognised as ours).
LEGACY_CACHE_COMMENT = "gauntlet.vllm.model_verify digest cache"

CACHE_MODE = 0o640

# Bytes read per read() call while hashing (1-8 MiB all hash at the same speed).
CHUNK_SIZE = 4 * 1024 * 1024

MAX_CACHE_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------
# Hashing and the digest cache
# --------------------------------------------------------------------------


def stat_key(st):
    """What a cached digest is keyed on, besides the real path."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def sha256_of_handle(handle, chunk_size=CHUNK_SIZE):
    """sha256 hex digest of an open (unbuffered) file from its start."""
    handle.seek(0)
    digest = hashlib.sha256()
    buf = bytearray(chunk_size)
    view = memoryview(buf)
    total = 0
    while True:
        count = handle.readinto(buf)
        if not count:
            break
        digest.update(view[:count])
        total += count
    return digest.hexdigest(), total


def sha256_file(path, chunk_size=CHUNK_SIZE):
    """sha256 hex digest of the file at ``path``."""
    with open(path, "rb", buffering=0) as handle:
        return sha256_of_handle(handle, chunk_size)[0]


def _not_ours(cache_path, what):
    return CheckpointError("%s: %s; model_verify only replaces a digest cache it wrote itself, so it stops here: "
                           "delete that file if it is not needed, or give cache_path a file of its own" % (cache_path, what))


def read_cache_file(cache_path):
    """The parsed digest cache at ``cache_path``, or None when there is no such file.

    :raises CheckpointError: when something is there that this module cannot prove it
        wrote (no marker key, not JSON, too large, unreadable, a symlink, not a file).
    """
    try:
        st = os.lstat(cache_path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise _not_ours(cache_path, "cannot examine it: %s" % (exc.strerror or exc))
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours(cache_path, "is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise _not_ours(cache_path, "is not a regular file")
    try:
        data = parse_json(read_text(cache_path, CheckpointError, MAX_CACHE_BYTES), cache_path, CheckpointError)
    except CheckpointError as exc:
        raise _not_ours(cache_path, "exists but is not a readable digest cache (%s)" % str(exc)[len(cache_path) + 2:])
    if isinstance(data, dict) and CACHE_MARKER in data:
        return data
    if (isinstance(data, dict) and data.get("version") == 1 and isinstance(data.get("comment"), str)
            and data["comment"].startswith(LEGACY_CACHE_COMMENT)):
        return data  # written by model_verify before the marker key existed
    raise _not_ours(cache_path, "exists and is not a model_verify digest cache (no %s key)" % json.dumps(CACHE_MARKER))


def load_cache(cache_path):
    """``(entries, warning)``: real path -> entry dict.

    A missing cache is empty; a cache of ours in another format is ignored with a warning
    (and rewritten); anything else raises CheckpointError (see read_cache_file).
    """
    if not cache_path:
        return {}, None
    data = read_cache_file(cache_path)
    if data is None:
        return {}, None
    if data.get(CACHE_MARKER) != CACHE_VERSION or not isinstance(data.get("files"), dict):
        return {}, "%s: digest cache of another format ignored; it will be rewritten" % cache_path
    entries = {}
    for path, entry in data["files"].items():
        if (isinstance(entry, dict) and isinstance(entry.get("key"), list) and len(entry["key"]) == 5
                and all(is_int(part) for part in entry["key"])
                and full_match(SHA256_HEX, entry.get("sha256"))):
            entries[path] = {"key": entry["key"], "sha256": entry["sha256"].lower()}
    return entries, None


def cache_writable(cache_path):
    """Why the cache could not be written now (a string), or None: what check mode predicts."""
    try:
        read_cache_file(cache_path)
    except CheckpointError as exc:
        return str(exc)
    directory = os.path.dirname(os.path.abspath(cache_path))
    if not os.access(directory, os.W_OK | os.X_OK):
        return "%s: could not write the digest cache: %s is not writable" % (cache_path, directory)
    return None


def write_cache(cache_path, entries):
    """Atomically replace ``cache_path`` (mode 0640); returns a warning string on failure, else None.

    The file there is checked again just before it is replaced: only a missing file or a cache
    of ours is ever replaced.
    """
    directory = os.path.dirname(os.path.abspath(cache_path))
    data = {CACHE_MARKER: CACHE_VERSION, "algorithm": "sha256",
            "comment": LEGACY_CACHE_COMMENT + ": real path -> [size, mtime_ns, ctime_ns, inode, device] and sha256",
            "files": dict((path, entries[path]) for path in sorted(entries))}
    tmp_path = None
    try:
        read_cache_file(cache_path)
        fd, tmp_path = tempfile.mkstemp(prefix=".gauntlet-verify-cache.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_path, CACHE_MODE)
        os.replace(tmp_path, cache_path)
        tmp_path = None
    except CheckpointError as exc:
        return "%s (the digest cache was not written)" % exc
    except (IOError, OSError) as exc:
        return "%s: could not write the digest cache: %s" % (cache_path, exc)
    finally:
        if tmp_path is not None and os.path.exists(tmp_path):
            os.unlink(tmp_path)
    return None
