# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chat template rule both vllm_service (which copies) and vllm_deploy (which shows the command line) use."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gauntlet.vllm.plugins.filter.vllm_serve import SHIPPED_TEMPLATES, vllm_chat_template


def test_a_shipped_template_lands_in_the_hosts_template_folder():
    assert os.path.isfile(os.path.join(SHIPPED_TEMPLATES, "chatml-tools.jinja"))
    assert vllm_chat_template("chatml-tools.jinja") == {"shipped": True, "path": "/etc/vllm/chat-templates/chatml-tools.jinja"}


def test_anything_else_is_passed_as_given():
    for given in ("", None, "/srv/templates/chatml-tools.jinja", "template_chatml.jinja", "../files/chatml-tools.jinja"):
        assert vllm_chat_template(given) == {"shipped": False, "path": "" if given is None else given}
