# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checkpoint verification on real safetensors files written byte by byte (no torch): every
corruption is made for real on disk. The helpers at the top (build_checkpoint and the corruption
functions) are also used by tests/unit/plugins/modules/test_model_verify.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import builtins
import hashlib
import io
import json
import os
import random
import shutil
import stat
import struct

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint import digest_cache, shards
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint import verify as verify_module
from ansible_collections.gauntlet.vllm.plugins.module_utils.io import safe_io
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.shards import (
    check_numbering,
    CheckpointError,
    load_weight_map,
    normalize_checksum_mode,
    parse_expected_files,
    shard_key,
    unsafe_name_reason,
)
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.safetensors import check_safetensors
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.digest_cache import load_cache
from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint.verify import (
    CACHE_FILE_NAME,
    failure_message,
    verify_checkpoint,
)

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1}
# Generated files get an old mtime: the verifier does not cache digests of files modified in the
# last seconds (the "racy" window), and a fixed time keeps the files identical from run to run.
OLD_MTIME = 1700000000
INDEX = "model.safetensors.index.json"


# --------------------------------------------------------------------------
# Writing safetensors checkpoints
# --------------------------------------------------------------------------

def tensor_data(name, nbytes):
    """Deterministic bytes for a tensor (a repeated digest of its name)."""
    seed = hashlib.sha256(name.encode("utf-8")).digest()
    return (seed * (nbytes // len(seed) + 1))[:nbytes]


def encode_header(header):
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the safetensors library pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(raw)) + raw


def encode_safetensors(tensors, metadata=None):
    """Bytes of a safetensors file holding ``tensors``: a list of (name, dtype, shape)."""
    header = {}
    chunks = []
    offset = 0
    for name, dtype, shape in tensors:
        count = 1
        for dim in shape:
            count *= dim
        data = tensor_data(name, count * DTYPE_BYTES[dtype])
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    return encode_header(header) + b"".join(chunks)


def read_header(path):
    """``(header, data bytes)`` of a safetensors file."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        return header, handle.read()


def write_file(path, data, mtime=OLD_MTIME):
    with open(path, "wb") as handle:
        handle.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


class Checkpoint(object):
    """A checkpoint written by build_checkpoint."""

    def __init__(self, path, shards, weight_map, expected_files, index):
        self.path = path
        self.shards = shards
        self.weight_map = weight_map
        self.expected_files = expected_files
        self.index = index

    def shard(self, number):
        """Path of shard ``number`` (1-based)."""
        return os.path.join(self.path, self.shards[number - 1])

    def write_index(self, weight_map=None, extra=None):
        data = {"metadata": {"total_size": self.index["metadata"]["total_size"]},
                "weight_map": self.weight_map if weight_map is None else weight_map}
        data.update(extra or {})
        write_file(os.path.join(self.path, INDEX), json.dumps(data, indent=2).encode("utf-8"))

    def tensors_of(self, shard_name):
        return sorted(tensor for tensor, name in self.weight_map.items() if name == shard_name)


def build_checkpoint(path, shards=4, tensors_per_shard=2, shape=(32, 32), dtypes=("F32", "BF16"),
                     name_format="model-{n:05d}-of-{total:05d}.safetensors", index=True, metadata=None):
    """Write a sharded safetensors checkpoint (and its index) into ``path``.

    Shard n holds ``tensors_per_shard`` tensors ``model.layers.<n>.w<k>.weight`` of ``shape``,
    cycling through ``dtypes``. ``expected_files`` gives every shard's size and sha256.
    """
    path = str(path)
    if not os.path.isdir(path):
        os.makedirs(path)
    weight_map = {}
    expected = {}
    total_size = 0
    names = []
    for number in range(1, shards + 1):
        name = name_format.format(n=number, total=shards)
        tensors = [("model.layers.%d.w%d.weight" % (number, k), dtypes[k % len(dtypes)], shape)
                   for k in range(tensors_per_shard)]
        data = encode_safetensors(tensors, metadata={"format": "pt"} if metadata is None else metadata)
        write_file(os.path.join(path, name), data)
        for tensor, dtype, dims in tensors:
            weight_map[tensor] = name
            count = 1
            for dim in dims:
                count *= dim
            total_size += count * DTYPE_BYTES[dtype]
        expected[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        names.append(name)
    index_data = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    result = Checkpoint(path, names, weight_map, expected, index_data)
    if index:
        result.write_index()
    return result


def clone_checkpoint(source, path):
    """A copy of ``source`` whose shards are hard links (rename and re-index, never write into them)."""
    path = str(path)
    os.makedirs(path)
    for name in os.listdir(source.path):
        if name.endswith(".safetensors"):
            os.link(os.path.join(source.path, name), os.path.join(path, name))
        elif not name.startswith("."):
            shutil.copy2(os.path.join(source.path, name), os.path.join(path, name))
    return Checkpoint(path, list(source.shards), dict(source.weight_map), dict(source.expected_files), source.index)


# --------------------------------------------------------------------------
# Corrupting them
# --------------------------------------------------------------------------

def truncate(path, nbytes):
    """Cut ``nbytes`` off the end of the file."""
    os.truncate(path, os.path.getsize(path) - nbytes)


def flip_bytes(path, offset, count=4, keep_mtime=False):
    """Invert ``count`` bytes at ``offset`` in place (the size does not change)."""
    before = os.stat(path)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        data = handle.read(count)
        handle.seek(offset)
        handle.write(bytes(byte ^ 0xFF for byte in data))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def middle_of_tensor(path, tensor=None):
    """File offset of the middle of ``tensor`` (default: the first one) in a safetensors file."""
    header, data = read_header(path)
    tensor = tensor or sorted(name for name in header if name != "__metadata__")[0]
    begin, end = header[tensor]["data_offsets"]
    assert end - begin > 8
    return os.path.getsize(path) - len(data) + (begin + end) // 2


def rewrite_header(path, change):
    """Re-encode a shard's header after ``change(header)``; the tensor data is kept byte for byte."""
    header, data = read_header(path)
    change(header)
    write_file(path, encode_header(header) + data)


def set_header_length(path, value):
    """Overwrite the 8-byte header length."""
    with open(path, "r+b") as handle:
        handle.write(struct.pack("<Q", value))


def garble_header_json(path):
    """Keep the length, break the JSON: the header's closing part becomes garbage."""
    with open(path, "r+b") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        handle.seek(8 + length - 16)
        handle.write(b"\x00garbage\x01{[\"}:\x02")


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

@pytest.fixture
def ckpt(tmp_path):
    """A small 4-shard checkpoint (F32 and BF16 tensors)."""
    return build_checkpoint(tmp_path / "model")


@pytest.fixture(scope="module")
def ckpt64(tmp_path_factory):
    """64 shards of about 2.3 MB each (144 MiB), built once per module; clone before changing it."""
    base = tmp_path_factory.mktemp("ckpt64")
    yield build_checkpoint(base / "model", shards=64, shape=(512, 768))
    shutil.rmtree(str(base))  # pytest keeps the last runs' temporary directories: do not keep 144 MiB


@pytest.fixture
def clone64(ckpt64, tmp_path):
    """A hard-link clone of ckpt64 to rename and re-index (removed afterwards: links keep the data alive)."""
    clone = clone_checkpoint(ckpt64, tmp_path / "clone")
    yield clone
    shutil.rmtree(clone.path)


def verify(path, **kwargs):
    kwargs.setdefault("workers", 2)
    return verify_checkpoint(str(path), **kwargs)


def problem_names(result, key):
    return [entry["file"] if isinstance(entry, dict) else entry for entry in result[key]]


def assert_only(result, key, name):
    """``name`` is reported under ``key`` and in the failure message; nothing else is wrong."""
    assert not result["ok"]
    assert name in problem_names(result, key), result
    assert name in failure_message(result)
    others = [other for other in ("missing", "misnamed", "unsafe", "unexpected", "truncated", "corrupt",
                                  "tensors_missing", "size_mismatch", "checksum_mismatch", "numbering")
              if other != key and result[other]]
    assert not others, dict((other, result[other]) for other in others)


# --------------------------------------------------------------------------
# Names and numbering
# --------------------------------------------------------------------------

def test_shard_key_ignores_zero_padding_and_case():
    assert shard_key("model-00001-of-000064.safetensors") == shard_key("model-00001-of-00064.safetensors")
    assert shard_key("Model-1-of-64.SafeTensors") == shard_key("model-00001-of-00064.safetensors")
    assert shard_key("model-00002-of-00064.safetensors") != shard_key("model-00001-of-00064.safetensors")
    assert shard_key("model.safetensors") == shard_key("MODEL.safetensors")


def test_numbering_consistent():
    names = ["model-%05d-of-00064.safetensors" % n for n in range(1, 65)]
    assert check_numbering(names) == []
    # Zero padding differences alone are not a numbering problem.
    assert check_numbering(["model-00001-of-000002.safetensors", "model-00002-of-00002.safetensors"]) == []
    assert check_numbering(["model.safetensors", "extra.safetensors"]) == []


def test_numbering_gap_names_the_absent_shard():
    names = ["model-%05d-of-00064.safetensors" % n for n in range(1, 65) if n != 17]
    messages = check_numbering(names)
    assert len(messages) == 1
    assert messages[0].startswith("model-00017-of-00064.safetensors: the index names no shard 17 of 64")


def test_numbering_wrong_total():
    names = ["model-%05d-of-00004.safetensors" % n for n in range(1, 6)]
    messages = check_numbering(names)
    assert messages == ["model-00005-of-00004.safetensors: shard number 5 is outside 1..4"]


def test_numbering_totals_disagree():
    names = ["model-%05d-of-00004.safetensors" % n for n in range(1, 4)] + ["model-00004-of-00005.safetensors"]
    messages = check_numbering(names)
    assert messages[0].startswith("model-00004-of-00005.safetensors: the index's shard names disagree on the number of shards")
    assert len(messages) == 2 and "model-00004-of-00004.safetensors" in messages[1]


def test_numbering_duplicate_number():
    names = ["model-00001-of-00002.safetensors", "model-001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert check_numbering(names) == [
        "model-00001-of-00002.safetensors, model-001-of-00002.safetensors: shard number 1 is named 2 times in the index"]


@pytest.mark.parametrize("name,reason", [
    ("model-00001-of-00002.safetensors", None),
    ("sub/model.safetensors", None),
    ("../escape.safetensors", "'..' climbs out of the model directory"),
    ("sub/../../escape.safetensors", "'..' climbs out of the model directory"),
    ("/etc/passwd", "absolute path"),
    ("", "empty file name"),
    ("a\x00b", "file name contains a NUL byte"),
])
def test_unsafe_name_reason(name, reason):
    assert unsafe_name_reason(name) == reason


# --------------------------------------------------------------------------
# Options and index
# --------------------------------------------------------------------------

def test_checksum_modes():
    assert normalize_checksum_mode(True) == "true"
    assert normalize_checksum_mode(False) == "false"
    assert normalize_checksum_mode("AUTO") == "auto"
    assert normalize_checksum_mode("yes") == "true"
    with pytest.raises(CheckpointError, match="checksum: must be one of auto, true, false"):
        normalize_checksum_mode("sometimes")


def test_expected_files_validation():
    digest = "AB" * 32
    assert parse_expected_files({"a": {"size": "12", "sha256": digest}, "b": {"size": None}}) == {
        "a": {"size": 12, "sha256": "ab" * 32}, "b": {"size": None, "sha256": None}}
    with pytest.raises(CheckpointError, match=r'expected_files\["a"\]\.sha256: must be 64 hexadecimal digits'):
        parse_expected_files({"a": {"sha256": "abc"}})
    with pytest.raises(CheckpointError, match=r'expected_files\["a"\]\.size: must be a non-negative integer'):
        parse_expected_files({"a": {"size": -1}})
    with pytest.raises(CheckpointError, match=r'expected_files\["a"\]: unknown key\(s\) sha1'):
        parse_expected_files({"a": {"sha1": "x"}})
    with pytest.raises(CheckpointError, match=r'expected_files\["a"\]: must be a dict'):
        parse_expected_files({"a": 3})


@pytest.mark.parametrize("content,message", [
    (b"{not json", "invalid JSON"),
    (b"[1, 2]", "expected a JSON object at the top level, got array"),
    (b'{"metadata": {}}', "missing required field 'weight_map'"),
    (b'{"weight_map": []}', "field 'weight_map' must be an object, got array"),
    (b'{"weight_map": {}}', "field 'weight_map' is empty"),
    (b'{"weight_map": {"w": 3}}', "field 'weight_map[\"w\"]' must be a file name (string), got 3 (int)"),
])
def test_bad_index_names_file_and_field(tmp_path, content, message):
    index = tmp_path / INDEX
    index.write_bytes(content)
    with pytest.raises(CheckpointError) as exc:
        load_weight_map(str(index))
    assert str(exc.value).startswith(str(index) + ": ")
    assert message in str(exc.value)
    with pytest.raises(CheckpointError) as exc:
        verify(tmp_path)
    assert str(index) in str(exc.value) and message in str(exc.value)


def test_bad_path(tmp_path):
    with pytest.raises(CheckpointError, match="no such directory"):
        verify(tmp_path / "nowhere")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a directory"):
        verify(tmp_path / "file")
    with pytest.raises(CheckpointError, match="neither model.safetensors.index.json nor model.safetensors found"):
        verify(tmp_path)
    with pytest.raises(CheckpointError, match="other.index.json: index file not found"):
        verify(tmp_path, index_file="other.index.json")


# --------------------------------------------------------------------------
# The safetensors structure, one file at a time
# --------------------------------------------------------------------------

def check_bytes(data, expected_size=None):
    return check_safetensors(io.BytesIO(data), len(data), expected_size)


def test_valid_file_with_metadata():
    data = encode_safetensors([("a", "F32", [4, 4]), ("b", "BF16", [3]), ("scalar", "F32", []), ("empty", "U8", [0, 5])],
                              metadata={"format": "pt"})
    report = check_bytes(data)
    assert report["corrupt"] == [] and report["truncated"] is None
    assert report["tensors"] == {"a", "b", "scalar", "empty"}
    assert report["tensor_bytes"] == 64 + 6 + 4


def test_packed_and_unknown_dtypes():
    header = {"fp4": {"dtype": "F4", "shape": [4, 8], "data_offsets": [0, 16]},
              "odd": {"dtype": "F4", "shape": [3], "data_offsets": [16, 18]},
              "new": {"dtype": "F2_FUTURE", "shape": [8], "data_offsets": [18, 20]}}
    report = check_bytes(encode_header(header) + b"\0" * 20)
    assert report["corrupt"][0] == ("odd", 'tensor "odd": F4 [3] is 12 bits, not a whole number of bytes')
    # A dtype the safetensors library does not know is an error (vLLM could not load the shard), not a warning.
    assert report["corrupt"][1][0] == "new"
    assert report["corrupt"][1][1].startswith('tensor "new": dtype "F2_FUTURE" is not a safetensors dtype (BF16, BOOL, ')
    assert report["warnings"] == []


@pytest.mark.parametrize("data,kind,reason", [
    (b"", "truncated", "shorter than the 8-byte header length"),
    (b"\xff" * 8 + b"{}", "corrupt", "is implausible"),
    (struct.pack("<Q", 1) + b"{", "corrupt", "too small for a JSON object"),
    (struct.pack("<Q", 64) + b"{}", "corrupt", "header length 64 runs past the end of the file (10 bytes)"),
    (struct.pack("<Q", 4) + b"[12]", "corrupt", "does not start with '{'"),
    (struct.pack("<Q", 4) + b"{]]}", "corrupt", "header is not valid JSON"),
    (struct.pack("<Q", 4) + b"{\xff\xfe}", "corrupt", "header is not UTF-8"),
    (encode_header({"__metadata__": {"n": 1}}), "corrupt", "__metadata__ must map strings to strings"),
    (encode_header({"t": [1]}), "corrupt", 'tensor "t": entry is a array, not an object'),
    (encode_header({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}), "corrupt", "shape must be a list"),
    (encode_header({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}), "corrupt", "data_offsets must be"),
])
def test_bad_headers(data, kind, reason):
    report = check_bytes(data)
    if kind == "truncated":
        assert reason in report["truncated"]["reason"]
    else:
        assert report["truncated"] is None
        assert any(reason in message for tensor, message in report["corrupt"]), report


def test_header_running_past_a_short_file_is_truncation_when_the_size_is_known():
    data = encode_safetensors([("a", "F32", [64])])
    report = check_bytes(data[:20], expected_size=len(data))
    assert "runs past the end of the file" in report["truncated"]["reason"]


def test_layout_must_tile_the_data_area():
    def header(*spans):
        return encode_header(dict(("t%d" % i, {"dtype": "U8", "shape": [end - begin], "data_offsets": [begin, end]})
                                  for i, (begin, end) in enumerate(spans)))
    assert check_bytes(header((0, 4), (4, 8)) + b"\0" * 8)["corrupt"] == []
    gap = check_bytes(header((0, 4), (6, 8)) + b"\0" * 8)["corrupt"]
    assert gap == [("t1", '2 unused bytes before tensor "t1" (data_offsets are not contiguous)')]
    overlap = check_bytes(header((0, 4), (2, 6)) + b"\0" * 6)["corrupt"]
    assert overlap == [("t1", 'tensor "t1" overlaps tensor "t0"')]
    trailing = check_bytes(header((0, 4)) + b"\0" * 7)["corrupt"]
    assert trailing == [(None, "3 bytes after the end of the last tensor")]
    short = check_bytes(header((0, 4), (4, 8)) + b"\0" * 5)
    assert short["truncated"]["reason"].startswith('tensor "t1" ends at byte')
    assert "(3 bytes missing)" in short["truncated"]["reason"]


# --------------------------------------------------------------------------
# Whole checkpoints
# --------------------------------------------------------------------------

def test_good_checkpoint(ckpt):
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["ok"], result["errors"]
    assert result["expected"] == ckpt.shards == result["present"]
    assert result["hashed"] == ckpt.shards
    assert result["sha256"] == dict((name, meta["sha256"]) for name, meta in ckpt.expected_files.items())
    assert result["bytes_total"] == sum(meta["size"] for meta in ckpt.expected_files.values())
    assert result["warnings"] == []
    json.dumps(result)


def test_good_64_shards_full_checksum(ckpt64, tmp_path):
    result = verify(ckpt64.path, expected_files=ckpt64.expected_files, cache_path=str(tmp_path / "cache.json"))
    assert result["ok"], result["errors"]
    assert len(result["present"]) == 64 and len(result["hashed"]) == 64
    assert result["bytes_hashed"] == result["bytes_total"] > 128 * 1024 * 1024
    assert result["cache_written"]


def test_checksum_modes_choose_what_is_hashed(ckpt):
    partial = dict(list(ckpt.expected_files.items())[:1])
    auto = verify(ckpt.path, expected_files=partial, cache=False)
    assert auto["ok"] and auto["hashed"] == ckpt.shards[:1]
    everything = verify(ckpt.path, expected_files=partial, checksum="true", cache=False)
    assert everything["ok"] and everything["hashed"] == ckpt.shards
    assert everything["sha256"][ckpt.shards[3]] == ckpt.expected_files[ckpt.shards[3]]["sha256"]
    never = verify(ckpt.path, expected_files=ckpt.expected_files, checksum="false")
    assert never["ok"] and never["hashed"] == [] and never["sha256"] == {} and never["cache_path"] is None
    assert not os.path.exists(os.path.join(ckpt.path, CACHE_FILE_NAME))


def test_parallel_and_serial_agree(ckpt):
    flip_bytes(ckpt.shard(2), middle_of_tensor(ckpt.shard(2)))
    truncate(ckpt.shard(4), 10)
    serial = verify(ckpt.path, expected_files=ckpt.expected_files, checksum="true", workers=1, cache=False)
    parallel = verify(ckpt.path, expected_files=ckpt.expected_files, checksum="true", workers=8, cache=False)
    for result in (serial, parallel):
        result.pop("elapsed_s")
    assert serial == parallel
    assert problem_names(serial, "checksum_mismatch") == [ckpt.shards[1]]
    assert problem_names(serial, "truncated") == [ckpt.shards[3]]
    assert problem_names(serial, "size_mismatch") == [ckpt.shards[3]]


def test_missing_shard(ckpt):
    os.unlink(ckpt.shard(3))
    result = verify(ckpt.path)
    assert_only(result, "missing", ckpt.shards[2])
    assert "%s: missing" % ckpt.shards[2] in result["errors"]


def test_misnamed_zero_padding(clone64):
    clone = clone64
    weight_map = dict((tensor, "model-00001-of-000064.safetensors" if name == "model-00001-of-00064.safetensors" else name)
                      for tensor, name in clone.weight_map.items())
    clone.write_index(weight_map)
    result = verify(clone.path)
    assert result["misnamed"] == [{"expected": "model-00001-of-000064.safetensors", "found": "model-00001-of-00064.safetensors"}]
    assert result["missing"] == [] and result["unexpected"] == [] and result["numbering"] == []
    assert not result["ok"]
    message = failure_message(result)
    assert "model-00001-of-000064.safetensors: missing, but model-00001-of-00064.safetensors is on disk" in message


def test_numbering_gap_in_the_index(clone64):
    clone = clone64
    os.unlink(clone.shard(17))
    clone.write_index(dict((tensor, name) for tensor, name in clone.weight_map.items() if name != clone.shards[16]))
    result = verify(clone.path)
    assert not result["ok"]
    assert len(result["numbering"]) == 1
    assert result["numbering"][0].startswith("model-00017-of-00064.safetensors: the index names no shard 17 of 64")
    assert "model-00017-of-00064.safetensors: the index names no shard 17 of 64" in failure_message(result)
    assert result["missing"] == [] and result["unexpected"] == []


def test_truncated_shard(ckpt):
    truncate(ckpt.shard(2), 100)
    result = verify(ckpt.path)
    assert_only(result, "truncated", ckpt.shards[1])
    assert "(100 bytes missing)" in result["truncated"][0]["reason"]


def test_offsets_inconsistent_with_dtype_and_shape(ckpt):
    def change(header):
        header["model.layers.3.w1.weight"]["shape"] = [32, 31]
    rewrite_header(ckpt.shard(3), change)
    result = verify(ckpt.path)
    assert_only(result, "corrupt", ckpt.shards[2])
    assert result["corrupt"][0]["tensor"] == "model.layers.3.w1.weight"
    assert "model.layers.3.w1.weight" in failure_message(result)
    assert "needs 1984" in result["corrupt"][0]["reason"]


def test_tensor_missing_from_header(ckpt):
    def change(header):
        header["model.layers.2.renamed.weight"] = header.pop("model.layers.2.w0.weight")
    rewrite_header(ckpt.shard(2), change)
    result = verify(ckpt.path)
    assert_only(result, "tensors_missing", ckpt.shards[1])
    assert result["tensors_missing"] == [{"file": ckpt.shards[1], "tensors": ["model.layers.2.w0.weight"], "count": 1}]
    assert "model.layers.2.w0.weight" in failure_message(result)


def test_stale_shard_and_ignore_files(ckpt):
    write_file(os.path.join(ckpt.path, "model-00001-of-00003.safetensors"), encode_safetensors([("old", "F32", [2])]))
    write_file(os.path.join(ckpt.path, "pytorch_model-00001-of-00002.bin"), b"legacy")
    result = verify(ckpt.path)
    assert_only(result, "unexpected", "model-00001-of-00003.safetensors")
    assert verify(ckpt.path, ignore_files=["model-*-of-00003.safetensors"])["ok"]


def test_unsafe_entries_are_never_opened(ckpt, tmp_path, monkeypatch):
    outside = build_checkpoint(tmp_path / "outside", shards=1)
    escape = os.path.join(str(tmp_path), "escape.safetensors")
    write_file(escape, b"garbage that is not a safetensors file")
    absolute = outside.shard(1)
    weight_map = dict(ckpt.weight_map)
    weight_map["evil.a"] = "../escape.safetensors"
    weight_map["evil.b"] = absolute
    ckpt.write_index(weight_map)

    touched = []
    real_open, real_stat, real_realpath = builtins.open, os.stat, os.path.realpath

    def record(function):
        def wrapper(path, *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)):
                touched.append(os.path.normpath(os.fspath(path)))
            return function(path, *args, **kwargs)
        return wrapper
    monkeypatch.setattr(builtins, "open", record(real_open))
    monkeypatch.setattr(os, "stat", record(real_stat))
    monkeypatch.setattr(os.path, "realpath", record(real_realpath))
    result = verify(ckpt.path, checksum="true", cache=False)
    monkeypatch.undo()

    assert os.path.normpath(escape) not in touched
    assert os.path.normpath(absolute) not in touched
    assert sorted(problem_names(result, "unsafe")) == sorted(["../escape.safetensors", absolute])
    reasons = dict((entry["file"], entry["reason"]) for entry in result["unsafe"])
    assert reasons == {"../escape.safetensors": "'..' climbs out of the model directory", absolute: "absolute path"}
    message = failure_message(result)
    assert "../escape.safetensors: unsafe, not opened" in message and "%s: unsafe, not opened" % absolute in message
    assert result["corrupt"] == [] and result["missing"] == [] and result["present"] == ckpt.shards


def test_symlinks(ckpt, tmp_path):
    outside = build_checkpoint(tmp_path / "outside", shards=1, name_format="elsewhere.safetensors")
    os.unlink(ckpt.shard(4))
    os.symlink(outside.shard(1), ckpt.shard(4))
    # (the linked file holds other tensors, so only follow_external_symlinks shows tensors_missing)
    result = verify(ckpt.path)
    assert_only(result, "unsafe", ckpt.shards[3])
    assert result["unsafe"][0]["reason"].startswith("resolves outside the model directory")
    followed = verify(ckpt.path, follow_external_symlinks=True)
    assert problem_names(followed, "tensors_missing") == [ckpt.shards[3]]
    # A symlink inside the directory is fine; a dangling one is a missing shard; a directory is refused.
    os.unlink(ckpt.shard(4))
    os.rename(ckpt.shard(3), os.path.join(ckpt.path, "real-3.safetensors"))
    os.symlink("real-3.safetensors", ckpt.shard(3))
    os.symlink("does-not-exist.safetensors", ckpt.shard(4))
    result = verify(ckpt.path, ignore_files=["real-*"])
    assert result["missing"] == [ckpt.shards[3]] and result["present"] == ckpt.shards[:3]
    assert "%s: missing (dangling symlink" % ckpt.shards[3] in failure_message(result)
    os.unlink(ckpt.shard(4))
    os.mkdir(ckpt.shard(4))
    result = verify(ckpt.path, ignore_files=["real-*"])
    assert result["unsafe"] == [{"file": ckpt.shards[3], "reason": "not a regular file"}]


def test_hugging_face_cache_layout(tmp_path):
    """snapshots/<revision>/<file> -> ../../blobs/<sha256>, as huggingface_hub lays out its cache."""
    source = build_checkpoint(tmp_path / "download", shards=2)
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name in source.shards + [INDEX]:
        blob = hashlib.sha256(name.encode("utf-8")).hexdigest()
        shutil.copy2(os.path.join(source.path, name), str(repo / "blobs" / blob))
        os.symlink(os.path.join("..", "..", "blobs", blob), str(snapshot / name))
    result = verify(snapshot, expected_files=source.expected_files)
    assert result["ok"], result["errors"]
    assert result["hashed"] == source.shards


def test_single_file_checkpoint(tmp_path):
    single = build_checkpoint(tmp_path / "single", shards=1, name_format="model.safetensors", index=False)
    result = verify(single.path, expected_files=single.expected_files)
    assert result["ok"], result["errors"]
    assert result["index"] is None and result["expected"] == ["model.safetensors"] and result["hashed"] == ["model.safetensors"]
    truncate(single.shard(1), 1)
    result = verify(single.path)
    assert_only(result, "truncated", "model.safetensors")


# --------------------------------------------------------------------------
# A PEFT (LoRA) adapter: one adapter_model.safetensors, no index (issue 35)
# --------------------------------------------------------------------------

ADAPTER = "adapter_model.safetensors"


def build_adapter(path, layers=2, hidden=128, q_out=128, v_out=64, r=8, seed=1234):
    """Write a LoRA adapter as PEFT saves it into ``path``: ``adapter_config.json`` and ``adapter_model.safetensors``,
    F32 tensors ``base_model.model.model.layers.<i>.self_attn.<q|v>_proj.lora_A.weight`` [r, hidden] and
    ``.lora_B.weight`` [out, r] holding normal(0, 0.02) values from a seeded generator, written byte by byte in the
    safetensors layout (tensors sorted by name, the header padded to 8 bytes, ``{"format": "pt"}`` metadata).
    Returns the expected_files of both files (size and sha256)."""
    path = str(path)
    os.makedirs(path)
    rng = random.Random(seed)
    header = {"__metadata__": {"format": "pt"}}
    chunks = []
    offset = 0
    shapes = {}
    for layer in range(layers):
        for module, out in (("q_proj", q_out), ("v_proj", v_out)):
            prefix = "base_model.model.model.layers.%d.self_attn.%s" % (layer, module)
            shapes[prefix + ".lora_A.weight"] = [r, hidden]
            shapes[prefix + ".lora_B.weight"] = [out, r]
    for name in sorted(shapes):
        rows, cols = shapes[name]
        data = struct.pack("<%df" % (rows * cols), *(rng.gauss(0.0, 0.02) for _value in range(rows * cols)))
        header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    weights = encode_header(header) + b"".join(chunks)
    config = json.dumps({"base_model_name_or_path": "tiny-llama", "peft_type": "LORA", "r": r, "lora_alpha": 2 * r,
                         "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}, indent=2).encode("utf-8")
    write_file(os.path.join(path, ADAPTER), weights)
    write_file(os.path.join(path, "adapter_config.json"), config)
    return dict((name, {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
                for name, data in ((ADAPTER, weights), ("adapter_config.json", config)))


def test_adapter_checkpoint_verifies(tmp_path):
    adapter = tmp_path / "tiny-lora"
    expected = build_adapter(adapter)
    result = verify(adapter, expected_files=expected)
    assert result["ok"], result["errors"]
    assert result["index"] is None and result["expected"] == [ADAPTER] and result["present"] == [ADAPTER]
    assert sorted(result["hashed"]) == ["adapter_config.json", ADAPTER]
    assert result["sha256"][ADAPTER] == expected[ADAPTER]["sha256"] and result["bytes_total"] == expected[ADAPTER]["size"]
    assert result["warnings"] == [] and result["unexpected"] == []
    # No config.json, and no adapter_config.json either: the weights are what is verified.
    os.unlink(str(adapter / "adapter_config.json"))
    assert verify(adapter, expected_files={ADAPTER: expected[ADAPTER]})["ok"]


def test_truncated_adapter_fails(tmp_path):
    adapter = tmp_path / "tiny-lora"
    expected = build_adapter(adapter)
    truncate(str(adapter / ADAPTER), 1)
    assert_only(verify(adapter), "truncated", ADAPTER)
    # With the Hub's size known, the size is wrong too; and a file cut inside its header is refused as well.
    result = verify(adapter, expected_files=expected)
    assert problem_names(result, "truncated") == [ADAPTER] and problem_names(result, "size_mismatch") == [ADAPTER]
    os.truncate(str(adapter / ADAPTER), 100)
    result = verify(adapter, expected_files=expected)
    assert not result["ok"] and ADAPTER in problem_names(result, "truncated") + problem_names(result, "corrupt")
    assert "%s: " % ADAPTER in failure_message(result)


def test_corrupt_adapter_fails(tmp_path):
    adapter = tmp_path / "tiny-lora"
    expected = build_adapter(adapter)
    path = str(adapter / ADAPTER)
    # Same size, flipped tensor bytes: only the Hub's sha256 can tell.
    flip_bytes(path, middle_of_tensor(path))
    assert verify(adapter, checksum="false")["ok"]
    assert_only(verify(adapter, expected_files={ADAPTER: expected[ADAPTER]}), "checksum_mismatch", ADAPTER)
    # A header that no longer parses, and a tensor whose shape disagrees with its bytes.
    shutil.rmtree(str(adapter))
    build_adapter(adapter)
    garble_header_json(path)
    assert_only(verify(adapter), "corrupt", ADAPTER)
    shutil.rmtree(str(adapter))
    build_adapter(adapter)
    rewrite_header(path, lambda header: header["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
                   .update(shape=[8, 64]))
    result = verify(adapter)
    assert_only(result, "corrupt", ADAPTER)
    assert result["corrupt"][0]["tensor"] == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"


def test_adapter_only_when_there_is_no_model_file(tmp_path):
    adapter = tmp_path / "tiny-lora"
    build_adapter(adapter)
    assert verify(adapter)["expected"] == [ADAPTER]
    # model.safetensors takes precedence: an adapter beside it is a stray file, as beside an index.
    write_file(str(adapter / "model.safetensors"), encode_safetensors([("model.w.weight", "F32", [4, 4])]))
    result = verify(adapter)
    assert result["expected"] == ["model.safetensors"]
    assert_only(result, "unexpected", ADAPTER)
    assert verify(adapter, ignore_files=[ADAPTER])["ok"]
    sharded = build_checkpoint(tmp_path / "sharded", shards=2)
    shutil.copy2(str(adapter / ADAPTER), os.path.join(sharded.path, ADAPTER))
    assert_only(verify(sharded.path), "unexpected", ADAPTER)
    # A model.safetensors that is not a file (a dangling symlink) is not passed over for the adapter.
    os.unlink(str(adapter / "model.safetensors"))
    os.symlink("gone.safetensors", str(adapter / "model.safetensors"))
    with pytest.raises(CheckpointError, match="neither model.safetensors.index.json nor model.safetensors found"):
        verify(adapter)


def test_adapter_directory_without_its_weights_is_refused(tmp_path):
    adapter = tmp_path / "tiny-lora"
    build_adapter(adapter)
    os.unlink(str(adapter / ADAPTER))
    with pytest.raises(CheckpointError, match="nor a PEFT adapter's adapter_model.safetensors"):
        verify(adapter)
    os.mkdir(str(adapter / ADAPTER))
    with pytest.raises(CheckpointError, match="nor a PEFT adapter's adapter_model.safetensors"):
        verify(adapter)


def test_expected_files_for_other_files(ckpt):
    config = os.path.join(ckpt.path, "config.json")
    write_file(config, b'{"model_type": "llama"}')
    expected = dict(ckpt.expected_files)
    expected["config.json"] = {"size": 23, "sha256": hashlib.sha256(b'{"model_type": "llama"}').hexdigest()}
    expected["README.md"] = {"size": 10}  # not downloaded: not an error
    expected["consolidated.safetensors"] = {"size": 1}
    write_file(os.path.join(ckpt.path, "consolidated.safetensors"), encode_safetensors([("x", "U8", [1])]))
    result = verify(ckpt.path, expected_files=expected)
    assert_only(result, "size_mismatch", "consolidated.safetensors")
    assert "config.json" in result["hashed"]
    write_file(config, b'{"model_type": "LLAMA"}')
    result = verify(ckpt.path, expected_files=dict(expected, **{"consolidated.safetensors": {}}))
    assert_only(result, "checksum_mismatch", "config.json")


def test_index_total_size_disagreement_is_a_warning(ckpt):
    index = dict(ckpt.index)
    ckpt.index = {"metadata": {"total_size": 12345}}
    ckpt.write_index()
    result = verify(ckpt.path)
    assert result["ok"]
    assert result["warnings"] == ["%s: metadata.total_size is 12345 but the shards hold %d bytes of tensors"
                                  % (os.path.join(ckpt.path, INDEX), index["metadata"]["total_size"])]


# --------------------------------------------------------------------------
# The digest cache
# --------------------------------------------------------------------------

def test_cache_second_run_hashes_nothing(ckpt):
    first = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert first["hashed"] == ckpt.shards and first["from_cache"] == [] and first["cache_written"]
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    entries, warning = load_cache(cache_file)
    assert warning is None and sorted(entries) == sorted(os.path.realpath(ckpt.shard(n)) for n in range(1, 5))
    second = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert second["ok"] and second["hashed"] == [] and second["from_cache"] == ckpt.shards
    assert second["bytes_hashed"] == 0 and not second["cache_written"]
    assert second["sha256"] == first["sha256"]
    # The cache file is not a shard.
    assert second["unexpected"] == []


def test_cache_touch_causes_rehash(ckpt):
    verify(ckpt.path, expected_files=ckpt.expected_files)
    os.utime(ckpt.shard(2))
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["ok"] and result["hashed"] == [ckpt.shards[1]]
    # Just touched: hashed a second time once its timestamp tick is over, then cached.
    size = os.path.getsize(ckpt.shard(2))
    assert result["bytes_hashed"] == 2 * size and result["cache_written"]
    again = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert again["hashed"] == [] and not again["cache_written"]


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["mtime-changed", "mtime-restored"])
def test_cache_cannot_hide_a_same_size_corruption(ckpt, keep_mtime):
    assert verify(ckpt.path, expected_files=ckpt.expected_files)["cache_written"]
    assert verify(ckpt.path, expected_files=ckpt.expected_files)["hashed"] == []
    size = os.path.getsize(ckpt.shard(3))
    flip_bytes(ckpt.shard(3), middle_of_tensor(ckpt.shard(3)), keep_mtime=keep_mtime)
    assert os.path.getsize(ckpt.shard(3)) == size
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["hashed"] == [ckpt.shards[2]]
    assert_only(result, "checksum_mismatch", ckpt.shards[2])
    # The bad digest was not cached as good: it fails again on the next run.
    assert not verify(ckpt.path, expected_files=ckpt.expected_files)["ok"]


def test_cache_not_written_in_check_mode_or_when_disabled(ckpt, tmp_path):
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    result = verify(ckpt.path, expected_files=ckpt.expected_files, write_cache_file=False)
    # Check mode: nothing written, and cache_written predicts what a real run reports.
    assert result["ok"] and result["cache_written"] and not os.path.exists(cache_file)
    real = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert real["cache_written"] and os.path.exists(cache_file)
    assert not verify(ckpt.path, expected_files=ckpt.expected_files, write_cache_file=False)["cache_written"]
    os.unlink(cache_file)
    result = verify(ckpt.path, expected_files=ckpt.expected_files, cache=False)
    assert result["cache_path"] is None and not os.path.exists(cache_file)
    elsewhere = str(tmp_path / "elsewhere.json")
    result = verify(ckpt.path, expected_files=ckpt.expected_files, cache_path=elsewhere)
    assert result["cache_written"] and os.path.exists(elsewhere) and not os.path.exists(cache_file)


def test_cache_of_another_format_is_ignored_and_forged_entries_are_not_used(ckpt):
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    write_file(cache_file, json.dumps({"gauntlet_vllm_verify_cache": 99, "files": []}).encode("utf-8"))
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["ok"] and result["hashed"] == ckpt.shards and result["cache_written"]
    assert result["warnings"] == ["%s: digest cache of another format ignored; it will be rewritten" % cache_file]
    # A forged entry for another stat key is not used.
    with open(cache_file) as handle:
        data = json.load(handle)
    for entry in data["files"].values():
        entry["key"][1] += 1
        entry["sha256"] = "0" * 64
    write_file(cache_file, json.dumps(data).encode("utf-8"))
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["ok"] and result["hashed"] == ckpt.shards


def test_unwritable_cache_is_a_warning(ckpt, tmp_path):
    result = verify(ckpt.path, expected_files=ckpt.expected_files, cache_path=str(tmp_path / "no" / "such" / "dir.json"))
    assert result["ok"] and not result["cache_written"]
    assert "could not write the digest cache" in result["warnings"][0]


def test_racy_files_are_cached_only_after_a_second_hash(ckpt, monkeypatch):
    os.utime(ckpt.shard(1))  # modified just now
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    entries = load_cache(os.path.join(ckpt.path, CACHE_FILE_NAME))[0]
    assert os.path.realpath(ckpt.shard(1)) in entries and len(entries) == 4
    assert result["ok"] and result["bytes_hashed"] == sum(os.path.getsize(ckpt.shard(n)) for n in range(1, 5)) + \
        os.path.getsize(ckpt.shard(1))
    # A fresh file whose second digest differs (written in between) is not cached.
    os.unlink(os.path.join(ckpt.path, CACHE_FILE_NAME))
    os.utime(ckpt.shard(2))
    real_sha = verify_module.sha256_of_handle
    calls = []

    def changing(handle, chunk_size):
        calls.append(1)
        digest, count = real_sha(handle, chunk_size)
        return (digest if len(calls) == 1 else "0" * 64), count
    monkeypatch.setattr(verify_module, "sha256_of_handle", changing)
    result = verify(ckpt.path, expected_files={ckpt.shards[1]: ckpt.expected_files[ckpt.shards[1]]})
    entries = load_cache(os.path.join(ckpt.path, CACHE_FILE_NAME))[0]
    assert os.path.realpath(ckpt.shard(2)) not in entries and len(calls) == 2
    assert result["warnings"] == ["%s: the file changed while it was being hashed; its digest is not cached" % ckpt.shards[1]]


def test_rig_models_pass_with_their_manifest(tmp_path):
    models = os.environ.get("GAUNTLET_MODELS")
    if not models or not os.path.isdir(models):
        pytest.fail("GAUNTLET_MODELS=%r is not a directory: run the tests via scripts/test.sh (or source scripts/lib.sh "
                    "after scripts/rig.sh), which builds the rig's tiny models" % (models,))
    for name in ("tiny-llama", "tiny-qwen3-moe"):
        model = str(tmp_path / name)
        shutil.copytree(os.path.join(models, name), model)
        expected = {}
        with open(os.path.join(model, "MANIFEST.sha256")) as handle:
            for line in handle:
                digest, file_name = line.split()
                expected[file_name] = {"sha256": digest, "size": os.path.getsize(os.path.join(model, file_name))}
        result = verify(model, expected_files=expected)
        assert result["ok"], result["errors"]
        assert len(result["hashed"]) == len(expected) and len(result["present"]) >= 2
        assert result["warnings"] == []
        again = verify(model, expected_files=expected)
        assert again["ok"] and again["hashed"] == [] and len(again["from_cache"]) == len(expected)


def test_rig_lora_adapter_passes_with_its_manifest_and_fails_truncated(tmp_path):
    """The rig's tiny-llama-lora (rig/build_tiny_models.py, written by the safetensors library) verifies against its
    MANIFEST.sha256, and a copy cut short by one byte fails, named."""
    models = os.environ.get("GAUNTLET_MODELS")
    if not models or not os.path.isdir(os.path.join(models or "", "tiny-llama-lora")):
        pytest.fail("GAUNTLET_MODELS=%r holds no tiny-llama-lora: run the tests via scripts/test.sh (or source "
                    "scripts/lib.sh after scripts/rig.sh), which builds the rig's tiny models and adapter" % (models,))
    adapter = str(tmp_path / "tiny-llama-lora")
    shutil.copytree(os.path.join(models, "tiny-llama-lora"), adapter)
    expected = {}
    with open(os.path.join(adapter, "MANIFEST.sha256")) as handle:
        for line in handle:
            digest, file_name = line.split()
            expected[file_name] = {"sha256": digest, "size": os.path.getsize(os.path.join(adapter, file_name))}
    assert sorted(expected) == ["adapter_config.json", ADAPTER]
    result = verify(adapter, expected_files=expected)
    assert result["ok"], result["errors"]
    assert result["expected"] == [ADAPTER] and sorted(result["hashed"]) == sorted(expected) and result["warnings"] == []
    truncate(os.path.join(adapter, ADAPTER), 1)
    result = verify(adapter, expected_files=expected)
    assert problem_names(result, "truncated") == [ADAPTER] and problem_names(result, "size_mismatch") == [ADAPTER]
    assert "%s: truncated" % ADAPTER in failure_message(result)


# --------------------------------------------------------------------------
# The cache path names a file model_verify did not write (issue 14)
# --------------------------------------------------------------------------

def _foreign_files(tmp_path):
    """name -> (how to make it at a path, what the error says)."""
    def too_large(path):
        with open(path, "wb") as handle:
            handle.truncate(64 * 1024 * 1024 + 1)  # sparse
    return {
        "config.json": (lambda path: write_file(path, b'{"hidden_size": 64, "num_hidden_layers": 2}\n'), "no \"gauntlet_vllm_verify_cache\" key"),
        "not-json": (lambda path: write_file(path, b"{broken"), "invalid JSON"),
        "marked-but-broken": (lambda path: write_file(path, b'{"gauntlet_vllm_verify_cache": 1, "files": {'), "invalid JSON"),
        "json-array": (lambda path: write_file(path, b'["gauntlet_vllm_verify_cache"]'), "no \"gauntlet_vllm_verify_cache\" key"),
        "empty": (lambda path: write_file(path, b""), "invalid JSON"),
        "binary": (lambda path: write_file(path, b"\xff\xfe\x00model weights"), "not UTF-8"),
        "deeply-nested": (lambda path: write_file(path, b"[" * 100000 + b"]" * 100000), "nested too deeply"),
        "too-large": (too_large, "larger than 64 MiB"),
        "directory": (os.mkdir, "is not a regular file"),
        "symlink-to-a-cache": (lambda path: os.symlink(str(tmp_path / "real-cache.json"), path), "is a symlink"),
    }


@pytest.mark.parametrize("kind", sorted(_foreign_files("/")))
@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_cache_path_naming_a_file_we_did_not_write_fails_and_leaves_it_alone(ckpt, tmp_path, kind, check_mode):
    verify(ckpt.path, expected_files=ckpt.expected_files, cache_path=str(tmp_path / "real-cache.json"))
    make, says = _foreign_files(tmp_path)[kind]
    target = str(tmp_path / ("cache-" + kind))
    make(target)
    before = os.listdir(target) if os.path.isdir(target) else open(target, "rb").read()
    with pytest.raises(CheckpointError) as err:
        verify(ckpt.path, expected_files=ckpt.expected_files, checksum="true", cache_path=target, write_cache_file=not check_mode)
    message = str(err.value)
    assert message.startswith(target + ": ") and says in message, message
    assert "only replaces a digest cache it wrote itself" in message and "delete that file" in message
    after = os.listdir(target) if os.path.isdir(target) else open(target, "rb").read()
    assert after == before
    assert [name for name in os.listdir(str(tmp_path)) if name.endswith(".tmp")] == []


def test_the_models_own_config_json_as_cache_path_is_not_destroyed(ckpt):
    config = os.path.join(ckpt.path, "config.json")
    write_file(config, b'{"architectures": ["LlamaForCausalLM"]}\n')
    with pytest.raises(CheckpointError, match="config.json: exists and is not a model_verify digest cache"):
        verify(ckpt.path, checksum=True, cache_path=config)
    with open(config, "rb") as handle:
        assert handle.read() == b'{"architectures": ["LlamaForCausalLM"]}\n'


def test_cache_is_marked_atomic_and_mode_0640(ckpt, monkeypatch):
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    old_umask = os.umask(0)
    try:
        assert verify(ckpt.path, expected_files=ckpt.expected_files)["cache_written"]
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(cache_file).st_mode) == 0o640
    with open(cache_file, "rb") as handle:
        written = handle.read()
    assert json.loads(written.decode("utf-8"))["gauntlet_vllm_verify_cache"] == 1
    # A write that fails half-way leaves the old cache whole and no temporary file behind.
    os.utime(ckpt.shard(1), (OLD_MTIME + 5, OLD_MTIME + 5))

    def broken_dump(data, handle, **kwargs):
        handle.write('{"gauntlet_vllm_verify_cache": 1, "files": {')
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(digest_cache.json, "dump", broken_dump)
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert not result["cache_written"] and "could not write the digest cache" in result["warnings"][0]
    with open(cache_file, "rb") as handle:
        assert handle.read() == written
    assert sorted(os.listdir(ckpt.path)) == sorted(ckpt.shards + [INDEX, CACHE_FILE_NAME])


def test_cache_replaced_by_a_foreign_file_while_hashing_is_not_overwritten(ckpt, monkeypatch):
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    real_inspect = verify_module._inspect_file

    def inspect_then_replace(task, hash_mode, chunk_size):
        report = real_inspect(task, hash_mode, chunk_size)
        write_file(cache_file, b'{"mine": true}')
        return report
    monkeypatch.setattr(verify_module, "_inspect_file", inspect_then_replace)
    result = verify(ckpt.path, expected_files=ckpt.expected_files, workers=1)
    assert result["ok"] and not result["cache_written"]
    assert "exists and is not a model_verify digest cache" in result["warnings"][0]
    with open(cache_file, "rb") as handle:
        assert handle.read() == b'{"mine": true}'


def test_cache_written_before_the_marker_existed_is_recognised_as_ours(ckpt):
    cache_file = os.path.join(ckpt.path, CACHE_FILE_NAME)
    legacy = {"version": 1, "algorithm": "sha256", "files": {},
              "comment": "gauntlet.vllm.model_verify digest cache: real path -> [size, mtime_ns, ctime_ns, inode, device] and sha256"}
    write_file(cache_file, json.dumps(legacy).encode("utf-8"))
    result = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert result["ok"] and result["cache_written"]
    assert load_cache(cache_file)[1] is None and len(load_cache(cache_file)[0]) == 4


# --------------------------------------------------------------------------
# Hostile safetensors headers: refused exactly when the safetensors library refuses them
# --------------------------------------------------------------------------

def _raw(header_text, data=b""):
    raw = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(raw)) + raw + data


T4 = '"dtype":"U8","shape":[4],"data_offsets":[0,4]'


def _extra(value):
    return _raw('{"t":{%s,"x":%s}}' % (T4, value), b"\0" * 4)


# (case, file bytes, refused by safetensors 0.8.0's safe_open). Each verdict was taken from the real
# library (test_hostile_headers_agree_with_the_safetensors_library re-checks them wherever it is installed).
HOSTILE = [
    ("good", _raw('{"t":{%s}}' % T4, b"\0" * 4), False),
    ("leading-whitespace", _raw(' \n{"t":{%s}}' % T4, b"\0" * 4), False),
    ("trailing-whitespace-padding", _raw('{}\t\r\n '), False),
    ("padding-with-nul", _raw(b"{}\0\0"), True),
    ("padding-with-form-feed", _raw(b"{}\x0c"), True),
    ("utf8-bom", _raw(b"\xef\xbb\xbf{}"), True),
    ("trailing-garbage", _raw("{}x"), True),
    ("empty-header", _raw(b""), True),
    ("whitespace-only", _raw("   "), True),
    ("top-level-array", _raw("[]"), True),
    ("header-too-large", struct.pack("<Q", 100000001) + b"{}", True),
    ("shorter-than-8-bytes", b"\0" * 7, True),
    ("invalid-utf8", _raw(b'{"\xc0\xaf":1}'), True),
    ("utf8-encoded-surrogate", _raw(b'{"\xed\xa0\x80":{' + T4.encode() + b"}}", b"\0" * 4), True),
    ("unknown-dtype", _raw('{"t":{"dtype":"F2_FUTURE","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("lower-case-dtype", _raw('{"t":{"dtype":"u8","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("dtype-null", _raw('{"t":{"dtype":null,"shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("dtype-as-enum-map", _raw('{"t":{"dtype":{"U8":null},"shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), False),
    ("dtype-as-map-with-value", _raw('{"t":{"dtype":{"U8":[]},"shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("dtype-escaped", _raw('{"t":{"dtype":"U\\u0038","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), False),
    ("F8_E4M3FNUZ", _raw('{"t":{"dtype":"F8_E4M3FNUZ","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), False),
    ("F8_E8M0", _raw('{"t":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), False),
    ("F4", _raw('{"t":{"dtype":"F4","shape":[8],"data_offsets":[0,4]}}', b"\0" * 4), False),
    ("F4-odd-count", _raw('{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"\0" * 2), True),
    ("F6_E2M3", _raw('{"t":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}', b"\0" * 3), False),
    ("C64", _raw('{"t":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}', b"\0" * 8), False),
    ("entry-as-sequence", _raw('{"t":["U8",[4],[0,4]]}', b"\0" * 4), False),
    ("entry-as-short-sequence", _raw('{"t":["U8",[0]]}'), True),
    ("entry-as-long-sequence", _raw('{"t":["U8",[4],[0,4],1]}', b"\0" * 4), True),
    ("entry-null", _raw('{"t":null}'), True),
    ("entry-string", _raw('{"t":"x"}'), True),
    ("missing-shape", _raw('{"t":{"dtype":"U8","data_offsets":[0,0]}}'), True),
    ("shape-null", _raw('{"t":{"dtype":"U8","shape":null,"data_offsets":[0,0]}}'), True),
    ("shape-object", _raw('{"t":{"dtype":"U8","shape":{"0":4},"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("shape-nested", _raw('{"t":{"dtype":"U8","shape":[[4]],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("shape-float", _raw('{"t":{"dtype":"U8","shape":[4.0],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("shape-exponent", _raw('{"t":{"dtype":"U8","shape":[4e0],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("shape-string", _raw('{"t":{"dtype":"U8","shape":["4"],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("shape-bool", _raw('{"t":{"dtype":"U8","shape":[true],"data_offsets":[0,1]}}', b"\0"), True),
    ("shape-minus-zero", _raw('{"t":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}'), True),
    ("shape-negative", _raw('{"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'), True),
    ("shape-2**64", _raw('{"t":{"dtype":"U8","shape":[18446744073709551616,0],"data_offsets":[0,0]}}'), True),
    ("shape-2**64-1-times-0", _raw('{"t":{"dtype":"U8","shape":[18446744073709551615,0],"data_offsets":[0,0]}}'), False),
    ("shape-product-overflows", _raw('{"t":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}'), True),
    ("shape-zero-first-no-overflow", _raw('{"t":{"dtype":"U8","shape":[0,4611686018427387904],"data_offsets":[0,0]}}'), False),
    ("bits-overflow", _raw('{"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}'), True),
    ("offsets-three", _raw('{"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4,4]}}', b"\0" * 4), True),
    ("offsets-float", _raw('{"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4.0]}}', b"\0" * 4), True),
    ("offsets-reversed", _raw('{"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}', b"\0" * 4), True),
    ("offsets-huge", _raw('{"t":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}}'), True),
    ("size-disagrees-with-shape", _raw('{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("gap", _raw('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}}',
                 b"\0" * 4), True),
    ("overlap", _raw('{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}',
                     b"\0" * 4), True),
    ("trailing-bytes", _raw('{"t":{%s}}' % T4, b"\0" * 5), True),
    ("data-short", _raw('{"t":{%s}}' % T4, b"\0" * 3), True),
    ("empty-header-with-data", _raw("{}", b"\0"), True),
    ("zero-size-tensors", _raw('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},'
                               '"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', b"\0" * 4), False),
    ("same-zero-size-offsets", _raw('{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
     False),
    ("duplicate-field", _raw('{"t":{"dtype":"U8","dtype":"U8","shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("duplicate-shape", _raw('{"t":{"dtype":"U8","shape":[4],"shape":[4],"data_offsets":[0,4]}}', b"\0" * 4), True),
    ("duplicate-metadata", _raw('{"__metadata__":{"a":"b"},"__metadata__":{"a":"c"}}'), True),
    ("duplicate-metadata-key", _raw('{"__metadata__":{"a":"b","a":"c"}}'), False),
    ("duplicate-unknown-field", _raw('{"t":{%s,"x":1,"x":2}}' % T4, b"\0" * 4), False),
    ("metadata-null", _raw('{"__metadata__":null}'), False),
    ("metadata-array", _raw('{"__metadata__":[]}'), True),
    ("metadata-int-value", _raw('{"__metadata__":{"a":1}}'), True),
    ("metadata-escaped-key", _raw('{"__metad\\u0061ta__":{"a":1}}'), True),
    ("metadata-lone-surrogate", _raw('{"__metadata__":{"a":"\\udc00"}}'), True),
    ("name-lone-surrogate", _raw('{"t\\ud800":{%s}}' % T4, b"\0" * 4), True),
    ("name-surrogate-pair", _raw('{"\\ud83d\\ude00":{%s}}' % T4, b"\0" * 4), False),
    ("empty-name", _raw('{"":{%s}}' % T4, b"\0" * 4), False),
    ("unknown-field", _extra("1"), False),
    ("unknown-field-NaN", _extra("NaN"), True),
    ("unknown-field-Infinity", _extra("-Infinity"), True),
    ("unknown-field-1e400", _extra("1e400"), True),
    ("unknown-field-1e-400", _extra("1e-400"), False),
    ("unknown-field-30-digits", _extra("1" * 30), False),
    ("unknown-field-5000-digits", _extra("1" * 5000), True),
    ("unknown-field-lone-surrogate", _extra('"\\ud800"'), True),
    ("unknown-field-control-char", _extra('"a\x01"'), True),
    ("unknown-field-bad-escape", _extra('"\\x"'), True),
    ("unknown-field-nested-125", _extra("[" * 125 + "]" * 125), False),
    ("unknown-field-nested-126", _extra("[" * 126 + "]" * 126), True),
    ("unknown-objects-nested-126", _extra('{"a":' * 126 + "1" + "}" * 126), True),
    ("nested-100000", _raw('{"t":' + "[" * 100000 + "]" * 100000 + "}"), True),
    ("unknown-field-duplicate-inside", _extra('{"a":1,"a":2}'), False),
]
# Where model_verify is stricter than the library, and why.
STRICTER = {
    "duplicate-tensor": "a tensor defined twice: the library silently keeps the last definition",
}
HOSTILE += [
    ("duplicate-tensor", _raw('{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"t":{%s}}' % T4, b"\0" * 4), False),
]


def _library_refuses(data, tmp_path):
    from safetensors import safe_open
    path = str(tmp_path / "probe.safetensors")
    with open(path, "wb") as handle:
        handle.write(data)
    try:
        with safe_open(path, "np") as opened:
            list(opened.keys())
    except Exception:  # pylint: disable=broad-except  # the library raises SafetensorError and others
        return True
    return False


@pytest.mark.parametrize("case,data,refused", HOSTILE, ids=[case for case, _data, _refused in HOSTILE])
def test_hostile_headers_are_errors_exactly_when_the_library_refuses_them(case, data, refused):
    report = check_bytes(data)
    ours = bool(report["corrupt"]) or report["truncated"] is not None
    assert ours == (refused or case in STRICTER), report
    for _tensor, message in report["corrupt"]:
        assert len(message) < 2000


def test_hostile_headers_agree_with_the_safetensors_library(tmp_path):
    """The recorded verdicts above are the real library's, wherever safetensors is installed
    (the rig's controller venv does not have it: the recorded verdicts stand in for it there)."""
    try:
        import safetensors  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        assert len(HOSTILE) > 80 and all(isinstance(refused, bool) for _case, _data, refused in HOSTILE)
        return
    disagree = [case for case, data, refused in HOSTILE if _library_refuses(data, tmp_path) != refused]
    assert disagree == []


def test_hostile_header_in_a_checkpoint_is_reported_not_raised(ckpt):
    rewrite_header_raw(ckpt.shard(1), b'{"t":' + b"[" * 100000 + b"]" * 100000 + b"}")
    result = verify(ckpt.path)
    assert problem_names(result, "corrupt") == [ckpt.shards[0]]
    assert "nested too deeply" in result["corrupt"][0]["reason"]


def rewrite_header_raw(path, raw):
    with open(path, "rb") as handle:
        data = handle.read()
    (length,) = struct.unpack("<Q", data[:8])
    write_file(path, struct.pack("<Q", len(raw)) + raw + data[8 + length:])


# --------------------------------------------------------------------------
# Hostile names and sizes: errors naming the file, never a traceback
# --------------------------------------------------------------------------

def test_shard_numbers_beyond_int_limits_are_numbering_problems(ckpt):
    long_name = "model-%s1-of-%s.safetensors" % ("0" * 39, "9" * 40)
    assert shard_key(long_name) == ("plain", long_name.lower())
    messages = check_numbering([long_name, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
    assert messages == ["%s: the shard number or total has more than 32 digits (not a shard name)" % long_name]
    # Python's int() refuses over 4300 digits: a 5000-digit shard number is refused as a name, unopened.
    huge = "model-%s1-of-%s.safetensors" % ("0" * 4999, "9" * 5000)
    assert shard_key(huge) == ("plain", huge.lower()) and check_numbering([huge]) == []
    index = {"weight_map": {"a": huge, "b": ckpt.shards[0], "c": long_name}}
    write_file(os.path.join(ckpt.path, INDEX), json.dumps(index).encode("utf-8"))
    result = verify(ckpt.path, checksum=False)
    assert not result["ok"] and any("more than 32 digits" in message for message in result["numbering"])
    assert result["unsafe"] == [{"file": huge, "reason": "file name is %d characters long (longer than any path can be)" % len(huge)}]


def test_padded_total_with_many_absent_shards_stays_small():
    name = "model-%s1-of-%s.safetensors" % ("0" * 30, "0" * 25 + "1000000")
    messages = check_numbering([name])
    assert len(messages) == 1 and "and 999979 more" in messages[0] and len(messages[0]) < 4000


@pytest.mark.parametrize("size", ["9" * 5000, "\u00b2", "1\u0661"])
def test_expected_size_strings_that_int_would_choke_on(size):
    with pytest.raises(CheckpointError, match=r"expected_files\[\"a\"\]\.size: must be a non-negative integer"):
        parse_expected_files({"a": {"size": size}})


@pytest.mark.parametrize("content,says", [
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"weight_map": {"a": "x.safetensors"}, "n": ' + b"1" * 5000 + b"}", "invalid JSON"),
    (b'{"weight_map": {"a": "\xff"}}', "not UTF-8"),
])
def test_hostile_index_is_an_error_naming_it(tmp_path, content, says):
    path = str(tmp_path / INDEX)
    write_file(path, content)
    with pytest.raises(CheckpointError) as err:
        load_weight_map(path)
    assert str(err.value).startswith(path + ": ") and says in str(err.value)


def test_index_larger_than_its_cap_is_not_read_whole(tmp_path, monkeypatch):
    path = str(tmp_path / INDEX)
    with open(path, "wb") as handle:
        handle.truncate(shards.MAX_INDEX_BYTES + 1)  # sparse: nothing written
    reads = []
    real_open = safe_io.open_regular

    def counting_open(file, error):
        handle = real_open(file, error)
        if file == path:
            handle = _ReadSpy(handle, handle.read, reads)
        return handle
    monkeypatch.setattr(safe_io, "open_regular", counting_open)
    with pytest.raises(CheckpointError, match="larger than 64 MiB, the most this file may hold"):
        load_weight_map(path)
    assert reads and all(size is not None and 0 < size <= shards.MAX_INDEX_BYTES + 1 for size in reads)


class _ReadSpy(object):
    def __init__(self, handle, real_read, reads):
        self._handle, self._real_read, self._reads = handle, real_read, reads

    def read(self, size=None):
        self._reads.append(size)
        return self._real_read(size) if size is not None else self._real_read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


# --------------------------------------------------------------------------
# Order of the checks (verify_checkpoint's steps): with two problems at once, the earlier step names its own
# --------------------------------------------------------------------------

@pytest.mark.parametrize("problems, says", [
    (("path", "checksum"), "no such directory"),
    (("checksum", "expected_files"), "checksum: must be one of auto, true, false, got 'maybe'"),
    (("expected_files", "workers"), "expected_files: must be a dict"),
    (("workers", "index_file"), "workers: must be a positive integer, got 0"),
    (("index_file", "cache_path"), "other.index.json: index file not found"),
    (("no_weights", "cache_path"), "neither model.safetensors.index.json nor model.safetensors found"),
])
def test_the_first_failing_check_is_the_one_reported(ckpt, tmp_path, problems, says):
    foreign = tmp_path / "foreign.json"
    foreign.write_bytes(b'{"mine": true}')
    bad = {
        "path": {"path": str(tmp_path / "nowhere")},
        "checksum": {"checksum": "maybe"},
        "expected_files": {"expected_files": ["model-00001-of-00004.safetensors"]},
        "workers": {"workers": 0},
        "index_file": {"index_file": "other.index.json"},
        "no_weights": {"path": str(tmp_path)},
        "cache_path": {"cache_path": str(foreign)},
    }
    kwargs = {"path": ckpt.path}
    for problem in problems:
        kwargs.update(bad[problem])
    with pytest.raises(CheckpointError) as exc:
        verify(**kwargs)
    assert says in str(exc.value)
    # The second problem alone is an error too (so the first one really hid it).
    alone = {"path": ckpt.path}
    alone.update(bad[problems[1]])
    with pytest.raises(CheckpointError):
        verify(**alone)


def test_errors_are_listed_by_kind_in_a_fixed_order(ckpt):
    stale = os.path.join(ckpt.path, "model-00009-of-00009.safetensors")
    shutil.copy2(ckpt.shard(1), stale)
    os.unlink(ckpt.shard(3))
    truncate(ckpt.shard(2), 100)
    flip_bytes(ckpt.shard(4), middle_of_tensor(ckpt.shard(4)))
    result = verify(ckpt.path, expected_files=ckpt.expected_files, cache=False)
    size = ckpt.expected_files[ckpt.shards[1]]["size"]
    digest = ckpt.expected_files[ckpt.shards[3]]["sha256"]
    assert [error.split(": ")[:2] for error in result["errors"]] == [
        [ckpt.shards[2], "missing"],
        [ckpt.shards[1], "truncated"],
        [ckpt.shards[1], "size %d bytes, expected %d" % (size - 100, size)],
        [ckpt.shards[3], "sha256 %s does not match the expected %s" % (result["sha256"][ckpt.shards[3]], digest)],
        ["model-00009-of-00009.safetensors", "unexpected shard on disk, not named by the index (stale download?)"],
    ]
