# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""safe_io: the bounded readers every module shares, one behaviour per test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import socket
import threading

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.io import safe_io


class Custom(Exception):
    pass


def test_read_text_raises_the_callers_class_and_caps_what_it_reads(tmp_path):
    path = tmp_path / "RECORD"
    path.write_bytes(b"a" * 100)
    assert safe_io.read_text(str(path), Custom) == "a" * 100
    with pytest.raises(Custom, match="RECORD: larger than 99 bytes"):
        safe_io.read_text(str(path), Custom, limit=99)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(Custom, match="not UTF-8 text"):
        safe_io.read_text(str(path), Custom)
    with pytest.raises(Custom, match="cannot read file"):
        safe_io.read_text(str(tmp_path / "absent"), Custom)
    with pytest.raises(Custom, match="cannot read file"):
        safe_io.read_text(str(tmp_path / "nul\x00byte"), Custom)


def test_a_fifo_is_refused_at_once_instead_of_blocking_for_a_writer(tmp_path):
    # Opening a FIFO for reading blocks until a writer comes: a manifest or state file replaced by one hung the
    # module forever (issue 34). The read runs in a thread so that a regression fails instead of hanging the suite.
    fifo = tmp_path / "manifest.json"
    os.mkfifo(str(fifo))
    outcome = []

    def read():
        try:
            safe_io.read_text(str(fifo), Custom)
        except Custom as exc:
            outcome.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():
        with open(str(fifo), "wb"):  # a writer releases the blocked open, so the thread ends
            pass
        pytest.fail("read_text blocked on a FIFO")
    assert outcome and "not a regular file" in outcome[0]


def test_a_directory_or_a_socket_is_not_a_regular_file(tmp_path):
    with pytest.raises(Custom, match="not a regular file|cannot read file"):
        safe_io.read_text(str(tmp_path), Custom)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "s"))
        with pytest.raises(Custom, match="cannot read file|not a regular file"):
            safe_io.read_text(str(tmp_path / "s"), Custom)
    finally:
        server.close()


def test_read_json_object_insists_on_an_object(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"a": 1}))
    assert safe_io.read_json_object(str(path)) == {"a": 1}
    path.write_text("[1]")
    with pytest.raises(safe_io.SafeIOError, match="a.json: expected a JSON object at the top level, got array"):
        safe_io.read_json_object(str(path))
    path.write_text("[" * 100000)
    with pytest.raises(Custom, match="nested too deeply|invalid JSON"):
        safe_io.read_json_object(str(path), Custom)


@pytest.mark.parametrize("value, integer, finite", [
    (3, True, True), (True, False, False), (2.5, False, True), (float("nan"), False, False),
    (float("inf"), False, False), ("3", False, False), (None, False, False),
])
def test_plain_value_checks(value, integer, finite):
    assert safe_io.is_int(value) is integer
    assert safe_io.is_finite_number(value) is finite


def test_size_text_and_type_names():
    assert safe_io.size_text(64 * 1024 * 1024) == "64 MiB" and safe_io.size_text(100) == "100 bytes"
    assert [safe_io.json_type_name(v) for v in (None, True, {}, [], 1.5)] == ["null", "bool", "object", "array", "float"]


def test_short_text_is_one_line_and_cut_with_a_mark():
    assert safe_io.short_text("a\n  b\tc") == "a b c"
    assert safe_io.short_text("x" * 10, limit=10) == "x" * 10
    assert safe_io.short_text("x" * 11, limit=10) == "x" * 7 + "..."


@pytest.mark.parametrize("value", ["name\n", "name\r", "\nname", "na\nme", "name ", "", None, 3, b"name"])
def test_full_match_refuses_what_re_match_with_dollar_lets_through(value):
    assert not safe_io.full_match(r"^[a-z]+$", value)
    assert not safe_io.full_match(re.compile(r"[a-z]+"), value)


def test_full_match_accepts_the_whole_name():
    assert safe_io.full_match(r"[a-z]+", "name")
    assert safe_io.full_match(re.compile(r"^[a-z]+$"), "name")
    # What the helper exists for: re.match with "$" takes one trailing newline.
    assert re.match(r"^[a-z]+$", "name\n")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), "1", "nan", True, None, [1]])
def test_finite_number_refuses_non_finite_and_non_numbers_naming_the_field(value):
    with pytest.raises(safe_io.SafeIOError, match="baseline.tok_s must be a finite number"):
        safe_io.finite_number(value, "baseline.tok_s")


def test_finite_number_bounds_name_the_field_and_value():
    assert safe_io.finite_number(3, "x", minimum=0, maximum=3) == 3.0
    with pytest.raises(safe_io.SafeIOError, match="x must be greater than 0, got 0"):
        safe_io.finite_number(0, "x", above=0)
    with pytest.raises(safe_io.SafeIOError, match="x must be at least 1, got 0.5"):
        safe_io.finite_number(0.5, "x", minimum=1)
    with pytest.raises(safe_io.SafeIOError, match="x must be at most 1, got 2"):
        safe_io.finite_number(2, "x", maximum=1)


@pytest.mark.parametrize("value", ["5s\n  server evil 1.2.3.4:80", "a\rb", "a\x00b", "a\u2028b", "a\x85b"])
def test_single_line_refuses_line_breaks_naming_the_variable(value):
    with pytest.raises(safe_io.SafeIOError, match="vllm_router_check_interval must not contain"):
        safe_io.single_line(value, "vllm_router_check_interval")


def test_single_line_refuses_the_formats_own_characters_and_non_strings():
    assert safe_io.single_line("5s", "v") == "5s"
    with pytest.raises(safe_io.SafeIOError, match="must not contain '\"'"):
        safe_io.single_line('unit"x', "v", forbidden='"\\')
    with pytest.raises(safe_io.SafeIOError, match="v must be a string, got int"):
        safe_io.single_line(5, "v")


def test_a_huge_int_is_a_verdict_not_an_overflow():
    assert safe_io.is_finite_number(10 ** 400)
    with pytest.raises(safe_io.SafeIOError, match="x is too large"):
        safe_io.finite_number(10 ** 400, "x")
