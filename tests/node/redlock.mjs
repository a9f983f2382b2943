// The npm `redlock` package (over `ioredis`), unchanged, against three independent servers.
//
// Run as `node redlock.mjs PORT PORT PORT`. Each step asserts what a RedLock user relies on;
// the script prints one JSON list of what it observed (no timings, no tokens), so that the
// transcript from three latchkey servers can be compared with the one from three redis-servers.
// Exits non-zero on the first broken expectation.

import assert from "node:assert/strict";
import Redis from "ioredis";
import Redlock, { ExecutionError, ResourceLockedError } from "redlock";

const ports = process.argv.slice(2).map(Number);
assert.equal(ports.length, 3, "three ports");
const clients = ports.map((port) => new Redis({ port, lazyConnect: false, maxRetriesPerRequest: 1 }));
const seen = [];
const note = (...what) => seen.push(what);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// redlock resolves as soon as a quorum answered; its `attempts` resolve once every node has.
// Wait for those before looking at the nodes, or the slowest node may not have run it yet.
const settled = (attempts) => Promise.all(attempts);

await Promise.all(clients.map((c) => c.flushall()));
const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
const patient = new Redlock(clients, { retryCount: 100, retryDelay: 20, retryJitter: 10 });

// Acquired on all three; its value is on every node with its TTL.
const lock = await redlock.acquire(["{a}job"], 5000);
await settled(lock.attempts);
const values = await Promise.all(clients.map((c) => c.get("{a}job")));
note("acquired", values.every((v) => v === lock.value), lock.attempts.length);
const ttls = await Promise.all(clients.map((c) => c.pttl("{a}job")));
assert.ok(ttls.every((t) => t > 0 && t <= 5000), `ttls ${ttls}`);

// A second acquisition fails while it is held.
try {
  await redlock.acquire(["{a}job"], 5000);
  note("acquired twice");
} catch (e) {
  await settled(e.attempts);
  note("second acquisition refused", e instanceof ExecutionError, e.attempts.length);
}

// Extended on every node.
const longer = await lock.extend(20000);
await settled(longer.attempts);
const extended = await Promise.all(clients.map((c) => c.pttl("{a}job")));
assert.ok(extended.every((t) => t > 5000 && t <= 20000), `extended ttls ${extended}`);
note("extended", longer.value === lock.value);

// Released everywhere: the key is gone, and a waiting acquirer gets in.
const released = await longer.release();
await settled(released.attempts);
note("released", released.attempts.length, await Promise.all(clients.map((c) => c.exists("{a}job"))));

// A waiting acquirer gets the lock once the holder releases.
const held = await redlock.acquire(["{a}wait"], 10000);
setTimeout(() => held.release(), 100);
const next = await patient.acquire(["{a}wait"], 10000);
note("waiter got it", next.value !== held.value);
await next.release();

// Several resources at once, all or nothing.
const two = await redlock.acquire(["{a}x", "{a}y"], 5000);
await settled(two.attempts);
try {
  await redlock.acquire(["{a}y", "{a}z"], 5000);
  note("overlapping acquisition granted");
} catch (e) {
  await settled(e.attempts);
  note("overlap refused", e instanceof ExecutionError);
}
note("nothing left on z", await Promise.all(clients.map((c) => c.exists("{a}z"))));
await two.release();

// A stale holder (its lock expired and was taken) cannot extend the new holder's lock.
const stale = await redlock.acquire(["{a}short"], 100);
await sleep(200);
const fresh = await redlock.acquire(["{a}short"], 5000);
await settled(fresh.attempts);
try {
  await stale.extend(5000);
  note("stale extend granted");
} catch (e) {
  if (e.attempts) await settled(e.attempts);
  note("stale extend refused", e instanceof ExecutionError || e instanceof ResourceLockedError);
}
note("fresh holder keeps it", (await clients[0].get("{a}short")) === fresh.value);
await fresh.release();

// `using`: the lock is extended automatically while the routine outlives its duration.
// Extended 300 ms in, with 700 ms to spare, so that a busy machine does not lose it.
const result = await redlock.using(["{a}long"], 1000, { automaticExtensionThreshold: 700 }, async (signal) => {
  await sleep(2500);
  return { aborted: signal.aborted, held: (await clients[1].get("{a}long")) !== null };
});
// `using` releases at the end, returning once a quorum released: give the last node a moment.
let left = [];
for (let i = 0; i < 100; i++) {
  left = await Promise.all(clients.map((c) => c.exists("{a}long")));
  if (left.every((n) => n === 0)) break;
  await sleep(10);
}
note("using", result.aborted, result.held, left);

console.log(JSON.stringify(seen));
await Promise.all(clients.map((c) => c.quit()));
