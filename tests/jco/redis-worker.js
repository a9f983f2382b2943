// The worker thread behind `redis-host.js`: it owns the sockets and does the asynchronous
// work (Node's sockets cannot be read synchronously), while the main thread, which runs the
// component, sleeps on a shared flag until the answer is posted.
//
// Protocol: the main thread posts `{ op, args }` on `port`; the worker answers with
// `{ ok: value }` or `{ err: message }` on the same port, then sets `signal[0] = 1` and
// notifies, which wakes the main thread to read the answer with `receiveMessageOnPort`.

import net from 'node:net';
import { workerData } from 'node:worker_threads';
import { encode, decode } from './resp.js';

const { addr, port, signal } = workerData;
const [host, portNumber] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];

/** One RESP connection: `send` writes a command, `onReply` gets each decoded reply's frames. */
function connect(onReply) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host, port: portNumber, noDelay: true });
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        const frames = [];
        const end = pending.length ? decode(pending, 0, frames) : -1;
        if (end < 0) break;
        pending = pending.subarray(end);
        onReply(frames);
      }
    });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

// The command connection: replies come back in order, so a FIFO of resolvers matches them.
const waiting = [];
let commandConn = null;
async function command(args) {
  commandConn ??= connect((frames) => waiting.shift().resolve(frames));
  const socket = await commandConn;
  return new Promise((resolve) => {
    waiting.push({ resolve });
    socket.write(encode(args));
  });
}

// Subscriptions: each has its own connection in subscribe mode and counts unread messages.
const subs = new Map();
let nextSub = 1n;
async function subscribe(channel) {
  const sub = { unread: 0, wake: null, confirmed: null };
  const confirmed = new Promise((resolve) => { sub.confirmed = resolve; });
  sub.socket = await connect((frames) => {
    const kind = frames[1]?.tag === 'bulk' ? Buffer.from(frames[1].val).toString() : '';
    if (kind === 'subscribe') sub.confirmed();
    if (kind === 'message') {
      sub.unread++;
      sub.wake?.();
    }
  });
  sub.socket.write(encode(['SUBSCRIBE', channel]));
  await confirmed;
  const id = nextSub++;
  subs.set(id, sub);
  return id;
}

function waitMessage(id, timeoutMs) {
  const sub = subs.get(id);
  if (!sub) return false;
  const take = () => { if (sub.unread > 0) { sub.unread--; return true; } return false; };
  if (take()) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => { sub.wake = null; resolve(false); }, Number(timeoutMs));
    sub.wake = () => { clearTimeout(timer); sub.wake = null; resolve(take()); };
  });
}

function unsubscribe(id) {
  subs.get(id)?.socket.destroy();
  subs.delete(id);
}

const ops = { command, subscribe, waitMessage, unsubscribe };

port.on('message', async ({ op, args }) => {
  let answer;
  try {
    answer = { ok: await ops[op](...args) };
  } catch (e) {
    answer = { err: `${op}: ${e.message ?? e}` };
  }
  port.postMessage(answer);
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
});
