// RESP, the Redis wire protocol: encoding a command, and decoding replies straight into the
// `frame` list of the component's `redis` import (a reply tree flattened in prefix order: an
// `array(n)` frame is followed by its n elements, a `pairs(n)` frame by 2n).

/** Encodes a command (a list of byte strings) as a RESP array of bulk strings. */
export function encode(args) {
  const parts = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const bytes = typeof a === 'string' ? Buffer.from(a) : Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/**
 * Decodes one reply from `buf` starting at `pos`, appending its frames to `out`.
 * Returns the position after the reply, or -1 when `buf` does not hold all of it yet.
 */
export function decode(buf, pos, out) {
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return -1;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, eol);
  let next = eol + 2;
  switch (type) {
    case '+': out.push({ tag: 'status', val: line }); return next;
    case '-': out.push({ tag: 'error', val: line }); return next;
    case ':': out.push({ tag: 'integer', val: BigInt(line) }); return next;
    case '_': out.push({ tag: 'nil' }); return next;
    case ',': out.push({ tag: 'double', val: Number(line.replace('inf', 'Infinity')) }); return next;
    case '#': out.push({ tag: 'boolean', val: line === 't' }); return next;
    case '$': case '=': case '!': case '(': {
      const n = Number(line);
      if (type === '$' && n < 0) { out.push({ tag: 'nil' }); return next; }
      if (type === '(') { out.push({ tag: 'integer', val: BigInt(line) }); return next; }
      if (buf.length < next + n + 2) return -1;
      const body = new Uint8Array(buf.subarray(next, next + n));
      out.push(type === '!' ? { tag: 'error', val: Buffer.from(body).toString() } : { tag: 'bulk', val: body });
      return next + n + 2;
    }
    case '*': case '~': case '>': case '%': {
      const n = Number(line);
      if (n < 0) { out.push({ tag: 'nil' }); return next; }
      const pairs = type === '%';
      out.push({ tag: pairs ? 'pairs' : 'array', val: n });
      for (let i = 0; i < (pairs ? 2 * n : n); i++) {
        next = decode(buf, next, out);
        if (next < 0) return -1;
      }
      return next;
    }
    default:
      throw new Error(`protocol error: unexpected reply type ${JSON.stringify(type)}`);
  }
}
