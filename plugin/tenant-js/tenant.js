// The example tenant in JavaScript (docs/TENANTS.md walks through it). It is written only
// against the standard `wasi:keyvalue` interfaces and the `latchkey:lease` proposal: the
// imports below are those interfaces, as componentize-js names them (`package/interface@version`).
// `plugin/tenant-rs` is the same tenant in Rust, line for line.
//
// How WIT types look here: `list<u8>` is a Uint8Array, `u64`/`s64` a BigInt, `option<T>` a value
// or `undefined`, and a function returning `result<T, E>` returns T or throws an error whose
// `payload` is E (a variant: `{ tag, val }`).

import { open } from 'wasi:keyvalue/store@0.2.0-draft2';
import { Cas, increment, swap } from 'wasi:keyvalue/atomics@0.2.0-draft2';
import { getMany, setMany } from 'wasi:keyvalue/batch@0.2.0-draft2';
import { acquire, release } from 'latchkey:lease/lease@0.1.0';

const LANGUAGE = 'js';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

// A `wasi:keyvalue/store.error` as text.
function why(error) {
  const e = error.payload ?? error;
  return e.tag === 'other' ? `other(${e.val})` : e.tag;
}

// The export of the world (`run: func(bucket: string) -> list<string>`): one round of work on
// the bucket, and what it saw, one line per step; a store error ends the round.
export function run(name) {
  try {
    return round(name);
  } catch (e) {
    return [`error: ${why(e)}`];
  }
}

// The round itself.
function round(name) {
  const out = [];

  // 1. Bucket names are the host's to check: a bad one is `no-such-store`.
  try {
    open('no/such');
    out.push('open no/such: opened');
  } catch (e) {
    out.push(`open no/such: ${why(e)}`);
  }
  const bucket = open(name);

  // 2. The lease on "report" (10 s) keeps other instances of this tenant out of the round.
  // Its fence grows with every grant: a storage service can refuse a write carrying an older
  // fence than one it has seen.
  const grant = acquire(bucket, 'report', 10_000n);
  if (grant === undefined) {
    out.push('lease: held by someone else, try later');
    return out;
  }
  out.push(`lease: fence ${grant.fence}`);

  // 3. A counter: `increment` creates a missing key with the delta.
  out.push(`visits: ${increment(bucket, 'visits', 1n)}`);

  // 4. Append to "log" with compare-and-swap: when someone wrote it since the handle was made,
  // `swap` fails with `cas-failed` and a fresh handle to retry with.
  let cas = Cas.new(bucket, 'log');
  for (let attempt = 1; ; attempt++) {
    const now = cas.current();
    const log = (now === undefined ? '' : decoder.decode(now)) + `${LANGUAGE};`;
    try {
      swap(cas, encoder.encode(log));
      out.push(`log: ${log}`);
      break;
    } catch (e) {
      if (e.payload?.tag !== 'cas-failed') throw e;
      if (attempt === 5) throw { payload: { tag: 'other', val: 'log: too busy' } };
      cas = e.payload.val;
    }
  }

  // 5. A batch: set one key, read two (a missing key comes back without a value).
  setMany(bucket, [[`seen-by-${LANGUAGE}`, encoder.encode('yes')]]);
  const seen = getMany(bucket, ['seen-by-rust', 'seen-by-js'])
    .map(([key, value]) => `${key}=${value === undefined ? 'none' : decoder.decode(value)}`);
  out.push(`seen: ${seen.join(' ')}`);

  // 6. Every key of the bucket, page by page (the cursor is the host's, opaque).
  const keys = [];
  let cursor;
  do {
    const page = bucket.listKeys(cursor);
    keys.push(...page.keys);
    cursor = page.cursor;
  } while (cursor !== undefined);
  out.push(`keys: ${[...new Set(keys)].sort().join(',')}`);

  // 7. Give the lease back: false would mean it ran out and someone else may hold it.
  out.push(`released: ${release(bucket, grant)}`);
  return out;
}
