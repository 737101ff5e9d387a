# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Verify a downloaded safetensors checkpoint (a model directory) before vLLM
loads it: every shard the index names is there under the right name, is a
well-formed safetensors file holding the tensors the index assigns to it, and
(when expected sizes / sha256 digests are known, for example from the Hub's
LFS metadata) has the right size and content.  A checkpoint without an index
is one ``model.safetensors``, or a PEFT (LoRA) adapter's one
``adapter_model.safetensors``, checked the same way.

Only the Python standard library is used (Python 3.8 or later).

The safetensors format (https://github.com/huggingface/safetensors): an
8-byte little-endian unsigned header length ``N``, ``N`` bytes of UTF-8 JSON
(an object starting with ``{``, possibly padded with spaces) mapping tensor
names to ``{"dtype", "shape", "data_offsets": [begin, end]}`` plus an optional
``"__metadata__"`` string-to-string map, then the tensor data.  Offsets are
relative to the end of the header.  The safetensors library itself refuses a
file whose tensors do not tile the data area exactly (no gap, no overlap, no
trailing bytes), whose slice sizes disagree with dtype x shape, or whose header
is over 100 MB; the same rules are applied here.

Design notes:

* Index entries (``weight_map`` values) are checked *lexically* before any
  file system access: an absolute path or a ``..`` component is refused and
  never opened.  A shard that resolves (through symlinks) outside the model
  directory is refused too, unless it resolves into the Hugging Face cache's
  ``blobs`` directory beside a ``snapshots/<revision>`` model directory, or
  ``follow_external_symlinks`` is set.  Only regular files are ever opened.
* Hashing runs in a thread pool; hashlib releases the GIL while hashing large
  buffers, so N workers hash N files at N times the speed of one.
* The digest cache is keyed on the file's real path and (size, mtime_ns,
  ctime_ns, inode, device).  Any write to a file changes its mtime and ctime,
  so a changed file is always rehashed.  To close the "racy" window (a write
  landing in the same timestamp tick as the stat that keyed the entry) a
  digest is only cached when the file's mtime is more than ``RACY_WINDOW_NS``
  older than the moment hashing started, and the file's stat is unchanged
  after hashing; a fresher file is hashed a second time once that window has
  passed, and cached when both digests and the stat agree.  Restoring the
  mtime after a write (``touch -d``, ``rsync -t``) still changes the ctime,
  which cannot be set back.
* The digest cache file carries the marker key ``gauntlet_vllm_verify_cache``.
  Only a missing file or a file with that marker is ever replaced (atomically,
  mode 0640); anything else at ``cache_path`` stops the verification with an
  error naming it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.digest_cache import (
    CHUNK_SIZE,
    cache_writable,
    load_cache,
    sha256_of_handle,
    stat_key,
    write_cache,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.safetensors import (
    check_safetensors,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import (
    LIST_CAP,
    CheckpointError,
    capped_names,
    check_numbering,
    default_workers,
    load_weight_map,
    normalize_checksum_mode,
    parse_expected_files,
    plural,
    shard_key,
    unsafe_name_reason,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    is_int,
)

INDEX_FILE_NAME = "model.safetensors.index.json"

SINGLE_FILE_NAME = "model.safetensors"

# A PEFT (LoRA) adapter: its weights in one file beside adapter_config.json, never with an index.
ADAPTER_FILE_NAME = "adapter_model.safetensors"

# The lone file of a checkpoint without an index, in order of precedence.
SINGLE_FILE_NAMES = (SINGLE_FILE_NAME, ADAPTER_FILE_NAME)

CACHE_FILE_NAME = ".gauntlet-verify-cache.json"

SHARD_SUFFIX = ".safetensors"

# A digest is cached only when the file's mtime is older than this before hashing started.
RACY_WINDOW_NS = 2 * 1000 * 1000 * 1000

# Most problems spelt out in the failure message (the ``errors`` list has them all).
MESSAGE_CAP = 50


# --------------------------------------------------------------------------
# One file
# --------------------------------------------------------------------------


def _inspect_file(task, hash_mode, chunk_size):
    """Check one file (run in a worker thread); returns a report dict.

    ``task``: name, path, real, is_shard, wanted (tensor names or None),
    expected ({size, sha256} or None), cached (cache entry or None),
    cacheable (whether a digest will be cached: a fresh file is then hashed again
    to make its digest cacheable, unless it does not match the expected one).
    """
    expected = task["expected"] or {"size": None, "sha256": None}
    report = {"name": task["name"], "real": task["real"], "size": None, "size_mismatch": None,
              "check": None, "digest": None, "hashed": False, "from_cache": False, "bytes_hashed": 0,
              "cache_entry": None, "warnings": [], "error": None}
    try:
        with open(task["path"], "rb", buffering=0) as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                report["error"] = "not a regular file"
                return report
            size = st.st_size
            report["size"] = size
            if expected["size"] is not None and expected["size"] != size:
                report["size_mismatch"] = {"file": task["name"], "expected": expected["size"], "actual": size}
            if task["is_shard"]:
                report["check"] = check_safetensors(handle, size, expected["size"])
            want_hash = hash_mode == "true" or (hash_mode == "auto" and expected["sha256"] is not None)
            # A file of the wrong size cannot have the right digest: it is not read again.
            if not want_hash or report["size_mismatch"]:
                return report
            key = stat_key(st)
            cached = task["cached"]
            if cached is not None and cached["key"] == key:
                report["digest"] = cached["sha256"]
                report["from_cache"] = True
                report["cache_entry"] = cached
                return report
            if hasattr(os, "posix_fadvise"):
                try:
                    os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
                except OSError:
                    pass
            started_ns = time.time_ns()
            digest, count = sha256_of_handle(handle, chunk_size)
            after = stat_key(os.fstat(handle.fileno()))
            report["digest"] = digest
            report["hashed"] = True
            report["bytes_hashed"] = count
            if after != key or count != size:
                report["warnings"].append("%s: the file changed while it was being hashed; its digest is not cached" % task["name"])
            elif st.st_mtime_ns < started_ns - RACY_WINDOW_NS:
                report["cache_entry"] = {"key": key, "sha256": digest}
            elif task.get("cacheable") and expected["sha256"] in (None, digest):
                report["cache_entry"] = _settle(handle, key, digest, st.st_mtime_ns, chunk_size, report)
    except (IOError, OSError) as exc:
        report["error"] = "cannot read: %s" % (exc.strerror or exc)
    return report


def _settle(handle, key, digest, mtime_ns, chunk_size, report):
    """The cache entry of a file modified just before it was hashed, or None.

    A write landing in the same timestamp tick as the file's mtime leaves no trace in its
    stat, so the first digest cannot be cached. Once ``RACY_WINDOW_NS`` has passed since the
    mtime, any later write would change the stat: a second digest that agrees, with the stat
    unchanged, is safe to cache (and the next run need not hash the file, nor rewrite the cache).
    """
    wait_ns = mtime_ns + RACY_WINDOW_NS - time.time_ns()
    if wait_ns > RACY_WINDOW_NS:
        return None  # an mtime in the future (clock skew): never cached
    if wait_ns > 0:
        time.sleep(wait_ns / 1e9)
    again, count = sha256_of_handle(handle, chunk_size)
    report["bytes_hashed"] += count
    if again != digest or stat_key(os.fstat(handle.fileno())) != key:
        report["warnings"].append("%s: the file changed while it was being hashed; its digest is not cached" % report["name"])
        return None
    return {"key": key, "sha256": digest}


# --------------------------------------------------------------------------
# The whole checkpoint
# --------------------------------------------------------------------------


def _allowed_roots(root_real):
    roots = [root_real]
    parent = os.path.dirname(root_real)
    if os.path.basename(parent) == "snapshots":
        # Hugging Face cache layout: <repo>/snapshots/<revision>/<file> -> ../../blobs/<hash>
        roots.append(os.path.join(os.path.dirname(parent), "blobs"))
    return roots


def _within(path, roots):
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def verify_checkpoint(path, index_file=None, expected_files=None, checksum="auto", workers=None,
                      cache=True, cache_path=None, write_cache_file=True, ignore_files=None,
                      follow_external_symlinks=False, chunk_size=CHUNK_SIZE):
    """Verify the checkpoint in directory ``path``; return the result dict (see the module's RETURN).

    :kwarg index_file: index file name relative to ``path``; by default
        ``model.safetensors.index.json``, falling back to a single
        ``model.safetensors`` when there is no index, else to a PEFT
        adapter's ``adapter_model.safetensors``.
    :kwarg write_cache_file: False in check mode: the cache is read, never written.
    :raises CheckpointError: on bad input (path, index, options).
    """
    started = time.monotonic()
    root = _model_directory(path)
    hash_mode = normalize_checksum_mode(checksum)
    expected_meta = parse_expected_files(expected_files)
    workers = _worker_count(workers)
    ignore_files = list(ignore_files or [])
    warnings = []
    index = _read_index(root, index_file)
    root_real = os.path.realpath(root)
    classify = _classifier(root, root_real, follow_external_symlinks)
    result = _new_result(root, index, hash_mode)

    tasks, missing = _place_expected(result, index, expected_meta, classify)
    on_disk = _stray_shards(root, index)
    claimed, missing_detail = _find_misnamed(result, tasks, missing, on_disk, index, expected_meta, classify)
    seen = _place_listed_files(result, tasks, index, expected_meta, classify)
    _list_unexpected(result, on_disk, claimed, seen, ignore_files)

    result["cache_path"] = _cache_location(root, cache, cache_path, hash_mode)
    cache_entries = _prime_cache(tasks, result["cache_path"], warnings)
    reports = _inspect_all(tasks, hash_mode, chunk_size, workers)
    new_entries, tensor_bytes, all_headers_read = _collect_reports(result, tasks, reports, warnings)
    _check_total_size(result, index, tensor_bytes, all_headers_read, warnings)
    if result["cache_path"] is not None:
        merged = _merged_cache(cache_entries, new_entries, tasks, reports, root_real)
        _save_cache(result, cache_entries, merged, write_cache_file, warnings)

    result["errors"].extend(_verdict_errors(result, missing_detail))
    result["ok"] = not result["errors"]
    result["warnings"] = warnings
    result["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


# --- options --------------------------------------------------------------


def _model_directory(path):
    """The model directory ``path`` as an absolute path; it must exist and be a directory."""
    if path is None or path == "":
        raise CheckpointError("path: no model directory given")
    root = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.exists(root):
        raise CheckpointError("%s: no such directory" % root)
    if not os.path.isdir(root):
        raise CheckpointError("%s: not a directory (give the model directory)" % root)
    return root


def _worker_count(workers):
    """``workers``, or the default when None; it must be a positive integer."""
    if workers is None:
        workers = default_workers()
    if not is_int(workers) or workers < 1:
        raise CheckpointError("workers: must be a positive integer, got %r" % (workers,))
    return workers


# --- the index ------------------------------------------------------------


def _index_path(root, index_file):
    """The index file's path: ``index_file`` (which must exist), else the default index when present, else None."""
    if index_file:
        index_path = os.path.join(root, index_file)
        if not os.path.isfile(index_path):
            raise CheckpointError("%s: index file not found" % index_path)
        return index_path
    index_path = os.path.join(root, INDEX_FILE_NAME)
    return index_path if os.path.isfile(index_path) else None


def _single_file(root):
    """The lone weights file of a checkpoint without an index: ``model.safetensors``, else a PEFT adapter's
    ``adapter_model.safetensors``.  Something under the first name that is not a file (a dangling symlink, a
    directory) is not passed over for the next: the checkpoint is refused."""
    for name in SINGLE_FILE_NAMES:
        full = os.path.join(root, name)
        if os.path.isfile(full):
            return name
        if os.path.lexists(full):
            break
    raise CheckpointError("%s: neither %s nor %s found (nor a PEFT adapter's %s)"
                          % (root, INDEX_FILE_NAME, SINGLE_FILE_NAME, ADAPTER_FILE_NAME))


def _read_index(root, index_file):
    """What the index says, as a dict: ``path`` (None for a lone model.safetensors or adapter_model.safetensors),
    ``total_size``, ``tensors_by_shard`` (file -> tensor names), ``expected_names`` (the files expected, sorted)
    and ``base`` (the index's file name, or None)."""
    total_size = None
    index_path = _index_path(root, index_file)
    if index_path is not None:
        weight_map, total_size = load_weight_map(index_path)
    else:
        single = _single_file(root)
        weight_map = {}
    tensors_by_shard = {}
    for tensor, shard in weight_map.items():
        tensors_by_shard.setdefault(shard, []).append(tensor)
    return {
        "path": index_path, "total_size": total_size, "tensors_by_shard": tensors_by_shard,
        "expected_names": sorted(tensors_by_shard) if index_path is not None else [single],
        "base": os.path.basename(index_path) if index_path else None,
    }


def _new_result(root, index, hash_mode):
    # (Not "path": AnsibleModule would add that path's owner, mode and size to the result.)
    return {
        "ok": True, "directory": root, "index": index["path"], "expected": index["expected_names"], "present": [],
        "missing": [], "misnamed": [], "numbering": check_numbering(index["expected_names"]), "unsafe": [],
        "unexpected": [], "truncated": [], "corrupt": [], "tensors_missing": [], "size_mismatch": [],
        "checksum_mismatch": [], "sha256": {}, "hashed": [], "from_cache": [], "bytes_total": 0, "bytes_hashed": 0,
        "checksum": hash_mode, "cache_path": None, "cache_written": False, "errors": [], "elapsed_s": 0.0,
    }


# --- which files are where --------------------------------------------------


def _classifier(root, root_real, follow_external_symlinks):
    """``classify(name)`` for names relative to ``root``."""
    roots = _allowed_roots(root_real)

    def classify(name):
        """``(state, detail)``: ('ok', (path, real)), ('missing', reason) or ('unsafe', reason)."""
        reason = unsafe_name_reason(name)
        if reason:
            return "unsafe", reason
        full = os.path.join(root, name)
        if not os.path.lexists(full):
            return "missing", None
        real = os.path.realpath(full)
        if not follow_external_symlinks and not _within(real, roots):
            return "unsafe", "resolves outside the model directory (to %s)" % real
        try:
            st = os.stat(full)
        except OSError:
            return "missing", "dangling symlink to %s" % real
        if not stat.S_ISREG(st.st_mode):
            return "unsafe", "not a regular file"
        return "ok", (full, real)
    return classify


def _task(name, detail, is_shard, wanted, expected):
    """One file to inspect (see _inspect_file); ``detail`` is classify's ``(path, real)``."""
    return {"name": name, "path": detail[0], "real": detail[1], "is_shard": is_shard, "wanted": wanted, "expected": expected}


def _place_expected(result, index, expected_meta, classify):
    """Sort the files the index names into present, unsafe and missing; returns ``(tasks, missing)``,
    ``missing`` a list of ``(name, reason or None)``."""
    tasks = []
    missing = []
    for name in index["expected_names"]:
        state, detail = classify(name)
        if state == "unsafe":
            result["unsafe"].append({"file": name, "reason": detail})
        elif state == "missing":
            missing.append((name, detail))
        else:
            result["present"].append(name)
            tasks.append(_task(name, detail, True, index["tensors_by_shard"].get(name), expected_meta.get(name)))
    return tasks, missing


def _stray_shards(root, index):
    """The shard files on disk (sorted) that the index does not name."""
    try:
        entries = sorted(os.listdir(root))
    except OSError as exc:
        raise CheckpointError("%s: cannot list directory: %s" % (root, exc))
    on_disk = []
    for entry in entries:
        if entry.lower().endswith(SHARD_SUFFIX) and entry not in index["tensors_by_shard"] and entry != index["base"] \
                and entry not in index["expected_names"] and os.path.isfile(os.path.join(root, entry)):
            on_disk.append(entry)
    return on_disk


def _find_misnamed(result, tasks, missing, on_disk, index, expected_meta, classify):
    """A missing shard found on disk under another spelling (zero padding, case) is misnamed (and inspected);
    the others are missing.  Returns ``(claimed, missing_detail)``: the stray files taken as misnamed shards,
    and the reason each missing shard is missing, where one is known."""
    by_key = {}
    for entry in on_disk:
        by_key.setdefault(shard_key(entry), []).append(entry)
    claimed = set()
    missing_detail = {}
    for name, detail in missing:
        candidates = [entry for entry in by_key.get(shard_key(name), []) if entry not in claimed]
        if len(candidates) == 1:
            found = candidates[0]
            state, found_detail = classify(found)
            if state == "ok":
                claimed.add(found)
                result["misnamed"].append({"expected": name, "found": found})
                tasks.append(_task(found, found_detail, True, index["tensors_by_shard"].get(name),
                                   expected_meta.get(found) or expected_meta.get(name)))
                continue
        result["missing"].append(name)
        if detail:
            missing_detail[name] = detail
    return claimed, missing_detail


def _place_listed_files(result, tasks, index, expected_meta, classify):
    """Files the expected metadata knows of besides the shards are checked when present.

    Returns the set of names accounted for (inspected, named by the index, or listed in expected_files).
    """
    seen = set(task["name"] for task in tasks) | set(index["expected_names"])
    for name in sorted(expected_meta):
        if name in seen:
            continue
        seen.add(name)
        state, detail = classify(name)
        if state == "unsafe":
            result["unsafe"].append({"file": name, "reason": "expected_files entry: %s" % detail})
        elif state == "ok":
            tasks.append(_task(name, detail, name.lower().endswith(SHARD_SUFFIX), None, expected_meta[name]))
    return seen


def _list_unexpected(result, on_disk, claimed, seen, ignore_files):
    for entry in on_disk:
        if entry in claimed or entry in seen or any(fnmatch.fnmatch(entry, pattern) for pattern in ignore_files):
            continue
        result["unexpected"].append(entry)


# --- cache and inspection ---------------------------------------------------


def _cache_location(root, cache, cache_path, hash_mode):
    """The digest cache's path, or None when no digest cache is used."""
    if not cache or hash_mode == "false":
        return None
    if cache_path:
        return os.path.abspath(os.path.expanduser(str(cache_path)))
    return os.path.join(root, CACHE_FILE_NAME)


def _prime_cache(tasks, cache_path, warnings):
    """Give each task its cache entry; returns the cache's entries ({} without a cache)."""
    cache_entries = {}
    if cache_path is not None:
        cache_entries, warning = load_cache(cache_path)
        if warning:
            warnings.append(warning)
    for task in tasks:
        task["cached"] = cache_entries.get(task["real"]) if cache_path is not None else None
        task["cacheable"] = cache_path is not None
    return cache_entries


def _inspect_all(tasks, hash_mode, chunk_size, workers):
    """Every task's report (in task order), inspected by up to ``workers`` threads."""
    if not tasks:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        return list(pool.map(lambda task: _inspect_file(task, hash_mode, chunk_size), tasks))


def _collect_reports(result, tasks, reports, warnings):
    """Fold the reports into ``result``, in file name order.

    Returns ``(new_entries, tensor_bytes, all_headers_read)``: the cache entries the reports give (real path ->
    entry), the tensor bytes the shard headers hold, and whether every header could be read.
    """
    tensor_bytes = 0
    all_headers_read = True
    new_entries = {}
    for task, report in sorted(zip(tasks, reports), key=lambda pair: pair[0]["name"]):
        name = task["name"]
        warnings.extend(report["warnings"])
        if report["error"]:
            result["corrupt"].append({"file": name, "tensor": None, "reason": report["error"],
                                      "problems": [report["error"]], "count": 1})
            all_headers_read = False
            continue
        if task["is_shard"]:
            result["bytes_total"] += report["size"]
        if report["size_mismatch"]:
            result["size_mismatch"].append(report["size_mismatch"])
        if report["check"] is not None:
            tensor_bytes += report["check"]["tensor_bytes"]
            if not _collect_check(result, task, report["check"], warnings):
                all_headers_read = False
        if report["digest"] is not None:
            _collect_digest(result, task, report, new_entries)
    return new_entries, tensor_bytes, all_headers_read


def _collect_check(result, task, check, warnings):
    """Fold one shard's structure check into ``result``; returns whether its header was read."""
    name = task["name"]
    warnings.extend("%s: %s" % (name, warning) for warning in check["warnings"])
    if check["truncated"]:
        entry = {"file": name}
        entry.update(check["truncated"])
        result["truncated"].append(entry)
    if check["corrupt"]:
        result["corrupt"].append({
            "file": name,
            "tensor": next((tensor for tensor, message in check["corrupt"] if tensor is not None), None),
            "reason": check["corrupt"][0][1],
            "problems": [message for tensor, message in check["corrupt"][:LIST_CAP]],
            "count": len(check["corrupt"]),
        })
    if check["tensors"] is None:
        return False
    if task["wanted"]:
        absent = sorted(set(task["wanted"]) - check["tensors"])
        if absent:
            result["tensors_missing"].append({"file": name, "tensors": absent[:LIST_CAP], "count": len(absent)})
    return True


def _collect_digest(result, task, report, new_entries):
    """Fold one file's digest into ``result`` (and its cache entry into ``new_entries``)."""
    name = task["name"]
    result["sha256"][name] = report["digest"]
    if report["hashed"]:
        result["hashed"].append(name)
        result["bytes_hashed"] += report["bytes_hashed"]
    if report["from_cache"]:
        result["from_cache"].append(name)
    if report["cache_entry"] is not None:
        new_entries[task["real"]] = report["cache_entry"]
    want = (task["expected"] or {}).get("sha256")
    if want is not None and want != report["digest"]:
        result["checksum_mismatch"].append({"file": name, "expected": want, "actual": report["digest"]})


def _check_total_size(result, index, tensor_bytes, all_headers_read, warnings):
    """Warn when every shard was read and their tensors disagree with the index's metadata.total_size."""
    if (index["path"] is not None and index["total_size"] is not None and all_headers_read and not result["missing"]
            and not result["unsafe"] and not result["truncated"] and tensor_bytes != index["total_size"]):
        warnings.append("%s: metadata.total_size is %d but the shards hold %d bytes of tensors"
                        % (index["path"], index["total_size"], tensor_bytes))


# --- write the cache back ---------------------------------------------------


def _merged_cache(cache_entries, new_entries, tasks, reports, root_real):
    """The cache to keep: the entries read, less the files gone from the model directory and the files hashed
    now without a cacheable digest, plus the new entries."""
    merged = dict(cache_entries)
    prefix = root_real.rstrip(os.sep) + os.sep
    for real in list(merged):
        if real.startswith(prefix) and not os.path.exists(real):
            del merged[real]
    for task, report in zip(tasks, reports):
        if report["hashed"] and report["cache_entry"] is None:
            merged.pop(task["real"], None)
    merged.update(new_entries)
    return merged


def _save_cache(result, cache_entries, merged, write_cache_file, warnings):
    """Write the cache when it changed; in check mode nothing is written, and ``cache_written`` then says
    whether a real run would write it."""
    if merged == cache_entries:
        return
    cache_path = result["cache_path"]
    warning = write_cache(cache_path, merged) if write_cache_file else cache_writable(cache_path)
    if warning:
        warnings.append(warning)
    else:
        result["cache_written"] = True


# --- verdict ----------------------------------------------------------------


def _verdict_errors(result, missing_detail):
    """Every problem in ``result``, one message each naming its file."""
    errors = []
    for name in result["missing"]:
        errors.append("%s: missing%s" % (name, " (%s)" % missing_detail[name] if name in missing_detail else ""))
    for entry in result["misnamed"]:
        errors.append("%s: missing, but %s is on disk: the same shard spelt differently (zero padding or case)"
                      % (entry["expected"], entry["found"]))
    errors.extend(result["numbering"])
    for entry in result["unsafe"]:
        errors.append("%s: unsafe, not opened: %s" % (entry["file"], entry["reason"]))
    for entry in result["truncated"]:
        errors.append("%s: truncated: %s" % (entry["file"], entry["reason"]))
    for entry in result["corrupt"]:
        shown = entry["problems"][:3]
        more = entry["count"] - len(shown)
        errors.append("%s: corrupt: %s%s" % (entry["file"], "; ".join(shown), " (and %d more problems)" % more if more else ""))
    for entry in result["tensors_missing"]:
        errors.append("%s: %d tensor%s the index assigns to it %s not in its header: %s"
                      % (entry["file"], entry["count"], plural(entry["count"]), "is" if entry["count"] == 1 else "are",
                         capped_names(entry["tensors"], entry["count"])))
    for entry in result["size_mismatch"]:
        errors.append("%s: size %d bytes, expected %d" % (entry["file"], entry["actual"], entry["expected"]))
    for entry in result["checksum_mismatch"]:
        errors.append("%s: sha256 %s does not match the expected %s" % (entry["file"], entry["actual"], entry["expected"]))
    for name in result["unexpected"]:
        errors.append("%s: unexpected shard on disk, not named by the index (stale download?)" % name)
    return errors


def failure_message(result):
    """The failure message: the directory, then each problem naming its file."""
    errors = result["errors"]
    shown = errors[:MESSAGE_CAP]
    text = "%s: checkpoint verification failed, %d problem%s: %s" % (
        result["directory"], len(errors), plural(len(errors)), "; ".join(shown))
    if len(errors) > len(shown):
        text += "; and %d more (see errors)" % (len(errors) - len(shown))
    return text
