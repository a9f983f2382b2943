//! What a key holds: its [`Value`], and the [`Entry`] around it (the expiry deadline and the
//! [`Access`] stamp that `maxmemory` eviction reads).

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use indexmap::IndexMap;

use crate::config::Limits;
use crate::list::List;
use crate::set::Set;
use crate::stream::Stream;
use crate::zset::ZSet;

pub(crate) use crate::string::Str;

/// A stored value.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A string (also what `INCR` works on): short ones inline (see [`Str`]).
    Str(Str),
    /// A hash; insertion-ordered like Redis's small-hash encoding, so replies match; short
    /// fields and values inline (see [`Str`]). Boxed, like the sorted set and the set: every
    /// key's [`Fields`] allocation is as large as the largest variant, and most keys hold
    /// strings.
    Hash(Box<IndexMap<Str, Str>>),
    /// A list (chunks of packed elements, see [`List`]; boxed, see `Hash`).
    List(Box<List>),
    /// A sorted set (boxed, see `Hash`).
    ZSet(Box<ZSet>),
    /// A set (an intset or a hashtable, see [`Set`]; boxed, see `Hash`).
    Set(Box<Set>),
    /// A stream (see [`Stream`]); boxed, being the largest and the rarest.
    Stream(Box<Stream>),
}

impl Value {
    /// Whether a key newly holding this value may serve clients blocked on it: lists
    /// (`BLPOP`, ...) and sorted sets (`BZPOPMIN`, ...), the types Redis signals as ready.
    pub(crate) fn wakes_blocked_clients(&self) -> bool {
        matches!(self, Value::List(_) | Value::ZSet(_))
    }

    /// Gives back the room a collection keeps from its peak once it is mostly empty (see
    /// [`crate::shrink`]); true when it rebuilt. Strings are left as they are.
    pub(crate) fn shrink_if_sparse(&mut self) -> bool {
        use crate::shrink::Shrink;
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.shrink_if_sparse(),
            Value::List(l) => l.shrink_if_sparse(),
            Value::ZSet(z) => z.shrink_if_sparse(),
            Value::Set(s) => s.shrink_if_sparse(),
            // A B-tree gives back its nodes as entries go.
            Value::Stream(_) => false,
        }
    }

    /// The name `TYPE` replies with.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::ZSet(_) => "zset",
            Value::Set(_) => "set",
            Value::Stream(_) => "stream",
        }
    }

    /// Whether this is a hash, list, set or sorted set with nothing left in it (a key Redis
    /// deletes).
    pub(crate) fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            Value::Set(s) => s.is_empty(),
            // A stream outlives its last entry: its last ID still matters.
            Value::Stream(_) => false,
        }
    }
}

/// A key as the keyspace table stores it: one thin pointer (8 bytes in the slot) to a single
/// allocation of its reference count, length and bytes (see [`Thin`](crate::thin::Thin)). A
/// `Box<[u8]>` took 16 bytes of every slot and a `Bytes` 32, each paid about twice per key (the
/// table runs half empty after it grows). The expiry index shares the same allocation for a
/// key with a TTL instead of copying it. Hashes and compares as `[u8]`, so lookups take a
/// `&[u8]`; code that needs a `Bytes` of a stored key (a reply) copies it with [`key_bytes`].
pub(crate) type Key = crate::thin::Thin;

/// A stored key's bytes as a `Bytes` (a copy: a key is short, and the copy keeps the table's
/// allocation exact).
pub(crate) fn key_bytes(key: &[u8]) -> Bytes {
    Bytes::copy_from_slice(key)
}

/// A value and its absolute expiry time (Unix milliseconds), if it has one: what the
/// keyspace table holds for each key.
///
/// Every key's slot in the table holds one, and the table runs about half empty right after
/// it grows, so each byte of the slot is paid about twice per key. An `Entry` is therefore one
/// pointer to its [`Fields`] (value, deadline, access stamp) in a single allocation of 48
/// bytes, which a short string fills with its bytes inline (see [`Str`]): 8 bytes in the slot
/// instead of the 56 the fields took there. Read and write the fields through `Deref`.
#[derive(Clone, Debug)]
pub(crate) struct Entry(Box<Fields>);

/// What an [`Entry`] holds. The deadline is a plain `u64` with [`NO_DEADLINE`] for "no TTL"
/// rather than an `Option<u64>`, which would take 16 bytes; read and write it through
/// [`expires_at`](Fields::expires_at) and [`set_expires_at`](Fields::set_expires_at).
#[derive(Clone, Debug)]
pub(crate) struct Fields {
    /// The stored value.
    pub value: Value,
    /// When the key stops existing, in Unix milliseconds; [`NO_DEADLINE`] when it has no TTL.
    deadline: u64,
    /// When the key was last used, or how often (for `maxmemory` eviction).
    pub access: Access,
}

/// The stored deadline of a key without a TTL. No real deadline reaches it: commands refuse
/// times past `i64::MAX` milliseconds, and a larger one read from a file is clamped just
/// below it (see [`Fields::set_expires_at`]), which still means "not in the next 500 million
/// years".
const NO_DEADLINE: u64 = u64::MAX;

/// The stored form of a deadline (see [`NO_DEADLINE`]).
fn pack(expires_at: Option<u64>) -> u64 {
    match expires_at {
        Some(t) => t.min(NO_DEADLINE - 1),
        None => NO_DEADLINE,
    }
}

impl Entry {
    /// An entry without expiry.
    pub(crate) fn new(value: Value) -> Entry {
        Entry::with_expiry(value, None)
    }

    /// An entry that expires at `expires_at` (Unix milliseconds), if given.
    pub(crate) fn with_expiry(value: Value, expires_at: Option<u64>) -> Entry {
        Entry(Box::new(Fields {
            value,
            deadline: pack(expires_at),
            access: Access::default(),
        }))
    }

    /// The value, taking the entry apart.
    pub(crate) fn into_value(self) -> Value {
        self.0.value
    }
}

impl std::ops::Deref for Entry {
    type Target = Fields;

    #[inline]
    fn deref(&self) -> &Fields {
        &self.0
    }
}

impl std::ops::DerefMut for Entry {
    #[inline]
    fn deref_mut(&mut self) -> &mut Fields {
        &mut self.0
    }
}

impl Fields {
    /// When the key stops existing, in Unix milliseconds (`None`: it has no TTL).
    #[inline]
    pub(crate) fn expires_at(&self) -> Option<u64> {
        (self.deadline != NO_DEADLINE).then_some(self.deadline)
    }

    /// Gives the key a new deadline (`None`: no TTL) and returns the one it had.
    pub(crate) fn set_expires_at(&mut self, expires_at: Option<u64>) -> Option<u64> {
        let old = self.expires_at();
        self.deadline = pack(expires_at);
        old
    }

    /// Whether the entry is logically gone at `now_ms`.
    #[inline]
    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        // A clock at the end of time (`u64::MAX`) still leaves a key without TTL alive.
        self.deadline <= now_ms.min(NO_DEADLINE - 1)
    }
}

// ---------------------------------------------------------------------------------------------
// Access time and frequency

/// Redis's starting frequency for a new key (`LFU_INIT_VAL`), so that a key just written is not
/// the first evicted.
pub(crate) const LFU_INIT: u32 = 5;

/// When a key was last used (milliseconds, wrapping every 49 days) or, under an LFU policy,
/// how often: a 16-bit minute stamp of the last decrement and an 8-bit logarithmic counter,
/// the layout of Redis's `lru` field.
#[derive(Debug, Default)]
pub(crate) struct Access(AtomicU32);

impl Clone for Access {
    fn clone(&self) -> Self {
        Access(AtomicU32::new(self.0.load(Ordering::Relaxed)))
    }
}

fn minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xFFFF) as u32
}

impl Access {
    /// Stamps a key that was just created.
    pub(crate) fn init(&self, now_ms: u64, limits: &Limits) {
        let v = if limits.policy().lfu() {
            (minutes(now_ms) << 8) | LFU_INIT
        } else {
            now_ms as u32
        };
        self.0.store(v, Ordering::Relaxed);
    }

    /// Records a use of the key (any read or write that found it). A read at time 0 is the
    /// server's own look at a key (encoding a write for the replication stream, say), not a
    /// use: it leaves the stamp alone, as Redis's `LOOKUP_NOTOUCH` does.
    pub(crate) fn touch(&self, now_ms: u64, limits: &Limits) {
        if now_ms == 0 {
            return;
        }
        let old = self.0.load(Ordering::Relaxed);
        let new = if limits.policy().lfu() {
            let counter = log_incr(decayed(old, now_ms, limits), limits);
            (minutes(now_ms) << 8) | counter
        } else {
            now_ms as u32
        };
        if new != old {
            self.0.store(new, Ordering::Relaxed);
        }
    }

    /// Stamps a key `RESTORE` just created with the `IDLETIME` (seconds) or `FREQ` (a counter
    /// 0..=255) its caller gave, as Redis's `objectSetLRUOrLFU` does: each applies only under
    /// the kind of policy that tracks it (idle time under LRU and the others, frequency under
    /// LFU), and is ignored otherwise.
    pub(crate) fn restore(
        &self,
        idle_s: Option<u64>,
        freq: Option<u8>,
        now_ms: u64,
        limits: &Limits,
    ) {
        if limits.policy().lfu() {
            if let Some(f) = freq {
                self.0
                    .store((minutes(now_ms) << 8) | f as u32, Ordering::Relaxed);
            }
        } else if let Some(idle) = idle_s {
            // The stamp is milliseconds modulo 2^32 (49 days), the wrap that `score` undoes;
            // an idle time past that wraps as Redis's 24-bit clock does.
            let back = idle.saturating_mul(1000);
            self.0
                .store((now_ms.wrapping_sub(back)) as u32, Ordering::Relaxed);
        }
    }

    /// How good an eviction candidate the key is under `policy` (higher: evict first).
    pub(crate) fn score(&self, now_ms: u64, limits: &Limits) -> u64 {
        let v = self.0.load(Ordering::Relaxed);
        if limits.policy().lfu() {
            255 - decayed(v, now_ms, limits) as u64
        } else {
            (now_ms as u32).wrapping_sub(v) as u64
        }
    }
}

/// The counter of an LFU stamp after the decay of the minutes since it was stamped: one step
/// down per `lfu-decay-time` minutes.
fn decayed(v: u32, now_ms: u64, limits: &Limits) -> u32 {
    let counter = v & 0xFF;
    let period = limits.lfu_decay_time.load(Ordering::Relaxed);
    if period == 0 {
        return counter;
    }
    // Masked to the 16-bit minute field: a stamp written under an LRU policy (milliseconds, 32
    // bits) and read after `CONFIG SET maxmemory-policy` switched to LFU has more bits there,
    // and would make the subtraction below overflow.
    let then = (v >> 8) & 0xFFFF;
    let now = minutes(now_ms);
    let elapsed = if now >= then {
        now - then
    } else {
        0xFFFF - then + now
    };
    counter.saturating_sub(elapsed / period)
}

/// Redis's logarithmic increment: the higher the counter, the less likely a use raises it.
fn log_incr(counter: u32, limits: &Limits) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let factor = limits.lfu_log_factor.load(Ordering::Relaxed) as f64;
    let p = 1.0 / (base * factor + 1.0);
    if rand::random::<f64>() < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key pays for its `Fields` in one allocation: a variant that makes `Value` bigger
    /// than a [`Str`] costs every key, so the big, rarer ones are boxed, and the other
    /// variants fit around the string's tag. This fails when one does not.
    #[test]
    fn a_value_is_no_bigger_than_a_string() {
        assert_eq!(std::mem::size_of::<Value>(), 32, "a 32-byte Str, no tag");
    }

    /// The fields of an entry: the value, an 8-byte deadline, the 4-byte access stamp, 44
    /// bytes in all, which the allocator's 48-byte size class holds (the 16-byte deadline
    /// of an `Option<u64>` would push it to 64).
    #[test]
    fn the_fields_fill_a_48_byte_allocation() {
        assert_eq!(std::mem::size_of::<Fields>(), 48);
    }

    /// A slot of the keyspace table: the key's thin pointer and the entry's pointer.
    #[test]
    fn a_slot_is_two_pointers() {
        assert_eq!(std::mem::size_of::<Entry>(), 8);
        assert_eq!(std::mem::size_of::<(crate::db::Key, Entry)>(), 16);
    }

    #[test]
    fn a_deadline_round_trips() {
        let mut e = Entry::new(Value::Str(Str::new()));
        assert_eq!(e.expires_at(), None);
        assert!(!e.is_expired(u64::MAX), "no TTL: never expires");
        assert_eq!(e.set_expires_at(Some(10)), None);
        assert_eq!(e.expires_at(), Some(10));
        assert!(!e.is_expired(9) && e.is_expired(10));
        assert_eq!(e.set_expires_at(Some(u64::MAX)), Some(10));
        assert_eq!(
            e.expires_at(),
            Some(u64::MAX - 1),
            "clamped below the sentinel"
        );
        assert_eq!(e.set_expires_at(None), Some(u64::MAX - 1));
        assert_eq!(e.expires_at(), None);
    }
}
