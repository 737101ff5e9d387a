# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""io/prometheus_text against prometheus_client's own parser, the field's reference: both read the same samples
from a real vLLM /metrics body and from the format's corner cases; where they differ, ours is the stricter (a line
the library reads wrongly is refused here, naming it). Why the modules do not run the library itself is in the
module's docstring."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os

import pytest

# The controller venv pins prometheus_client (rig/requirements-controller.txt): a missing one fails, never skips.
from prometheus_client import parser

from ansible_collections.gauntlet.vllm.plugins.module_utils.io import prometheus_text

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "vllm", "metrics-0.32.0-tiny-llama.txt")


def _library(text):
    return [(sample.name, dict(sample.labels), sample.value)
            for family in parser.text_string_to_metric_families(text) for sample in family.samples]


def _key(sample):
    name, labels, value = sample
    return (name, sorted(labels.items()), "nan" if math.isnan(value) else value)


def _same(ours, theirs):
    return sorted(map(_key, ours)) == sorted(map(_key, theirs))


def test_a_real_vllm_metrics_body_reads_as_the_library_reads_it():
    with open(FIXTURE) as handle:
        text = handle.read()
    ours = prometheus_text.parse_exposition(text)
    assert len(ours) == 425
    assert _same(ours, _library(text))


@pytest.mark.parametrize("text", [
    'm{a="x\\"}y",b="c,d",c="back\\\\slash",d="new\\nline"} 2.5\n',
    "m NaN\nn +Inf\no -Inf\n",
    "m 1e3 1700000000000\n",
    "# HELP m a help\n# TYPE m counter\nm_total 7\n",
    'h_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 3\nh_sum 1.5\nh_count 3\n',
])
def test_the_formats_corners_read_as_the_library_reads_them(text):
    assert _same(prometheus_text.parse_exposition(text), _library(text))


def test_a_line_the_library_misreads_is_refused_naming_it():
    # prometheus_client reads "foo 1 2 3" as foo = 1; the text format allows one value and one timestamp.
    assert _library("foo 1 2 3\n") == [("foo", {}, 1.0)]
    with pytest.raises(prometheus_text.ExpositionError, match="line 1 is not Prometheus text"):
        prometheus_text.parse_exposition("foo 1 2 3\n")


def test_sums_add_every_label_set_of_the_names_asked():
    samples = prometheus_text.parse_exposition('a{e="0"} 1\na{e="1"} 2\nb 5\n')
    assert prometheus_text.sums(samples, {"a", "c"}) == {"a": 3.0}


def test_a_histograms_buckets_are_its_cumulative_counts_by_bound_over_every_other_label_as_the_library_reads_them():
    with open(FIXTURE) as handle:
        text = handle.read()
    name = "vllm:time_to_first_token_seconds"
    ours = prometheus_text.buckets(prometheus_text.parse_exposition(text), name)
    theirs = {}
    for sample in [s for family in parser.text_string_to_metric_families(text) for s in family.samples]:
        if sample.name == name + "_bucket":
            bound = float(sample.labels["le"])
            theirs[bound] = theirs.get(bound, 0.0) + sample.value
    assert ours == theirs and ours[0.01] == 5.0 and ours[float("inf")] == 6.0
    two = prometheus_text.parse_exposition('h_bucket{e="0",le="0.1"} 1\nh_bucket{e="1",le="0.1"} 2\nh_count 3\n')
    assert prometheus_text.buckets(two, "h") == {0.1: 3.0}
    assert prometheus_text.buckets(two, "other") == {}
    bad = prometheus_text.parse_exposition('h_bucket{le="soon"} 1\n')
    with pytest.raises(prometheus_text.ExpositionError, match="h_bucket has le='soon', not a number"):
        prometheus_text.buckets(bad, "h")


def test_a_written_sample_reads_back_with_its_quote_backslash_and_newline_as_the_library_reads_it():
    labels = {"unit": 'a"} 1\nforged{unit="b', "path": "back\\slash", "plain": "vllm-a.service"}
    line = prometheus_text.format_sample("m", labels, 2.5) + "\n"
    assert line.count("\n") == 1
    assert prometheus_text.parse_exposition(line) == [("m", labels, 2.5)]
    assert _same(prometheus_text.parse_exposition(line), _library(line))
    assert prometheus_text.format_sample("m", {}, 4) == "m 4"


def test_a_series_given_twice_is_refused_naming_both_lines_never_summed():
    # The text format allows each series (name and label set) once; summing them read 2 running requests as 4.
    with pytest.raises(prometheus_text.ExpositionError, match=r"line 2 is a duplicate series of line 1"):
        prometheus_text.parse_exposition('a{e="0",m="x"} 2\na{m="x",e="0"} 2\n')
    with pytest.raises(prometheus_text.ExpositionError, match=r"label e given twice"):
        prometheus_text.parse_exposition('a{e="0",e="1"} 2\n')
