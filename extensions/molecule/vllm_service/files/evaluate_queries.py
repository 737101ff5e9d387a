# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evaluate PromQL expressions against a Prometheus, all in one run on the monitoring host.

Usage: evaluate_queries.py PROMETHEUS_URL BASE64_JSON, where the JSON is dashboard_queries.py's list
({dashboard, panel, expr, needs_gpu}). Prints the same list with `status` (Prometheus's, or the HTTP
error) and `series` (how many series or samples came back) added to each entry.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def evaluate(url, expr):
    query = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen("%s/api/v1/query?%s" % (url.rstrip("/"), query), timeout=30) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        return "HTTP %d: %s" % (exc.code, exc.read().decode("utf-8", "replace")[:300]), 0
    result = answer.get("data", {}).get("result", [])
    return answer.get("status"), len(result) if isinstance(result, list) else 1


def main(argv):
    url, encoded = argv[1], argv[2]
    queries = json.loads(base64.b64decode(encoded).decode("utf-8"))
    for query in queries:
        query["status"], query["series"] = evaluate(url, query["expr"])
    print(json.dumps(queries))


if __name__ == "__main__":
    main(sys.argv)
