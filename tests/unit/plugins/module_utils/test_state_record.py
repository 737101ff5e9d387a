# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's "already done?" records (module_utils/io/state_record.py): one format, a key that matches or
not, a foreign file that is refused and left alone, an older record of ours that matches nothing and is
replaced, and a write that happens whole (through a temporary file) or not at all."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.io import state_record
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.state_record import (
    StateRecordError,
    read_record,
    write_record,
)

KEY = {"repo_id": "gauntlet/tiny-llama", "revision": "main", "allow_patterns": []}
CONTENT = {"commit": "a" * 40, "result": {"path": "/opt/models/tiny", "files": {"config.json": {"size": 12}}}}
NOW = "2026-12-03T14:24:10Z"


def _now():
    return NOW


def _write(path, generator="model_fetch", key=None, content=None, **kwargs):
    return write_record(str(path), generator, KEY if key is None else key, CONTENT if content is None else content,
                        now=kwargs.pop("now", _now), **kwargs)


def _tree(root):
    return sorted(os.path.join(folder, name) for folder, dirs, files in os.walk(str(root)) for name in dirs + files)


# --------------------------------------------------------------------------
# Format
# --------------------------------------------------------------------------

def test_the_record_is_sorted_indented_json_with_a_trailing_newline(tmp_path):
    path = tmp_path / "record.json"
    result = _write(path)
    assert result["changed"] is True
    text = path.read_text()
    expected = {"generator": "gauntlet.vllm.model_fetch", "format": 1, "key": KEY, "recorded_at": NOW,
                "content": CONTENT}
    assert text == json.dumps(expected, indent=2, sort_keys=True) + "\n"
    assert result["record"] == expected and result["exists"] is True and result["matches"] is True
    assert result["content"] == CONTENT and result["path"] == str(path)


def test_recorded_at_is_utc_iso_8601_to_the_second():
    stamp = state_record.utc_now()
    assert len(stamp) == 20 and stamp.endswith("Z") and stamp[10] == "T"


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------

def test_no_file_reads_as_no_record(tmp_path):
    result = read_record(str(tmp_path / "none.json"), "model_fetch", KEY)
    assert result == {"path": str(tmp_path / "none.json"), "exists": False, "record": None, "matches": False,
                      "content": {}}


def test_a_record_matches_its_own_key_only(tmp_path):
    path = tmp_path / "record.json"
    _write(path)
    same = read_record(str(path), "model_fetch", dict(KEY))
    assert same["exists"] and same["matches"] and same["content"] == CONTENT
    other = read_record(str(path), "model_fetch", dict(KEY, revision="v2"))
    assert other["exists"] and not other["matches"]
    assert other["content"] == CONTENT  # the content is returned whenever a record exists
    assert other["record"]["key"] == KEY


def test_a_record_of_another_writer_of_the_collection_does_not_match(tmp_path):
    path = tmp_path / "record.json"
    _write(path, generator="vllm_bench")
    result = read_record(str(path), "model_fetch", KEY)
    assert result["exists"] and not result["matches"]


@pytest.mark.parametrize("legacy", [
    # model_fetch 0.2: request, commit, result.
    {"generator": "gauntlet.vllm.model_fetch", "request": KEY, "commit": "a" * 40, "result": {}},
    # vllm_preflight 0.2: key, recorded_at, allreduce_probe (a key equal to the one asked).
    {"generator": "gauntlet.vllm.model_fetch", "key": KEY, "recorded_at": "2026-12-01T00:00:00",
     "allreduce_probe": {"backend": "nccl"}},
    # A record of ours in a format that is not this one.
    {"generator": "gauntlet.vllm.model_fetch", "format": 2, "key": KEY, "content": CONTENT},
    {"generator": "gauntlet.vllm.model_fetch", "format": 1, "key": KEY, "content": ["not", "a", "dict"]},
])
def test_an_older_record_of_ours_matches_nothing_and_is_replaced(tmp_path, legacy):
    path = tmp_path / "record.json"
    path.write_text(json.dumps(legacy))
    read = read_record(str(path), "model_fetch", KEY)
    assert read == {"path": str(path), "exists": True, "record": legacy, "matches": False, "content": {}}
    written = _write(path)
    assert written["changed"] is True
    assert json.loads(path.read_text())["content"] == CONTENT


@pytest.mark.parametrize("text, why", [
    ("{}", "no generator key"),
    ('{"request": {}, "mine": true}\n', "no generator key"),
    ('{"generator": "someone.else", "format": 1, "key": {}, "content": {}}', 'its generator is "someone.else"'),
    ('{"generator": 7}', "its generator is 7"),
    ("[1, 2]", "its top level is array, not a JSON object"),
    ("not json", "invalid JSON: "),
    ("[" * 100000 + "]" * 100000, "invalid JSON: nested too deeply"),
    (b"\xff\xfe".decode("latin-1"), "not UTF-8 text"),
])
def test_a_foreign_file_is_refused_naming_it_and_left_alone(tmp_path, text, why):
    path = tmp_path / "record.json"
    path.write_bytes(text.encode("latin-1") if why == "not UTF-8 text" else text.encode("utf-8"))
    before = path.read_bytes()
    for attempt in (lambda: read_record(str(path), "model_fetch", KEY), lambda: _write(path),
                    lambda: _write(path, check_mode=True)):
        with pytest.raises(StateRecordError) as failed:
            attempt()
        message = str(failed.value)
        assert message.startswith("%s exists but was not written by gauntlet.vllm.model_fetch (" % path)
        assert why in message
        assert message.endswith("; it is left alone. Move it away, or choose another path.")
    assert path.read_bytes() == before
    assert _tree(tmp_path) == [str(path)]


def test_a_huge_file_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(state_record, "MAX_RECORD_BYTES", 1024)
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"generator": "gauntlet.vllm.model_fetch", "pad": "x" * 2000}))
    with pytest.raises(StateRecordError) as failed:
        read_record(str(path), "model_fetch", KEY)
    assert "larger than 1 KiB" in str(failed.value) and "it is left alone" in str(failed.value)


@pytest.mark.parametrize("kind", ["folder", "symlink"])
def test_a_folder_or_a_symlink_at_the_path_is_refused(tmp_path, kind):
    path = tmp_path / "record.json"
    if kind == "folder":
        path.mkdir()
    else:
        target = tmp_path / "elsewhere.json"
        _write(target)
        path.symlink_to(target)
    with pytest.raises(StateRecordError) as failed:
        _write(path, content={"other": 1})
    why = "it is not a regular file" if kind == "folder" else "it is a symlink"
    assert str(failed.value).startswith("%s exists but was not written by gauntlet.vllm.model_fetch (%s); " % (path, why))
    assert path.is_dir() if kind == "folder" else path.is_symlink()


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------

def test_an_equal_record_is_left_untouched(tmp_path):
    path = tmp_path / "record.json"
    _write(path)
    before = path.read_bytes()
    again = _write(path, key=dict(KEY), content=json.loads(json.dumps(CONTENT)), now=lambda: "2030-01-01T00:00:00Z")
    assert again["changed"] is False and again["matches"] is True
    assert path.read_bytes() == before  # recorded_at kept
    assert again["record"]["recorded_at"] == NOW


@pytest.mark.parametrize("change", [{"key": dict(KEY, revision="v2")}, {"content": dict(CONTENT, commit="b" * 40)},
                                    {"generator": "vllm_bench"}])
def test_another_key_content_or_writer_rewrites_the_record(tmp_path, change):
    path = tmp_path / "record.json"
    _write(path)
    result = _write(path, now=lambda: "2030-01-01T00:00:00Z", **change)
    assert result["changed"] is True and result["matches"] is True
    stored = json.loads(path.read_text())
    assert stored["recorded_at"] == "2030-01-01T00:00:00Z"
    assert stored["key"] == change.get("key", KEY) and stored["content"] == change.get("content", CONTENT)
    assert stored["generator"] == "gauntlet.vllm." + change.get("generator", "model_fetch")


def test_check_mode_predicts_changed_and_writes_nothing(tmp_path):
    path = tmp_path / "state" / "record.json"
    predicted = _write(path, check_mode=True)
    assert predicted["changed"] is True and predicted["record"]["content"] == CONTENT
    assert _tree(tmp_path) == []  # not even the folder
    _write(path)
    before = path.read_bytes()
    assert _write(path, check_mode=True)["changed"] is False
    assert _write(path, check_mode=True, content={"other": 1})["changed"] is True
    assert path.read_bytes() == before


def test_the_write_goes_through_a_temporary_file_beside_the_record(tmp_path):
    path = tmp_path / "record.json"
    moves = []

    def move(source, destination):
        moves.append((source, destination, open(source).read()))
        os.replace(source, destination)

    _write(path, move=move)
    [(source, destination, text)] = moves
    assert os.path.dirname(source) == str(tmp_path) and os.path.basename(source).startswith(".record.json.")
    assert destination == str(path) and text == path.read_text()


def test_a_failed_move_leaves_the_old_record_and_no_temporary_file(tmp_path):
    path = tmp_path / "record.json"
    _write(path)
    before = path.read_bytes()

    def move(source, destination):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        _write(path, content={"other": 1}, move=move)
    assert path.read_bytes() == before
    assert _tree(tmp_path) == [str(path)]


def test_missing_folders_are_created_0750(tmp_path):
    old = os.umask(0o077)
    try:
        path = tmp_path / "var" / "lib" / "gauntlet-vllm" / "record.json"
        _write(path)
    finally:
        os.umask(old)
    for folder in (tmp_path / "var", tmp_path / "var" / "lib", tmp_path / "var" / "lib" / "gauntlet-vllm"):
        assert stat.S_IMODE(os.stat(str(folder)).st_mode) == 0o750
    assert json.loads(path.read_text())["content"] == CONTENT


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("key", {"when": object()}, "key: not JSON-serialisable: "),
    ("content", {"ratio": float("nan")}, "content: not JSON-serialisable: "),
    ("content", ["a"], "content: must be a dict, got list"),
])
def test_key_and_content_must_be_json(tmp_path, field, value, message):
    path = tmp_path / "record.json"
    with pytest.raises(StateRecordError) as failed:
        _write(path, **{field: value})
    assert str(failed.value).startswith(message)
    assert not path.exists()


def test_a_key_that_json_changes_still_matches_after_the_round_trip(tmp_path):
    path = tmp_path / "record.json"
    _write(path, key={"patterns": ("*.json", "*.safetensors")})
    assert read_record(str(path), "model_fetch", {"patterns": ["*.json", "*.safetensors"]})["matches"] is True
    assert _write(path, key={"patterns": ("*.json", "*.safetensors")})["changed"] is False


@pytest.mark.parametrize("generator", ["", "Model-Fetch", "gauntlet.vllm.model_fetch", "../x", None])
def test_the_generator_must_be_a_module_or_role_name(tmp_path, generator):
    with pytest.raises(StateRecordError) as failed:
        read_record(str(tmp_path / "record.json"), generator, KEY)
    assert str(failed.value).startswith("generator: %r is not the name of a module or role" % (generator,))


def test_an_unreadable_record_is_reported_as_unreadable_not_as_foreign(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    _write(path)
    monkeypatch.setattr(state_record.os, "access", lambda where, how: False)
    with pytest.raises(StateRecordError) as failed:
        read_record(str(path), "model_fetch", KEY)
    assert str(failed.value) == "%s: cannot read the record: permission denied" % path
