# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A checkpoint's index and shard names: the options of a verification, the index's weight map, index
entries checked lexically before any file is opened, and the Hugging Face ``-NNNNN-of-NNNNN`` numbering."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    full_match,
    is_int,
    json_type_name,
    read_json_object,
    usable_cpus,
)

CHECKSUM_MODES = ("auto", "true", "false")

# Longest list of names given per problem (the count is always given in full).
LIST_CAP = 20

# ``<prefix>-<number>-of-<total><suffix>``, the Hugging Face shard naming. These patterns are matched whole
# (fullmatch, safe_io.full_match): ``$`` would also accept a name or digest ending in a newline.
SHARD_NAME = re.compile(r"(?P<prefix>.*)-(?P<number>[0-9]+)-of-(?P<total>[0-9]+)(?P<suffix>\.[^./]+)")

SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")

# A size given as a string: ASCII digits only, and few enough for int() (it refuses over 4300).
DECIMAL = re.compile(r"[0-9]{1,30}")

# Longest shard number or total (zero padding included) taken as a number; Hugging Face writes 5 digits.
MAX_SHARD_DIGITS = 32

# Longer index entries cannot be paths (PATH_MAX is 4096): they are refused unopened.
MAX_NAME_CHARS = 4096

# Caps on the JSON files read whole: the index (DeepSeek-V3's is 9 MB) and the digest cache.
MAX_INDEX_BYTES = 64 * 1024 * 1024


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
        if isinstance(size, str) and full_match(DECIMAL, size.strip()):
            size = int(size.strip())
        if size is not None and (not is_int(size) or size < 0):
            raise CheckpointError("%s.size: must be a non-negative integer, got %s" % (where, json.dumps(entry.get("size"))))
        digest = entry.get("sha256")
        if digest is not None:
            if not isinstance(digest, str) or not full_match(SHA256_HEX, digest.strip()):
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
    match = SHARD_NAME.fullmatch(name) if len(name) <= MAX_NAME_CHARS else None
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
        elif len(name) <= MAX_NAME_CHARS and full_match(SHARD_NAME, name):
            messages.append("%s: the shard number or total has more than %d digits (not a shard name)"
                            % (short_name(name), MAX_SHARD_DIGITS))
    for (prefix, suffix), matches in sorted(groups.items()):
        totals = {}
        for match in matches:
            totals.setdefault(int(match.group("total")), []).append(match.group(0))
        if len(totals) > 1:
            # The total most names agree on is taken as right; the others are named.
            ranked = sorted(totals.items(), key=lambda item: (-len(item[1]), item[0]))
            majority = ranked[0][0]
            odd = sorted(name for item in ranked[1:] for name in item[1])
            summary = ", ".join("-of-%d in %d name%s" % (total, len(group), plural(len(group)))
                                for total, group in sorted(totals.items()))
            messages.append("%s: the index's shard names disagree on the number of shards (%s)" % (capped_names(odd), summary))
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
                            % (capped_names(absent_names, len(absent)), capped_numbers(absent), total, len(numbers),
                               plural(len(numbers))))
    return messages


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def plural(count):
    return "" if count == 1 else "s"


def capped_names(names, count=None):
    count = len(names) if count is None else count
    shown = list(names)[:LIST_CAP]
    text = ", ".join(shown)
    if count > len(shown):
        text += " and %d more" % (count - len(shown))
    return text


def short_name(name, limit=200):
    """A name for a message, cut in the middle when it is very long."""
    if len(name) <= limit:
        return name
    return "%s...(%d characters)...%s" % (name[:limit // 2], len(name) - limit, name[-limit // 2:])


def capped_numbers(numbers):
    shown = [str(number) for number in numbers[:LIST_CAP]]
    text = ", ".join(shown)
    if len(numbers) > len(shown):
        text += " and %d more" % (len(numbers) - len(shown))
    return text
