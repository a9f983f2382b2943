"""redis-py's own lock (redis.lock.Lock) and the commands lock code leans on, against one server.

Run as `python3 redis_py_locks.py PORT PROTOCOL` (PROTOCOL 2 or 3) with the redis package on
the path. Every step asserts what a Redis user would rely on; the script prints one JSON list of
what it observed (no timings, nothing random), so that the transcript from a latchkey server can
be compared with the one from redis-server. Exits non-zero on the first broken expectation.
"""

import json
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError, ResponseError

port = int(sys.argv[1])
protocol = int(sys.argv[2])
r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
seen = []


def note(*what):
    seen.append(list(what))


r.flushall()

# A lock, and a second client refused while it is held (after its blocking timeout).
lock = r.lock("job", timeout=5, blocking_timeout=0.1)
other = redis.Redis(port=port, protocol=protocol).lock("job", timeout=5, blocking_timeout=0.1)
assert lock.acquire()
assert not other.acquire(), "a second holder"
note("held", lock.locked(), lock.owned(), other.owned())
assert 0 < r.pttl("job") <= 5000

# extend adds to the remaining time; reacquire resets it to the timeout.
assert lock.extend(10)
assert 10000 < r.pttl("job") <= 15000
assert lock.extend(3, replace_ttl=True)
assert 0 < r.pttl("job") <= 3000
assert lock.reacquire()
assert 3000 < r.pttl("job") <= 5000

# Released: free for the other; releasing again is refused, by the token check.
lock.release()
note("released", lock.locked(), lock.owned())
assert other.acquire()
try:
    lock.release()
    note("released twice")
except LockError as e:
    note("second release refused", type(e).__name__)
try:
    lock.extend(1)
except LockError as e:
    note("extend of a released lock refused", type(e).__name__)
other.release()

# A holder whose lock expired cannot release or extend the next holder's lock.
short = r.lock("short", timeout=0.05)
assert short.acquire()
time.sleep(0.15)
after = r.lock("short", timeout=5)
assert after.acquire(blocking=False)
try:
    short.extend(5)
except LockNotOwnedError as e:
    note("stale extend refused", type(e).__name__)
try:
    short.release()
except LockNotOwnedError as e:
    note("stale release refused", type(e).__name__)
note("next holder keeps it", after.owned(), r.get("short") == after.local.token.decode())
after.release()

# A waiting acquire wakes once the holder lets go.
holder = r.lock("wait", timeout=5, thread_local=False)
assert holder.acquire()
threading.Timer(0.1, holder.release).start()
waiter = r.lock("wait", timeout=5, blocking_timeout=2, sleep=0.01)
assert waiter.acquire(), "the holder's release should let the waiter in well before its TTL"
note("waiter got it", waiter.owned())
waiter.release()

# Mutual exclusion: four threads add to a counter read-modify-write under the lock.
def worker():
    c = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    for _ in range(25):
        with c.lock("counter-lock", timeout=5, blocking_timeout=10, sleep=0.001):
            v = int(c.get("counter") or 0)
            c.set("counter", v + 1)


threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
note("counter", r.get("counter"))

# The `with` form raises when the lock cannot be had in time.
blocker = r.lock("busy", timeout=5)
assert blocker.acquire()
try:
    with r.lock("busy", timeout=5, blocking_timeout=0.05):
        note("entered a held lock")
except LockError as e:
    note("with refused", type(e).__name__)
blocker.release()

# A fencing counter and a token check in a registered script (EVALSHA, NOSCRIPT fallback).
fence = r.register_script(
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('incr', KEYS[2]) end return 0"
)
r.set("owner", "me")
note("fence", fence(keys=["owner", "fence"], args=["me"]), fence(keys=["owner", "fence"], args=["you"]))
r.script_flush()
note("fence after SCRIPT FLUSH", fence(keys=["owner", "fence"], args=["me"]))

# Optimistic locking: WATCH / MULTI / EXEC through redis-py's transaction helper.
r.set("balance", 10)


def spend(pipe):
    balance = int(pipe.get("balance"))
    pipe.multi()
    pipe.set("balance", balance - 3)


note("transaction", r.transaction(spend, "balance"), r.get("balance"))
pipe = r.pipeline()
pipe.watch("balance")
r.set("balance", 100)
pipe.multi()
pipe.set("balance", 0)
try:
    pipe.execute()
    note("a watched key changed, yet EXEC ran")
except redis.WatchError:
    note("watch conflict", r.get("balance"))

# Pub/sub, as waiting locks use it for unlock messages.
p = r.pubsub()
p.subscribe("unlock")
first = p.get_message(timeout=1)
note("subscribed", first["type"], first["channel"], first["data"])
note("published to", r.publish("unlock", "job"))
msg = p.get_message(timeout=1)
note("message", msg["type"], msg["channel"], msg["data"])
p.close()

# Errors come back as the same exceptions.
r.set("text", "x")
try:
    r.incr("text")
except ResponseError as e:
    note("error", str(e))
try:
    r.hset("text", "f", "v")
except ResponseError as e:
    note("error", str(e))

print(json.dumps(seen))
