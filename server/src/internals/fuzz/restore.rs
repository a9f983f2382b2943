//! `restore_payload`: what `RESTORE` reads, a payload straight from a client. A hostile payload
//! must be refused with Redis's error and leave no key behind, or become a value that dumps
//! back to a payload which restores to the same value; it must never crash the server, hang
//! it, or make it allocate beyond a small multiple of the payload's size.

use bytes::{BufMut, Bytes, BytesMut};

use crate::rdb::{dump, CRC64, VERSION};
use crate::Frame;

/// A decode may allocate this many times the payload's size (LZF strings inflate up to 88
/// times their compressed size, and every element has its own small allocation) ...
const ALLOC_FACTOR: usize = 256;
/// ... plus this.
const ALLOC_CONST: usize = 2 << 20;

/// `body` with a valid footer (RDB version 10 and the CRC-64), so that the fuzzer's bytes
/// reach the value reader instead of stopping at the checksum.
pub fn with_footer(body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(body.len() + 10);
    out.put_slice(body);
    out.put_u16_le(VERSION as u16);
    let crc = CRC64.checksum(&out);
    out.put_u64_le(crc);
    out.to_vec()
}

/// The check: `data` is the value's body (type byte and RDB encoding); the footer is added.
pub fn check(data: &[u8]) {
    let payload = with_footer(data);
    let base = super::alloc_start();
    let decoded = dump::decode(&payload, 512);
    let used = super::alloc_peak_since(base);
    assert!(
        used <= ALLOC_FACTOR * payload.len() + ALLOC_CONST,
        "{} payload bytes made the decoder allocate {used} bytes",
        payload.len()
    );
    // A value that was read dumps to a payload that reads back to the same value: latchkey's
    // own payloads are a fixed point.
    let redumped = decoded.as_ref().ok().map(dump::payload);
    if let Some(again) = &redumped {
        let value = dump::decode(again, 512).expect("a payload latchkey wrote reads back");
        assert_eq!(
            dump::payload(&value),
            *again,
            "dump, restore, dump changed the bytes"
        );
    }
    super::rt::block_on(async {
        let server = super::rt::server().await;
        let mut c = server.client();
        let payload = Bytes::from(payload);
        let reply = c
            .cmd([&b"RESTORE"[..], b"k", b"0", &payload, b"REPLACE"])
            .await;
        match &redumped {
            Some(again) => {
                assert_eq!(
                    reply,
                    Frame::Simple("OK".into()),
                    "a readable payload restores"
                );
                let dumped = c.cmd(["DUMP", "k"]).await;
                assert_eq!(
                    dumped,
                    Frame::Bulk(again.clone()),
                    "the key dumps as decoded"
                );
            }
            None => {
                assert_eq!(reply, Frame::Error("ERR Bad data format".into()));
                let exists = c.cmd(["EXISTS", "k"]).await;
                assert_eq!(exists, Frame::Integer(0), "a refused payload left a key");
            }
        }
        let pong = c.cmd(["PING"]).await;
        assert_eq!(pong, Frame::Simple("PONG".into()));
        server.shutdown().await;
    });
}

/// Whether `body` (with a valid footer added) is a value latchkey restores; for the
/// regression tests, which check that Redis's own payloads do and the hostile ones do not.
pub fn restores(body: &[u8]) -> bool {
    dump::decode(&with_footer(body), 512).is_ok()
}
