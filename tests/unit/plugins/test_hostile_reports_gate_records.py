# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile input (issue 34) on the report writers, the rollout's health gate, the state records and the
calibration filters: a file that only mentions a report module is not the module's, NaN and infinity never pass a
gate nor come out of a record or a filter, and bad paths and levels are messages, not tracebacks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct
import zlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_perf import vllm_calibration, vllm_prediction_errors
from ansible_collections.gauntlet.vllm.plugins.filter.vllm_rollout import vllm_gate_verdict
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_rollout import GateError, gate_verdict
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import plan_model
from ansible_collections.gauntlet.vllm.plugins.modules import vllm_record, vllm_rollout_report

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "vllm_bench_report"
MARKER = report_files.marker_of(NAME)
NAN, INF = float("nan"), float("inf")


# ---- lost data: one marker test per format ----------------------------------------------------

class FakeModule(object):
    def atomic_move(self, source, destination):
        os.rename(source, destination)


def png(*texts):
    """A 1x1 PNG with the text chunks ``texts`` ((type, data), before the image data, as matplotlib writes them)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + b"".join(chunk(kind, data) for kind, data in texts)
            + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))


def draw(path):
    """The PNG the report modules draw: matplotlib, with the marker as its Software text."""
    figure, axis = report_files.pyplot().subplots()
    axis.plot([1, 2], [3, 4])
    report_files.save_figure(figure, "run", path, NAME)


def written_over(folder, kind, existing):
    """Whether write_report (check mode, which refuses exactly what a real run refuses) takes ``existing`` bytes at
    the ``kind`` file of a report as its own: True, or the message of the refusal."""
    files = report_files.report_paths(str(folder), "run", True, history_file=None)
    with open(files[kind], "wb") as handle:
        handle.write(existing)
    try:
        report_files.write_report(FakeModule(), NAME, files, {"figure": 1}, "| table |\n", png_renderer=draw,
                                  check_mode=True, history_line=json.dumps({"generator": MARKER}) + "\n")
    except report_files.ReportFileError as exc:
        return str(exc)
    return True


MENTIONS = "see %s for the numbers" % MARKER
NOT_OURS = {
    "json: the marker in another key": ("json", json.dumps({"note": MARKER, "figure": 1}).encode()),
    "json: a nested generator": ("json", json.dumps({"run": {"generator": MARKER}}).encode()),
    "json: a list": ("json", json.dumps([{"generator": MARKER}]).encode()),
    "json: not JSON": ("json", ("# notes\n" + MENTIONS).encode()),
    "markdown: a mention": ("markdown", ("# Runbook\n\n" + MENTIONS + "\n").encode()),
    "markdown: the marker line second": ("markdown", ("# Notes\n" + report_files.markdown_marker(NAME)).encode()),
    "markdown: the marker inside a longer first line": (
        "markdown", ("x " + report_files.markdown_marker(NAME)).encode()),
    "png: the marker in a Comment": ("png", png((b"tEXt", b"Comment\x00" + MARKER.encode()))),
    "png: another Software": ("png", png((b"tEXt", b"Software\x00GIMP " + MARKER.encode()))),
    "png: a mention in bytes that are no PNG": ("png", b"\x89PNG fake " + MARKER.encode()),
    "history: a mention": ("history", ("%s\n" % MENTIONS).encode()),
    "history: the marker in another key": ("history", (json.dumps({"note": MARKER}) + "\n").encode()),
}


@pytest.mark.parametrize("case", sorted(NOT_OURS))
def test_a_file_that_only_mentions_the_marker_is_not_the_reports(tmp_path, case):
    kind, existing = NOT_OURS[case]
    refusal = written_over(tmp_path, kind, existing)
    name = "history.jsonl" if kind == "history" else "run." + {"markdown": "md"}.get(kind, kind)
    assert refusal is not True and "refusing to overwrite %s" % (tmp_path / name) in refusal, case


OURS = {
    "json": lambda folder: report_files.json_document(NAME, {"figure": 2}).encode(),
    "markdown": lambda folder: (report_files.markdown_marker(NAME) + "| old |\n\nhand edit mentioning nothing\n").encode(),
    "png: matplotlib's": None,
    "png: an iTXt Software": lambda folder: png((b"iTXt", b"Software\x00\x00\x00\x00\x00" + MARKER.encode())),
    "history": lambda folder: (json.dumps({"generator": MARKER, "name": "a"}, sort_keys=True) + "\n"
                               + "a torn line that a crash left behind").encode(),
}


@pytest.mark.parametrize("case", sorted(OURS))
def test_a_file_the_collection_wrote_is_still_the_reports(tmp_path, case):
    kind = case.split(":")[0]
    if OURS[case] is None:
        draw(str(tmp_path / "drawn.png"))
        existing = (tmp_path / "drawn.png").read_bytes()
    else:
        existing = OURS[case](tmp_path)
    assert written_over(tmp_path, kind, existing) is True


@pytest.mark.parametrize("extension, text", [
    ("md", "# Runbook\n\nAfter a rollout, gauntlet.vllm.vllm_rollout_report writes the fleet's table.\n"),
    ("json", '{"steps": ["run gauntlet.vllm.vllm_rollout_report"], "generator": "me"}\n'),
])
def test_a_hand_written_runbook_that_names_the_rollout_report_is_left_alone(run_module, tmp_path, extension, text):
    (tmp_path / ("runbook." + extension)).write_text(text)
    result, failed = run_module(vllm_rollout_report.main, {
        "name": "runbook", "output_dir": str(tmp_path), "hosts": ["h1"], "reports": {}})
    assert failed and "runbook.%s" % extension in result["msg"] and "not written by" in result["msg"]
    assert (tmp_path / ("runbook." + extension)).read_text() == text


def test_a_fifo_at_a_report_path_is_refused_without_waiting(tmp_path):
    files = report_files.report_paths(str(tmp_path), "run", False, history_file=None)
    os.mkfifo(files["history"])
    with pytest.raises(report_files.ReportFileError, match="history.jsonl.*not a regular file"):
        report_files.write_report(FakeModule(), NAME, files, {}, "", check_mode=True, history_line="{}\n")


# ---- NaN and infinity in the rollout's health gate ---------------------------------------------

def level(tokens, requests=16, failed=0, abandoned=0):
    return {"concurrency": 4, "output_tokens_per_s": tokens, "requests": requests, "failed": failed,
            "abandoned": abandoned}


GOOD = {"levels": [level(400.0)]}


@pytest.mark.parametrize("measured", [
    {"levels": [level(NAN)]},
    {"levels": [level(INF)]},
    {"levels": [level(0.0)]},
    {"levels": [level(-400.0)]},
    {"levels": [level(400.0), level(NAN), level(400.0)]},
    {"levels": [level(400.0, requests=NAN)]},
    {"levels": [level(400.0, failed=NAN)]},
    {"levels": [level(400.0, abandoned=INF)]},
    {"levels": [level(400.0, failed=-3)]},
])
@pytest.mark.parametrize("baseline", [GOOD, None])
def test_a_sweep_that_measured_nan_or_nothing_fails_the_gate_with_a_reason(measured, baseline):
    verdict = gate_verdict(measured, baseline, 4, 0.25, 0.0)
    assert verdict["passed"] is False and verdict["reasons"]
    assert any("C=4" in reason and "not" in reason for reason in verdict["reasons"]), verdict["reasons"]
    # The verdict goes into the rollout's JSON report: no NaN or Infinity there.
    json.dumps(verdict, allow_nan=False)


@pytest.mark.parametrize("figure", [NAN, INF, -INF, 0.0, -400.0])
def test_a_nan_or_non_positive_baseline_is_an_error_naming_it(figure):
    with pytest.raises(GateError, match=r"the baseline: output_tokens_per_s .*%s" % repr(figure).replace("-", r"\-")):
        gate_verdict(GOOD, {"levels": [level(figure)]}, 4, 0.25, 0.0)
    with pytest.raises(AnsibleFilterError, match="the baseline"):
        vllm_gate_verdict(GOOD, baseline={"levels": [level(figure)]}, concurrency=4)


@pytest.mark.parametrize("limit", [NAN, "nan", INF, "inf", -0.1, 1.5])
def test_a_nan_or_out_of_range_max_error_rate_is_an_error_naming_it(limit):
    failing = {"levels": [level(400.0, requests=10, failed=9)]}
    with pytest.raises(AnsibleFilterError, match="max_error_rate"):
        vllm_gate_verdict(failing, baseline=GOOD, concurrency=4, max_error_rate=limit)


def test_an_infinite_gate_concurrency_is_an_error_not_a_traceback():
    with pytest.raises(AnsibleFilterError, match="concurrency"):
        vllm_gate_verdict(GOOD, baseline=GOOD, concurrency=INF)


# ---- records: no NaN, no bad paths, full-match generator names ---------------------------------

def record_text(value):
    return ('{"content": {"result": {"levels": [{"concurrency": 4, "output_tokens_per_s": %s}]}}, "format": 1, '
            '"generator": "gauntlet.vllm.vllm_rollout", "key": {"unit": "a"}, "recorded_at": "2026-12-03T14:24:10Z"}\n'
            % value)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("state", ["read", "present"])
def test_a_record_holding_nan_or_infinity_is_refused_naming_the_file_and_field(run_module, tmp_path, value, state):
    path = tmp_path / "baseline.json"
    path.write_text(record_text(value))
    args = {"path": str(path), "generator": "vllm_rollout", "key": {"unit": "a"}, "state": state,
            "content": {"result": {}}}
    result, failed = run_module(vllm_record.main, args)
    assert failed, result
    assert str(path) in result["msg"] and "content.result.levels[0].output_tokens_per_s" in result["msg"]
    assert path.read_text() == record_text(value)


@pytest.mark.parametrize("suffix, message", [("\x00x", "NUL"), ("/", "ends in '/'")])
@pytest.mark.parametrize("state", ["read", "present"])
def test_a_record_path_with_nul_or_a_trailing_slash_is_an_error_naming_it(run_module, tmp_path, suffix, message, state):
    path = str(tmp_path / "records" / "baseline.json") + suffix
    result, failed = run_module(vllm_record.main, {"path": path, "generator": "vllm_rollout", "state": state,
                                                   "content": {"a": 1}})
    assert failed and message in result["msg"] and repr(path)[1:-1] in result["msg"], result
    assert not (tmp_path / "records" / "baseline.json").exists()


def test_a_generator_with_a_trailing_newline_is_refused(run_module, tmp_path):
    result, failed = run_module(vllm_record.main, {"path": str(tmp_path / "r.json"), "generator": "vllm_rollout\n",
                                                   "state": "present", "content": {"a": 1}})
    assert failed and "generator" in result["msg"] and not (tmp_path / "r.json").exists()


# ---- calibration and prediction errors -------------------------------------------------------

CONFIG = os.path.join(HERE, "..", "fixtures", "model_configs", "meta-llama--Meta-Llama-3.1-70B.json")


@pytest.fixture(scope="module")
def estimate():
    result = plan_model(load_model_config(CONFIG), 4, 80.0, "0.32.0", max_model_len=4096,
                        workload={"input_len": 256, "output_len": 128, "concurrency": [1, 16]})
    return [p for p in result["plans"] if p["name"] == "TP4"][0]["estimate"]


def measured(estimate, **overrides):
    """Bench levels as vllm_bench gives them, close to the estimate's; ``overrides``: index -> fields."""
    levels = [{"concurrency": figures["concurrency"], "output_tokens_per_s": figures["output_tokens_per_s"],
               "tpot_ms": {"median": figures["tpot_ms"] * 1.2, "p99": figures["tpot_ms"] * 2},
               "ttft_ms": {"median": figures["ttft_ms"]}} for figures in estimate["levels"]]
    for index, fields in overrides.items():
        levels[int(index[1:])].update(fields)
    return levels


BAD_MEASURED = [
    ({"i1": {"tpot_ms": {"median": INF}}}, r"levels\[1\]\.tpot_ms\.median.*inf"),
    ({"i0": {"tpot_ms": NAN}}, r"levels\[0\]\.tpot_ms.*nan"),
    ({"i1": {"ttft_ms": {"median": INF}}}, r"levels\[1\]\.ttft_ms\.median.*inf"),
    ({"i0": {"output_tokens_per_s": INF}}, r"levels\[0\]\.output_tokens_per_s.*inf"),
    ({"i1": {"output_tokens_per_s": NAN}}, r"levels\[1\]\.output_tokens_per_s.*nan"),
]


@pytest.mark.parametrize("overrides, message", BAD_MEASURED)
@pytest.mark.parametrize("which", ["vllm_calibration", "vllm_prediction_errors"])
def test_a_non_finite_measured_figure_is_refused_naming_the_level_and_field(estimate, overrides, message, which):
    function = {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}[which]
    assert function(estimate, measured(estimate))  # the same levels, finite, are fine
    with pytest.raises(AnsibleFilterError, match=message):
        function(estimate, measured(estimate, **overrides))


@pytest.mark.parametrize("field, value, message", [
    ("tpot_ms", NAN, r"estimate\.levels\[1\]\.tpot_ms.*nan"),
    ("output_tokens_per_s", INF, r"estimate\.levels\[1\]\.output_tokens_per_s.*inf"),
    ("parts", {"tpot_base_ms": INF}, r"estimate\.levels\[1\]\.parts\.tpot_base_ms.*inf"),
    ("simulated", {"output_throughput": NAN, "tpot_ms": {"p50": 3.0}}, r"estimate\.levels\[1\]\.simulated\.output_throughput.*nan"),
])
@pytest.mark.parametrize("which", ["vllm_calibration", "vllm_prediction_errors"])
def test_a_non_finite_predicted_figure_is_refused_naming_the_level_and_field(estimate, field, value, message, which):
    function = {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}[which]
    bad = dict(estimate, levels=[estimate["levels"][0], dict(estimate["levels"][1], **{field: dict(
        estimate["levels"][1][field], **value) if isinstance(value, dict) else value})])
    with pytest.raises(AnsibleFilterError, match=message):
        function(bad, measured(estimate))


@pytest.mark.parametrize("levels, message", [
    ([None], r"estimate\.levels\[0\].*null"),
    (["TP4"], r"estimate\.levels\[0\].*str"),
    ([{"concurrency": 1}, 3], r"estimate\.levels\[1\].*int"),
    ("TP4", r"estimate\.levels.*list"),
    ([{"concurrency": 1, "parts": "x", "tpot_ms": 3.0}], r"estimate\.levels\[0\]\.parts.*str"),
])
@pytest.mark.parametrize("which", ["vllm_calibration", "vllm_prediction_errors"])
def test_estimate_levels_of_the_wrong_type_are_a_filter_error_naming_the_index(estimate, levels, message, which):
    function = {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}[which]
    with pytest.raises(AnsibleFilterError, match=message):
        function(dict(estimate, levels=levels), measured(estimate))


@pytest.mark.parametrize("which", ["vllm_calibration", "vllm_prediction_errors"])
def test_measured_levels_of_the_wrong_type_are_a_filter_error_naming_the_index(estimate, which):
    function = {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}[which]
    with pytest.raises(AnsibleFilterError, match=r"levels\[1\].*str"):
        function(estimate, [measured(estimate)[0], "fast"])
