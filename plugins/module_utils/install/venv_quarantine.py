# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Put drift found by :func:`venv_integrity.check_venv` aside instead of deleting it.

A repair of a virtualenv removes the files no wheel installed (``unrecorded``)
and overwrites the files a local patch changed (``modified``) by reinstalling.
Nothing is deleted outright here: unrecorded files are *moved* into a
timestamped quarantine folder, modified files are *copied* there before the
reinstall overwrites them, and a ``manifest.json`` in that folder lists, for
each file, where it was, where it is now, its size and sha256, the
distribution and why.  :func:`restore_quarantine` moves the files back.

Layout: ``<quarantine_dir>/<UTC timestamp>/<path relative to the venv>``,
with ``quarantine_dir`` ``<venv>/../.gauntlet-quarantine`` unless given.

Safety rules:

* The files to move come from a fresh check, never from the caller: only the
  files the check reports as unrecorded, which lie inside a package folder of
  a checked distribution whose RECORD was read (the check leaves out every
  folder a distribution with an unreadable RECORD may own).
* Each file is checked again before it is moved: inside the venv, no
  symlinked folder on the way, a regular file or a symlink.
* A move is ``os.rename`` (same filesystem: every attribute kept) or, across
  filesystems, ``shutil.copy2`` and a sha256 comparison of the copy before the
  original is removed.  An existing file is never overwritten.

Only the Python standard library is used (Python 3.8 or later).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import hashlib
import json
import os
import shutil
import stat

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import READ_FLAGS, is_int, parse_json, read_text
from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import (
    VenvIntegrityError,
    check_venv,
)

QUARANTINE_FOLDER = ".gauntlet-quarantine"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
ACTION_MOVE = "moved"
ACTION_COPY = "copied"
HASH_CHUNK = 1024 * 1024


class VenvQuarantineError(VenvIntegrityError):
    """The quarantine could not be made or restored; the message names the path or option at fault."""


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------

def _inside(path, folder):
    """Whether ``path`` (absolute, normalised) is ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def default_quarantine_dir(venv_root):
    """``<venv>/../.gauntlet-quarantine``."""
    return os.path.join(os.path.dirname(venv_root.rstrip(os.sep)), QUARANTINE_FOLDER)


def resolve_quarantine_dir(venv_root, quarantine_dir):
    """The quarantine folder (absolute); it must not lie inside the venv (nor the venv inside it)."""
    if not quarantine_dir:
        return default_quarantine_dir(venv_root)
    folder = os.path.normpath(os.path.abspath(os.path.expanduser(str(quarantine_dir))))
    real_folder = os.path.realpath(folder)
    real_venv = os.path.realpath(venv_root)
    if _inside(real_folder, real_venv) or _inside(real_venv, real_folder):
        raise VenvQuarantineError("quarantine_dir: %s must lie outside the venv %s (and not hold it)" % (folder, venv_root))
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise VenvQuarantineError("quarantine_dir: %s exists and is not a directory" % folder)
    return folder


def utc_stamp(now=None):
    """``20260131T235959Z``: the UTC time, sortable, safe in a path."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


def claim_folder(base, stamp):
    """Create ``base/stamp`` (``stamp-1``, ``stamp-2``... when taken) and return it; ``base`` is made 0700."""
    try:
        os.makedirs(base, mode=0o700)
    except OSError as exc:
        if exc.errno != errno.EEXIST or not os.path.isdir(base):
            raise VenvQuarantineError("quarantine_dir: cannot create %s: %s" % (base, exc))
    for number in range(1000):
        folder = os.path.join(base, stamp if number == 0 else "%s-%d" % (stamp, number))
        try:
            os.mkdir(folder, 0o700)
            return folder
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise VenvQuarantineError("quarantine_dir: cannot create %s: %s" % (folder, exc))
    raise VenvQuarantineError("quarantine_dir: %s: no free folder name for %s" % (base, stamp))


def _open_regular_file(path):
    """A read handle on the regular file ``path``, opened without blocking and without following a symlink: a FIFO
    would block a plain open until a writer comes (forever), a device might never end."""
    descriptor = os.open(path, READ_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    try:
        regular = stat.S_ISREG(os.fstat(descriptor).st_mode)
    except OSError:
        os.close(descriptor)
        raise
    if not regular:
        os.close(descriptor)
        raise VenvQuarantineError("%s: not a regular file or a symlink (a FIFO, socket or device is never read)" % path)
    return os.fdopen(descriptor, "rb")


def sha256_of(path):
    """Hex sha256 of a regular file, or of a symlink's target text (the link itself, never what it points at)."""
    hasher = hashlib.sha256()
    if os.path.islink(path):
        hasher.update(os.readlink(path).encode("utf-8", "surrogateescape"))
        return hasher.hexdigest()
    with _open_regular_file(path) as handle:
        while True:
            chunk = handle.read(HASH_CHUNK)
            if not chunk:
                break
            hasher.update(chunk)
    return hasher.hexdigest()


def _parent_reason(full, venv_root):
    """Why the folder of ``full`` is no place to move a file from or to (outside the venv, a symlinked folder on
    the way), or None."""
    full = os.path.normpath(full)
    parent = os.path.dirname(full)
    if not _inside(full, venv_root) or full == venv_root:
        return "outside the venv"
    expected = os.path.normpath(os.path.join(os.path.realpath(venv_root), os.path.relpath(parent, venv_root)))
    if os.path.realpath(parent) != expected:
        return "a symlinked folder lies on the way"
    return None


def _check_writable(base):
    """Fail when the quarantine folder could not be created or written (the nearest existing folder decides)."""
    probe = base
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        raise VenvQuarantineError("quarantine_dir: cannot create or write %s (%s is not a writable directory)" % (base, probe))


def _unsafe_reason(full, venv_root):
    """Why ``full`` must not be moved (outside the venv, a symlinked folder on the way, not a file), or None."""
    reason = _parent_reason(full, venv_root)
    if reason is not None:
        return reason
    try:
        mode = os.lstat(full).st_mode
    except OSError as exc:
        return "cannot stat: %s" % exc.strerror
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        return "not a regular file or a symlink"
    return None


# --------------------------------------------------------------------------
# Moving and copying
# --------------------------------------------------------------------------

def _copy_verified(source, destination, digest):
    """``shutil.copy2`` (a symlink is copied as a link) and compare the copy's sha256 with ``digest``."""
    shutil.copy2(source, destination, follow_symlinks=False)
    if sha256_of(destination) != digest:
        os.remove(destination)
        raise VenvQuarantineError("%s: the copy at %s does not match the original (sha256); original left in place"
                                  % (source, destination))


def move_file(source, destination, digest, folder_mode=0o700):
    """Move a file keeping its metadata: ``os.rename``, or across filesystems a verified copy, then remove.

    Missing folders on the way to ``destination`` are made with ``folder_mode`` (less the umask).
    """
    if os.path.lexists(destination):
        raise VenvQuarantineError("%s: exists, not overwritten" % destination)
    parent = os.path.dirname(destination)
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=folder_mode)
    try:
        os.rename(source, destination)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise VenvQuarantineError("%s: cannot move to %s: %s" % (source, destination, exc.strerror))
    _copy_verified(source, destination, digest)
    os.remove(source)


def copy_file(source, destination, digest):
    """Copy a file keeping its metadata and verify the copy."""
    if os.path.lexists(destination):
        raise VenvQuarantineError("%s: exists, not overwritten" % destination)
    parent = os.path.dirname(destination)
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700)
    _copy_verified(source, destination, digest)


def write_manifest(folder, manifest):
    """Write ``folder/manifest.json`` whole or not at all (a temporary file renamed over it)."""
    path = os.path.join(folder, MANIFEST)
    temp = path + ".tmp"
    with open(temp, "w") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.chmod(temp, 0o600)
    os.replace(temp, path)
    return path


# --------------------------------------------------------------------------
# Quarantine
# --------------------------------------------------------------------------

def plan_quarantine(check, backup_modified=True):
    """The files a repair would remove or overwrite, from a :func:`check_venv` result.

    Returns ``(items, refused)``: ``items`` are dicts (original, relative, distribution, reason, action);
    ``refused`` are dicts (original, distribution, reason) for files found unsafe to move.
    """
    root = check["venv"]
    items = []
    refused = []
    seen = set()
    for key in sorted(check["distributions"]):
        report = check["distributions"][key]
        if report.get("record_error"):
            continue  # never touch files of a distribution whose RECORD is unreadable
        site = report["site_packages"]
        candidates = [(path, "unrecorded: no distribution's RECORD lists it", ACTION_MOVE) for path in report["unrecorded"]]
        if backup_modified:
            candidates += [(entry["path"], "modified: %s" % entry["reason"], ACTION_COPY) for entry in report["modified"]]
        for path, reason, action in candidates:
            full = os.path.normpath(os.path.join(site, path))
            if full in seen:
                continue
            seen.add(full)
            why_not = _unsafe_reason(full, root)
            if why_not is None and action == ACTION_COPY and not stat.S_ISREG(os.lstat(full).st_mode):
                why_not = "not a regular file"
            if why_not is not None:
                refused.append({"original": full, "distribution": key, "reason": why_not})
                continue
            items.append({"original": full, "relative": os.path.relpath(full, root), "distribution": key,
                          "reason": reason, "action": action})
    return items, refused


def _planned_entry(item, folder):
    """What check mode reports for a planned file."""
    entry = dict((key, item[key]) for key in ("original", "distribution", "reason", "action"))
    entry["quarantined"] = os.path.join(folder, item["relative"])
    return entry


def _put_aside(item, folder):
    """Move or copy one planned file into ``folder``; return its manifest entry."""
    destination = os.path.join(folder, item["relative"])
    st = os.lstat(item["original"])
    digest = sha256_of(item["original"])
    if item["action"] == ACTION_MOVE:
        move_file(item["original"], destination, digest)
    else:
        copy_file(item["original"], destination, digest)
    entry = dict((key, item[key]) for key in ("original", "distribution", "reason", "action"))
    entry.update({"quarantined": destination, "size": st.st_size, "sha256": digest,
                  "symlink": stat.S_ISLNK(st.st_mode)})
    return entry


def quarantine_venv(venv, distributions=None, ignore=None, workers=None, quarantine_dir=None,
                    backup_modified=True, check_mode=False, now=None):
    """Check ``venv`` and put its unrecorded files (moved) and modified files (copied) into a quarantine folder.

    Returns a dict: changed, quarantine (the folder, or in check mode the folder it would use), manifest, entries
    (the manifest entries; in check mode the plan), refused, and the check's clean/unrepairable.
    """
    check = check_venv(venv, distributions=distributions, workers=workers, ignore=ignore)
    base = resolve_quarantine_dir(check["venv"], quarantine_dir)
    items, refused = plan_quarantine(check, backup_modified=backup_modified)
    result = {"changed": bool(items), "venv": check["venv"], "quarantine": None, "manifest": None, "entries": [],
              "refused": refused, "clean": check["clean"], "unrepairable": check["unrepairable"],
              "warnings": check["warnings"]}
    if not items:
        return result
    stamp = utc_stamp(now)
    if check_mode:
        _check_writable(base)
        result["quarantine"] = os.path.join(base, stamp)
        result["entries"] = [_planned_entry(item, os.path.join(base, stamp)) for item in items]
        return result
    folder = claim_folder(base, stamp)
    manifest = {"version": MANIFEST_VERSION, "venv": check["venv"], "site_packages": check["site_packages"],
                "created": stamp, "entries": []}
    result["quarantine"] = folder
    try:
        for item in items:
            manifest["entries"].append(_put_aside(item, folder))
    except (OSError, VenvQuarantineError) as exc:
        path = write_manifest(folder, manifest)
        raise VenvQuarantineError("%s (stopped; the %d files put aside before are listed in %s)"
                                  % (exc, len(manifest["entries"]), path))
    result["manifest"] = write_manifest(folder, manifest)
    result["entries"] = manifest["entries"]
    return result


# --------------------------------------------------------------------------
# Restore
# --------------------------------------------------------------------------

def read_manifest(folder):
    """Load and validate ``folder/manifest.json`` (a regular file, read without blocking); errors name the file, the
    entry and the field."""
    path = os.path.join(folder, MANIFEST)
    manifest = parse_json(read_text(path, VenvQuarantineError), path, VenvQuarantineError)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("entries"), list):
        raise VenvQuarantineError("%s: field 'entries' must be a list" % path)
    for index, entry in enumerate(manifest["entries"]):
        for field in ("original", "quarantined", "sha256", "action"):
            if not isinstance(entry, dict) or not isinstance(entry.get(field), str):
                raise VenvQuarantineError("%s: entries[%d]: field '%s' must be a string" % (path, index, field))
        for field in ("original", "quarantined"):
            if "\x00" in entry[field]:
                raise VenvQuarantineError("%s: entries[%d]: field '%s' holds a NUL byte, which no path may hold: %r"
                                          % (path, index, field, entry[field][:200]))
        if "size" in entry and not (is_int(entry["size"]) and entry["size"] >= 0):
            raise VenvQuarantineError("%s: entries[%d]: field 'size' must be a whole number of bytes, got %r"
                                      % (path, index, entry["size"]))
    return manifest


def _quarantined_kind(quarantined, where):
    """The quarantined entry's lstat result, or None when it is gone; anything but a regular file or a symlink (a
    FIFO would block the hash, a folder is no file) is refused."""
    try:
        st = os.lstat(quarantined)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise VenvQuarantineError("%s: cannot stat %s: %s" % (where, quarantined, exc.strerror))
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise VenvQuarantineError("%s: %s is not a regular file or a symlink (a FIFO, socket, device or folder); "
                                  "refusing to restore from this quarantine" % (where, quarantined))
    return st


def _restore_check(entry, index, folder, venv_root):
    """Check one manifest entry before anything moves: returns ``None`` when it can be moved back, else why it is
    skipped (gone, its place taken, changed since); a path outside the quarantine or the venv, or an entry that is no
    file, raises."""
    where = "%s: entries[%d]" % (os.path.join(folder, MANIFEST), index)
    original = os.path.normpath(entry["original"])
    quarantined = os.path.normpath(entry["quarantined"])
    real_folder = os.path.realpath(folder)
    if (not _inside(quarantined, folder) or not _inside(os.path.realpath(os.path.dirname(quarantined)), real_folder)
            or _parent_reason(original, venv_root) is not None):
        raise VenvQuarantineError("%s: 'quarantined' must lie in the quarantine folder and 'original' in "
                                  "the venv %s (no symlinked folder on the way)" % (where, venv_root))
    st = _quarantined_kind(quarantined, where)
    if st is None:
        return "no longer in the quarantine"
    if os.path.lexists(original):
        return "%s exists, not overwritten" % original
    if "size" in entry and stat.S_ISREG(st.st_mode) and st.st_size != entry["size"]:
        return "changed since it was quarantined (size differs)"
    if sha256_of(quarantined) != entry["sha256"]:
        return "changed since it was quarantined (sha256 differs)"
    return None


def _check_unique(manifest, folder):
    """Two entries with one original (or one quarantined file) would have the second move fail halfway."""
    for field in ("original", "quarantined"):
        seen = {}
        for index, entry in enumerate(manifest["entries"]):
            path = os.path.normpath(entry[field])
            if path in seen:
                raise VenvQuarantineError("%s: entries[%d]: '%s' %s is also entries[%d]'s"
                                          % (os.path.join(folder, MANIFEST), index, field, path, seen[path]))
            seen[path] = index


def _move_back(movable, folder):
    """Move each checked entry back; a move that fails stops the restore, saying what was moved back before."""
    restored = []
    for entry in movable:
        try:
            move_file(os.path.normpath(entry["quarantined"]), os.path.normpath(entry["original"]), entry["sha256"],
                      folder_mode=0o777)
        except (OSError, VenvQuarantineError) as exc:
            raise VenvQuarantineError("restore: %s: cannot move %s back to %s: %s; restored before it stopped: %s"
                                      % (folder, entry["quarantined"], entry["original"],
                                         getattr(exc, "strerror", None) or exc, ", ".join(restored) or "nothing"))
        restored.append(entry["original"])
    return restored


def _clean_path(value, option):
    """An option's path, absolute and normalised; a NUL byte (which no path holds) is refused naming the option."""
    text = str(value)
    if "\x00" in text:
        raise VenvQuarantineError("%s: %r holds a NUL byte, which no path may hold" % (option, text[:200]))
    return os.path.normpath(os.path.abspath(os.path.expanduser(text)))


def restore_quarantine(venv, folder, check_mode=False):
    """Move the files a quarantine folder holds back to where they were; never overwrite a file.

    The whole manifest and every entry are checked first (inside the quarantine and the venv, a regular file or a
    symlink, its place free, its size and sha256 as recorded), so a bad entry stops the restore before anything moved.
    Returns a dict: changed, quarantine, restored (original paths), skipped (dicts: original, reason).
    """
    venv_root = _clean_path(venv, "venv")
    folder = _clean_path(folder, "restore")
    if not os.path.isdir(folder):
        raise VenvQuarantineError("restore: %s: no such quarantine folder" % folder)
    manifest = read_manifest(folder)
    if os.path.normpath(str(manifest.get("venv"))) != venv_root:
        raise VenvQuarantineError("restore: %s holds files of the venv %s, not %s"
                                  % (os.path.join(folder, MANIFEST), manifest.get("venv"), venv_root))
    _check_unique(manifest, folder)
    movable = []
    skipped = []
    for index, entry in enumerate(manifest["entries"]):
        reason = _restore_check(entry, index, folder, venv_root)
        if reason is None:
            movable.append(entry)
        else:
            skipped.append({"original": entry["original"], "reason": reason})
    restored = [entry["original"] for entry in movable] if check_mode else _move_back(movable, folder)
    return {"changed": bool(restored), "venv": venv_root, "quarantine": folder, "restored": restored,
            "skipped": skipped}
