# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Will a checkpoint fit? Bytes still to transfer into a destination directory against the
free bytes of the file system that will hold it, before any byte moves.

A file already at the destination with exactly its expected size counts as complete (nothing to
transfer; model_verify judges its content afterwards); any other file counts in full (a partial
or different file is rewritten or resumed, and a resumed one may need its whole size again while
the old copy still exists). The destination need not exist: the nearest existing ancestor's file
system is the one asked. Only the Python standard library is used.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

GIB = 1024 ** 3


class SpaceError(Exception):
    """Bad input (a size that is not a number, a file name that climbs out of the destination)."""


def parse_sizes(files):
    """``files`` (name -> size, or name -> {size: N}) as name -> int; names must stay inside the destination."""
    if not isinstance(files, dict):
        raise SpaceError("files: must be a dict of file name -> size in bytes, got %s" % type(files).__name__)
    sizes = {}
    for name, value in files.items():
        where = "files[%s]" % json.dumps(str(name))
        if isinstance(value, dict):
            value = value.get("size")
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpaceError("%s: the size must be a non-negative integer, got %s" % (where, json.dumps(value)))
        if not name or os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
            raise SpaceError("%s: must be a relative path inside the destination" % where)
        sizes[name] = value
    return sizes


def existing_ancestor(path):
    """``path`` or its nearest ancestor that exists (a dangling symbolic link counts: it is there, and blocks)."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def blocker(path):
    """Why nothing can be created under ``path`` (an existing ancestor of the destination, or the destination itself),
    or None when it is a directory (through symbolic links): a regular file, a dangling link, a FIFO, ..."""
    if os.path.isdir(path):
        return None
    if os.path.islink(path):
        return "a symbolic link to nothing (%s)" % os.readlink(path)
    mode = os.lstat(path).st_mode
    for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a directory"


def existing_directory(path):
    """``path`` when it is a directory, else its nearest ancestor that is one."""
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def mount_point(path):
    """The mount point of the file system holding ``path`` (which exists)."""
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def bytes_to_transfer(dest, sizes):
    """``(needed, complete)``: bytes of the files not yet complete at ``dest``, and the complete files' names."""
    needed = 0
    complete = []
    for name, size in sorted(sizes.items()):
        target = os.path.join(dest, name)
        try:
            present = os.path.isfile(target) and os.path.getsize(target) == size
        except OSError:
            present = False
        if present:
            complete.append(name)
        else:
            needed += size
    return needed, complete


def free_bytes(path):
    """Bytes an unprivileged writer may still use on the file system of ``path``."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def gib(count):
    return "%.2f GiB" % (float(count) / GIB)


def check_space(dest, files, min_free_bytes=0):
    """Whether ``files`` (name -> size) fit under ``dest`` with ``min_free_bytes`` left over.

    Returns a dict: ``fits``, ``needed_bytes``, ``free_bytes``, ``min_free_bytes``, ``checked_path`` (the
    nearest existing ancestor of ``dest``), ``filesystem`` (its mount point), ``files_total``,
    ``files_complete`` and ``msg`` (the numbers, in words).
    """
    if not isinstance(min_free_bytes, int) or isinstance(min_free_bytes, bool) or min_free_bytes < 0:
        raise SpaceError("min_free_bytes: must be a non-negative integer, got %s" % json.dumps(min_free_bytes))
    sizes = parse_sizes(files)
    checked = existing_ancestor(dest)
    needed, complete = bytes_to_transfer(dest, sizes)
    # The file system asked is that of the nearest directory: a file in the way has no free space of its own to give.
    in_the_way = blocker(checked)
    free = free_bytes(existing_directory(checked))
    filesystem = mount_point(existing_directory(checked))
    fits = needed + min_free_bytes <= free and in_the_way is None
    msg = "needs %d bytes (%s) at %s, %s has %d bytes free (%s)" % (needed, gib(needed), dest, filesystem, free, gib(free))
    if min_free_bytes:
        msg += " and %d bytes (%s) must stay free" % (min_free_bytes, gib(min_free_bytes))
    if in_the_way:
        # Free space says nothing here: the download would fail creating the destination, after the check passed.
        where = "%s is" % dest if checked == os.path.abspath(dest) else "%s cannot be created: %s is" % (dest, checked)
        msg = "%s %s, not a directory; %s" % (where, in_the_way, msg)
    return {"fits": fits, "needed_bytes": needed, "free_bytes": free, "min_free_bytes": min_free_bytes,
            "checked_path": checked, "filesystem": filesystem, "files_total": len(sizes), "files_complete": len(complete),
            "msg": msg}
