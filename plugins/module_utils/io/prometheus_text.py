# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Prometheus text exposition format, read strictly: the one parser of vLLM's ``/metrics`` for every module
(vllm_monitoring_info's figures, vllm_bench's server counters and queue).

Labels with escaped quotes, ``NaN``/``+Inf``, optional timestamps. A body that is not exposition text (an HTML
error page, another program on the port), or that gives one series twice, is an error naming the line, not a silent
zero or sum. ``format_sample`` writes a sample the way this parser reads it back (the baselines' textfile).

Why not ``prometheus_client``'s parser (measured, issue 33): the modules run with the host's system Python, which
has no prometheus_client (the rig's Debian image: ModuleNotFoundError; it is in vLLM's venv and in Debian's
python3-prometheus-client, neither of which a module may assume); it accepts ``foo 1 2 3`` as ``foo 1`` and its
errors do not name the line; and on vLLM 0.32's /metrics (55 KB, 425 samples) it takes 9.1 ms against 3.9 ms
here. It is this parser's oracle instead: tests/unit/plugins/module_utils/test_prometheus_text.py checks that both
read the same samples from real vLLM text.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import is_int, short_text


class ExpositionError(ValueError):
    """Text that is not the Prometheus exposition format; the message names the line."""


# ---- Prometheus text format ------------------------------------------------------------------

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_LABEL_NAME_ONLY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}


def parse_value(text):
    """A sample value as Go's ParseFloat reads it in the text format (``NaN``, ``+Inf``, ``-Inf``, 1e3)."""
    lowered = text.lower()
    if lowered in ("nan", "+inf", "-inf", "inf"):
        return float(lowered)
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?", lowered):
        raise ValueError("not a number: %r" % text)
    return float(text)


def _parse_labels(text, position):
    """Labels from ``text[position]`` (just after ``{``) -> (dict, position after ``}``)."""
    labels = {}
    while True:
        while position < len(text) and text[position] in " \t":
            position += 1
        if text.startswith("}", position):
            return labels, position + 1
        match = _LABEL_NAME.match(text, position)
        if not match:
            raise ValueError("bad label at column %d" % (position + 1))
        if match.group(1) in labels:
            raise ValueError("label %s given twice" % match.group(1))
        value, position = _label_value(text, match.end())
        labels[match.group(1)] = value
        while position < len(text) and text[position] in " \t":
            position += 1
        if text.startswith(",", position):
            position += 1
        elif not text.startswith("}", position):
            raise ValueError("expected ',' or '}' at column %d" % (position + 1))


def _label_value(text, position):
    """A quoted label value starting after its opening quote -> (value, position after the quote)."""
    chars = []
    while position < len(text):
        char = text[position]
        if char == "\\" and position + 1 < len(text):
            chars.append(_ESCAPES.get(text[position + 1], "\\" + text[position + 1]))
            position += 2
        elif char == "\"":
            return "".join(chars), position + 1
        else:
            chars.append(char)
            position += 1
    raise ValueError("unterminated label value")


def parse_sample(line):
    """One sample line -> ``(name, labels, value)``; raises ValueError on a malformed line."""
    match = _NAME.match(line)
    if not match:
        raise ValueError("no metric name")
    name, position, labels = match.group(0), match.end(), {}
    if line.startswith("{", position):
        labels, position = _parse_labels(line, position + 1)
    rest = line[position:].split()
    if len(rest) not in (1, 2) or (position < len(line) and line[position] not in " \t"):
        raise ValueError("expected a value (and an optional timestamp) after the name and labels")
    if len(rest) == 2 and not re.fullmatch(r"-?\d+", rest[1]):
        raise ValueError("bad timestamp %r" % rest[1])
    return name, labels, parse_value(rest[0])


def parse_exposition(text):
    """Every sample of Prometheus text -> list of ``(name, labels, value)``.

    Comment lines (``# HELP``, ``# TYPE``, any ``#``) and blank lines are skipped; any other
    line that is not a sample raises ExpositionError naming its number and content.

    A series (name and label set) given twice is an error naming both lines. The format allows each series once
    (Prometheus keeps the first and counts the rest as duplicates; client libraries refuse to expose them): a body
    that repeats one is two exporters' text run together or a proxy's echo, and adding or picking its values would
    report a figure no server holds (two running requests read as four).
    """
    samples, first_line = [], {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            sample = parse_sample(stripped)
        except ValueError as exc:
            raise ExpositionError("line %d is not Prometheus text (%s): %s" % (number, exc, short_text(stripped)))
        series = (sample[0], frozenset(sample[1].items()))
        if series in first_line:
            raise ExpositionError("line %d is a duplicate series of line %d (each series may appear once): %s"
                                  % (number, first_line[series], short_text(stripped)))
        first_line[series] = number
        samples.append(sample)
    return samples


def escape_label_value(value):
    """A label value as the text format writes it between its quotes: backslash, double quote and line feed
    escaped (the only three the format escapes), so no value can end its quotes or start a new sample line."""
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def format_sample(name, labels, value):
    """One sample line, ``name{label="value",...} value``: labels in name order, values escaped, a whole number as
    itself and any other as Python's shortest round-trip repr (Go's ParseFloat reads either back to the same float)."""
    if not _NAME.fullmatch(name) or not all(_LABEL_NAME_ONLY.fullmatch(label) for label in labels):
        raise ValueError("not a metric or label name: %r %r" % (name, sorted(labels)))
    text = ",".join('%s="%s"' % (label, escape_label_value(labels[label])) for label in sorted(labels))
    number = "%d" % value if is_int(value) else repr(float(value))
    return "%s%s %s" % (name, "{%s}" % text if text else "", number)


def buckets(samples, name):
    """A histogram's cumulative counts: upper bound ``le`` (a float, ``inf`` for +Inf) -> count summed over every
    other label, from the ``<name>_bucket`` samples; {} when there are none."""
    totals = {}
    for sample_name, labels, value in samples:
        if sample_name == name + "_bucket" and "le" in labels:
            try:
                bound = parse_value(labels["le"])
            except ValueError:
                raise ExpositionError("%s_bucket has le=%r, not a number" % (name, short_text(labels["le"])))
            totals[bound] = totals.get(bound, 0.0) + value
    return totals


def sums(samples, names):
    """name -> the sum of its samples (every label set) for each of ``names`` present."""
    totals = {}
    for name, _labels, value in samples:
        if name in names:
            totals[name] = totals.get(name, 0.0) + value
    return totals
