# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One safetensors file's header and layout, checked the way the safetensors library reads them (see
``verify.py`` for the format): a header the library would refuse, tensors that do not tile the data area,
slice sizes that disagree with dtype x shape."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import struct

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    is_int,
    json_type_name,
)

# The safetensors library refuses headers larger than this.
MAX_HEADER_BYTES = 100 * 1000 * 1000

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
