# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import sys

import pytest

# The points are test data: they live beside the benchmarks that read them (tests/benchmarks/perf_points.py).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
import perf_points as vllm_perf_points  # noqa: E402  pylint: disable=import-error,wrong-import-position

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "model_configs")
HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
DATE = re.compile(r"^20[0-9]{2}-(0[1-9]|1[0-2])(-(0[1-9]|[12][0-9]|3[01]))?$")
STRINGS = ("id", "source_url", "source_title", "source_date", "quote", "gpu", "link", "model", "quantization", "metric", "notes")
INTS = ("gpus", "tp", "pp", "dp", "concurrency")
OPTIONAL_INTS = ("input_len", "output_len")
KEYS = set(STRINGS + INTS + OPTIONAL_INTS + ("ep", "vllm_version", "value"))
POINTS = vllm_perf_points.POINTS


def _exactly(value, kind):
    """``value`` is of ``kind`` itself, not a subclass (True is an int to isinstance)."""
    return isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))


def point_problems(point):
    """Every way one point breaks the documented shape, as short sentences (empty when it is well formed)."""
    problems = []
    if set(point) != KEYS:
        problems.append("keys differ: missing %s, extra %s" % (sorted(KEYS - set(point)), sorted(set(point) - KEYS)))
        return problems
    problems += ["%s is not a non-empty str" % key for key in STRINGS if not isinstance(point[key], str) or not point[key].strip()]
    problems += ["%s is not an int >= 1" % key for key in INTS if not _exactly(point[key], int) or point[key] < 1]
    problems += ["%s is not None or an int >= 1" % key for key in OPTIONAL_INTS
                 if point[key] is not None and (not _exactly(point[key], int) or point[key] < 1)]
    if not _exactly(point["ep"], bool):
        problems.append("ep is not a bool")
    if point["vllm_version"] is not None and not isinstance(point["vllm_version"], str):
        problems.append("vllm_version is not None or a str")
    if not _exactly(point["value"], float) or not point["value"] > 0:
        problems.append("value is not a positive float")
    # The checks of meaning compare values, so they run only on a point whose types are right.
    return problems or meaning_problems(point)


def meaning_problems(point):
    problems = []
    if point["metric"] not in vllm_perf_points.METRICS:
        problems.append("metric %r is not one of %s" % (point["metric"], vllm_perf_points.METRICS))
    if point["link"] not in ("pcie", "nvlink"):
        problems.append("link %r is not pcie or nvlink" % point["link"])
    if not DATE.match(point["source_date"]):
        problems.append("source_date %r is not YYYY-MM or YYYY-MM-DD" % point["source_date"])
    if not point["source_url"].startswith("https://"):
        problems.append("source_url is not an https address")
    if len(point["quote"]) > 300:
        problems.append("quote has %d characters, more than 300" % len(point["quote"]))
    if point["tp"] * point["pp"] * point["dp"] != point["gpus"]:
        problems.append("tp x pp x dp = %d, not gpus %d" % (point["tp"] * point["pp"] * point["dp"], point["gpus"]))
    if point["metric"] == "user_tokens_per_s" and point["concurrency"] != 1 and "per stream" not in point["notes"]:
        problems.append("user_tokens_per_s at concurrency > 1 without 'per stream' in notes")
    model = point["model"]
    if "--" in model:
        if not os.path.isfile(os.path.join(FIXTURES, model + ".json")):
            problems.append("model %r looks like a fixture stem but %s.json does not exist" % (model, model))
    elif not HF_ID.match(model):
        problems.append("model %r is neither a fixture stem nor a Hugging Face id" % model)
    return problems


def test_there_are_enough_points_and_enough_of_them_on_pcie():
    assert len(POINTS) >= 20
    assert sum(1 for point in POINTS if point["link"] == "pcie") >= 8


def test_ids_are_unique():
    ids = [point["id"] for point in POINTS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("point", POINTS, ids=[point["id"] for point in POINTS])
def test_every_point_is_well_formed(point):
    assert point_problems(point) == []


def good_point():
    return dict(POINTS[0])


@pytest.mark.parametrize("change, expected", [
    ({"metric": "tok_s"}, "metric 'tok_s' is not one of"),
    ({"value": 0.0}, "value is not a positive float"),
    ({"value": 12}, "value is not a positive float"),
    ({"tp": "4"}, "tp is not an int >= 1"),
    ({"ep": 0}, "ep is not a bool"),
    ({"input_len": 0}, "input_len is not None or an int >= 1"),
    ({"model": "nobody--No-Such-Model"}, "looks like a fixture stem but"),
    ({"model": "not a model"}, "neither a fixture stem nor a Hugging Face id"),
    ({"link": "infiniband"}, "link 'infiniband' is not pcie or nvlink"),
    ({"source_date": "March 2026"}, "is not YYYY-MM or YYYY-MM-DD"),
    ({"quote": "x" * 301}, "more than 300"),
    ({"gpus": 3}, "not gpus 3"),
    ({"notes": ""}, "notes is not a non-empty str"),
])
def test_the_checker_catches_each_kind_of_bad_point(change, expected):
    point = good_point()
    point.update(change)
    problems = point_problems(point)
    assert any(expected in problem for problem in problems), problems


def test_the_checker_catches_a_missing_key():
    point = good_point()
    del point["quote"]
    assert point_problems(point) == ["keys differ: missing ['quote'], extra []"]


def test_a_fixture_stem_and_an_hf_id_are_both_accepted():
    point = good_point()
    for model in ("MiniMaxAI--MiniMax-M2.5", "QuantTrio/Qwen3.5-397B-A17B-AWQ"):
        point["model"] = model
        assert point_problems(point) == []
