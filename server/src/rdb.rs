//! RDB, Redis's snapshot format: what a master sends a replica after `+FULLRESYNC`.
//!
//! An RDB file is a magic string (`REDIS0010`), then a flat sequence of records, each starting
//! with one byte: an *opcode* (`AUX` metadata, `SELECTDB`, `RESIZEDB`, `EXPIRETIME_MS`, `EOF`,
//! ...) or a *value type* (string, hash, list, sorted set, in one of several encodings) that is
//! followed by the key and its value. After `EOF` come eight bytes of CRC-64 (the Jones
//! polynomial, `CRC_64_REDIS` in the `crc` crate) over everything before them.
//!
//! Numbers use two encodings. *Lengths* take 1, 2, 5 or 9 bytes depending on their size
//! ([`encode::len`]). *Strings* are a length and the bytes, or, when the top two bits of the
//! first byte are `11`, a small integer (8, 16 or 32 bits, little-endian) or an LZF-compressed
//! blob.
//!
//! [`write`](mod@write) produces what redis-server 7.0 loads (plain, legacy encodings, which every
//! version still reads); [`read`] parses what redis-server 7.0 writes, including the compact
//! listpack, ziplist and quicklist encodings that [`packed`] decodes.

pub(crate) mod dump;
pub(crate) mod encode;
pub(crate) mod file;
pub(crate) mod lzf_room;
pub(crate) mod packed;
pub(crate) mod read;
pub(crate) mod reader;
pub(crate) mod stream_read;
pub(crate) mod stream_write;
pub(crate) mod write;

use crc::{Crc, CRC_64_REDIS};

/// The RDB version this server writes (what Redis 7.0 writes), and the newest it reads.
pub(crate) const VERSION: u32 = 10;

/// The checksum Redis puts after `EOF`.
pub(crate) const CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_REDIS);

/// Record opcodes: a byte that starts something other than a key.
pub(crate) mod opcode {
    /// A library of Redis 7 functions (its code as a string).
    pub(crate) const FUNCTION2: u8 = 245;
    /// The pre-release form of the function opcode (never written by 7.0 GA).
    pub(crate) const FUNCTION_PRE_GA: u8 = 246;
    /// Module auxiliary data.
    pub(crate) const MODULE_AUX: u8 = 247;
    /// The LRU idle time of the next key.
    pub(crate) const IDLE: u8 = 248;
    /// The LFU frequency of the next key.
    pub(crate) const FREQ: u8 = 249;
    /// A metadata field (`redis-ver`, `repl-id`, ...).
    pub(crate) const AUX: u8 = 250;
    /// Hash table sizes of the current database.
    pub(crate) const RESIZEDB: u8 = 251;
    /// The next key's expiry, in Unix milliseconds.
    pub(crate) const EXPIRETIME_MS: u8 = 252;
    /// The next key's expiry, in Unix seconds (old files).
    pub(crate) const EXPIRETIME: u8 = 253;
    /// Switch to another database.
    pub(crate) const SELECTDB: u8 = 254;
    /// End of the records; the checksum follows.
    pub(crate) const EOF: u8 = 255;
}

/// Value types: the byte before a key says how its value is encoded.
pub(crate) mod kind {
    /// A string.
    pub(crate) const STRING: u8 = 0;
    /// A list, element by element.
    pub(crate) const LIST: u8 = 1;
    /// A set, member by member.
    pub(crate) const SET: u8 = 2;
    /// A sorted set with scores as decimal strings.
    pub(crate) const ZSET: u8 = 3;
    /// A hash, field and value after field and value.
    pub(crate) const HASH: u8 = 4;
    /// A sorted set with scores as binary doubles.
    pub(crate) const ZSET_2: u8 = 5;
    /// A module value (pre-GA form).
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const MODULE_PRE_GA: u8 = 6;
    /// A module value.
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const MODULE_2: u8 = 7;
    /// A hash as a zipmap (Redis 2.x).
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const HASH_ZIPMAP: u8 = 9;
    /// A list as one ziplist.
    pub(crate) const LIST_ZIPLIST: u8 = 10;
    /// A set of integers.
    pub(crate) const SET_INTSET: u8 = 11;
    /// A sorted set as one ziplist.
    pub(crate) const ZSET_ZIPLIST: u8 = 12;
    /// A hash as one ziplist.
    pub(crate) const HASH_ZIPLIST: u8 = 13;
    /// A list as a quicklist of ziplists.
    pub(crate) const LIST_QUICKLIST: u8 = 14;
    /// A stream.
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const STREAM_LISTPACKS: u8 = 15;
    /// A hash as one listpack (Redis 7).
    pub(crate) const HASH_LISTPACK: u8 = 16;
    /// A sorted set as one listpack (Redis 7).
    pub(crate) const ZSET_LISTPACK: u8 = 17;
    /// A list as a quicklist of listpacks or plain nodes (Redis 7).
    pub(crate) const LIST_QUICKLIST_2: u8 = 18;
    /// A stream (Redis 7.0).
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const STREAM_LISTPACKS_2: u8 = 19;
    /// A set as one listpack (Redis 7.2).
    pub(crate) const SET_LISTPACK: u8 = 20;
    /// A stream (Redis 7.2).
    #[allow(dead_code)] // named for the table's completeness; the reader refuses this type
    pub(crate) const STREAM_LISTPACKS_3: u8 = 21;
}

/// Why an RDB payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbError(pub String);

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad RDB: {}", self.0)
    }
}

impl std::error::Error for RdbError {}

impl From<RdbError> for std::io::Error {
    fn from(e: RdbError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}
