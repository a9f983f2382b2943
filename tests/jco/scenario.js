// The portability scenario: the lock-client component, transpiled by jco, driven from Node
// against a real server. Usage: `node scenario.js HOST:PORT` after `jco transpile` into out/.
//
// It prints one line per observation (`label value...`) for the Rust test to check. At a
// `pause` line it waits for a line on stdin, so that the test can look at the server's state
// while a lock is held.

import fs from 'node:fs';
import { configure, close } from './redis-host.js';

configure(process.argv[2]);
const { locks } = await import('./out/latchkey.js');

const say = (...words) => console.log(words.join(' '));
const pause = (label, ...words) => {
  say('pause', label, ...words);
  // The test answers with a line once it has looked. A pipe may be non-blocking, so a read
  // can find nothing yet (EAGAIN): nap and read again.
  for (;;) {
    try {
      if (fs.readSync(0, Buffer.alloc(64)) > 0) return;
      throw new Error('the test closed stdin');
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
};
const text = (bytes) => Buffer.from(bytes).toString();

// Simple lock: taken, seen held (by the test too), refused a second time, released once.
const simple = new locks.SimpleLock('jco-simple');
const lease = simple.tryAcquire(30_000n);
pause('simple-held', text(lease.key), lease.token);
say('simple-second', simple.tryAcquire(30_000n) === undefined ? 'refused' : 'taken');
say('simple-holder', simple.holder());
say('simple-extend', simple.extend(lease, 60_000n), simple.pttl() > 30_000n);
say('simple-release', simple.release(lease), simple.release(lease));

// Waiting: a deadline that passes while someone holds the lock, then a holder whose TTL runs
// out while we wait (the wait goes through subscribe / wait-message).
const held = simple.tryAcquire(300n);
say('simple-wait-deadline', simple.acquireWait(5_000n, 100n) === undefined ? 'gave-up' : 'taken');
const late = simple.acquireWaitBackoff(5_000n, 10_000n, { baseMs: 5n, maxMs: 50n });
say('simple-wait-expiry', late !== undefined && late.token !== held.token ? 'taken' : 'missed');
simple.release(late);

// Fenced lock: two acquisitions, increasing tokens.
const fenced = new locks.FencedLock('jco-fenced');
const [first, fence1] = fenced.tryAcquire(30_000n);
say('fenced-refused', fenced.tryAcquire(30_000n) === undefined);
fenced.release(first);
const [second, fence2] = fenced.acquireWait(30_000n, 1_000n);
say('fenced', fence1, fence2);
fenced.release(second);

// Reentrant lock: one owner twice, another refused, the owner record handed to a new handle.
const a = new locks.ReentrantLock('jco-re');
const b = new locks.ReentrantLock('jco-re');
const tags = [a.tryAcquire(30_000n).tag, a.tryAcquire(30_000n).tag, b.tryAcquire(30_000n).tag];
const resumed = locks.ReentrantLock.resume(a.owner());
pause('reentrant', a.owner().owner, resumed.holdCount(), ...tags);
say('reentrant-renew', resumed.renew(60_000n), b.renew(60_000n));
say('reentrant-release', b.release(30_000n), resumed.release(30_000n), a.release(30_000n));
say('reentrant-after', a.holdCount(), b.tryAcquire(30_000n).tag, b.release(30_000n));

// Read-write lock: readers share, a writer waits for them all, the mode travels in the lease.
const rw = new locks.RwLock('jco-rw');
const r1 = rw.tryRead(30_000n);
const r2 = rw.tryRead(30_000n);
const blocked = rw.tryWrite(30_000n) === undefined;
rw.release(r1);
rw.release(r2);
const w = rw.tryWrite(30_000n);
say('rw', r1.mode, blocked, w.mode, rw.tryRead(30_000n) === undefined, rw.release(w), rw.release(w));

// Multi-lock: both keys or none; the test reads both while held.
const single = new locks.SimpleLock('jco-b');
const b1 = single.tryAcquire(30_000n);
const both = new locks.MultiLock(['{jco-a}', '{jco-b}']);
say('multi-while-one-held', both.tryAcquire(30_000n) === undefined);
single.release(b1);
const m = both.tryAcquire(30_000n);
pause('multi-held', m.token, ...m.keys.map(text));
say('multi-release', both.release(m));

// Semaphore: two permits.
const sem = new locks.Semaphore('jco-pool', 2);
const permits = [sem.tryAcquire(30_000n), sem.tryAcquire(30_000n), sem.tryAcquire(30_000n)];
say('semaphore', permits.map((p) => (p === undefined ? 'none' : 'permit')).join(','), sem.release(permits[0]));

// Replicated lock: this server has no replica, so one replica is never confirmed; zero is.
const rep = new locks.ReplicatedLock('jco-rep', 1, 50n);
const rep0 = new locks.ReplicatedLock('jco-rep', 0, 50n);
const unconfirmed = rep.tryAcquire(30_000n);
const confirmed = rep0.tryAcquire(30_000n);
say('replicated', unconfirmed.tag, unconfirmed.val, confirmed.tag, rep0.release(confirmed.val));

// Fair lock: taken, a second caller queued behind the holder.
const fair = new locks.FairLock('jco-fair', 1_000n);
const turn = fair.acquireWait(30_000n, 1_000n);
say('fair', turn !== undefined, fair.enqueueOnce(30_000n).tag, fair.release(turn));

// RedLock on this host's one node: a majority of one, refused while held, released on it.
const red = new locks.RedLock('jco-red', 200n);
const rl = red.tryAcquire(30_000n);
const redRefused = red.tryAcquire(30_000n) === undefined;
const renewed = red.extend(rl, 60_000n);
pause('redlock-held', red.nodes(), red.quorum(), rl.granted, rl.validityMs > 0n, rl.token);
say('redlock', redRefused, renewed.granted, renewed.validityMs > 30_000n, red.release(renewed), red.release(renewed));

say('done');
close();
