// How fast the component runs in Node: `node bench.js HOST:PORT [N]` (after transpile.js).
// Times N rounds of three operations, each through the component and this host's `redis`
// import: `holder` (one GET), `try-acquire` + `release` of a simple lock (SET NX PX, then an
// EVALSHA), and the same for a fenced lock (two scripts). Prints microseconds per round.

import { configure, close } from './redis-host.js';

configure(process.argv[2]);
const rounds = Number(process.argv[3] ?? 2000);
const { locks } = await import('./out/latchkey.js');

function time(label, round) {
  for (let i = 0; i < 500; i++) round(); // warm up: scripts loaded, JIT warm
  const start = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) round();
  const us = Number(process.hrtime.bigint() - start) / 1000 / rounds;
  console.log(`${label.padEnd(34)} ${us.toFixed(1).padStart(8)} us`);
}

const simple = new locks.SimpleLock('bench-simple');
const fenced = new locks.FencedLock('bench-fenced');
time('holder (1 command)', () => simple.holder());
time('simple try-acquire + release (2)', () => simple.release(simple.tryAcquire(10_000n)));
time('fenced try-acquire + release (2)', () => fenced.release(fenced.tryAcquire(10_000n)[0]));
close();
