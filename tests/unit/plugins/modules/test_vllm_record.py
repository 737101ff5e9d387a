# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_record end to end, through run_module: read, write (atomic_move, then mode, owner and
group), a rerun that changes nothing, check mode that predicts ``changed`` and writes nothing, and a foreign file
that fails the task naming it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

from ansible.module_utils import basic

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_record

KEY = {"gpus": 8, "vllm_version": "0.28.0"}
CONTENT = {"allreduce_probe": {"backend": "nccl", "by_gpu_count": {"2": [[1024, 1.2e-5]]}}}


def _args(path, **extra):
    return dict({"path": str(path), "generator": "vllm_preflight", "key": KEY}, **extra)


def _present(path, **extra):
    return _args(path, **dict({"state": "present", "content": CONTENT}, **extra))


def _mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_read_write_read_again(run_module, tmp_path):
    path = tmp_path / "state" / "allreduce.json"
    result, failed = run_module(vllm_record.main, _args(path))
    assert not failed
    assert result == {"changed": False, "path": str(path), "exists": False, "record": None, "matches": False,
                      "content": {}}

    written, failed = run_module(vllm_record.main, _present(path))
    assert not failed and written["changed"] is True and written["matches"] is True
    stored = json.loads(path.read_text())
    assert stored == written["record"]
    assert stored["generator"] == "gauntlet.vllm.vllm_preflight" and stored["format"] == 1
    assert stored["key"] == KEY and stored["content"] == CONTENT and stored["recorded_at"].endswith("Z")
    assert _mode(path) == 0o640 and _mode(path.parent) == 0o750

    read, failed = run_module(vllm_record.main, _args(path))
    assert not failed and read["changed"] is False
    assert read["exists"] and read["matches"] and read["content"] == CONTENT and read["record"] == stored

    other, failed = run_module(vllm_record.main, _args(path, key=dict(KEY, gpus=4)))
    assert not failed and other["exists"] and not other["matches"] and other["content"] == CONTENT


def test_an_equal_record_is_not_touched(run_module, tmp_path):
    path = tmp_path / "allreduce.json"
    run_module(vllm_record.main, _present(path))
    os.chmod(str(path), 0o600)
    before = path.read_bytes()
    again, failed = run_module(vllm_record.main, _present(path))
    assert not failed and again["changed"] is False
    assert path.read_bytes() == before and _mode(path) == 0o600


def test_the_record_is_moved_into_place_by_atomic_move(run_module, tmp_path, monkeypatch):
    moves = []
    atomic_move = basic.AnsibleModule.atomic_move

    def recording_move(self, source, destination, *args, **kwargs):
        moves.append((os.path.dirname(source), destination))
        return atomic_move(self, source, destination, *args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "atomic_move", recording_move)
    path = tmp_path / "allreduce.json"
    result, failed = run_module(vllm_record.main, _present(path))
    assert not failed and result["changed"] is True
    assert moves == [(str(tmp_path), str(path))]


def test_mode_owner_and_group_are_set_on_the_written_file(run_module, tmp_path):
    path = tmp_path / "allreduce.json"
    path.write_text(json.dumps({"generator": "gauntlet.vllm.vllm_preflight", "key": KEY,
                                "allreduce_probe": {}}))  # a record written before vllm_record: replaced
    os.chmod(str(path), 0o644)
    # root gives the file away to nobody (65534); anyone else can only name their own user and group.
    uid, gid = (65534, 65534) if os.getuid() == 0 else (os.getuid(), os.getgid())
    result, failed = run_module(vllm_record.main, _present(path, mode="0600", owner=str(uid), group=str(gid)))
    assert not failed and result["changed"] is True
    assert _mode(path) == 0o600
    assert (os.stat(str(path)).st_uid, os.stat(str(path)).st_gid) == (uid, gid)
    assert json.loads(path.read_text())["content"] == CONTENT
    assert os.listdir(str(tmp_path)) == ["allreduce.json"]  # no temporary file left


def test_check_mode_predicts_changed_and_writes_nothing(run_module, tmp_path):
    path = tmp_path / "state" / "allreduce.json"
    predicted, failed = run_module(vllm_record.main, _present(path, _ansible_check_mode=True))
    assert not failed and predicted["changed"] is True and predicted["record"]["content"] == CONTENT
    assert os.listdir(str(tmp_path)) == []
    run_module(vllm_record.main, _present(path))
    before = path.read_bytes()
    same, failed = run_module(vllm_record.main, _present(path, _ansible_check_mode=True))
    assert not failed and same["changed"] is False
    other, failed = run_module(vllm_record.main, _present(path, content={"x": 1}, _ansible_check_mode=True))
    assert not failed and other["changed"] is True
    assert path.read_bytes() == before


def test_a_foreign_file_fails_the_task_naming_it_and_is_kept(run_module, tmp_path):
    path = tmp_path / "allreduce.json"
    path.write_text("{}")
    for args in (_args(path), _present(path)):
        result, failed = run_module(vllm_record.main, args)
        assert failed and result["path"] == str(path)
        assert result["msg"] == ("%s exists but was not written by gauntlet.vllm.vllm_preflight (no generator key); it "
                                 "is left alone. Move it away, or choose another path." % path)
    assert path.read_text() == "{}"


def test_a_bad_generator_fails_naming_the_option(run_module, tmp_path):
    result, failed = run_module(vllm_record.main, dict(_args(tmp_path / "r.json"), generator="Vllm Bench"))
    assert failed and result["msg"].startswith("generator: 'Vllm Bench' is not the name of a module or role")
