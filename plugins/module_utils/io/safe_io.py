# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Reading what the collection did not write: bounded text and JSON reads, and the checks of plain values that
every module shares.

A file given by an operator or found on a host may be huge, not UTF-8, not JSON, nested past Python's recursion
limit, or not a file at all (a FIFO blocks an ``open`` for reading until a writer comes, forever). Each reader here
refuses those with the caller's exception class and a message that names the file, and never blocks on one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import stat

# What a text file read through read_text may hold at most, unless the caller says less.
MAX_TEXT_BYTES = 64 * 1024 * 1024
# How a file the collection did not write is opened: read-only, never waiting (a FIFO without a writer would block
# a plain open forever; the caller checks fstat for a regular file next), never kept by a child, never a terminal.
READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
              | getattr(os, "O_NOCTTY", 0))


class SafeIOError(ValueError):
    """A file or value the collection cannot use; the message names it."""


def size_text(count):
    """``64 MiB``, ``512 KiB`` or ``100 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale and count % scale == 0:
            return "%d %s" % (count // scale, unit)
    return "%d bytes" % count


def open_regular(path, error=SafeIOError):
    """A read handle on ``path`` when it is a regular file; opened without blocking, so a FIFO (which would wait
    for a writer) or a device is refused instead of hanging the module."""
    try:
        descriptor = os.open(path, READ_FLAGS)
    except (IOError, OSError, TypeError, ValueError) as exc:
        raise error("%s: cannot read file: %s" % (path, exc))
    try:
        mode = os.fstat(descriptor).st_mode
    except OSError as exc:
        os.close(descriptor)
        raise error("%s: cannot read file: %s" % (path, exc))
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise error("%s: not a regular file (a FIFO, socket or device could block or never end); refusing to read it"
                    % path)
    return os.fdopen(descriptor, "rb")


def read_text(path, error=SafeIOError, limit=MAX_TEXT_BYTES):
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes; a file that is larger, not a regular
    file, or cannot be read or decoded, raises ``error`` naming the file (and the cap)."""
    with open_regular(path, error) as handle:
        try:
            raw = handle.read(limit + 1)
        except (IOError, OSError) as exc:
            raise error("%s: cannot read file: %s" % (path, exc))
    if len(raw) > limit:
        raise error("%s: larger than %s, the most this file may hold; refusing to read it" % (path, size_text(limit)))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error("%s: not UTF-8 text: %s" % (path, exc))


def parse_json(text, where, error=SafeIOError):
    """``json.loads`` whose every failure (bad syntax, a number over int()'s digit limit, nesting deeper than
    Python's recursion limit) raises ``error`` naming ``where``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise error("%s: invalid JSON: nested too deeply" % where)
    except ValueError as exc:
        raise error("%s: invalid JSON: %s" % (where, str(exc)[:300]))


def read_json_object(path, error=SafeIOError, limit=MAX_TEXT_BYTES):
    """Load ``path`` (at most ``limit`` bytes) as JSON and insist on a top-level object; problems raise ``error``."""
    data = parse_json(read_text(path, error, limit), path, error)
    if not isinstance(data, dict):
        raise error("%s: expected a JSON object at the top level, got %s" % (path, json_type_name(data)))
    return data


def json_type_name(value):
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def usable_cpus():
    """CPUs this process may run on (a container's or cgroup's share, not the machine's): how many workers a module
    may start."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def short_text(text, limit=120):
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters with "..." when longer:
    a value quoted in an error message."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_int(value):
    """An int that is not a bool (True is an int to isinstance)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value):
    """An int or float that is not a bool, NaN or an infinity. Every int is finite (math.isfinite would convert one
    past 1e308 to a float and raise OverflowError)."""
    if is_int(value):
        return True
    return isinstance(value, float) and math.isfinite(value)


def full_match(pattern, value):
    """True when the whole of ``value`` (a str) matches ``pattern`` (a str or compiled regex).

    ``re.match(r"^name$")`` also accepts ``"name\\n"``: ``$`` matches before one trailing newline, and that newline
    then ends up in a unit file, a textfile or a config file as a second line. Every name check goes through here.
    """
    if not isinstance(value, str):
        return False
    regex = pattern if hasattr(pattern, "fullmatch") else re.compile(pattern)
    return regex.fullmatch(value) is not None


def finite_number(value, where, error=SafeIOError, minimum=None, maximum=None, above=None):
    """``value`` as a float when it is a finite int or float (not a bool) within the bounds; otherwise ``error``
    naming ``where`` and the value. ``minimum``/``maximum`` are inclusive, ``above`` is an exclusive lower bound
    (``above=0``: strictly positive). Strings are refused, not parsed: "nan" and "inf" parse as floats."""
    if not is_finite_number(value):
        raise error("%s must be a finite number, got %s" % (where, short_text(repr(value), 80)))
    return number_in_bounds(value, where, error, minimum, maximum, above)


def number_in_bounds(value, where, error=SafeIOError, minimum=None, maximum=None, above=None):
    """``value`` (an int or float) as a float within finite_number's bounds, or ``error`` naming ``where``; a NaN
    fails every bound given. finite_number is this after its finiteness test."""
    try:
        number = float(value)
    except OverflowError:
        raise error("%s is too large, got %s" % (where, short_text(repr(value), 80)))
    if above is not None and not number > above:
        raise error("%s must be greater than %s, got %s" % (where, above, value))
    if minimum is not None and number < minimum:
        raise error("%s must be at least %s, got %s" % (where, minimum, value))
    if maximum is not None and number > maximum:
        raise error("%s must be at most %s, got %s" % (where, maximum, value))
    return number


# Characters no single-line configuration value may hold: line breaks start a new directive or key in HAProxy,
# Prometheus YAML, systemd units and textfiles; NUL ends a C string early.
LINE_BREAKS = ("\n", "\r", "\x00", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def single_line(value, where, error=SafeIOError, forbidden=""):
    """``value`` when it is a str holding no line break, NUL, or any of ``forbidden`` (the characters the target
    format gives a meaning to); otherwise ``error`` naming ``where`` and the character found."""
    if not isinstance(value, str):
        raise error("%s must be a string, got %s" % (where, json_type_name(value)))
    for char in LINE_BREAKS + tuple(forbidden):
        if char in value:
            raise error("%s must not contain %r (it would be written into a configuration file): %s"
                        % (where, char, short_text(repr(value), 80)))
    return value
