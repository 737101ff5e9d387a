# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.model_verify end to end, through run_module: real checkpoints on disk (the rig's
tiny models, copied, and generated ones), each corruption made for real, each bad file named in the
right result list and in the failure message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil

import pytest

from ansible_collections.gauntlet.vllm.plugins.modules import model_verify
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_checkpoint import (
    INDEX,
    build_checkpoint,
    clone_checkpoint,
    encode_safetensors,
    flip_bytes,
    garble_header_json,
    middle_of_tensor,
    rewrite_header,
    set_header_length,
    truncate,
    write_file,
)

CACHE = ".gauntlet-verify-cache.json"
PROBLEM_KEYS = ("missing", "misnamed", "numbering", "unsafe", "unexpected", "truncated", "corrupt",
                "tensors_missing", "size_mismatch", "checksum_mismatch")
RESULT_KEYS = PROBLEM_KEYS + ("ok", "directory", "index", "expected", "present", "sha256", "hashed", "from_cache",
                              "bytes_total", "bytes_hashed", "checksum", "cache_path", "cache_written", "errors",
                              "elapsed_s", "changed")


def rig_model(tmp_path, name):
    """A copy of one of the rig's tiny models (scripts/rig.sh builds them; scripts/lib.sh names the directory)."""
    models = os.environ.get("GAUNTLET_MODELS")
    if not models or not os.path.isdir(os.path.join(models, name)):
        pytest.fail("GAUNTLET_MODELS=%r does not hold %s: run the tests via scripts/test.sh (or source scripts/lib.sh "
                    "after scripts/rig.sh), which builds the rig's tiny models" % (models, name))
    copy = str(tmp_path / name)
    shutil.copytree(os.path.join(models, name), copy)
    return copy


def manifest(model):
    """expected_files from the tiny model's MANIFEST.sha256 (sizes from the pristine copy)."""
    expected = {}
    with open(os.path.join(model, "MANIFEST.sha256")) as handle:
        for line in handle:
            digest, name = line.split()
            expected[name] = {"sha256": digest, "size": os.path.getsize(os.path.join(model, name))}
    return expected


def shards_of(model):
    with open(os.path.join(model, INDEX)) as handle:
        return sorted(set(json.load(handle)["weight_map"].values()))


@pytest.fixture
def verify(run_module):
    def run(path, **args):
        args["path"] = str(path)
        return run_module(model_verify.main, args)
    return run


@pytest.fixture
def ckpt(tmp_path):
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


def names(result, key):
    return [entry["file"] if isinstance(entry, dict) else entry for entry in result[key]]


def assert_fails_on(result, failed, key, name):
    """The task failed, ``name`` is in ``result[key]`` and in the message, and no other problem is reported."""
    assert failed, result
    # changed reports the one write model_verify may make: its digest cache.
    assert result["ok"] is False and result["changed"] is result["cache_written"]
    assert name in names(result, key), result[key]
    assert name in result["msg"]
    others = dict((other, result[other]) for other in PROBLEM_KEYS if other != key and result[other])
    assert not others
    assert set(RESULT_KEYS) <= set(result)


# --------------------------------------------------------------------------
# Good checkpoints
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3-moe"])
def test_rig_tiny_models_pass(verify, tmp_path, name):
    model = rig_model(tmp_path, name)
    result, failed = verify(model, expected_files=manifest(model))
    assert not failed, result.get("msg")
    assert result["ok"] is True and result["changed"] is True and result["cache_written"] is True
    assert result["present"] == result["expected"] == shards_of(model)
    again, failed = verify(model, expected_files=manifest(model))
    assert not failed and again["changed"] is False and again["hashed"] == []
    assert len(result["hashed"]) == len(manifest(model))
    assert set(RESULT_KEYS) <= set(result)
    json.dumps(result)


def test_generated_64_shards_pass(verify, ckpt64, tmp_path):
    result, failed = verify(ckpt64.path, expected_files=ckpt64.expected_files, cache_path=str(tmp_path / "cache.json"))
    assert not failed, result.get("msg")
    assert len(result["present"]) == 64 and len(result["hashed"]) == 64 and result["elapsed_s"] < 30
    again, failed = verify(ckpt64.path, expected_files=ckpt64.expected_files, cache_path=str(tmp_path / "cache.json"))
    assert not failed and again["hashed"] == [] and len(again["from_cache"]) == 64


def test_single_file_without_index(verify, tmp_path):
    single = build_checkpoint(tmp_path / "single", shards=1, name_format="model.safetensors", index=False)
    result, failed = verify(single.path, checksum=True)
    assert not failed, result.get("msg")
    assert result["index"] is None and result["expected"] == ["model.safetensors"]
    assert result["sha256"] == {"model.safetensors": single.expected_files["model.safetensors"]["sha256"]}
    rewrite_header(single.shard(1), lambda header: header.pop("model.layers.1.w1.weight"))
    result, failed = verify(single.path)
    assert_fails_on(result, failed, "corrupt", "model.safetensors")


# --------------------------------------------------------------------------
# One problem at a time
# --------------------------------------------------------------------------

def test_missing_shard(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-qwen3-moe")
    os.unlink(os.path.join(model, "model-00004-of-00005.safetensors"))
    result, failed = verify(model)
    assert_fails_on(result, failed, "missing", "model-00004-of-00005.safetensors")


def test_misnamed_zero_padding(verify, clone64):
    clone = clone64
    clone.write_index(dict((tensor, "model-00001-of-000064.safetensors" if name == "model-00001-of-00064.safetensors" else name)
                           for tensor, name in clone.weight_map.items()))
    result, failed = verify(clone.path)
    assert failed and result["ok"] is False
    assert result["misnamed"] == [{"expected": "model-00001-of-000064.safetensors", "found": "model-00001-of-00064.safetensors"}]
    assert result["missing"] == [] and result["unexpected"] == [] and result["numbering"] == []
    assert "model-00001-of-000064.safetensors: missing, but model-00001-of-00064.safetensors is on disk" in result["msg"]


def test_numbering_gap(verify, clone64):
    clone = clone64
    os.unlink(clone.shard(40))
    clone.write_index(dict((tensor, name) for tensor, name in clone.weight_map.items() if name != clone.shards[39]))
    result, failed = verify(clone.path)
    assert failed and result["missing"] == [] and result["unexpected"] == []
    assert result["numbering"] == ["model-00040-of-00064.safetensors: the index names no shard 40 of 64 (it names 63 shards)"]
    assert "model-00040-of-00064.safetensors: the index names no shard 40 of 64" in result["msg"]


def test_numbering_wrong_total(verify, tmp_path):
    # Five shards whose names all say "of 00004".
    odd = build_checkpoint(tmp_path / "odd", shards=5, name_format="model-{n:05d}-of-00004.safetensors")
    result, failed = verify(odd.path)
    assert failed
    assert result["numbering"] == ["model-00005-of-00004.safetensors: shard number 5 is outside 1..4"]
    assert "model-00005-of-00004.safetensors: shard number 5 is outside 1..4" in result["msg"]


def test_truncated_shard(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-llama")
    truncate(os.path.join(model, "model-00002-of-00003.safetensors"), 4096)
    result, failed = verify(model)
    assert_fails_on(result, failed, "truncated", "model-00002-of-00003.safetensors")
    assert "(4096 bytes missing)" in result["msg"]


def test_truncated_shard_with_expected_files(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-llama")
    expected = manifest(model)
    truncate(os.path.join(model, "model-00002-of-00003.safetensors"), 4096)
    result, failed = verify(model, expected_files=expected)
    assert failed
    assert names(result, "truncated") == names(result, "size_mismatch") == ["model-00002-of-00003.safetensors"]
    # A file of the wrong size is not hashed: it cannot match.
    assert "model-00002-of-00003.safetensors" not in result["hashed"] and result["checksum_mismatch"] == []


def test_garbage_header_length(verify, ckpt):
    set_header_length(ckpt.shard(2), 0xDEADBEEFCAFE)
    result, failed = verify(ckpt.path)
    assert_fails_on(result, failed, "corrupt", ckpt.shards[1])
    assert "header length 244837814094590 is implausible" in result["msg"]


def test_header_invalid_json(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-qwen3-moe")
    garble_header_json(os.path.join(model, "model-00003-of-00005.safetensors"))
    result, failed = verify(model)
    assert_fails_on(result, failed, "corrupt", "model-00003-of-00005.safetensors")
    assert "model-00003-of-00005.safetensors: corrupt: header is not" in result["msg"]


def test_offsets_inconsistent_with_dtype_and_shape(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-llama")
    shard = os.path.join(model, "model-00001-of-00003.safetensors")

    def change(header):
        header["model.embed_tokens.weight"]["shape"][0] -= 1
    rewrite_header(shard, change)
    result, failed = verify(model)
    assert_fails_on(result, failed, "corrupt", "model-00001-of-00003.safetensors")
    assert result["corrupt"][0]["tensor"] == "model.embed_tokens.weight"
    assert 'tensor "model.embed_tokens.weight": data_offsets' in result["msg"]


def test_tensor_in_index_missing_from_shard(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-qwen3-moe")
    with open(os.path.join(model, INDEX)) as handle:
        weight_map = json.load(handle)["weight_map"]
    tensor = sorted(t for t, shard in weight_map.items() if shard == "model-00002-of-00005.safetensors")[0]
    weight_map["model.layers.9.never.written"] = "model-00002-of-00005.safetensors"
    write_file(os.path.join(model, INDEX), json.dumps({"weight_map": weight_map}).encode("utf-8"))
    result, failed = verify(model)
    assert_fails_on(result, failed, "tensors_missing", "model-00002-of-00005.safetensors")
    assert result["tensors_missing"][0]["tensors"] == ["model.layers.9.never.written"]
    assert "model.layers.9.never.written" in result["msg"]
    assert tensor not in result["msg"]


def test_stale_extra_shard(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-llama")
    shutil.copy2(os.path.join(model, "model-00003-of-00003.safetensors"), os.path.join(model, "model-00003-of-00004.safetensors"))
    result, failed = verify(model)
    assert_fails_on(result, failed, "unexpected", "model-00003-of-00004.safetensors")


def test_same_size_corruption_caught_by_checksum(verify, tmp_path):
    model = rig_model(tmp_path, "tiny-qwen3-moe")
    expected = manifest(model)
    shard = os.path.join(model, "model-00005-of-00005.safetensors")
    size = os.path.getsize(shard)
    flip_bytes(shard, middle_of_tensor(shard))
    assert os.path.getsize(shard) == size
    result, failed = verify(model, expected_files=expected)
    assert_fails_on(result, failed, "checksum_mismatch", "model-00005-of-00005.safetensors")
    assert result["checksum_mismatch"][0]["expected"] == expected["model-00005-of-00005.safetensors"]["sha256"]
    with open(shard, "rb") as handle:
        assert result["checksum_mismatch"][0]["actual"] == hashlib.sha256(handle.read()).hexdigest()
    # Structure alone cannot see it.
    result, failed = verify(model, checksum="false")
    assert not failed and result["ok"]


def test_size_mismatch(verify, ckpt):
    expected = dict(ckpt.expected_files)
    name = ckpt.shards[0]
    expected[name] = {"size": expected[name]["size"] + 1, "sha256": expected[name]["sha256"]}
    result, failed = verify(ckpt.path, expected_files=expected)
    assert_fails_on(result, failed, "size_mismatch", name)
    assert result["size_mismatch"] == [{"file": name, "expected": expected[name]["size"], "actual": expected[name]["size"] - 1}]


def test_escaping_and_absolute_entries_rejected(verify, ckpt, tmp_path):
    outside = build_checkpoint(tmp_path / "outside", shards=1)
    write_file(str(tmp_path / "escape.safetensors"), b"not even a header")
    weight_map = dict(ckpt.weight_map)
    weight_map["x.weight"] = "../escape.safetensors"
    weight_map["y.weight"] = outside.shard(1)
    ckpt.write_index(weight_map)
    result, failed = verify(ckpt.path, checksum="true")
    assert failed
    assert sorted(names(result, "unsafe")) == sorted(["../escape.safetensors", outside.shard(1)])
    assert "../escape.safetensors: unsafe, not opened: '..' climbs out of the model directory" in result["msg"]
    assert "%s: unsafe, not opened: absolute path" % outside.shard(1) in result["msg"]
    # Neither was read: no digest, no header check, nothing else wrong.
    assert set(result["sha256"]) == set(ckpt.shards)
    assert not any(result[key] for key in PROBLEM_KEYS if key != "unsafe")


# --------------------------------------------------------------------------
# Cache, check mode, fail_on_error, bad input
# --------------------------------------------------------------------------

def test_cache_rehashes_only_changed_files(verify, ckpt):
    first, failed = verify(ckpt.path, expected_files=ckpt.expected_files)
    # Writing the digest cache is a change on the host; reading it again is not.
    assert not failed and first["hashed"] == ckpt.shards and first["cache_written"] and first["changed"] is True
    second, failed = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert not failed and second["hashed"] == [] and second["from_cache"] == ckpt.shards and second["changed"] is False
    flip_bytes(ckpt.shard(4), middle_of_tensor(ckpt.shard(4)), keep_mtime=True)
    third, failed = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert third["hashed"] == [ckpt.shards[3]] and third["from_cache"] == ckpt.shards[:3]
    assert_fails_on(third, failed, "checksum_mismatch", ckpt.shards[3])


def test_check_mode_does_not_write_the_cache_but_predicts_changed(verify, ckpt):
    result, failed = verify(ckpt.path, expected_files=ckpt.expected_files, _ansible_check_mode=True)
    assert not failed and result["ok"] and result["changed"] is True and result["cache_written"] is True
    assert not os.path.exists(os.path.join(ckpt.path, CACHE))
    normal, failed = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert normal["changed"] is True and normal["cache_written"] and os.path.exists(os.path.join(ckpt.path, CACHE))
    # A check-mode run uses the cache that is there, and predicts no change, as a real run reports.
    result, failed = verify(ckpt.path, expected_files=ckpt.expected_files, _ansible_check_mode=True)
    assert result["from_cache"] == ckpt.shards and result["hashed"] == [] and result["changed"] is False
    again, failed = verify(ckpt.path, expected_files=ckpt.expected_files)
    assert again["changed"] is False


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_cache_path_naming_the_models_config_json_fails_and_keeps_it(verify, ckpt, check_mode):
    config = os.path.join(ckpt.path, "config.json")
    write_file(config, b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n')
    result, failed = verify(ckpt.path, checksum="true", cache_path=config, _ansible_check_mode=check_mode)
    assert failed and result.get("changed", False) is False
    assert result["msg"].startswith(config + ": exists and is not a model_verify digest cache")
    assert "delete that file if it is not needed, or give cache_path a file of its own" in result["msg"]
    with open(config, "rb") as handle:
        assert handle.read() == b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n'


def test_unknown_dtype_fails_the_task(verify, ckpt):
    rewrite_header(ckpt.shard(2), lambda header: header[next(name for name in header if name != "__metadata__")]
                   .update(dtype="F2_FUTURE"))
    result, failed = verify(ckpt.path)
    assert failed and [entry["file"] for entry in result["corrupt"]] == [ckpt.shards[1]]
    assert 'dtype "F2_FUTURE" is not a safetensors dtype' in result["msg"]


def test_fail_on_error_false(verify, ckpt):
    os.unlink(ckpt.shard(1))
    result, failed = verify(ckpt.path, fail_on_error=False)
    assert not failed
    assert result["ok"] is False and result["missing"] == [ckpt.shards[0]]
    assert result["errors"] == ["%s: missing" % ckpt.shards[0]]


def test_several_problems_in_one_message(verify, ckpt):
    os.unlink(ckpt.shard(1))
    truncate(ckpt.shard(2), 3)
    write_file(os.path.join(ckpt.path, "model-00005-of-00005.safetensors"), encode_safetensors([("x", "F32", [1])]))
    result, failed = verify(ckpt.path)
    assert failed
    assert result["msg"].startswith("%s: checkpoint verification failed, 3 problems: " % ckpt.path)
    for name in (ckpt.shards[0], ckpt.shards[1], "model-00005-of-00005.safetensors"):
        assert name in result["msg"]


@pytest.mark.parametrize("setup,message", [
    (None, "no such directory"),
    (b"{oops", "model.safetensors.index.json: invalid JSON"),
    (b'{"metadata": {"total_size": 1}}', "model.safetensors.index.json: missing required field 'weight_map'"),
])
def test_bad_input_fails_naming_the_file(verify, tmp_path, setup, message):
    model = tmp_path / "model"
    if setup is not None:
        model.mkdir()
        (model / INDEX).write_bytes(setup)
    result, failed = verify(model)
    assert failed and message in result["msg"] and str(model) in result["msg"]


def test_bad_expected_files_names_the_field(verify, ckpt):
    result, failed = verify(ckpt.path, expected_files={ckpt.shards[0]: {"sha256": "xyz"}})
    assert failed
    assert result["msg"] == 'expected_files["%s"].sha256: must be 64 hexadecimal digits, got "xyz"' % ckpt.shards[0]
