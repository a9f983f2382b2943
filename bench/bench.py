#!/usr/bin/env python3
"""latchkey-server against redis-server, side by side on this machine, as ratios.

Run through `scripts/bench`, which builds what this needs first. Every row starts both
servers the same way (fresh process, persistence off, pinned to the same core when the machine
has a core to spare for the load), measures both with the same client, and reports
latchkey / redis-server: above 1.0 means latchkey is faster (for rates) or uses more (for memory
and latency, where the row says so). Repetitions alternate the two servers so that noise from
the rest of the machine falls on both alike; the ratio is the median of the per-repetition
ratios, and the spread is their minimum and maximum.

Writes a Markdown report (machine, versions, date, the command, every row) and an SVG plot of
the ratios.
"""

import argparse
import datetime
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cores():
    return os.cpu_count() or 1


class Server:
    """One server process on a free port, in a temporary directory, killed on close."""

    def __init__(self, kind, binary, pin, extra=()):
        self.kind = kind
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix=f"latchkey-bench-{kind}-")
        # Persistence off on both: latchkey-server, like redis-server, saves a snapshot by
        # default once enough writes happened, which would land in the middle of a row.
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.dir]
        args += list(extra)
        if pin is not None:
            args = ["taskset", "-c", pin] + args
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir
        )
        self.ready_after = self.wait_ready()

    def wait_ready(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if self.cmd("PING") == b"+PONG\r\n":
                    return time.perf_counter() - self.started
            except OSError:
                pass
            time.sleep(0.001)
        raise RuntimeError(f"{self.kind} did not answer PING")

    def cmd(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(encode(args))
            return read_reply(s)

    def info(self, section):
        text = self.cmd("INFO", section).decode(errors="replace")
        out = {}
        for line in text.split("\r\n"):
            if ":" in line:
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read_reply(s):
    """Reads one whole reply and returns its bytes."""
    f = s.makefile("rb")
    out = []

    def one():
        line = f.readline()
        if not line:
            raise OSError("connection closed")
        out.append(line)
        kind, rest = line[:1], line[1:-2]
        if kind == b"$" and int(rest) >= 0:
            out.append(f.read(int(rest) + 2))
        elif kind in (b"*", b"%", b"~", b">") and int(rest) > 0:
            for _ in range(int(rest) * (2 if kind == b"%" else 1)):
                one()

    one()
    return b"".join(out)


def fill(server, make, count, batch=10_000):
    """Sends `count` commands made by `make(i)`, pipelined in batches, each reply one line."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        for start in range(0, count, batch):
            n = min(batch, count - start)
            s.sendall(b"".join(encode(make(i)) for i in range(start, start + n)))
            lines = 0
            while lines < n:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("connection closed while filling")
                lines += chunk.count(b"\r\n")


def median_spread(ratios):
    return statistics.median(ratios), min(ratios), max(ratios)


def fmt_ratio(r):
    med, lo, hi = r
    return f"{med:.2f}× ({lo:.2f}–{hi:.2f})"


# -------------------------------------------------------------------------------------------
# Throughput: redis-benchmark
# -------------------------------------------------------------------------------------------

THROUGHPUT = [
    ("PING", ["-t", "ping_mbulk"]),
    ("SET", ["-t", "set"]),
    ("GET", ["-t", "get"]),
    ("INCR", ["-t", "incr"]),
    ("LPUSH", ["-t", "lpush"]),
    ("LPOP", ["-t", "lpop"]),
    ("SADD", ["-t", "sadd"]),
    ("HSET", ["-t", "hset"]),
    ("ZADD", ["ZADD", "zset:__rand_int__", "__rand_int__", "m:__rand_int__"]),
    ("PUBLISH", ["PUBLISH", "channel:__rand_int__", "hello"]),
    ("EVALSHA", None),
    ("SET NX PX", ["SET", "lock:__rand_int__", "token", "NX", "PX", "5000"]),
]

LOCK_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)


def bench_rps(server, test, pipeline, requests, clients, pin):
    args = ["redis-benchmark", "-p", str(server.port), "-c", str(clients), "-n", str(requests),
            "-P", str(pipeline), "-r", "100000", "-q", "--csv"]
    if pin is not None:
        args = ["taskset", "-c", pin] + args
    out = subprocess.run(args + test, capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines()[1:]:
        fields = [f.strip('"') for f in line.split(",")]
        if len(fields) >= 2:
            try:
                return float(fields[1])
            except ValueError:
                pass
    raise RuntimeError(f"redis-benchmark gave no rate: {out.stdout} {out.stderr}")


def supported(server, test):
    """Whether the server knows the command a row sends (a row the server cannot answer says
    so rather than measuring error replies)."""
    name = {"-t": None}.get(test[0], test[0])
    if name is None:
        name = {"ping_mbulk": "PING", "set": "SET", "get": "GET", "incr": "INCR",
                "lpush": "LPUSH", "lpop": "LPOP", "sadd": "SADD", "hset": "HSET"}[test[1]]
    reply = server.cmd("COMMAND", "INFO", name)
    return not reply.startswith(b"*1\r\n*-1") and not reply.startswith(b"*1\r\n$-1")


def throughput(opts, pins):
    rows = []
    # `--rows INCR,EVALSHA`: only those rows (by name, any case), to measure one change.
    wanted = {r.strip().upper() for r in opts.rows.split(",")} if opts.rows else None
    for name, test in THROUGHPUT:
        if wanted is not None and name.upper() not in wanted:
            continue
        for pipeline in (1, 16):
            ratios, rates = [], {"latchkey": [], "redis": []}
            absent = None
            for _rep in range(opts.reps):
                pair = {}
                for kind in ("latchkey", "redis"):
                    srv = Server(kind, opts.binary[kind], pins["server"])
                    try:
                        t = test
                        if t is None:
                            sha = srv.cmd("SCRIPT", "LOAD", LOCK_SCRIPT).split(b"\r\n")[1].decode()
                            t = ["EVALSHA", sha, "1", "lock:__rand_int__", "token"]
                        if not supported(srv, t):
                            absent = f"{kind} does not have the command"
                            break
                        pair[kind] = bench_rps(srv, t, pipeline, opts.requests, 50, pins["load"])
                    finally:
                        srv.close()
                if absent:
                    break
                rates["latchkey"].append(pair["latchkey"])
                rates["redis"].append(pair["redis"])
                ratios.append(pair["latchkey"] / pair["redis"])
            label = f"{name}, -P {pipeline}"
            if absent:
                rows.append((label, None, absent))
                continue
            detail = (f"latchkey {statistics.median(rates['latchkey']):,.0f}/s, "
                      f"redis {statistics.median(rates['redis']):,.0f}/s")
            rows.append((label, median_spread(ratios), detail))
            print(f"  {label}: {fmt_ratio(median_spread(ratios))} ({detail})", flush=True)
    return rows


# -------------------------------------------------------------------------------------------
# Memory
# -------------------------------------------------------------------------------------------

MEMORY = [
    ("{n} keys (key:N → 16 bytes)", lambda i: ("SET", f"key:{i}", "v" * 16)),
    ("{n} keys with a TTL", lambda i: ("SET", f"key:{i}", "v" * 16, "PX", "3600000")),
    ("a hash of {n} fields", lambda i: ("HSET", "hash", f"field:{i}", "v" * 16)),
    ("a sorted set of {n} members", lambda i: ("ZADD", "zset", str(i), f"member:{i}")),
    ("a list of {n} elements", lambda i: ("RPUSH", "list", "v" * 16)),
]


def memory(opts, pins):
    rows = []
    n = opts.keys
    for name, make in MEMORY:
        name = name.format(n=f"{n:,}")
        per = {}
        for kind in ("latchkey", "redis"):
            srv = Server(kind, opts.binary[kind], pins["server"])
            try:
                before = srv.rss()
                fill(srv, make, n)
                time.sleep(0.5)
                used = int(srv.info("memory").get("used_memory", "0"))
                per[kind] = ((srv.rss() - before) / n, used / n)
            finally:
                srv.close()
        ratio = per["latchkey"][0] / per["redis"][0]
        detail = (f"RSS per element: latchkey {per['latchkey'][0]:.0f} B, redis {per['redis'][0]:.0f} B; "
                  f"used_memory per element: latchkey {per['latchkey'][1]:.0f} B, "
                  f"redis {per['redis'][1]:.0f} B")
        rows.append((f"{name} (RSS, lower is better)", (ratio, ratio, ratio), detail))
        print(f"  {name}: {ratio:.2f}× ({detail})", flush=True)
    return rows


# -------------------------------------------------------------------------------------------
# Start-up and WAIT
# -------------------------------------------------------------------------------------------


def startup(opts, pins):
    times = {"latchkey": [], "redis": []}
    for _ in range(max(opts.reps, 5)):
        for kind in ("latchkey", "redis"):
            srv = Server(kind, opts.binary[kind], pins["server"])
            times[kind].append(srv.ready_after)
            srv.close()
    lk, rd = statistics.median(times["latchkey"]), statistics.median(times["redis"])
    detail = f"latchkey {lk * 1000:.1f} ms, redis {rd * 1000:.1f} ms"
    print(f"  start-up: {lk / rd:.2f}× ({detail})", flush=True)
    return [("process start to first PING (lower is better)", (lk / rd,) * 3, detail)]


def sample_wait(s, kind, n, prefix, timeout):
    """`n` times a `SET` then `WAIT 1 timeout` on the socket `s`: the WAIT's p50 and p99."""
    samples = []
    for i in range(n):
        s.sendall(encode(("SET", f"{prefix}:{i}", "v")))
        read_reply(s)
        t = time.perf_counter()
        s.sendall(encode(("WAIT", "1", timeout)))
        reply = read_reply(s)
        samples.append(time.perf_counter() - t)
        if reply != b":1\r\n":
            raise RuntimeError(f"{kind}: WAIT answered {reply!r}")
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]


def wait_rows(per, label):
    """The p50 and p99 rows of a WAIT measurement, `per` holding each server's (p50, p99)."""
    r50 = per["latchkey"][0] / per["redis"][0]
    r99 = per["latchkey"][1] / per["redis"][1]
    detail = (f"p50 latchkey {per['latchkey'][0] * 1e6:.0f} µs, redis {per['redis'][0] * 1e6:.0f} µs; "
              f"p99 latchkey {per['latchkey'][1] * 1e6:.0f} µs, redis {per['redis'][1] * 1e6:.0f} µs")
    print(f"  {label}: p50 {r50:.2f}×, p99 {r99:.2f}× ({detail})", flush=True)
    return [(f"{label}, p50 (lower is better)", (r50,) * 3, detail),
            (f"{label}, p99 (lower is better)", (r99,) * 3, "")]


def wait_latency(opts, pins):
    per = {}
    for kind in ("latchkey", "redis"):
        master = Server(kind, opts.binary[kind], pins["server"])
        replica = Server(kind, opts.binary[kind], pins["server"],
                         extra=["--replicaof", "127.0.0.1", str(master.port)])
        try:
            online(master, kind)
            deadline = time.time() + 30
            with socket.create_connection(("127.0.0.1", master.port), timeout=10) as s:
                # Right after the first sync a master may count the replica's acknowledgements
                # only from its once-a-second ACK: warm up until a write is confirmed at once.
                while True:
                    s.sendall(encode(("SET", "warm-up", "v")))
                    read_reply(s)
                    s.sendall(encode(("WAIT", "1", "100")))
                    if read_reply(s) == b":1\r\n":
                        break
                    if time.time() > deadline:
                        raise RuntimeError(f"{kind}: no write was ever confirmed by WAIT")
                per[kind] = sample_wait(s, kind, opts.wait_samples, "k", "1000")
        finally:
            replica.close()
            master.close()
    return wait_rows(per, "WAIT 1 after a SET")


def online(master, kind):
    """Waits until `master` lists an online replica."""
    deadline = time.time() + 30
    while b"state=online" not in master.cmd("INFO", "replication"):
        if time.time() > deadline:
            raise RuntimeError(f"{kind}: the replica never came online")
        time.sleep(0.05)


def replication(opts, pins):
    """Writes per second that reach a replica: `redis-benchmark SET -P 16` against a master
    with one replica (both on the servers' core), timed from the first write until the
    replica's offset equals the master's, so a replica that falls behind costs its lag."""
    ratios, last = [], {}
    for _rep in range(opts.reps):
        rate = {}
        for kind in ("latchkey", "redis"):
            master = Server(kind, opts.binary[kind], pins["server"])
            replica = Server(kind, opts.binary[kind], pins["server"],
                             extra=["--replicaof", "127.0.0.1", str(master.port)])
            try:
                online(master, kind)
                start = time.perf_counter()
                bench_rps(master, ["-t", "set"], 16, opts.requests, 50, pins["load"])
                target = int(master.info("replication")["master_repl_offset"])
                deadline = time.time() + 120
                while int(replica.info("replication").get("slave_repl_offset", "0")) < target:
                    if time.time() > deadline:
                        raise RuntimeError(f"{kind}: the replica never caught up")
                    time.sleep(0.001)
                rate[kind] = opts.requests / (time.perf_counter() - start)
            finally:
                replica.close()
                master.close()
        ratios.append(rate["latchkey"] / rate["redis"])
        last = rate
    detail = f"latchkey {last['latchkey']:,.0f}/s, redis {last['redis']:,.0f}/s (last repetition)"
    r = median_spread(ratios)
    print(f"  replication: {fmt_ratio(r)} ({detail})", flush=True)
    rows = [("SET -P 16 writes/s, counted when the replica has them", r, detail)]
    rows += wait_under_load(opts, pins)
    return rows


def wait_under_load(opts, pins):
    """`WAIT 1 0` after a `SET`, while `redis-benchmark` writes at -P 1 with 20 clients to
    the same master (its writes replicate too)."""
    per = {}
    for kind in ("latchkey", "redis"):
        master = Server(kind, opts.binary[kind], pins["server"])
        replica = Server(kind, opts.binary[kind], pins["server"],
                         extra=["--replicaof", "127.0.0.1", str(master.port)])
        load = None
        try:
            online(master, kind)
            args = ["redis-benchmark", "-p", str(master.port), "-c", "20", "-n", "100000000",
                    "-P", "1", "-r", "100000", "-q", "-t", "set"]
            if pins["load"] is not None:
                args = ["taskset", "-c", pins["load"]] + args
            load = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            with socket.create_connection(("127.0.0.1", master.port), timeout=10) as s:
                per[kind] = sample_wait(s, kind, opts.wait_samples, "w", "0")
        finally:
            if load is not None:
                load.kill()
                load.wait()
            replica.close()
            master.close()
    return wait_rows(per, "WAIT 1 0 under a write load")


def all_cores(opts, pins):
    """Every core for the server: latchkey with `io-threads` the core count (that many worker
    threads, each running commands; it has one by default, as redis-server) against redis-server with
    `io-threads` set to the core count (reads too), and against redis-server as it runs by
    default (one thread for commands and I/O). Nothing is pinned, so the load generator
    (`redis-benchmark --threads` the core count) shares the cores with the server: on a
    machine with few cores, redis's I/O threads, which spin while they wait for work, compete
    with it."""
    n = cores()
    variants = (("latchkey", "latchkey", ["--io-threads", str(n)]),
                ("redis-io", "redis", ["--io-threads", str(n), "--io-threads-do-reads", "yes"]),
                ("redis", "redis", []))
    rows = []
    for name, test in (("SET", ["-t", "set"]), ("GET", ["-t", "get"])):
        for pipeline in (1, 16):
            rates = {v: [] for v, _, _ in variants}
            vs_io, vs_plain = [], []
            for _rep in range(opts.reps):
                pair = {}
                for variant, kind, extra in variants:
                    srv = Server(kind, opts.binary[kind], None, extra=extra)
                    try:
                        pair[variant] = bench_rps(srv, test + ["--threads", str(n)], pipeline,
                                                  opts.requests, 50, None)
                    finally:
                        srv.close()
                    rates[variant].append(pair[variant])
                vs_io.append(pair["latchkey"] / pair["redis-io"])
                vs_plain.append(pair["latchkey"] / pair["redis"])
            med = {v: statistics.median(r) for v, r in rates.items()}
            detail = (f"latchkey {med['latchkey']:,.0f}/s, redis io-threads {n} "
                      f"{med['redis-io']:,.0f}/s, redis default {med['redis']:,.0f}/s")
            for label, r in ((f"{name}, -P {pipeline}, {n} cores, vs redis io-threads {n}", vs_io),
                             (f"{name}, -P {pipeline}, {n} cores, vs redis default", vs_plain)):
                rows.append((label, median_spread(r), detail))
                print(f"  {label}: {fmt_ratio(median_spread(r))} ({detail})", flush=True)
    return rows


# -------------------------------------------------------------------------------------------
# Report
# -------------------------------------------------------------------------------------------


def svg(sections, path):
    rows = [(label, r[0]) for _title, rs in sections for (label, r, _d) in rs if r]
    width, bar_h, left = 900, 18, 330
    height = 40 + len(rows) * (bar_h + 6)
    top = max([2.0] + [v for _, v in rows])
    scale = (width - left - 60) / top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           '<text x="10" y="20" font-size="14">latchkey / redis-server (1.0 = equal)</text>']
    for i, (label, v) in enumerate(rows):
        y = 35 + i * (bar_h + 6)
        colour = "#4a8" if v >= 1.0 else "#d84"
        if "lower is better" in label:
            colour = "#4a8" if v <= 1.0 else "#d84"
        out.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{v * scale:.1f}" height="{bar_h}" fill="{colour}"/>')
        out.append(f'<text x="{left + v * scale + 4:.1f}" y="{y + 13}">{v:.2f}</text>')
    x1 = left + scale
    out.append(f'<line x1="{x1:.1f}" y1="28" x2="{x1:.1f}" y2="{height - 4}" stroke="black" '
               'stroke-dasharray="4 3"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def version(binary):
    out = subprocess.run([binary, "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().splitlines()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latchkey", required=True, help="the latchkey-server binary")
    ap.add_argument("--redis", default="redis-server", help="the redis-server binary")
    ap.add_argument("--out", required=True, help="the Markdown report to write")
    ap.add_argument("--svg", required=True, help="the SVG plot to write")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--wait-samples", type=int, default=2_000)
    ap.add_argument("--only", default="throughput,memory,startup,wait,replication,allcores",
                    help="comma-separated sections")
    ap.add_argument("--rows", default="",
                    help="comma-separated throughput rows to run (e.g. INCR,EVALSHA); all by default")
    ap.add_argument("--extra", action="append", default=[],
                    help="a file of further results to include verbatim (e.g. host_bench)")
    ap.add_argument("--command", default="scripts/bench", help="the command, for the report")
    opts = ap.parse_args()
    # Absolute paths: each server runs in a directory of its own (`cwd`), where a relative
    # path such as target/release/latchkey-server would not be found.
    def resolve(path):
        return os.path.abspath(path) if os.sep in path else path
    opts.binary = {"latchkey": resolve(opts.latchkey), "redis": resolve(opts.redis)}
    # Servers on core 0, the load on the others, when there is a core to spare.
    pins = {"server": "0", "load": f"1-{cores() - 1}"} if cores() >= 2 else {"server": None, "load": None}
    sections = []
    wanted = opts.only.split(",")
    runs = [("throughput", "Throughput: redis-benchmark, 50 clients (rate ratio; higher is better)", throughput),
            ("memory", f"Memory: {opts.keys:,} elements (RSS ratio; lower is better)", memory),
            ("startup", "Start-up", startup),
            ("wait", "Replication: WAIT 1 with one replica, no other load (latency ratio)", wait_latency),
            ("replication", "Replication under load: one replica", replication),
            ("allcores", f"Every core ({cores()}): latchkey's threads vs redis-server's io-threads", all_cores)]
    for key, title, fn in runs:
        if key in wanted:
            print(f"== {title}", flush=True)
            sections.append((title, fn(opts, pins)))
    load = os.getloadavg()
    lines = [
        "# latchkey-server vs redis-server",
        "",
        f"Made by `{opts.command}` on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        f"- machine: {platform.machine()}, {cores()} cores, Linux {platform.release()}; "
        f"load average when done {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}",
        f"- latchkey: `{version(opts.latchkey)}`",
        f"- redis: `{version(opts.redis)}`",
        f"- pinning: " + (f"servers on core {pins['server']}, load on cores {pins['load']} (`taskset`)"
                          if pins["server"] else "none (one core)"),
        f"- repetitions: {opts.reps}, alternating the two servers; a ratio is the median of the "
        "per-repetition ratios, (min–max) their spread",
        "",
        "![ratios](ratios.svg)",
        "",
    ]
    for title, rows in sections:
        lines += [f"## {title}", "", "| row | latchkey / redis | detail |", "|---|---|---|"]
        for label, r, detail in rows:
            lines.append(f"| {label} | {fmt_ratio(r) if r else 'not measured'} | {detail} |")
        lines.append("")
    for path in opts.extra:
        with open(path) as f:
            lines += [f.read().rstrip(), ""]
    with open(opts.out, "w") as f:
        f.write("\n".join(lines))
    svg(sections, opts.svg)
    print(f"wrote {opts.out} and {opts.svg}")


if __name__ == "__main__":
    sys.exit(main())
