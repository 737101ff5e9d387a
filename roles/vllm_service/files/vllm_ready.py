# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ExecStartPost readiness probe of gauntlet.vllm's vLLM units.

Keeps the unit "activating" until the server answers a real one-token completion, so that
systemd's TimeoutStartSec bounds the whole load and `systemctl is-active` means "serves".
Exits 0 once a completion comes back, 1 as soon as the main process (--main-pid, systemd's
$MAINPID) has exited, and loops otherwise. systemd does not stop an ExecStartPost= command when
the main process dies, so without that check a server that crashed on a bad argument would
leave the unit "activating" until TimeoutStartSec. The API key comes from VLLM_API_KEY (the unit's
0600 EnvironmentFile), never from the command line; an https URL's certificate is verified, and a
redirect is never followed, so the key goes nowhere but --url.
"""

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would resend the Authorization header to wherever a redirect points, http included."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener():
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context()), _NoRedirect())


def completion_works(url, model, timeout):
    body = json.dumps({"model": model, "prompt": "ready?", "max_tokens": 1, "temperature": 0}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    key = os.environ.get("VLLM_API_KEY")
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with _opener().open(request, timeout=timeout) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return False, "HTTP %d: a redirect, not followed (the API key stays with --url)" % exc.code
        return False, "HTTP %d" % exc.code
    except (OSError, ValueError) as exc:
        return False, str(getattr(exc, "reason", exc))
    tokens = (answer.get("usage") or {}).get("completion_tokens")
    return bool(tokens), "ok" if tokens else "no tokens in the answer"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between attempts")
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument("--main-pid", type=int, default=0, help="the server's pid ($MAINPID); 0 to skip the check")
    args = parser.parse_args()

    started = time.monotonic()
    last_reason = None
    while True:
        if args.main_pid and not os.path.exists("/proc/%d" % args.main_pid):
            print("vllm-ready: the server (pid %d) exited before it answered" % args.main_pid, file=sys.stderr)
            return 1
        ok, reason = completion_works(args.url, args.model, args.request_timeout)
        if ok:
            print("vllm-ready: %s answered a completion after %.0f s of probing" % (args.model, time.monotonic() - started))
            return 0
        # Log only changes, so a 36-minute load does not fill the journal with connection refusals.
        if reason != last_reason:
            print("vllm-ready: not ready yet (%s)" % reason, file=sys.stderr)
            last_reason = reason
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
