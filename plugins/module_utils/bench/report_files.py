# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing report files on the controller: whole or not at all, owner and group only, and never over a file
that some other program wrote.

Every file a report module writes carries a marker, the module's name (``gauntlet.vllm.<module>``), where that
format keeps such a thing: the top-level ``generator`` key of the JSON, the first line of the Markdown (exactly
``markdown_marker``), the ``Software`` text chunk of the PNG, the ``generator`` key of the history's first line.
Before it replaces or appends to a file, the module reads that one place (bounded, regular files only, never
waiting on a FIFO); a file without the marker there belongs to somebody else, even when it mentions the module, and
is left alone: the module fails naming it and saying why. Reports may hold the workload and unit details of a
deployment, so they are 0640.

``write_report`` is the one way both report modules write: the marker check, the directory, the JSON and
Markdown (left alone when their bytes would not change), the PNG and a history line, and in check mode the
same decisions without writing (its ``changed`` is what a real run would report). ``pyplot`` and the
``*_figure``/``finish_*axis``/``*rate_*`` helpers are the PNG set-up both modules share, ``rate_text`` and
``slo_text`` the way both write a request rate and an SLO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct
import tempfile

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.text.converters import to_bytes

# The SLO keys (vllm_bench's goodput) and the latency each limits: bench_traffic defines them.
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.bench_traffic import SLO_METRICS
# open_regular: the one "regular file only, never wait on a FIFO" open; the marker tests need its bytes, not text.
from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import (
    json_type_name,
    open_regular,
    parse_json,
    read_json_object,
    short_text,
    size_text,
)

REPORT_MODE = 0o640
# How much of a PNG the marker test reads: matplotlib writes its text chunks right after the header, before the image
# data. A history's first line holds one run's figures, a few KiB; one longer than this is no line of ours.
MARKER_WINDOW = 64 * 1024
HISTORY_LINE_MAX = 1024 * 1024
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The Markdown's first line, with the marker.
MARKDOWN_LINE = "<!-- written by %s: edits are overwritten -->\n"


class ReportFileError(Exception):
    """A report file cannot be written without destroying something that is not ours."""


def marker_of(module_name):
    return "gauntlet.vllm.%s" % module_name


def markdown_marker(module_name):
    return MARKDOWN_LINE % marker_of(module_name)


# ---- is it ours? one marker test per format ---------------------------------------------------

def _read_head(path, limit):
    """The first ``limit`` bytes of the regular file ``path`` (opened without waiting on a FIFO)."""
    with open_regular(path, ReportFileError) as handle:
        try:
            return handle.read(limit)
        except (IOError, OSError) as exc:
            raise ReportFileError("%s: cannot read file: %s" % (path, exc))


def _generator_problem(document, marker, where):
    """Why ``document`` (parsed JSON) is not one of ours: its top-level ``generator`` must be exactly ``marker``."""
    if not isinstance(document, dict):
        return "%s is %s, not a JSON object" % (where, json_type_name(document))
    if "generator" not in document:
        return "%s has no generator key" % where
    if document["generator"] != marker:
        return "%s has the generator %s" % (where, short_text(json.dumps(document["generator"]), 80))
    return None


def _json_problem(path, marker):
    # The whole file is parsed (bounded): a "generator" anywhere but the top level says nothing about who wrote it.
    return _generator_problem(read_json_object(path, ReportFileError), marker, "its top level")


def _markdown_problem(path, marker):
    line = to_bytes(MARKDOWN_LINE % marker)
    if _read_head(path, len(line)) != line:
        return "its first line is not the marker line %s" % line.decode().strip()
    return None


def _png_text(kind, data):
    """The text of a ``Software`` tEXt or iTXt chunk (``kind``, ``data``), None for any other chunk. A compressed
    iTXt is never one of ours (matplotlib writes its text plain): it gives a text no marker equals."""
    keyword, separator, rest = data.partition(b"\x00")
    if keyword != b"Software" or not separator or kind not in (b"tEXt", b"iTXt"):
        return None
    if kind == b"tEXt":
        return rest.decode("latin-1")
    # iTXt: compression flag, compression method, language tag NUL, translated keyword NUL, text (UTF-8).
    fields = rest[2:].split(b"\x00", 2)
    if rest[:1] != b"\x00" or len(fields) != 3:
        return "(compressed or malformed iTXt)"
    return fields[2].decode("utf-8", "replace")


def png_software(head):
    """The ``Software`` text of the PNG that starts with the bytes ``head``: its first Software tEXt/iTXt chunk
    before the image data, None when there is none within ``head``; ReportFileError when ``head`` is no PNG."""
    if not head.startswith(PNG_SIGNATURE):
        raise ReportFileError("it is not a PNG")
    offset = len(PNG_SIGNATURE)
    while offset + 8 <= len(head):
        length, kind = struct.unpack(">I4s", head[offset:offset + 8])
        data = head[offset + 8:offset + 8 + length]
        if kind in (b"IDAT", b"IEND") or len(data) < length:
            return None
        text = _png_text(kind, data)
        if text is not None:
            return text
        offset += 12 + length
    return None


def _png_problem(path, marker):
    software = png_software(_read_head(path, MARKER_WINDOW))
    if software is None:
        return "no Software text before its image data"
    if software != marker:
        return "its Software text is %s" % short_text(repr(software), 80)
    return None


def _history_problem(path, marker):
    # The first line only: the module creates the file with its first line and only ever appends its own, so the
    # first line says who started it, and reading it stays bounded however long the history grows (every line
    # would mean reading the whole file before each append).
    head = _read_head(path, HISTORY_LINE_MAX + 1)
    line, newline, dummy = head.partition(b"\n")
    if not newline and len(head) > HISTORY_LINE_MAX:
        return "its first line is longer than %s" % size_text(HISTORY_LINE_MAX)
    try:
        document = parse_json(line.decode("utf-8"), "its first line", ReportFileError)
    except UnicodeDecodeError:
        return "its first line is not UTF-8 text"
    return _generator_problem(document, marker, "its first line")


MARKER_TESTS = {"json": _json_problem, "markdown": _markdown_problem, "png": _png_problem,
                "history": _history_problem}


def marker_problem(path, marker, kind):
    """None when ``path`` is absent or carries ``marker`` the way a ``kind`` file (``json``, ``markdown``, ``png``,
    ``history``) of a report module does; else why it is not ours (a link, not a regular file, not that format,
    no marker in its place)."""
    if not os.path.lexists(path):
        return None
    if os.path.islink(path):
        return "it is a symbolic link"
    try:
        return MARKER_TESTS[kind](path, marker)
    except ReportFileError as exc:
        message = str(exc)
        return message[len(path) + 2:] if message.startswith(path + ": ") else message


def is_ours(path, marker, kind):
    """True when ``path`` is absent or carries ``marker`` where a ``kind`` file keeps it (see ``marker_problem``)."""
    return marker_problem(path, marker, kind) is None


def check_ours(path, marker, kind):
    problem = marker_problem(path, marker, kind)
    if problem is not None:
        raise ReportFileError(
            "refusing to overwrite %s: it was not written by %s (%s). Move it away, or choose another output_dir or "
            "name." % (path, marker, problem))


def would_change(path, data):
    """Whether writing ``data`` to ``path`` would change it (check mode's prediction)."""
    try:
        with open(path, "rb") as handle:
            return handle.read() != to_bytes(data)
    except (IOError, OSError):
        return True


def write_atomic(module, path, data, unless_unchanged=False):
    """Write ``data`` to ``path`` through a temporary file and ``atomic_move``, so a reader never sees half a
    report (whose marker ``write_report`` checked first). With ``unless_unchanged``, a file that already holds
    exactly ``data`` is left alone (a re-run then reports no change). Returns whether it wrote."""
    data = to_bytes(data)
    if unless_unchanged and not would_change(path, data):
        return False
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.chmod(temp, REPORT_MODE)
    module.atomic_move(temp, path)
    # atomic_move gives a new file the umask's mode and an old one its old mode: reports are 0640 either way.
    os.chmod(path, REPORT_MODE)
    return True


def append_line(path, line, marker):
    """Append one line to a history file that is ours (or new, then created 0640)."""
    check_ours(path, marker, "history")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, REPORT_MODE)
    with os.fdopen(descriptor, "ab") as stream:
        stream.write(to_bytes(line))


# ---- one report: paths, prologue, writing (or predicting) every file -------------------------

def report_paths(output_dir, name, plot, history_file=False):
    """The files of report ``name``: ``json``, ``markdown``, ``png`` (None without ``plot``), and, unless
    ``history_file`` is False, ``history`` (the given path, or ``history.jsonl`` in ``output_dir``)."""
    base = os.path.join(output_dir, name)
    files = {"json": base + ".json", "markdown": base + ".md", "png": base + ".png" if plot else None}
    if history_file is not False:
        files["history"] = history_file or os.path.join(output_dir, "history.jsonl")
    return files


def prologue_problem(name, plot):
    """Why a report cannot be written (``name`` not a plain file name, a plot without matplotlib), or None."""
    if "/" in name or not name.strip():
        return "name: '%s' must be a plain file name" % name
    if plot and pyplot() is None:
        return missing_required_lib("matplotlib", reason="for the PNG plot (or set plot: false)")
    return None


def json_document(module_name, document):
    """The JSON file's text: ``document`` with the module's ``generator`` marker, indented, keys sorted."""
    return json.dumps(dict(document, generator=marker_of(module_name)), indent=2, sort_keys=True) + "\n"


def check_targets(files, output_dir, marker):
    """Refuse, before anything is written (also in check mode), every path that is not ours and directories a
    real run could not use: ``output_dir`` that is not a directory, a history file in a directory that is missing."""
    for kind, path in files.items():
        if path:
            check_ours(path, marker, kind)
    if os.path.lexists(output_dir) and not os.path.isdir(output_dir):
        raise ReportFileError("output_dir: %s exists and is not a directory" % output_dir)
    history = files.get("history")
    folder = os.path.dirname(history or "") or "."
    if history and os.path.normpath(folder) != os.path.normpath(output_dir) and not os.path.isdir(folder):
        raise ReportFileError("history_file: %s: its directory %s does not exist" % (history, folder))


def planned_changes(files, contents, png_renderer, history_line):
    """What a run would change: the data files whose bytes differ, the PNG (drawn when a data file changes or it
    is missing: it follows the data, so it is never rendered only to be compared), the history (always appended)."""
    changes = [key for key in ("json", "markdown") if would_change(files[key], contents[key])]
    if png_renderer is not None and files["png"] and (changes or not os.path.exists(files["png"])):
        changes.append("png")
    if history_line is not None:
        changes.append("history")
    return changes


def write_png(module, path, png_renderer):
    """Draw the PNG into a temporary file beside ``path`` and move it there whole, 0640."""
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".png")
    os.close(handle)
    try:
        png_renderer(temp)
        os.chmod(temp, REPORT_MODE)
        module.atomic_move(temp, path)
    finally:
        if os.path.lexists(temp):
            os.remove(temp)
    os.chmod(path, REPORT_MODE)


def make_output_dir(output_dir):
    """Create the report folder unless it exists; several hosts of one play write theirs into the same folder at
    once, so another may create it between the check and the call (a fleet CI run of 2026-12-07: File exists)."""
    try:
        os.makedirs(output_dir, 0o750)
    except OSError:
        if not os.path.isdir(output_dir):
            raise


def write_report(module, module_name, files, json_doc, markdown, png_renderer=None, check_mode=False,
                 history_line=None):
    """Write report ``files`` (from ``report_paths``) of ``module_name``, or in check mode say what would change.

    ``json_doc`` is a dict (written with the marker, see ``json_document``), ``markdown`` the text (written after
    the marker line), ``png_renderer`` a function drawing the PNG at the path it is given (None: no PNG),
    ``history_line`` a line appended to ``files["history"]`` (None: no history). Files that are not ours are
    refused first (ReportFileError) in both modes. Returns ``{"files": files, "changed": bool}``; check mode's
    ``changed`` is the real run's: a data file missing or with other bytes, the PNG then or when missing, a history
    line always.
    """
    output_dir = os.path.dirname(files["json"])
    check_targets(files, output_dir, marker_of(module_name))
    contents = {"json": json_document(module_name, json_doc), "markdown": markdown_marker(module_name) + markdown}
    changes = planned_changes(files, contents, png_renderer, history_line)
    if check_mode:
        return {"files": files, "changed": bool(changes)}
    make_output_dir(output_dir)
    for key in ("json", "markdown"):
        if key in changes:
            write_atomic(module, files[key], contents[key])
    if "png" in changes:
        write_png(module, files["png"], png_renderer)
    if "history" in changes:
        append_line(files["history"], history_line, marker_of(module_name))
    return {"files": files, "changed": bool(changes)}


def write_report_or_fail(module, module_name, report, history_line=None):
    """``write_report`` for a report module's ``report`` (``files``, ``json_doc``, ``markdown``, ``png``), failing
    the module with the files when one of them is not ours; returns what ``write_report`` returns."""
    try:
        return write_report(module, module_name, report["files"], report["json_doc"], report["markdown"],
                            png_renderer=report["png"], check_mode=module.check_mode, history_line=history_line)
    except ReportFileError as exc:
        module.fail_json(msg=str(exc), files=report["files"])


# ---- PNG set-up shared by the report modules ------------------------------------------------

_PYPLOT = []


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display), or None without matplotlib."""
    if not _PYPLOT:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            plt = None
        _PYPLOT.append(plt)
    return _PYPLOT[0]


def two_panel_figure():
    """A figure of two plots side by side (throughput, latency), as both reports draw them."""
    return pyplot().subplots(1, 2, figsize=(11, 4.2))


def four_panel_figure():
    """Two rows of two plots (the closed-loop pair above, the open-loop pair below): ``figure, (upper, lower)``."""
    return pyplot().subplots(2, 2, figsize=(11, 8.4))


def _finish(axis, xlabel, title, unit, legend):
    axis.set_xlabel(xlabel)
    axis.set_ylabel(unit)
    axis.set_title(title)
    axis.grid(True, alpha=0.3)
    axis.legend(**legend)


def finish_axis(axis, title, unit, **legend):
    """Concurrency on a log2 x axis, ``unit`` on y, a grid and the legend (``legend``: its options)."""
    axis.set_xscale("log", base=2)
    _finish(axis, "concurrency", title, unit, legend)


def finish_rate_axis(axis, title, unit, xs, **legend):
    """Target request rate on x, log2 when the rates ``xs`` span more than a factor 4 (a ladder of doublings),
    linear otherwise; ``unit`` on y, a grid and the legend."""
    positive = [x for x in xs if x and x > 0]
    if positive and max(positive) > 4 * min(positive):
        axis.set_xscale("log", base=2)
    _finish(axis, "target request rate (req/s)", title, unit, legend)


def rate_points(rate_levels):
    """Where each open-loop level sits on a request-rate axis, in x order: ``(x, level, is_inf)``, x its target
    rate or, for an ``inf`` level (no target), the rate it achieved. Levels with neither are left out."""
    points = []
    for level in rate_levels or []:
        if not isinstance(level, dict):
            continue
        target = level.get("request_rate")
        is_inf = target == "inf"
        x = level.get("request_throughput") if is_inf else target
        if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < float("inf"):
            points.append((float(x), level, is_inf))
    return sorted(points, key=lambda point: point[0])


def plot_rate_series(axis, points, value, fmt, label, **style):
    """One series against the request rate (``points`` from ``rate_points``, ``value`` a level's y): the levels
    of a target rate joined by a line, an ``inf`` level a lone star of the same colour at the rate it achieved,
    labelled ``inf``. Returns the line."""
    finite = [(x, value(level)) for x, level, is_inf in points if not is_inf]
    line = axis.plot([x for x, dummy in finite], [y for dummy, y in finite], fmt, label=label, **style)[0]
    for x, level, is_inf in points:
        if is_inf and value(level) is not None:
            axis.plot([x], [value(level)], "*", color=line.get_color(), markersize=11)
            axis.annotate("inf", (x, value(level)), textcoords="offset points", xytext=(5, 5), fontsize="small")
    return line


def save_figure(figure, title, path, module_name):
    """Title, lay out and save the figure as a PNG carrying the module's marker in its Software text."""
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110, format="png", metadata={"Software": marker_of(module_name)})
    pyplot().close(figure)


# ---- text shared by the report modules -------------------------------------------------------

def rate_text(rate):
    """A target request rate as the reports write it: ``8``, ``6.25``, ``inf`` (``-`` for None)."""
    if rate is None:
        return "-"
    if rate == "inf" or rate == float("inf"):
        return "inf"
    return "%g" % rate


def slo_text(slo):
    """An SLO (``{ttft_ms, tpot_ms, e2el_ms}``, any of them) as ``TTFT <= 500 ms, TPOT <= 50 ms``; None without one."""
    limits = ["%s <= %g ms" % (name, slo[key]) for key, name in SLO_METRICS if (slo or {}).get(key) is not None]
    return ", ".join(limits) or None
