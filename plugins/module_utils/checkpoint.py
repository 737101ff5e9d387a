# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Verify a downloaded safetensors checkpoint (a model directory) before vLLM
loads it: every shard the index names is there under the right name, is a
well-formed safetensors file holding the tensors the index assigns to it, and
(when expected sizes / sha256 digests are known, for example from the Hub's
LFS metadata) has the right size and content.

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

import errno
import fnmatch
import hashlib
import json
import os
import re
import stat
import struct
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gauntlet.vllm.plugins.module_utils.safe_io import (
    is_int,
    json_type_name,
    parse_json,
    read_json_object,
    read_text,
    usable_cpus,
)


INDEX_FILE_NAME = "model.safetensors.index.json"
SINGLE_FILE_NAME = "model.safetensors"
CACHE_FILE_NAME = ".gauntlet-verify-cache.json"
# A digest cache is marked by this key (its value is the format version): model_verify never
# replaces a file without it.
CACHE_MARKER = "gauntlet_vllm_verify_cache"
CACHE_VERSION = 1
# The comment of the caches written before the marker existed (also recognised as ours).
LEGACY_CACHE_COMMENT = "gauntlet.vllm.model_verify digest cache"
CACHE_MODE = 0o640
SHARD_SUFFIX = ".safetensors"
CHECKSUM_MODES = ("auto", "true", "false")

# Bytes read per read() call while hashing (1-8 MiB all hash at the same speed).
CHUNK_SIZE = 4 * 1024 * 1024
# The safetensors library refuses headers larger than this.
MAX_HEADER_BYTES = 100 * 1000 * 1000
# A digest is cached only when the file's mtime is older than this before hashing started.
RACY_WINDOW_NS = 2 * 1000 * 1000 * 1000
# Longest list of names given per problem (the count is always given in full).
LIST_CAP = 20
# Most problems spelt out in the failure message (the ``errors`` list has them all).
MESSAGE_CAP = 50

# Bits per element of every safetensors dtype (the safetensors crate's Dtype enum, 0.8).
DTYPE_BITS = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
}
# A tensor entry's fields, in the order serde reads them from a sequence.
TENSOR_FIELDS = ("dtype", "shape", "data_offsets")
# The safetensors library reads sizes as 64-bit unsigned integers.
MAX_USIZE = (1 << 64) - 1
# serde_json refuses JSON nested deeper than this (the header object counts as level 1).
MAX_JSON_DEPTH = 127
JSON_WHITESPACE = b" \t\r\n"
LONE_SURROGATE_ESCAPE = re.compile(br"\\u[dD][89a-fA-F]")
LONE_SURROGATE = re.compile(u"[\ud800-\udfff]")

# ``<prefix>-<number>-of-<total><suffix>``, the Hugging Face shard naming.
SHARD_NAME = re.compile(r"^(?P<prefix>.*)-(?P<number>[0-9]+)-of-(?P<total>[0-9]+)(?P<suffix>\.[^./]+)$")
SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
# A size given as a string: ASCII digits only, and few enough for int() (it refuses over 4300).
DECIMAL = re.compile(r"^[0-9]{1,30}$")
# Longest shard number or total (zero padding included) taken as a number; Hugging Face writes 5 digits.
MAX_SHARD_DIGITS = 32
# Longer index entries cannot be paths (PATH_MAX is 4096): they are refused unopened.
MAX_NAME_CHARS = 4096
# Caps on the JSON files read whole: the index (DeepSeek-V3's is 9 MB) and the digest cache.
MAX_INDEX_BYTES = 64 * 1024 * 1024
MAX_CACHE_BYTES = 64 * 1024 * 1024


class CheckpointError(Exception):
    """The verification could not be run (bad path, index or option).

    The message names the file and, where one is at fault, the field.
    """


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------

def default_workers():
    """min(8, CPUs this process may run on)."""
    return max(1, min(8, usable_cpus()))


def normalize_checksum_mode(value):
    """``auto``, ``true`` or ``false`` from a string or bool."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "auto"
    text = str(value).strip().lower()
    if text in ("yes", "on", "1"):
        text = "true"
    elif text in ("no", "off", "0"):
        text = "false"
    if text not in CHECKSUM_MODES:
        raise CheckpointError("checksum: must be one of auto, true, false, got %r" % (value,))
    return text


def parse_expected_files(expected_files):
    """Validate ``expected_files`` (file name -> {size, sha256}); return name -> {size, sha256}.

    ``size`` and ``sha256`` are each optional (null or absent means unknown);
    sha256 digests are lower-cased.
    """
    if expected_files is None:
        return {}
    if not isinstance(expected_files, dict):
        raise CheckpointError("expected_files: must be a dict of file name -> {size, sha256}, got %s"
                              % json_type_name(expected_files))
    parsed = {}
    for name, entry in expected_files.items():
        where = "expected_files[%s]" % json.dumps(str(name))
        if not isinstance(name, str) or not name:
            raise CheckpointError("%s: file names must be non-empty strings" % where)
        if not isinstance(entry, dict):
            raise CheckpointError("%s: must be a dict with size and/or sha256, got %s" % (where, json_type_name(entry)))
        unknown = sorted(set(entry) - set(("size", "sha256")))
        if unknown:
            raise CheckpointError("%s: unknown key(s) %s (allowed: size, sha256)" % (where, ", ".join(unknown)))
        size = entry.get("size")
        if isinstance(size, str) and DECIMAL.match(size.strip()):
            size = int(size.strip())
        if size is not None and (not is_int(size) or size < 0):
            raise CheckpointError("%s.size: must be a non-negative integer, got %s" % (where, json.dumps(entry.get("size"))))
        digest = entry.get("sha256")
        if digest is not None:
            if not isinstance(digest, str) or not SHA256_HEX.match(digest.strip()):
                raise CheckpointError("%s.sha256: must be 64 hexadecimal digits, got %s" % (where, json.dumps(digest)))
            digest = digest.strip().lower()
        parsed[name] = {"size": size, "sha256": digest}
    return parsed


# --------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------

def load_weight_map(index_path):
    """Read a ``*.safetensors.index.json``; return its ``weight_map`` (tensor -> file)."""
    data = read_json_object(index_path, error=CheckpointError, limit=MAX_INDEX_BYTES)
    if "weight_map" not in data:
        raise CheckpointError("%s: missing required field 'weight_map'" % index_path)
    weight_map = data["weight_map"]
    if not isinstance(weight_map, dict):
        raise CheckpointError("%s: field 'weight_map' must be an object, got %s" % (index_path, json_type_name(weight_map)))
    if not weight_map:
        raise CheckpointError("%s: field 'weight_map' is empty" % index_path)
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str):
            raise CheckpointError("%s: field 'weight_map[%s]' must be a file name (string), got %s (%s)"
                                  % (index_path, json.dumps(tensor), json.dumps(shard), json_type_name(shard)))
    total_size = None
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and is_int(metadata.get("total_size")):
        total_size = metadata["total_size"]
    return weight_map, total_size


def unsafe_name_reason(name):
    """Why ``name`` (an index entry) may not be opened relative to the model directory, or None.

    Purely lexical: no file system access.
    """
    if not name:
        return "empty file name"
    if len(name) > MAX_NAME_CHARS:
        return "file name is %d characters long (longer than any path can be)" % len(name)
    if "\x00" in name:
        return "file name contains a NUL byte"
    if os.path.isabs(name) or name.startswith("/"):
        return "absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "'..' climbs out of the model directory"
    return None


def shard_match(name):
    """The ``-NNNNN-of-MMMMM`` match of ``name``, or None (also when a number is implausibly long)."""
    match = SHARD_NAME.match(name) if len(name) <= MAX_NAME_CHARS else None
    if match and len(match.group("number")) <= MAX_SHARD_DIGITS and len(match.group("total")) <= MAX_SHARD_DIGITS:
        return match
    return None


def shard_key(name):
    """Name normalised for zero padding and case: the same shard under another spelling."""
    match = shard_match(name)
    if match:
        return ("numbered", match.group("prefix").lower(), int(match.group("number")),
                int(match.group("total")), match.group("suffix").lower())
    return ("plain", name.lower())


def check_numbering(names):
    """Messages about gaps and inconsistencies in ``-NNNNN-of-MMMMM`` shard names.

    Each message starts with the file name(s) concerned.
    """
    groups = {}
    messages = []
    for name in names:
        match = shard_match(name)
        if match:
            groups.setdefault((match.group("prefix"), match.group("suffix")), []).append(match)
        elif len(name) <= MAX_NAME_CHARS and SHARD_NAME.match(name):
            messages.append("%s: the shard number or total has more than %d digits (not a shard name)"
                            % (_short_name(name), MAX_SHARD_DIGITS))
    for (prefix, suffix), matches in sorted(groups.items()):
        totals = {}
        for match in matches:
            totals.setdefault(int(match.group("total")), []).append(match.group(0))
        if len(totals) > 1:
            # The total most names agree on is taken as right; the others are named.
            ranked = sorted(totals.items(), key=lambda item: (-len(item[1]), item[0]))
            majority = ranked[0][0]
            odd = sorted(name for item in ranked[1:] for name in item[1])
            summary = ", ".join("-of-%d in %d name%s" % (total, len(group), _plural(len(group)))
                                for total, group in sorted(totals.items()))
            messages.append("%s: the index's shard names disagree on the number of shards (%s)" % (_capped_names(odd), summary))
            matches = [match for match in matches if int(match.group("total")) == majority]
        total = int(matches[0].group("total"))
        numbers = {}
        for match in matches:
            numbers.setdefault(int(match.group("number")), []).append(match.group(0))
        for number in sorted(numbers):
            group = sorted(numbers[number])
            if len(group) > 1:
                messages.append("%s: shard number %d is named %d times in the index" % (", ".join(group), number, len(group)))
            if number < 1 or number > total:
                messages.append("%s: shard number %d is outside 1..%d" % (group[0], number, total))
        absent = [number for number in range(1, total + 1) if number not in numbers] if total <= 1000000 else []
        if absent:
            width = len(matches[0].group("number"))
            total_text = matches[0].group("total")
            absent_names = ["%s-%0*d-of-%s%s" % (prefix, width, number, total_text, suffix) for number in absent[:LIST_CAP]]
            messages.append("%s: the index names no shard %s of %d (it names %d shard%s)"
                            % (_capped_names(absent_names, len(absent)), _capped_numbers(absent), total, len(numbers),
                               _plural(len(numbers))))
    return messages


# --------------------------------------------------------------------------
# safetensors header
# --------------------------------------------------------------------------

class _HeaderProblem(Exception):
    """The header cannot be read; ``kind`` is ``truncated`` or ``corrupt``."""

    def __init__(self, kind, reason):
        super(_HeaderProblem, self).__init__(reason)
        self.kind = kind
        self.reason = reason


def _read_exact(handle, count):
    chunks = []
    while count > 0:
        chunk = handle.read(count)
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_safetensors_header(handle, size, expected_size=None):
    """Parse the header of an open safetensors file of ``size`` bytes.

    The JSON is read as the safetensors library reads it (serde_json): no NaN or
    Infinity, no number beyond the double range, no lone surrogate, containers
    nested at most ``MAX_JSON_DEPTH`` deep.

    :returns: ``(header, data_start)`` where header is the JSON object
        (a dict that lists in ``duplicates`` the keys it had more than once).
    :raises _HeaderProblem: when no usable header can be read.
    """
    if size < 8:
        raise _HeaderProblem("truncated", "the file is %d bytes, shorter than the 8-byte header length" % size)
    (length,) = struct.unpack("<Q", _read_exact(handle, 8))
    if length > MAX_HEADER_BYTES:
        raise _HeaderProblem("corrupt", "header length %d is implausible (the safetensors limit is %d bytes)"
                             % (length, MAX_HEADER_BYTES))
    if length < 2:
        raise _HeaderProblem("corrupt", "header length %d is too small for a JSON object" % length)
    if 8 + length > size:
        # A cut through the (small) header is far less likely than a damaged length field,
        # unless the file is known to be short.
        kind = "truncated" if expected_size is not None and size < expected_size else "corrupt"
        raise _HeaderProblem(kind, "header length %d runs past the end of the file (%d bytes)" % (length, size))
    raw = _read_exact(handle, length)
    if len(raw) != length:
        raise _HeaderProblem("truncated", "the file ended while reading the header")
    if not raw.lstrip(JSON_WHITESPACE).startswith(b"{"):
        raise _HeaderProblem("corrupt", "header does not start with '{' (not a safetensors file?)")
    header = _parse_header_json(raw)
    if not isinstance(header, dict):
        raise _HeaderProblem("corrupt", "header is a JSON %s, not an object" % json_type_name(header))
    return header, 8 + length


class _JsonObject(dict):
    """A JSON object that remembers the keys it held more than once (the last value is kept)."""

    duplicates = ()


def _json_object(pairs):
    obj = _JsonObject(pairs)
    if len(obj) != len(pairs):
        seen = set()
        obj.duplicates = sorted(set(key for key, _value in pairs if key in seen or seen.add(key)))
    return obj


def _json_int(text):
    """An integer as serde_json reads it: beyond the 64-bit range (and -0) it is a float."""
    digits = text.lstrip("-")
    if len(digits) <= 20:
        value = int(text)
        if text != "-0" and -(1 << 63) <= value <= MAX_USIZE:
            return value
    return _json_float(text)


def _json_float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range: %s" % (text[:40] + ("..." if len(text) > 40 else "")))
    return value


def _json_constant(name):
    raise ValueError("%s is not JSON" % name)


def _parse_header_json(raw):
    """The header's JSON, parsed as strictly as the safetensors library parses it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _HeaderProblem("corrupt", "header is not UTF-8: %s" % exc)
    try:
        header = json.loads(text, object_pairs_hook=_json_object, parse_int=_json_int, parse_float=_json_float,
                            parse_constant=_json_constant)
    except RecursionError:
        raise _HeaderProblem("corrupt", "header JSON is nested too deeply (the safetensors limit is %d levels)" % MAX_JSON_DEPTH)
    except ValueError as exc:
        raise _HeaderProblem("corrupt", "header is not valid JSON: %s" % exc)
    if LONE_SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(header):
        raise _HeaderProblem("corrupt", "header is not valid JSON: a \\u escape is a lone UTF-16 surrogate")
    return header


def _has_lone_surrogate(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _json_depth(value, limit):
    """Nesting depth of containers in ``value`` (a scalar is 0), counted up to ``limit + 1``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _usize(value):
    """Whether ``value`` is what the safetensors library reads as a size (a 64-bit unsigned integer)."""
    return is_int(value) and 0 <= value <= MAX_USIZE


def _tensor_entry(name, info):
    """``(dtype, shape, offsets, problem)`` of one header entry, read as the safetensors library reads it."""
    label = "tensor %s" % json.dumps(name)
    if isinstance(info, list) and len(info) == 3:
        # serde also accepts a struct written as a sequence of its fields, in order.
        info = dict(zip(TENSOR_FIELDS, info))
    if not isinstance(info, dict):
        return None, None, None, "%s: entry is a %s, not an object" % (label, json_type_name(info))
    duplicated = [key for key in getattr(info, "duplicates", ()) if key in TENSOR_FIELDS]
    if duplicated:
        return None, None, None, "%s: field %s is given more than once" % (label, ", ".join(duplicated))
    extra = [key for key in info if key not in TENSOR_FIELDS]
    if extra and max(_json_depth(info[key], MAX_JSON_DEPTH) for key in extra) > MAX_JSON_DEPTH - 2:
        return None, None, None, "%s: field nested too deeply (the safetensors limit is %d levels)" % (label, MAX_JSON_DEPTH)
    dtype = info.get("dtype")
    if isinstance(dtype, dict) and len(dtype) == 1 and list(dtype.values()) == [None]:
        dtype = list(dtype)[0]  # serde's map form of an enum's unit variant: {"BF16": null}
    shape = info.get("shape")
    offsets = info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        return None, None, None, "%s: dtype %s is not a safetensors dtype (%s)" % (label, json.dumps(dtype), ", ".join(sorted(DTYPE_BITS)))
    if not isinstance(shape, list) or not all(_usize(dim) for dim in shape):
        return None, None, None, "%s: shape must be a list of non-negative integers, got %s" % (label, _short_json(shape))
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_usize(offset) for offset in offsets) or offsets[1] < offsets[0]:
        return None, None, None, "%s: data_offsets must be [begin, end] with 0 <= begin <= end, got %s" % (label, _short_json(offsets))
    return dtype, shape, offsets, None


def _tensor_size_problem(label, dtype, shape, begin, end):
    """Why ``data_offsets`` disagree with dtype x shape (the library's arithmetic, overflow included), or None."""
    elements = 1
    for dim in shape:
        elements *= dim
        if elements > MAX_USIZE:
            return "%s: %s x %s overflows a 64-bit size" % (label, dtype, _short_json(shape))
    needed_bits = elements * DTYPE_BITS[dtype]
    if needed_bits > MAX_USIZE:
        return "%s: %s x %s overflows a 64-bit size" % (label, dtype, _short_json(shape))
    if needed_bits % 8:
        return "%s: %s %s is %d bits, not a whole number of bytes" % (label, dtype, shape, needed_bits)
    if end - begin != needed_bits // 8:
        return "%s: data_offsets [%d, %d] hold %d bytes but %s x %s needs %d" % (label, begin, end, end - begin, dtype, shape, needed_bits // 8)
    return None


def _short_json(value, limit=200):
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_safetensors(handle, size, expected_size=None):
    """Check the structure of one open safetensors file.

    Every file the safetensors library refuses to open is reported here (truncated or
    corrupt); one thing the library lets through is reported too: a tensor named twice
    in the header (the library silently keeps the last definition).

    :returns: dict with ``truncated`` (reason dict or None), ``corrupt``
        (list of ``(tensor or None, message)``), ``tensors`` (set of names, or
        None when the header is unreadable), ``tensor_bytes`` and ``warnings``.
    """
    report = {"truncated": None, "corrupt": [], "tensors": None, "tensor_bytes": 0, "warnings": []}
    try:
        header, data_start = read_safetensors_header(handle, size, expected_size)
    except _HeaderProblem as exc:
        if exc.kind == "truncated":
            report["truncated"] = {"size": size, "needed": expected_size, "reason": exc.reason}
        else:
            report["corrupt"].append((None, exc.reason))
        return report
    problems = report["corrupt"]
    for key in getattr(header, "duplicates", ()):
        if key == "__metadata__":
            problems.append((None, "__metadata__ is given more than once"))
        else:
            problems.append((key, "tensor %s is defined more than once in the header" % json.dumps(key)))
    spans = []
    tensors = set()
    for name, info in header.items():
        if name == "__metadata__":
            if info is not None and (not isinstance(info, dict) or not all(isinstance(value, str) for value in info.values())):
                problems.append((None, "__metadata__ must map strings to strings"))
            continue
        tensors.add(name)
        dtype, shape, offsets, problem = _tensor_entry(name, info)
        if problem is None:
            problem = _tensor_size_problem("tensor %s" % json.dumps(name), dtype, shape, offsets[0], offsets[1])
            spans.append((offsets[0], offsets[1], name))
            report["tensor_bytes"] += offsets[1] - offsets[0]
        if problem is not None:
            problems.append((name, problem))
    report["tensors"] = tensors
    _check_layout(report, spans, size, data_start, expected_size)
    return report


def _check_layout(report, spans, size, data_start, expected_size):
    """The safetensors library insists that the tensors tile the data area exactly."""
    problems = report["corrupt"]
    data_size = size - data_start
    if spans:
        last = max(spans, key=lambda span: (span[1], span[0]))
        if last[1] > data_size:
            report["truncated"] = {
                "size": size,
                "needed": max(data_start + last[1], expected_size or 0),
                "reason": "tensor %s ends at byte %d but the file has %d (%d bytes missing)"
                          % (json.dumps(last[2]), data_start + last[1], size, data_start + last[1] - size),
            }
            return
    cursor = 0
    previous = None
    for begin, end, name in sorted(spans):
        if begin > cursor:
            problems.append((name, "%d unused bytes before tensor %s (data_offsets are not contiguous)"
                             % (begin - cursor, json.dumps(name))))
        elif begin < cursor:
            problems.append((name, "tensor %s overlaps tensor %s" % (json.dumps(name), json.dumps(previous))))
        if end >= cursor:
            cursor = end
            previous = name
    if cursor < data_size:
        problems.append((None, "%d bytes after the end of the last tensor" % (data_size - cursor)))


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
                and isinstance(entry.get("sha256"), str) and SHA256_HEX.match(entry["sha256"])):
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
        ``model.safetensors`` when there is no index.
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


def _read_index(root, index_file):
    """What the index says, as a dict: ``path`` (None for a lone model.safetensors), ``total_size``,
    ``tensors_by_shard`` (file -> tensor names), ``expected_names`` (the files expected, sorted) and
    ``base`` (the index's file name, or None)."""
    total_size = None
    index_path = _index_path(root, index_file)
    if index_path is not None:
        weight_map, total_size = load_weight_map(index_path)
    else:
        if not os.path.isfile(os.path.join(root, SINGLE_FILE_NAME)):
            raise CheckpointError("%s: neither %s nor %s found" % (root, INDEX_FILE_NAME, SINGLE_FILE_NAME))
        weight_map = {}
    tensors_by_shard = {}
    for tensor, shard in weight_map.items():
        tensors_by_shard.setdefault(shard, []).append(tensor)
    return {
        "path": index_path, "total_size": total_size, "tensors_by_shard": tensors_by_shard,
        "expected_names": sorted(tensors_by_shard) if index_path is not None else [SINGLE_FILE_NAME],
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
                      % (entry["file"], entry["count"], _plural(entry["count"]), "is" if entry["count"] == 1 else "are",
                         _capped_names(entry["tensors"], entry["count"])))
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
        result["directory"], len(errors), _plural(len(errors)), "; ".join(shown))
    if len(errors) > len(shown):
        text += "; and %d more (see errors)" % (len(errors) - len(shown))
    return text


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _plural(count):
    return "" if count == 1 else "s"


def _capped_names(names, count=None):
    count = len(names) if count is None else count
    shown = list(names)[:LIST_CAP]
    text = ", ".join(shown)
    if count > len(shown):
        text += " and %d more" % (count - len(shown))
    return text


def _short_name(name, limit=200):
    """A name for a message, cut in the middle when it is very long."""
    if len(name) <= limit:
        return name
    return "%s...(%d characters)...%s" % (name[:limit // 2], len(name) - limit, name[-limit // 2:])


def _capped_numbers(numbers):
    shown = [str(number) for number in numbers[:LIST_CAP]]
    text = ", ".join(shown)
    if len(numbers) > len(shown):
        text += " and %d more" % (len(numbers) - len(shown))
    return text
