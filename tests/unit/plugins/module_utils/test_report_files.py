# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_files.write_report, the one writer of both report modules: check mode says exactly what a real run
would change and writes nothing; directories a real run could not use are refused in both modes; the PNG is
written whole or not at all."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import struct
import zlib

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files

NAME = "vllm_test_report"
MARKER = report_files.marker_of(NAME)


class FakeModule(object):
    """What write_report needs of AnsibleModule."""

    def atomic_move(self, source, destination):
        os.rename(source, destination)


def marked_png():
    """A 1x1 PNG whose Software text is the marker, as save_figure writes it (tEXt before the image data)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"tEXt", b"Software\x00" + MARKER.encode()) + chunk(b"IDAT", zlib.compress(b"\x00\x00"))
            + chunk(b"IEND", b""))


class Renderer(object):
    """Draws a stand-in PNG (carrying the marker as its Software text, like save_figure) and counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, path):
        self.calls += 1
        with open(path, "wb") as handle:
            handle.write(marked_png())


def snapshot(folder):
    """Every file under ``folder`` with its bytes, mode and modification time."""
    found = {}
    for root, dummy, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                found[path] = (handle.read(), os.stat(path).st_mode, os.stat(path).st_mtime_ns)
    return found


def write(folder, check_mode, doc=None, plot=True, history=None, renderer=None):
    files = report_files.report_paths(str(folder / "out"), "run", plot, history_file=False if history is None else None)
    png = (renderer or Renderer()) if plot else None
    return report_files.write_report(FakeModule(), NAME, files, doc or {"figure": 1}, "| table |\n", png_renderer=png,
                                     check_mode=check_mode, history_line=history)


def remove_png(folder):
    os.remove(str(folder / "out" / "run.png"))


def edit_markdown(folder):
    with open(str(folder / "out" / "run.md"), "a") as handle:
        handle.write("a hand edit\n")


def remove_output_dir(folder):
    shutil.rmtree(str(folder / "out"))


# state name -> (how to change a finished report, write options, what a real run then rewrites)
STATES = {
    "nothing written yet": (remove_output_dir, {}, {"run.json", "run.md", "run.png"}),
    "written, nothing differs": (None, {}, set()),
    "only the PNG missing": (remove_png, {}, {"run.png"}),
    "the Markdown edited": (edit_markdown, {}, {"run.md", "run.png"}),
    "other figures in the JSON": (None, {"doc": {"figure": 2}}, {"run.json", "run.png"}),
    "no plot, PNG missing": (remove_png, {"plot": False}, set()),
    "a history line to append": (None, {"history": '{"generator": "%s"}\n' % MARKER}, {"history.jsonl"}),
}


@pytest.mark.parametrize("state", sorted(STATES))
def test_check_mode_predicts_the_real_run_and_writes_nothing(tmp_path, state):
    change, options, rewritten = STATES[state]
    write(tmp_path, False, history=options.get("history"))
    if change is not None:
        change(tmp_path)
    before = snapshot(tmp_path)
    renderer = Renderer()
    predicted = write(tmp_path, True, renderer=renderer, **options)
    assert snapshot(tmp_path) == before and renderer.calls == 0
    real = write(tmp_path, False, **options)
    after = snapshot(tmp_path)
    changed_files = {os.path.basename(path) for path in after if before.get(path) != after[path]}
    assert predicted["changed"] is real["changed"] is bool(rewritten), state
    assert changed_files == rewritten, state


def test_a_rerun_with_the_same_report_changes_nothing(tmp_path):
    renderer = Renderer()
    assert write(tmp_path, False, renderer=renderer)["changed"] is True
    stamps = snapshot(tmp_path)
    assert write(tmp_path, False, renderer=renderer)["changed"] is False
    assert write(tmp_path, True, renderer=renderer)["changed"] is False
    assert snapshot(tmp_path) == stamps and renderer.calls == 1


def test_written_files_are_0640_and_marked(tmp_path):
    result = write(tmp_path, False, history='{"generator": "%s"}\n' % MARKER)
    assert sorted(result["files"]) == ["history", "json", "markdown", "png"]
    for path in result["files"].values():
        assert os.stat(path).st_mode & 0o777 == 0o640, path
        with open(path, "rb") as handle:
            assert MARKER.encode() in handle.read(), path


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_output_dir_that_is_a_file_is_refused_in_both_modes(tmp_path, check_mode):
    (tmp_path / "out").write_text("not a directory\n")
    with pytest.raises(report_files.ReportFileError, match="output_dir: %s exists and is not a directory"
                       % (tmp_path / "out")):
        write(tmp_path, check_mode)
    assert (tmp_path / "out").read_text() == "not a directory\n"


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_history_file_in_a_missing_directory_is_refused_in_both_modes(tmp_path, check_mode):
    history = tmp_path / "gone" / "history.jsonl"
    files = dict(report_files.report_paths(str(tmp_path / "out"), "run", False), history=str(history))
    with pytest.raises(report_files.ReportFileError, match="history_file: %s: its directory %s does not exist"
                       % (history, tmp_path / "gone")):
        report_files.write_report(FakeModule(), NAME, files, {}, "", check_mode=check_mode, history_line="{}\n")
    assert sorted(os.listdir(str(tmp_path))) == []


def test_a_png_that_fails_to_draw_leaves_nothing_half_written(tmp_path):
    def broken(path):
        with open(path, "wb") as handle:
            handle.write(marked_png()[:20])
        raise RuntimeError("matplotlib gave up")

    with pytest.raises(RuntimeError):
        write(tmp_path, False, renderer=broken)
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["run.json", "run.md"]


def test_a_foreign_file_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run.png").write_bytes(b"someone's picture")
    for check_mode in (True, False):
        with pytest.raises(report_files.ReportFileError, match="refusing to overwrite .*run.png"):
            write(tmp_path, check_mode)
        assert sorted(os.listdir(str(tmp_path / "out"))) == ["run.png"]


def test_the_json_document_carries_the_marker_with_sorted_keys():
    assert report_files.json_document(NAME, {"b": 1, "a": [2]}) == (
        '{\n  "a": [\n    2\n  ],\n  "b": 1,\n  "generator": "%s"\n}\n' % MARKER)


def test_the_prologue_names_a_bad_report_name():
    assert report_files.prologue_problem("../x", False) == "name: '../x' must be a plain file name"
    assert report_files.prologue_problem(" ", False) == "name: ' ' must be a plain file name"
    assert report_files.prologue_problem("run", False) is None


def test_the_report_folder_another_host_created_meanwhile_is_used(tmp_path):
    # Two hosts of one play write into one folder: the other created it between the check and this call.
    from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files as made
    folder = str(tmp_path / "reports")
    made.make_output_dir(folder)
    made.make_output_dir(folder)  # exists now: no error
    assert os.path.isdir(folder)
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(OSError):
        made.make_output_dir(str(blocked))
