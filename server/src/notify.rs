//! Keyspace notifications (`notify-keyspace-events`): a write publishes what it did to a key
//! on two pub/sub channels, `__keyspace@<db>__:<key>` (the message is the event, `set`) and
//! `__keyevent@<db>__:<event>` (the message is the key), so that a client can wait for a key
//! to change, expire or be deleted — a lock's waiters can listen for its release this way.
//!
//! The parameter is a string of letters: `K` and `E` choose the channels, the others the
//! classes of events (`g` generic, `$` strings, `l` lists, `s` sets, `h` hashes, `z` sorted
//! sets, `x` expired, `e` evicted, `t` streams, `d` module, `A` all of those). While it is
//! empty, as by default, a write pays one relaxed atomic load here.
//!
//! This module reads and shows the parameter; `Shared::keyspace_event` (`state.rs`) publishes,
//! and the commands, the expiry cycle and eviction call it with Redis's event names.
//!
//! `n` (`new`: a key created) is sent when a command adds a key to a database, as Redis's
//! `dbAdd` sends it, before the command's own event; a snapshot being loaded sends none.
//!
//! Not implemented, and refused by `CONFIG SET` rather than accepted and ignored: `m` (an
//! event on every read of a missing key).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub(crate) const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub(crate) const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (`DEL`, `EXPIRE`, `RENAME`, ...).
pub(crate) const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub(crate) const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub(crate) const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub(crate) const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub(crate) const HASH: u32 = 1 << 6;
/// `z`: sorted-set commands.
pub(crate) const ZSET: u32 = 1 << 7;
/// `x`: a key deleted because its TTL ran out.
pub(crate) const EXPIRED: u32 = 1 << 8;
/// `e`: a key deleted by `maxmemory` eviction.
pub(crate) const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub(crate) const STREAM: u32 = 1 << 10;
/// `m`: a read that found no key (refused: see the module docs).
const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (latchkey has no modules, so none is ever sent, as on a Redis without
/// modules).
const MODULE: u32 = 1 << 12;
/// `n`: a key created.
pub(crate) const NEW: u32 = 1 << 13;
/// `A`: every class but `m` and `n`.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's error for a letter it does not know.
const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Reads a parameter value into flags, as Redis does (any order, repeats allowed).
pub(crate) fn parse(value: &str) -> Result<u32, String> {
    let mut flags = 0;
    for c in value.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return Err(INVALID.into()),
        };
    }
    if flags & KEY_MISS != 0 {
        return Err("latchkey does not send key-miss events ('m')".into());
    }
    Ok(flags)
}

/// The flags as `CONFIG GET` shows them: Redis's canonical order, `A` for all the classes.
pub(crate) fn format(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// The current flags, read on every write: set by `CONFIG SET notify-keyspace-events`.
/// Clones share the flags: the keyspace holds one, to learn whether to note created keys.
#[derive(Debug, Default, Clone)]
pub(crate) struct NotifyFlags(Arc<AtomicU32>);

impl NotifyFlags {
    /// Replaces the flags.
    pub(crate) fn store(&self, flags: u32) {
        self.0.store(flags, Ordering::Relaxed);
    }

    /// Whether events of `class` are published at all.
    pub(crate) fn wants(&self, class: u32) -> bool {
        let flags = self.0.load(Ordering::Relaxed);
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }

    /// Whether `new` events (class `n`) are published: the keyspace notes the keys it
    /// creates only then.
    pub(crate) fn wants_new_keys(&self) -> bool {
        self.wants(NEW)
    }

    /// The flags.
    pub(crate) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_show_as_redis_does() {
        for (given, shown) in [
            ("", ""),
            ("KEA", "AKE"),
            ("Kx", "xK"),
            ("gKE", "gKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("Kg$lshzxetd", "AK"),
            ("EKx", "xKE"),
            ("En", "nE"),
            ("KEAn", "AKE"),
        ] {
            assert_eq!(format(parse(given).unwrap()), shown, "{given}");
        }
        assert_eq!(parse("Z").unwrap_err(), INVALID);
        assert!(parse("AKEm").is_err());
    }
}
