//! A stream in Redis 7.0's RDB form (`RDB_TYPE_STREAM_LISTPACKS_2`), so that a replica (latchkey
//! or redis-server) and a restart get every stream back.
//!
//! Redis keeps a stream as a radix tree of listpacks and writes them as they are: for each
//! node its *master ID* (16 bytes, big-endian milliseconds then sequence) and the listpack.
//! A node's listpack opens with a *master entry* (live count, deleted count, the master
//! fields, a `0` terminator); then each entry is a flags integer, its ID as differences from
//! the master ID, its fields and values, and an `lp-count` (how many listpack elements the
//! entry took, so that it can be walked backwards). Entries here never use the "same fields
//! as the master" shortcut (flag 2): each carries its own field names, which every reader
//! accepts. After the nodes come the length, the last ID, the first ID, the greatest deleted
//! ID, `entries-added`, and the consumer groups: for each its name, last delivered ID and
//! `entries-read` (`-1`, unknown, as the 64-bit length it wraps to), its pending entries (the
//! 16-byte big-endian ID, the delivery time as 8 little-endian bytes, the delivery count), and
//! its consumers (name, seen time, the IDs of the pending entries each holds).

use bytes::{BufMut, BytesMut};

use super::encode::{len, string};
use crate::stream::{Stream, StreamId};

/// Appends `s` (the type byte and key already written): nodes, metadata, groups.
pub(crate) fn stream(out: &mut BytesMut, s: &Stream) {
    let nodes = s.nodes();
    len(out, nodes.len() as u64);
    for node in &nodes {
        let master = node[0].0;
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&master.ms.to_be_bytes());
        key[8..].copy_from_slice(&master.seq.to_be_bytes());
        string(out, &key);
        let mut lp = Listpack::default();
        let master_fields: Vec<&[u8]> = node[0].1.iter().step_by(2).map(|f| &f[..]).collect();
        lp.int(node.len() as i64);
        lp.int(0);
        lp.int(master_fields.len() as i64);
        for f in &master_fields {
            lp.str(f);
        }
        lp.int(0);
        for (id, fields) in node.iter() {
            lp.int(0); // flags: live, own fields
            lp.int((id.ms - master.ms) as i64);
            lp.int(id.seq.wrapping_sub(master.seq) as i64);
            let pairs = fields.len() / 2;
            lp.int(pairs as i64);
            for f in fields.iter() {
                lp.str(f);
            }
            lp.int(4 + 2 * pairs as i64);
        }
        string(out, &lp.finish());
    }
    len(out, s.len() as u64);
    let id = |out: &mut BytesMut, id: StreamId| {
        len(out, id.ms);
        len(out, id.seq);
    };
    id(out, s.last_id());
    id(out, s.first_id());
    id(out, s.max_deleted());
    len(out, s.entries_added());
    len(out, s.groups().len() as u64);
    for (name, g) in s.groups() {
        string(out, name);
        id(out, g.last_id);
        len(out, g.entries_read as u64);
        len(out, g.pel.len() as u64);
        for (pid, n) in &g.pel {
            raw_id(out, *pid);
            out.put_u64_le(n.delivery_time);
            len(out, n.delivery_count);
        }
        len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            string(out, cname);
            out.put_u64_le(c.seen_time);
            len(out, c.pel.len() as u64);
            for pid in &c.pel {
                raw_id(out, *pid);
            }
        }
    }
}

/// An ID as Redis stores it in a radix-tree key: milliseconds then sequence, big-endian.
fn raw_id(out: &mut BytesMut, id: StreamId) {
    out.put_u64(id.ms);
    out.put_u64(id.seq);
}

/// A listpack being built: elements, each followed by its own size (the "backlen").
#[derive(Default)]
struct Listpack {
    body: Vec<u8>,
    count: usize,
}

impl Listpack {
    /// Appends an integer: seven bits in the encoding byte when small, else eight bytes.
    fn int(&mut self, v: i64) {
        let start = self.body.len();
        if (0..128).contains(&v) {
            self.body.push(v as u8);
        } else {
            self.body.push(0xF4);
            self.body.extend_from_slice(&v.to_le_bytes());
        }
        self.backlen(start);
    }

    /// Appends a string with the shortest length encoding that holds it.
    fn str(&mut self, s: &[u8]) {
        let start = self.body.len();
        if s.len() < 64 {
            self.body.push(0x80 | s.len() as u8);
        } else if s.len() < 4096 {
            self.body.push(0xE0 | (s.len() >> 8) as u8);
            self.body.push(s.len() as u8);
        } else {
            self.body.push(0xF0);
            self.body.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        self.body.extend_from_slice(s);
        self.backlen(start);
    }

    /// The element's size after it, seven bits a byte, most significant first; every byte
    /// but the first has its top bit set (so a reader walking backwards knows where the
    /// size begins).
    fn backlen(&mut self, start: usize) {
        let mut n = self.body.len() - start;
        let mut groups = vec![(n & 0x7F) as u8];
        n >>= 7;
        while n > 0 {
            groups.push((n & 0x7F) as u8);
            n >>= 7;
        }
        for (i, g) in groups.iter().rev().enumerate() {
            self.body.push(if i == 0 { *g } else { g | 0x80 });
        }
        self.count += 1;
    }

    /// The listpack: total size and count (`u16::MAX` when it does not fit), body, `0xFF`.
    fn finish(self) -> Vec<u8> {
        let total = 6 + self.body.len() + 1;
        let mut out = Vec::with_capacity(total);
        out.put_u32_le(total as u32);
        out.put_u16_le(u16::try_from(self.count).unwrap_or(u16::MAX));
        out.extend_from_slice(&self.body);
        out.push(0xFF);
        out
    }
}
