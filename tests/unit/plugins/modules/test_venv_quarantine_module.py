# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.venv_quarantine end to end, through run_module, on real venvs (tiny pip-installed wheels):
check mode predicts ``changed`` and writes nothing, a real run moves the stray file into the quarantine with a
manifest entry, ``restore`` moves it back, bad options fail naming the field."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.modules import venv_quarantine
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_venv_integrity import (
    MODEL_FILE,
    append,
    base_venv,
    clone_venv,
    site_packages,
)

STRAY = "vllm/model_executor/models/local_hack.py"


@pytest.fixture
def venv(tmp_path_factory, tmp_path):
    return clone_venv(base_venv(tmp_path_factory), tmp_path / "venv")


def _tree(root):
    return sorted(os.path.join(folder, name) for folder, dirs, files in os.walk(root) for name in dirs + files)


def test_check_mode_then_quarantine_then_restore(run_module, venv, tmp_path):
    site = site_packages(venv)
    stray = os.path.join(site, STRAY)
    append(stray, b"FORCE_DEQUANT = True\n")
    append(os.path.join(site, MODEL_FILE), b"# debug\n")
    quarantine_dir = str(tmp_path / "quarantine")
    args = {"venv": venv, "distributions": ["vllm", "torch"], "quarantine_dir": quarantine_dir}

    before = _tree(str(tmp_path))
    predicted, failed = run_module(venv_quarantine.main, dict(args, _ansible_check_mode=True))
    assert not failed
    assert predicted["changed"] is True and predicted["manifest"] is None
    assert _tree(str(tmp_path)) == before  # check mode wrote nothing
    assert sorted(entry["action"] for entry in predicted["entries"]) == ["copied", "moved"]

    result, failed = run_module(venv_quarantine.main, args)
    assert not failed
    assert result["changed"] is True
    assert os.path.dirname(result["quarantine"]) == quarantine_dir
    assert sorted(entry["quarantined"] for entry in result["entries"]) == \
        sorted(entry["quarantined"].replace(predicted["quarantine"], result["quarantine"]) for entry in predicted["entries"])
    assert not os.path.exists(stray)
    with open(result["manifest"]) as handle:
        manifest = json.load(handle)
    moved = [entry for entry in manifest["entries"] if entry["action"] == "moved"]
    assert [entry["original"] for entry in moved] == [stray]
    assert os.path.isfile(moved[0]["quarantined"])

    again, failed = run_module(venv_quarantine.main, dict(args, backup_modified=False))
    assert not failed and again["changed"] is False and again["quarantine"] is None

    restored, failed = run_module(venv_quarantine.main, {"venv": venv, "restore": result["quarantine"]})
    assert not failed
    assert restored["changed"] is True and restored["restored"] == [stray]
    assert os.path.isfile(stray)


def test_bad_options_fail_naming_the_field(run_module, venv, tmp_path):
    result, failed = run_module(venv_quarantine.main, {"venv": venv, "quarantine_dir": os.path.join(venv, "q")})
    assert failed and result["msg"].startswith("quarantine_dir: ")
    result, failed = run_module(venv_quarantine.main, {"venv": venv, "workers": 0})
    assert failed and result["msg"].startswith("workers: ")
    result, failed = run_module(venv_quarantine.main, {"venv": venv, "restore": str(tmp_path / "none")})
    assert failed and result["msg"] == "restore: %s: no such quarantine folder" % (tmp_path / "none")
    result, failed = run_module(venv_quarantine.main, {"venv": str(tmp_path / "nowhere")})
    assert failed and result["msg"] == "%s: no such directory (venv)" % (tmp_path / "nowhere")
