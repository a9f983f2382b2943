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

/**
 * One RESP connection: `onReply` gets each decoded reply's frames, `onClose` the reason the
 * connection ended (after it was established).
 */
function connect(onReply, onClose) {
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
    socket.once('connect', () => {
      socket.off('error', reject);
      socket.on('error', () => {}); // 'close' follows and reports it
      socket.once('close', () => onClose('connection closed'));
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

// The command connection: replies come back in order, so a FIFO of resolvers matches them.
const waiting = [];
let commandConn = null;
async function command(args) {
  commandConn ??= connect(
    (frames) => waiting.shift().resolve(frames),
    (reason) => {
      // Fail every command still waiting; the next one reconnects.
      commandConn = null;
      for (const w of waiting.splice(0)) w.reject(new Error(reason));
    },
  ).catch((e) => {
    commandConn = null;
    throw e;
  });
  const socket = await commandConn;
  return new Promise((resolve, reject) => {
    waiting.push({ resolve, reject });
    socket.write(encode(args));
  });
}

// Subscriptions: each has its own connection in subscribe mode and counts unread messages.
const subs = new Map();
let nextSub = 1n;
async function subscribe(channel) {
  const sub = { unread: 0, wake: null };
  const confirmed = new Promise((resolve, reject) => {
    sub.confirmed = resolve;
    sub.failed = reject;
  });
  sub.socket = await connect((frames) => {
    const kind = frames[1]?.tag === 'bulk' ? Buffer.from(frames[1].val).toString() : '';
    if (kind === 'subscribe') sub.confirmed();
    if (kind === 'message') {
      sub.unread++;
      sub.wake?.();
    }
  }, (reason) => {
    sub.failed(new Error(reason)); // before the confirmation: subscribe fails
    sub.wake?.(); // after: a waiter stops waiting
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

// `command-all` on this host's one node: the command, bounded by the timeout. A reply that
// comes after the timeout still reaches its place in the FIFO above and is dropped there.
function commandTimed(args, timeoutMs) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), Number(timeoutMs));
  });
  return Promise.race([command(args), late]).finally(() => clearTimeout(timer));
}

const ops = { command, commandTimed, subscribe, waitMessage, unsubscribe };

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
