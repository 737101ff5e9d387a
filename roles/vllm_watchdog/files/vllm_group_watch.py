# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Group watch of a vLLM deployment that spans nodes (vllm-<name>-group.service on every node).

vLLM's processes on different nodes do not take each other down: a data-parallel head whose
headless worker died keeps its API server up and keeps sending that engine its share of the
requests, and a worker whose head died waits for it. This watch makes the nodes one deployment.
Each node's watch answers on a TCP port (--listen) while its vLLM unit runs (the watch unit is
bound to it both ways), and looks at every other node's watch (--peer) every --interval seconds.
A peer that answered once and then misses --misses looks in a row, or one that never answers
within --grace seconds of the start, ends the watch with status 1; the vLLM unit bound to it
stops, so its own watch stops answering and the other nodes follow: one node's failure stops the
whole group within about (interval x misses) seconds per hop. A re-run of the play starts it again.

An answer is the group's token (--token) on one line: the watch of another deployment on the same
port does not count as this group's peer. Standard library only (it runs on the vLLM venv's Python).
"""

import argparse
import socket
import sys
import threading
import time

ANSWER_BYTES = 256


def endpoint(text):
    """'host:port' or '[v6]:port' as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
    return host.strip("[]"), int(port)


def serve(listener, token, stop):
    """Answer every connection with the token until stop is set."""
    listener.settimeout(0.5)
    while not stop.is_set():
        try:
            conn = listener.accept()[0]
        except socket.timeout:
            continue
        except OSError:
            return
        with conn:
            try:
                conn.sendall((token + "\n").encode())
            except OSError:
                pass


def listen(address):
    """A listening socket on (host, port); SO_REUSEADDR so a restart does not wait for TIME_WAIT."""
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(16)
    return sock


def look(peer, token, timeout):
    """One look at a peer's watch: (answered as this group, why not)."""
    try:
        with socket.create_connection(peer, timeout=timeout) as conn:
            conn.settimeout(timeout)
            answer = conn.recv(ANSWER_BYTES).decode(errors="replace").strip()
    except OSError as exc:
        return False, str(exc) or type(exc).__name__
    if answer != token:
        return False, "it answers for another group (%r)" % answer[:64]
    return True, ""


class PeerState(object):
    """What the watch knows of one peer: whether it has answered yet, and the misses since."""

    def __init__(self, peer):
        self.peer = peer
        self.seen = False
        self.misses = 0
        self.reason = ""

    def record(self, answered, reason):
        if answered:
            if not self.seen:
                print("peer %s:%d joined" % self.peer, flush=True)
            self.seen, self.misses, self.reason = True, 0, ""
        elif self.seen:
            self.misses += 1
            self.reason = reason

    def verdict(self, misses, grace, elapsed):
        """Why the group must stop because of this peer, or '' while it may go on."""
        if self.seen and self.misses >= misses:
            return "peer %s:%d lost: %d looks in a row failed (%s)" % (self.peer + (self.misses, self.reason))
        if not self.seen and elapsed > grace:
            return "peer %s:%d never answered within %d s of the start" % (self.peer + (grace,))
        return ""


def watch(peers, token, interval, misses, grace, look_at=look, clock=time.monotonic, sleep=time.sleep):
    """Look at every peer every interval until one is lost: the reason (the watch then exits 1)."""
    states = [PeerState(peer) for peer in peers]
    started = clock()
    while True:
        for state in states:
            state.record(*look_at(state.peer, token, interval))
            reason = state.verdict(misses, grace, clock() - started)
            if reason:
                return reason
        sleep(interval)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--listen", type=endpoint, required=True, help="HOST:PORT this node's watch answers on")
    parser.add_argument("--peer", type=endpoint, action="append", default=[], help="HOST:PORT of another node's watch")
    parser.add_argument("--token", required=True, help="the group's name, which every node's watch answers")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--misses", type=int, default=3)
    parser.add_argument("--grace", type=float, default=900.0, help="seconds a peer may take to answer at all")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    stop = threading.Event()
    listener = listen(args.listen)
    threading.Thread(target=serve, args=(listener, args.token, stop), daemon=True).start()
    print("group %s: answering on %s:%d, watching %s" % (
        args.token, args.listen[0], args.listen[1], ", ".join("%s:%d" % peer for peer in args.peer) or "no peer"), flush=True)
    reason = watch(args.peer, args.token, args.interval, args.misses, args.grace)
    stop.set()
    listener.close()
    print("group %s stops: %s" % (args.token, reason), file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
