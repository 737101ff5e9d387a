# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils.planning.model_space: bytes still to transfer against the free bytes of the destination's file system."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import model_space


def fake_free(monkeypatch, free):
    asked = []

    def fake(path):
        asked.append(path)
        return free
    monkeypatch.setattr(model_space, "free_bytes", fake)
    return asked


def test_a_missing_destination_asks_its_nearest_existing_ancestor(tmp_path, monkeypatch):
    asked = fake_free(monkeypatch, 10 ** 9)
    result = model_space.check_space(str(tmp_path / "a" / "b"), {"x.safetensors": 100, "config.json": {"size": 5}})
    assert asked == [str(tmp_path)]
    assert result["checked_path"] == str(tmp_path)
    assert result["needed_bytes"] == 105 and result["fits"]


def test_complete_files_are_not_counted_and_partial_ones_count_in_full(tmp_path, monkeypatch):
    fake_free(monkeypatch, 10 ** 9)
    (tmp_path / "done.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "half.safetensors").write_bytes(b"x" * 5)
    result = model_space.check_space(str(tmp_path), {"done.safetensors": 10, "half.safetensors": 10, "new.json": 7})
    assert result["needed_bytes"] == 17
    assert result["files_complete"] == 1 and result["files_total"] == 3


def test_too_little_space_is_refused_with_the_numbers(tmp_path, monkeypatch):
    fake_free(monkeypatch, 1000)
    result = model_space.check_space(str(tmp_path / "m"), {"big.safetensors": 2 * 1024 ** 3})
    assert not result["fits"]
    assert result["msg"].startswith("needs 2147483648 bytes (2.00 GiB) at %s, " % (tmp_path / "m"))
    assert "has 1000 bytes free" in result["msg"]


def test_the_margin_must_stay_free(tmp_path, monkeypatch):
    fake_free(monkeypatch, 1000)
    assert model_space.check_space(str(tmp_path), {"a": 900})["fits"]
    result = model_space.check_space(str(tmp_path), {"a": 900}, min_free_bytes=101)
    assert not result["fits"] and "101 bytes (0.00 GiB) must stay free" in result["msg"]


def test_the_real_file_system_is_asked(tmp_path):
    result = model_space.check_space(str(tmp_path), {"a": 1})
    stats = os.statvfs(str(tmp_path))
    assert abs(result["free_bytes"] - stats.f_bavail * stats.f_frsize) < 64 * 1024 ** 2
    assert os.path.ismount(result["filesystem"])


@pytest.mark.parametrize("files,where", [
    ({"a": -1}, 'files["a"]'), ({"a": "many"}, 'files["a"]'), ({"../a": 1}, 'files["../a"]'), ({"/etc/a": 1}, 'files["/etc/a"]'),
])
def test_bad_input_names_the_entry(tmp_path, files, where):
    with pytest.raises(model_space.SpaceError, match=r"^%s" % where.replace("[", r"\[").replace("]", r"\]")):
        model_space.check_space(str(tmp_path), files)
