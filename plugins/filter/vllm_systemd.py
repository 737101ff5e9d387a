# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quoting for systemd unit files: the one place every unit template quotes what it writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# Where a word goes decides what systemd expands in it (systemd.service(5), "Command lines"; systemd.exec(5),
# "Environment="; systemd.unit(5), "Specifiers"): % specifiers everywhere, $VARIABLES only on command lines.
CONTEXTS = ("exec", "assignment", "path")


def systemd_quote(value, context="exec"):
    """``value`` as one double-quoted word of a unit file line: backslashes and double quotes escaped, ``%``
    doubled (specifiers expand in every setting), ``$`` doubled on a command line (``context`` exec, where
    systemd expands $VARIABLES). ``assignment`` is one Environment= KEY=VALUE, ``path`` one ReadWritePaths= entry.
    A newline or NUL byte would end the unit's line and start another (a setting of the caller's choosing): refused."""
    if context not in CONTEXTS:
        raise AnsibleFilterError("systemd_quote: context must be one of %s, got %r" % (", ".join(CONTEXTS), context))
    if value is None or isinstance(value, (dict, list)):
        raise AnsibleFilterError("systemd_quote takes a string or a number, got %r" % (value,))
    text = value if isinstance(value, str) else str(value)
    if "\n" in text or "\r" in text or "\0" in text:
        raise AnsibleFilterError("systemd_quote: %r holds a newline or NUL byte, which would end the unit file's line" % (text,))
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if context == "exec":
        text = text.replace("$", "$$")
    return '"%s"' % text


class FilterModule(object):
    def filters(self):
        return {"systemd_quote": systemd_quote}
