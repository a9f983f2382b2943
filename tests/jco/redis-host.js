// The component's `latchkey:locks/redis` import, for Node.js: the same lock-client component
// that runs in the wasmtime host runs here, transpiled by jco, with this file as its Redis.
//
// The component calls its imports synchronously, but Node's sockets are asynchronous. So a
// worker thread (`redis-worker.js`) owns the sockets, and each call here posts a request to
// it and blocks this thread with `Atomics.wait` on a shared flag until the worker has posted
// the answer, which `receiveMessageOnPort` then reads synchronously.

import { Worker, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';

/** How long one call may take before the host gives up (the worker died or hung). */
const CALL_TIMEOUT_MS = 60_000;

let address = process.env.LATCHKEY_ADDR;
let link = null;

/** Sets the server's `host:port`; call it before the component makes its first call. */
export function configure(addr) {
  address = addr;
}

/** Stops the worker, so the process can exit. */
export function close() {
  link?.worker.terminate();
  link = null;
}

function start() {
  if (!address) throw new Error('redis host: no server address (configure() or LATCHKEY_ADDR)');
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(new URL('./redis-worker.js', import.meta.url), {
    workerData: { addr: address, port: port2, signal },
    transferList: [port2],
  });
  worker.unref();
  return { worker, port: port1, signal };
}

/** Runs `op` in the worker and waits for its answer: `{ ok }` or `{ err }`. */
function call(op, ...args) {
  link ??= start();
  const { port, signal } = link;
  Atomics.store(signal, 0, 0);
  port.postMessage({ op, args });
  const deadline = Date.now() + CALL_TIMEOUT_MS;
  while (Atomics.load(signal, 0) === 0) {
    if (Date.now() > deadline) throw new Error(`redis host: ${op} got no answer`);
    Atomics.wait(signal, 0, 0, 100);
  }
  return receiveMessageOnPort(port).message;
}

/** A WIT `result` the generated bindings pass through as it is. */
const result = (answer) => ('err' in answer ? { tag: 'err', val: answer.err } : { tag: 'ok', val: answer.ok });

/** For the import's functions this host does not implement: a trap with a clear message. */
function unsupported(name) {
  return () => {
    throw new Error(`redis.${name} is unsupported in this host`);
  };
}

/** `command`: runs one command; error replies come back as an `error` frame. */
export function command(args) {
  return result(call('command', args));
}

/**
 * `nodes`: this host has one server, so quorum locks (the component's `red-lock`) run on it
 * alone.
 */
export function nodes() {
  return 1;
}

/** `command-all`: the one node's outcome, bounded by the timeout, as a list of one. */
export function commandAll(args, timeoutMs) {
  return [result(call('commandTimed', args, timeoutMs))];
}

/** `subscribe`: a subscription id, once the server has confirmed the subscription. */
export function subscribe(channel) {
  return result(call('subscribe', channel));
}

/** `wait-message`: true if a message arrived on the subscription within the timeout. */
export function waitMessage(subscription, timeoutMs) {
  const answer = call('waitMessage', subscription, timeoutMs);
  return 'ok' in answer && answer.ok;
}

/** `unsubscribe`: ends a subscription. */
export function unsubscribe(subscription) {
  call('unsubscribe', subscription);
}

/** `sleep`: blocks this thread; no worker needed. */
export function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(ms));
}

// Functions of the import this host does not (yet) provide; each is one line to add.
export const keepLease = unsupported('keep-lease');
export const keepQuorumLease = unsupported('keep-quorum-lease');
export const dropLease = unsupported('drop-lease');
export const leaseAlive = unsupported('lease-alive');
export const leaseLost = unsupported('lease-lost');
