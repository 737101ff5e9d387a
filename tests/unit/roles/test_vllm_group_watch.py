# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The group watch of multi-node deployments (roles/vllm_watchdog/files/vllm_group_watch.py): its verdicts
on a scripted sequence of looks, and the real script as two processes on loopback sockets, one of which
is killed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "roles", "vllm_watchdog", "files", "vllm_group_watch.py")
TOKEN = "vllm-tiny-llama.service@10.0.0.10"


def _load():
    spec = importlib.util.spec_from_file_location("gauntlet_vllm_group_watch", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GROUP = _load()


class Script:
    """Looks that answer as scripted (True, or a reason) on a clock that advances one interval per round."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.now = 0.0
        self.looks = 0

    def look(self, peer, token, timeout):
        self.looks += 1
        assert self.answers, "the watch kept looking after the last scripted answer"
        answer = self.answers.pop(0)
        return (True, "") if answer is True else (False, answer)

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_watch(answers, misses=3, grace=10.0, peers=(("10.0.0.11", 29600),)):
    script = Script(answers)
    reason = GROUP.watch(list(peers), TOKEN, 1.0, misses, grace, look_at=script.look, clock=script.clock, sleep=script.sleep)
    return reason, script


def test_a_peer_that_answered_and_then_misses_in_a_row_stops_the_group():
    reason, script = run_watch([True, True, "refused", "refused", "refused"])
    assert reason.startswith("peer 10.0.0.11:29600 lost: 3 looks in a row failed (refused)")
    assert script.looks == 5


def test_a_look_that_answers_again_resets_the_misses():
    reason, script = run_watch([True, "refused", "refused", True, "refused", "refused", True] + ["gone"] * 3)
    assert "lost: 3 looks in a row failed (gone)" in reason
    assert script.looks == 10


def test_a_peer_that_never_answers_gets_the_grace_and_no_more():
    reason, script = run_watch(["refused"] * 100, grace=10.0)
    assert reason == "peer 10.0.0.11:29600 never answered within 10 s of the start"
    # looks at t = 0..10 are inside the grace; the one at t = 11 is past it
    assert script.looks == 12


def test_a_slow_peer_joins_within_the_grace_and_is_then_watched():
    reason, script = run_watch(["refused"] * 8 + [True, True] + ["refused"] * 3, grace=10.0)
    assert "lost: 3 looks in a row failed" in reason
    assert script.looks == 13


def test_every_peer_is_watched():
    peers = (("10.0.0.11", 29600), ("10.0.0.12", 29600))
    # looks alternate between the two peers: the second one fails from its second look on
    reason = run_watch([True, True, True, "refused", True, "refused", True, "refused"], peers=peers)[0]
    assert reason.startswith("peer 10.0.0.12:29600 lost")


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.10:29600", ("10.0.0.10", 29600)),
    ("[fd00::1]:29600", ("fd00::1", 29600)),
    ("node-1.example:1", ("node-1.example", 1)),
])
def test_endpoints_parse(text, expected):
    assert GROUP.endpoint(text) == expected


@pytest.mark.parametrize("text", ["10.0.0.10", "10.0.0.10:", ":29600", "10.0.0.10:0", "10.0.0.10:65536", "host:http"])
def test_bad_endpoints_are_refused_naming_them(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected HOST:PORT, got %r" % text):
        GROUP.endpoint(text)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(listen, peer, token=TOKEN, grace=20):
    return subprocess.Popen(
        [sys.executable, SCRIPT, "--listen", "127.0.0.1:%d" % listen, "--peer", "127.0.0.1:%d" % peer,
         "--token", token, "--interval", "0.2", "--misses", "3", "--grace", str(grace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_answer(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        answered = GROUP.look(("127.0.0.1", port), TOKEN, 0.5)[0]
        if answered:
            return True
        time.sleep(0.05)
    return False


def test_two_watches_run_together_and_the_survivor_stops_when_the_other_is_killed():
    head_port, worker_port = _free_port(), _free_port()
    head = _start(head_port, worker_port)
    worker = _start(worker_port, head_port)
    try:
        assert _wait_for_answer(head_port) and _wait_for_answer(worker_port)
        time.sleep(1.0)
        assert head.poll() is None and worker.poll() is None, "both watches keep running while both answer"
        worker.kill()
        worker.wait(5)
        started = time.monotonic()
        assert head.wait(10) == 1
        # 3 misses at 0.2 s apart, plus start-up slack for a loaded machine
        assert time.monotonic() - started < 5
        out, err = head.communicate()
        assert "peer 127.0.0.1:%d joined" % worker_port in out
        assert "stops: peer 127.0.0.1:%d lost: 3 looks in a row failed" % worker_port in err
    finally:
        for proc in (head, worker):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def test_the_watch_of_another_group_does_not_count_as_a_peer():
    mine, theirs = _free_port(), _free_port()
    other = _start(theirs, mine, token="vllm-other.service@10.0.0.10", grace=60)
    watch = _start(mine, theirs, grace=1)
    try:
        assert watch.wait(10) == 1
        err = watch.communicate()[1]
        assert "peer 127.0.0.1:%d never answered within 1 s of the start" % theirs in err
        reason = GROUP.look(("127.0.0.1", theirs), TOKEN, 1.0)[1]
        assert reason == "it answers for another group ('vllm-other.service@10.0.0.10')"
    finally:
        for proc in (other, watch):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
