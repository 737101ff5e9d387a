"""Compare HAProxy and vllm-router in front of two real vLLM servers (issue 19).

Stdlib only.  The two vLLM servers must already answer /v1/completions; this
script starts HAProxy and vllm-router itself (as plain processes), measures,
and stops them again.  Backend B is stopped and started with the shell
commands given on the command line (e.g. podman kill / podman run), so the
script does not know about containers.

Scenarios (each router in turn, the order alternating between repeats):
  latency   interleaved direct / via HAProxy / via vllm-router requests,
            rotating the order every round; 1-token and 32-token completions.
  failover  steady load through the router; backend B is killed (no drain),
            started again; failed requests and time until B gets traffic.
  drain     steady load; B is drained at the router (HAProxy: admin socket
            "set server ... state drain", vllm-router: POST /remove_worker),
            stopped gracefully, started, put back (state ready / add_worker).
  auth      a stdlib echo backend records which Authorization header reaches
            the worker through each router (client request and health check).

Example (docs/router-evaluation.md, "Reproduce", has the full recipe):
  python3 scripts/router_eval.py all --backend 127.0.0.1:18001 --backend 127.0.0.1:18002 \\
      --model tiny --vllm-router /tmp/vr-venv/bin/vllm-router --down-for 8 \\
      --kill-cmd 'podman pause rt-b' --stop-cmd 'podman pause rt-b' --start-cmd 'podman unpause rt-b' \\
      --json /tmp/router-eval.json
"""

import argparse
import http.client
import http.server
import json
import socket
import statistics
import subprocess
import sys
import threading
import time

HAPROXY_PORT = 18100
ROUTER_PORT = 18200
ROUTER_METRICS_PORT = 18290
ECHO_PORT = 18300
SOCK = "/tmp/router-eval-haproxy.sock"
CFG = "/tmp/router-eval-haproxy.cfg"

HAPROXY_CFG = """global
    stats socket {sock} mode 600 level admin
    maxconn 1000
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout 502 503
frontend fe
    bind 127.0.0.1:{port}
    default_backend vllm
backend vllm
    balance leastconn
    option httpchk
    http-check send meth POST uri /v1/completions hdr Content-Type application/json {auth}body '{check_body}'
    http-check expect status 200
    default-server inter 2s fastinter 1s downinter 1s fall 2 rise 2
{servers}
"""


# ---------------------------------------------------------------- HTTP helpers

def split_hostport(hostport):
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def post(hostport, path, body, headers=None, timeout=120):
    """POST JSON; return (status, seconds). Connection errors give status 0."""
    host, port = split_hostport(hostport)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    start = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers=hdrs)
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.monotonic() - start
    except (OSError, http.client.HTTPException):
        return 0, time.monotonic() - start
    finally:
        conn.close()


def get(hostport, path, timeout=5):
    host, port = split_hostport(hostport)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return 0, ""
    finally:
        conn.close()


def completion(hostport, model, max_tokens, headers=None):
    body = {"model": model, "prompt": "The quick brown fox", "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}
    return post(hostport, "/v1/completions", body, headers)


def wait_until(pred, timeout, step=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


def served_count(backend):
    """Requests that generated more than one token, read from the backend's own /metrics.

    The load generates 8 tokens per request; health checks and our readiness probes
    generate 1, so they do not count as routed traffic.
    """
    status, text = get(backend, "/metrics")
    if status != 200:
        return None
    total = one = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_generation_tokens_count"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:request_generation_tokens_bucket") and 'le="1.0"' in line:
            one += float(line.rsplit(" ", 1)[1])
    return total - one


# ---------------------------------------------------------------- routers

def haproxy_admin(cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    s.sendall((cmd + "\n").encode())
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode()


def haproxy_server_stat(name):
    try:
        lines = haproxy_admin("show stat").splitlines()
    except OSError:
        return {}
    header = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(",")))
        if row.get("pxname") == "vllm" and row.get("svname") == name:
            return row
    return {}


class HAProxy:
    name = "haproxy"

    def __init__(self, args, backends, auth=None):
        self.args = args
        self.backends = backends
        self.url = "127.0.0.1:%d" % HAPROXY_PORT
        servers = "\n".join("    server %s %s check" % (n, b) for n, b in zip("ab", backends))
        check_body = json.dumps({"model": args.model, "prompt": "hi", "max_tokens": 1})
        auth_hdr = "hdr Authorization '%s' " % auth if auth else ""
        with open(CFG, "w") as f:
            f.write(HAPROXY_CFG.format(sock=SOCK, port=HAPROXY_PORT, servers=servers,
                                       check_body=check_body, auth=auth_hdr))
        self.proc = None

    def start(self):
        subprocess.run([self.args.haproxy, "-c", "-q", "-f", CFG], check=True)
        self.proc = subprocess.Popen([self.args.haproxy, "-f", CFG, "-db"],
                                     stdout=subprocess.DEVNULL, stderr=open("/tmp/router-eval-haproxy.log", "w"))
        ok = wait_until(lambda: all(haproxy_server_stat(n).get("status") == "UP" for n in "ab"), 60)
        if not ok:
            raise SystemExit("haproxy: servers not UP within 60 s")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)

    def remove(self, name):
        haproxy_admin("set server vllm/%s state drain" % name)

    def wait_idle(self, name, timeout=60):
        t0 = time.monotonic()
        wait_until(lambda: haproxy_server_stat(name).get("scur") == "0", timeout, 0.2)
        return time.monotonic() - t0

    def readd(self, name):
        haproxy_admin("set server vllm/%s state ready" % name)


class VllmRouter:
    name = "vllm-router"

    def __init__(self, args, backends, api_key=None):
        self.args = args
        self.backends = backends
        self.api_key = api_key
        self.url = "127.0.0.1:%d" % ROUTER_PORT
        self.proc = None

    def start(self):
        workers = ["http://%s" % b for b in self.backends]
        cmd = [self.args.vllm_router, "--host", "127.0.0.1", "--port", str(ROUTER_PORT), "--worker-urls"] + workers + [
            "--policy", self.args.policy,
            "--health-check-interval-secs", "2", "--health-failure-threshold", "2",
            "--health-success-threshold", "2", "--health-check-timeout-secs", "5",
            "--prometheus-port", str(ROUTER_METRICS_PORT), "--log-level", "warning"]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open("/tmp/router-eval-vllm-router.log", "w"))
        if not wait_until(lambda: completion(self.url, self.args.model, 1)[0] == 200, 120):
            raise SystemExit("vllm-router: no completion within 120 s (see /tmp/router-eval-vllm-router.log)")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)

    def _admin(self, path):
        status, _body = post(self.url, path, {}, timeout=30)
        return status

    def remove(self, name):
        backend = self.backends["ab".index(name)]
        self.last_admin_status = self._admin("/remove_worker?url=http://%s" % backend)
        self.workers_seen = get(self.url, "/list_workers")[1][:300]

    def wait_idle(self, name, timeout=60):
        return 0.0  # vllm-router exposes no per-worker in-flight count to wait on

    def readd(self, name):
        backend = self.backends["ab".index(name)]
        self.last_admin_status = self._admin("/add_worker?url=http://%s" % backend)
        self.workers_seen = get(self.url, "/list_workers")[1][:300]


# ---------------------------------------------------------------- load

class Load:
    """N client threads posting 8-token completions in a loop (with a short pause) until stopped."""

    def __init__(self, url, model, workers, think):
        self.url, self.model, self.workers, self.think = url, model, workers, think
        self.results = []  # (t_end, status)
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _worker in range(workers)]

    def _run(self):
        while not self.stop_evt.is_set():
            status, _body = completion(self.url, self.model, 8)
            with self.lock:
                self.results.append((time.monotonic(), status))
            time.sleep(self.think)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_evt.set()
        for t in self.threads:
            t.join(150)

    def summary(self):
        failed = [s for _when, s in self.results if s != 200]
        return {"requests": len(self.results), "failed": len(failed),
                "failed_statuses": sorted(set(failed))}


def shell(cmd):
    t0 = time.monotonic()
    subprocess.run(cmd, shell=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return round(time.monotonic() - t0, 1)


def restart_b_and_readmit(args, router, backend_b, readd):
    """Start B, wait until it answers directly, optionally re-add it, time until routed traffic reaches it."""
    t_start = time.monotonic()
    shell(args.start_cmd)
    if not wait_until(lambda: completion(backend_b, args.model, 1)[0] == 200, args.start_timeout, 1):
        return {"error": "backend B did not come back within %d s" % args.start_timeout}
    t_healthy = time.monotonic()
    base = served_count(backend_b)  # includes our own probe above
    if readd:
        router.readd("b")
    got = wait_until(lambda: (served_count(backend_b) or 0) > base, args.readmit_timeout, 0.25)
    t_traffic = time.monotonic()
    return {"start_to_healthy_s": round(t_healthy - t_start, 1),
            "healthy_to_traffic_s": round(t_traffic - t_healthy, 1) if got else None}


def scenario(args, router, kind):
    backend_b = args.backend[1]
    with Load(router.url, args.model, args.workers, args.think) as load:
        time.sleep(args.settle)
        rec = {"router": router.name, "scenario": kind}
        if kind == "drain":
            router.remove("b")
            rec["admin_status"] = getattr(router, "last_admin_status", None)
            rec["workers_after_remove"] = getattr(router, "workers_seen", None)
            rec["idle_wait_s"] = round(router.wait_idle("b"), 1)
            rec["stop_s"] = shell(args.stop_cmd)
        else:
            rec["stop_s"] = shell(args.kill_cmd)
        time.sleep(args.down_for)
        rec.update(restart_b_and_readmit(args, router, backend_b, readd=(kind == "drain")))
        if kind == "drain":
            rec["readd_status"] = getattr(router, "last_admin_status", None)
            rec["workers_after_readd"] = getattr(router, "workers_seen", None)
        time.sleep(args.settle)
    rec.update(load.summary())
    return rec


# ---------------------------------------------------------------- latency

def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def latency(args, routers):
    targets = [("direct", args.backend[0])] + [(r.name, r.url) for r in routers]
    samples = {(name, n): [] for name, _url in targets for n in (1, 32)}
    errors = 0
    for _round in range(5):  # warm-up, not recorded: both backends and both routers' connections
        for _name, url in targets + [("b", args.backend[1])]:
            completion(url, args.model, 32)
    for rnd in range(args.rounds):
        order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
        for name, url in order:
            for n in (1, 32):
                status, secs = completion(url, args.model, n)
                if status == 200:
                    samples[(name, n)].append(secs * 1000)
                else:
                    errors += 1
    out = {"rounds": args.rounds, "errors": errors, "rows": []}
    for n in (1, 32):
        direct = statistics.median(samples[("direct", n)])
        for name, _url in targets:
            vals = samples[(name, n)]
            med = statistics.median(vals)
            out["rows"].append({"target": name, "max_tokens": n, "n": len(vals), "median_ms": round(med, 1),
                                "p90_ms": round(pct(vals, 0.9), 1), "added_ms": round(med - direct, 1)})
    return out


# ---------------------------------------------------------------- auth

class EchoHandler(http.server.BaseHTTPRequestHandler):
    seen = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        EchoHandler.seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b'{"id":"x","object":"text_completion","choices":[{"text":"x","index":0}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *a):
        pass


def auth_check(args):
    """Which Authorization header reaches a worker: client request, and the router's own health check."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", ECHO_PORT), EchoHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    echo = ["127.0.0.1:%d" % ECHO_PORT]
    out = {}
    for router in (HAProxy(args, echo + echo, auth="Bearer ROUTER-KEY"), VllmRouter(args, echo, api_key="ROUTER-KEY")):
        EchoHandler.seen = []
        try:
            router.start()
        except SystemExit as exc:
            out[router.name] = {"error": str(exc)}
            continue
        EchoHandler.seen = []  # drop start()'s own readiness probe: only the router's checks remain
        time.sleep(5)
        checks = list(EchoHandler.seen)
        EchoHandler.seen = []
        completion(router.url, args.model, 1, headers={"Authorization": "Bearer CLIENT-KEY"})
        completion(router.url, args.model, 1)
        router.stop()
        out[router.name] = {"health_checks_seen": sorted(set(checks)),
                            "client_with_header": EchoHandler.seen[0] if EchoHandler.seen else None,
                            "client_without_header": EchoHandler.seen[1] if len(EchoHandler.seen) > 1 else None}
    srv.shutdown()
    return out


# ---------------------------------------------------------------- main

def make_routers(args):
    return [HAProxy(args, args.backend), VllmRouter(args, args.backend)]


def run_all(args):
    results = {"argv": sys.argv[1:], "haproxy_version": subprocess.run(
        [args.haproxy, "-v"], capture_output=True, text=True, check=False).stdout.splitlines()[0]}
    routers = make_routers(args)
    if args.what in ("all", "latency", "failover", "drain"):
        try:
            for r in routers:
                r.start()
            if args.what in ("all", "latency"):
                results["latency"] = latency(args, routers)
                print(json.dumps(results["latency"], indent=1), flush=True)
            runs = []
            kinds = ["drain", "failover"] if args.what == "all" else [args.what] if args.what != "latency" else []
            for kind in kinds:
                for rep in range(args.repeats):
                    order = routers if rep % 2 == 0 else routers[::-1]
                    for r in order:
                        rec = scenario(args, r, kind)
                        rec["repeat"] = rep
                        print(json.dumps(rec), flush=True)
                        runs.append(rec)
            results["scenarios"] = runs
        finally:
            for r in routers:
                if r.proc and r.proc.poll() is None:
                    r.stop()
    if args.what in ("all", "auth"):
        results["auth"] = auth_check(args)
        print(json.dumps(results["auth"], indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["all", "latency", "failover", "drain", "auth"])
    p.add_argument("--backend", action="append", required=True, help="host:port of a vLLM server; give exactly two (A, B)")
    p.add_argument("--model", default="tiny")
    p.add_argument("--haproxy", default="haproxy")
    p.add_argument("--vllm-router", default="vllm-router")
    p.add_argument("--policy", default="round_robin", help="vllm-router --policy")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--think", type=float, default=0.05, help="pause of each load worker between requests (s)")
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--down-for", type=float, default=3.0)
    p.add_argument("--start-timeout", type=int, default=240)
    p.add_argument("--readmit-timeout", type=int, default=150)
    p.add_argument("--kill-cmd", default="", help="shell command that kills backend B abruptly")
    p.add_argument("--stop-cmd", default="", help="shell command that stops backend B gracefully")
    p.add_argument("--start-cmd", default="", help="shell command that starts backend B again")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    if len(args.backend) != 2:
        p.error("--backend must be given exactly twice (A then B)")
    if args.what in ("all", "failover", "drain") and not (args.kill_cmd and args.stop_cmd and args.start_cmd):
        p.error("failover/drain need --kill-cmd, --stop-cmd and --start-cmd")
    return args


if __name__ == "__main__":
    sys.exit(run_all(parse_args(sys.argv[1:])))
