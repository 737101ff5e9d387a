# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""safe_io: the bounded readers every module shares, one behaviour per test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
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
