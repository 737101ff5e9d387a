# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gauntlet.vllm.vllm_bench_report through run_module: real files, a real matplotlib PNG."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gauntlet.vllm.plugins.module_utils import vllm_bench
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_bench_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sweep(scale=1.0, levels=(1, 8, 32)):
    result = []
    for concurrency in levels:
        records = []
        for index in range(concurrency):
            records.append({"ok": True, "error_class": None, "error": None, "ttft": 0.05 * scale, "itl": [0.01] * 15,
                            "latency": 0.2 * scale, "prompt_tokens": 64, "completion_tokens": 16,
                            "start": 0.0, "end": 0.2})
        result.append(vllm_bench.level_metrics(concurrency, records, duration_s=0.25 * scale))
    workload = {"model": "tiny-llama", "api": "completions", "input_len": 64, "output_len": 16,
                "ignore_eos": True, "seed": 0}
    output = {"levels": result, "workload": workload, "aborted": None}
    output.update(vllm_bench.saturation(result))
    return {"changed": False, "ansible_facts": {"vllm_bench": output}, **output}


def test_writes_json_markdown_png_and_history(run_module, tmp_path):
    out = tmp_path / "reports"
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "tiny-llama-c1-32",
                                                         "output_dir": str(out)})
    assert not failed and result["changed"] is True
    files = result["files"]
    with open(files["json"]) as handle:
        recorded = json.load(handle)
    assert [level["concurrency"] for level in recorded["levels"]] == [1, 8, 32]
    assert "ansible_facts" not in recorded and recorded["name"] == "tiny-llama-c1-32"
    with open(files["png"], "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    assert os.path.getsize(files["png"]) > 10000
    markdown = open(files["markdown"]).read()
    assert markdown == "<!-- written by gauntlet.vllm.vllm_bench_report: edits are overwritten -->\n" + result["markdown"]
    assert "Peak 2048.0 output tok/s at C=32" in markdown
    assert markdown.count("\n| ") == 4          # header + one row per level
    run_module(vllm_bench_report.main, {"result": sweep(), "name": "tiny-llama-c1-32", "output_dir": str(out)})
    history = [json.loads(line) for line in open(files["history"])]
    assert len(history) == 2 and history[0]["peak_concurrency"] == 32


def test_compares_with_a_baseline_level_by_level(run_module, tmp_path):
    first, dummy = run_module(vllm_bench_report.main, {"result": sweep(), "name": "before", "output_dir": str(tmp_path)})
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(scale=2.0, levels=(8, 32, 128)), "name": "after",
                                                         "output_dir": str(tmp_path), "baseline": first["files"]["json"]})
    assert not failed
    assert [row["concurrency"] for row in result["comparison"]] == [8, 32]
    assert result["comparison"][0]["output_tokens_per_s"]["change_pct"] == -50.0
    assert result["comparison"][0]["ttft_ms.p99"]["change_pct"] == 100.0
    assert "### Against the baseline" in result["markdown"]


def test_bad_inputs_name_the_field_and_write_nothing(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": {"msg": "x"}, "name": "n", "output_dir": str(tmp_path)})
    assert failed and result["msg"].startswith("result: not a vllm_bench result")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path),
                                                         "baseline": str(bad)})
    assert failed and result["msg"] == ("baseline: %s: it is not a vllm_bench JSON report (no 'levels' list of objects)"
                                        % bad)
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "../escape",
                                                         "output_dir": str(tmp_path)})
    assert failed and "name" in result["msg"]
    assert sorted(os.listdir(str(tmp_path))) == ["bad.json"]


def test_check_mode_writes_nothing_and_predicts_the_change(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "r"),
                                                         "_ansible_check_mode": True})
    # A real run always appends a history line, so check mode must say changed too.
    assert not failed and result["changed"] is True
    assert not os.path.exists(str(tmp_path / "r"))
    assert "| 8 |" in result["markdown"]


def test_report_files_are_0640_and_marked(run_module, tmp_path):
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path)})
    assert not failed
    for path in result["files"].values():
        assert os.stat(path).st_mode & 0o777 == 0o640, path
        with open(path, "rb") as handle:
            assert b"gauntlet.vllm.vllm_bench_report" in handle.read(65536), path


def test_never_overwrites_or_appends_to_a_file_it_did_not_write(run_module, tmp_path):
    for suffix in (".json", ".md", ".png"):
        out = tmp_path / suffix.strip(".")
        out.mkdir()
        foreign = out / ("n" + suffix)
        foreign.write_text("somebody else's file\n")
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(out)})
        assert failed and result["msg"].startswith("refusing to overwrite %s: it was not written by" % foreign)
        assert foreign.read_text() == "somebody else's file\n"
        assert sorted(os.listdir(str(out))) == ["n" + suffix]
    history = tmp_path / "notes.txt"
    history.write_text("my notes\n")
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "h", "output_dir": str(tmp_path / "h"),
                                                         "history_file": str(history)})
    assert failed and str(history) in result["msg"] and history.read_text() == "my notes\n"
    # The refusal comes first in check mode too.
    result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "h", "output_dir": str(tmp_path / "h"),
                                                         "history_file": str(history), "_ansible_check_mode": True})
    assert failed and str(history) in result["msg"]


def test_replaces_its_own_files_and_appends_its_own_history(run_module, tmp_path):
    args = {"result": sweep(), "name": "n", "output_dir": str(tmp_path)}
    for dummy in range(2):
        result, failed = run_module(vllm_bench_report.main, args)
        assert not failed
    assert len(open(result["files"]["history"]).readlines()) == 2


def test_hostile_baselines_give_a_message(run_module, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps({"levels": [1, 2]}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for bad in (deep, levels, binary, tmp_path / "missing.json"):
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "o"),
                                                             "baseline": str(bad)})
        assert failed and result["msg"].startswith("baseline: %s: " % bad), result


def test_check_mode_writes_nothing_over_an_earlier_run_and_still_predicts_the_history_line(run_module, tmp_path):
    args = {"result": sweep(), "name": "n", "output_dir": str(tmp_path), "plot": False}
    first, failed = run_module(vllm_bench_report.main, args)
    assert not failed
    before = {path: open(path, "rb").read() for path in first["files"].values() if path}
    predicted, failed = run_module(vllm_bench_report.main, dict(args, _ansible_check_mode=True))
    assert not failed and predicted["changed"] is True and predicted["files"] == first["files"]
    assert {path: open(path, "rb").read() for path in before} == before
    assert sorted(os.listdir(str(tmp_path))) == ["history.jsonl", "n.json", "n.md"]


def test_a_history_file_in_a_missing_directory_fails_in_both_modes_naming_it(run_module, tmp_path):
    history = tmp_path / "gone" / "history.jsonl"
    for check_mode in (True, False):
        result, failed = run_module(vllm_bench_report.main, {"result": sweep(), "name": "n", "output_dir": str(tmp_path / "o"),
                                                             "history_file": str(history), "_ansible_check_mode": check_mode})
        assert failed and result["msg"] == "history_file: %s: its directory %s does not exist" % (history, tmp_path / "gone")
    assert os.listdir(str(tmp_path)) == []
