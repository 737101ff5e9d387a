# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Prometheus text exposition format, read strictly: the one parser of vLLM's ``/metrics`` for every module
(vllm_monitoring_info's figures, vllm_bench's server counters and queue).

Labels with escaped quotes, ``NaN``/``+Inf``, optional timestamps. A body that is not exposition text (an HTML
error page, another program on the port) is an error naming the line, not a silent zero.

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

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import short_text


class ExpositionError(ValueError):
    """Text that is not the Prometheus exposition format; the message names the line."""


# ---- Prometheus text format ------------------------------------------------------------------

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}


def parse_value(text):
    """A sample value as Go's ParseFloat reads it in the text format (``NaN``, ``+Inf``, ``-Inf``, 1e3)."""
    lowered = text.lower()
    if lowered in ("nan", "+inf", "-inf", "inf"):
        return float(lowered)
    if not re.match(r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$", lowered):
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
    if len(rest) == 2 and not re.match(r"^-?\d+$", rest[1]):
        raise ValueError("bad timestamp %r" % rest[1])
    return name, labels, parse_value(rest[0])


def parse_exposition(text):
    """Every sample of Prometheus text -> list of ``(name, labels, value)``.

    Comment lines (``# HELP``, ``# TYPE``, any ``#``) and blank lines are skipped; any other
    line that is not a sample raises ExpositionError naming its number and content.
    """
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            samples.append(parse_sample(stripped))
        except ValueError as exc:
            raise ExpositionError("line %d is not Prometheus text (%s): %s" % (number, exc, short_text(stripped)))
    return samples


def sums(samples, names):
    """name -> the sum of its samples (every label set) for each of ``names`` present."""
    totals = {}
    for name, _labels, value in samples:
        if name in names:
            totals[name] = totals.get(name, 0.0) + value
    return totals
