#!/usr/bin/env python3
"""Resident memory per idle connection, latchkey-server beside redis-server.

Opens N connections to a server already running on PORT (process PID), sends one PING on each,
and reports the growth of the server's resident memory per connection just after, and again
after 3.5 s, once an idle client's buffers have been given back (Redis frees an idle client's
query buffer after two seconds; so does latchkey).

    bench/idle_connections.py PORT PID [N [SECONDS]]   # N 5000, SECONDS 3.5 by default

Freed memory reaches the resident size only when the allocator returns it to the system
(jemalloc, in both servers, does so over about ten seconds): a longer SECONDS shows more of it.
"""
import resource
import socket
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    raise SystemExit(f"no process {pid}")


def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
    wait = float(sys.argv[4]) if len(sys.argv) > 4 else 3.5
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 100)), hard))
    before = rss_kib(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PING\r\n")
        socks.append(s)
    for s in socks:
        if not s.recv(100).startswith(b"+PONG"):
            raise SystemExit("unexpected reply")
    just_after = rss_kib(pid)
    time.sleep(wait)
    idle = rss_kib(pid)
    print(f"{n} connections: {(just_after - before) * 1024 // n} B each just after, "
          f"{(idle - before) * 1024 // n} B each after {wait} s idle")


if __name__ == "__main__":
    main()
