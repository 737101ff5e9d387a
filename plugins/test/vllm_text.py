# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Jinja tests for the values roles write into configuration files: ``full_match`` and ``single_line``.

Ansible's ``match`` test is ``re.match``: a pattern ``'^name$'`` also accepts ``"name\\n"``, and that newline becomes
a second line in a unit, haproxy.cfg, prometheus.yml or a textfile. Roles check names with ``full_match`` and free
text with ``single_line``; both are safe_io's checks, the ones the modules use. Documentation: vllm_full_match.yml
and vllm_single_line.yml next to this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import LINE_BREAKS, full_match


def vllm_full_match(value, pattern):
    """True when the whole string ``value`` matches ``pattern`` (no trailing newline slips through)."""
    if not isinstance(pattern, str):
        raise AnsibleFilterError("vllm_full_match: the pattern must be a string, got %r" % (pattern,))
    return full_match(pattern, value)


def vllm_single_line(value, forbidden=""):
    """True when ``value`` is a string holding no line break, NUL, or any character of ``forbidden``."""
    if not isinstance(value, str):
        return False
    return not any(char in value for char in LINE_BREAKS + tuple(forbidden))


class TestModule(object):
    def tests(self):
        return {"vllm_full_match": vllm_full_match, "vllm_single_line": vllm_single_line}
