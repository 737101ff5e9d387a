# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_rollout_report through run_module: real files, no change on a re-run, foreign files refused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.modules import vllm_rollout_report


def reports():
    return {"h1": {"outcome": "updated", "started_at": 10.0, "finished_at": 70.0, "returned": True, "error": None,
                   "steps": [{"step": "drain", "seconds": 1.5}, {"step": "deploy", "seconds": 50.0}], "gate": {"skipped": "off"}}}


def test_writes_json_and_markdown_then_changes_nothing(run_module, tmp_path):
    args = {"name": "rollout-tiny", "output_dir": str(tmp_path / "out"), "hosts": ["h1", "h2"], "reports": reports(),
            "settings": {"serial": [1, "50%"]}}
    result, failed = run_module(vllm_rollout_report.main, args)
    assert not failed and result["changed"] is True
    assert sorted(result["files"]) == ["json", "markdown"]
    doc = json.load(open(result["files"]["json"]))
    assert doc["generator"] == "gauntlet.vllm.vllm_rollout_report" and doc["settings"] == {"serial": [1, "50%"]}
    assert [h["outcome"] for h in doc["hosts"]] == ["updated", "not_reached"]
    assert result["summary"]["outcomes"]["not_reached"] == 1 and result["summary"]["span_s"] == 60.0
    assert "| h1 | updated | drain 1.5, deploy 50.0 | skipped (off) | yes |" in open(result["files"]["markdown"]).read()
    assert oct(os.stat(result["files"]["json"]).st_mode & 0o777) == "0o640"
    again, failed = run_module(vllm_rollout_report.main, args)
    assert not failed and again["changed"] is False


def test_check_mode_predicts_without_writing(run_module, tmp_path):
    args = {"name": "r", "output_dir": str(tmp_path / "out"), "hosts": ["h1"], "reports": reports(), "_ansible_check_mode": True}
    result, failed = run_module(vllm_rollout_report.main, args)
    assert not failed and result["changed"] is True and not (tmp_path / "out").exists()


def test_a_foreign_file_is_refused_and_left_alone(run_module, tmp_path):
    (tmp_path / "r.md").write_text("my notes\n")
    result, failed = run_module(vllm_rollout_report.main, {"name": "r", "output_dir": str(tmp_path), "hosts": ["h1"], "reports": reports()})
    assert failed and "r.md" in result["msg"]
    assert (tmp_path / "r.md").read_text() == "my notes\n"


def test_a_bad_outcome_fails_naming_the_host(run_module, tmp_path):
    result, failed = run_module(vllm_rollout_report.main, {"name": "r", "output_dir": str(tmp_path), "hosts": ["h1"],
                                                           "reports": {"h1": {"outcome": "half"}}})
    assert failed and "hosts.h1.outcome: 'half'" in result["msg"]
