//! The encoding parameters (`hash-max-listpack-entries`, `set-max-intset-entries`, ...): the
//! sizes below which Redis 7.0 keeps a value in a compact encoding. latchkey stores values its
//! own way, so what these settings change is what `OBJECT ENCODING` answers (and, for sets,
//! when a set leaves the intset shape, which also orders `SMEMBERS`). Each parameter has the
//! old `ziplist` name as an alias, as in Redis 7.0: both names are listed by `CONFIG GET` and
//! setting either sets both.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::codec::parse_int;

/// One parameter: its name, its alias, its range and its default (Redis 7.0.15's).
struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    min: i64,
    max: i64,
    default: i64,
}

const INT: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);
const SIZE: (i64, i64) = (0, i64::MAX);

const fn param(
    name: &'static str,
    alias: Option<&'static str>,
    range: (i64, i64),
    default: i64,
) -> Param {
    Param {
        name,
        alias,
        min: range.0,
        max: range.1,
        default,
    }
}

/// The parameters, in the order of [`Encodings::values`].
const PARAMS: &[Param] = &[
    param(
        "list-max-listpack-size",
        Some("list-max-ziplist-size"),
        INT,
        -2,
    ),
    param("list-compress-depth", None, (0, i32::MAX as i64), 0),
    param(
        "hash-max-listpack-entries",
        Some("hash-max-ziplist-entries"),
        SIZE,
        512,
    ),
    param(
        "hash-max-listpack-value",
        Some("hash-max-ziplist-value"),
        SIZE,
        64,
    ),
    param(
        "zset-max-listpack-entries",
        Some("zset-max-ziplist-entries"),
        SIZE,
        128,
    ),
    param(
        "zset-max-listpack-value",
        Some("zset-max-ziplist-value"),
        SIZE,
        64,
    ),
    param("set-max-intset-entries", None, SIZE, 512),
];

const LIST_FILL: usize = 0;
const LIST_DEPTH: usize = 1;
const HASH_ENTRIES: usize = 2;
const HASH_VALUE: usize = 3;
const ZSET_ENTRIES: usize = 4;
const ZSET_VALUE: usize = 5;
const SET_INTSET: usize = 6;

/// The current values of the encoding parameters.
#[derive(Debug)]
pub(crate) struct Encodings {
    values: [AtomicI64; 7],
}

impl Default for Encodings {
    fn default() -> Self {
        Encodings {
            values: std::array::from_fn(|i| AtomicI64::new(PARAMS[i].default)),
        }
    }
}

impl Encodings {
    /// Every `(name, default)` pair, aliases included, for the configuration table.
    pub(crate) fn defaults() -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for p in PARAMS {
            out.push((p.name, p.default.to_string()));
            if let Some(a) = p.alias {
                out.push((a, p.default.to_string()));
            }
        }
        out
    }

    /// Applies `CONFIG SET name value` if `name` is one of these parameters: `Ok(Some(names,
    /// text))` gives every name the value is stored under (the parameter and its alias) and
    /// the value as `CONFIG GET` prints it; `Ok(None)` says the name is not one of them.
    /// `Err` is Redis's reason for refusing the value (`CONFIG SET` words the rest).
    pub(crate) fn set(
        &self,
        name: &str,
        value: &str,
    ) -> Result<Option<(Vec<&'static str>, String)>, String> {
        let Some(i) = PARAMS
            .iter()
            .position(|p| p.name == name || p.alias == Some(name))
        else {
            return Ok(None);
        };
        let p = &PARAMS[i];
        let n = parse_int(value.as_bytes())
            .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
        if n < p.min || n > p.max {
            return Err(format!(
                "argument must be between {} and {} inclusive",
                p.min, p.max
            ));
        }
        self.values[i].store(n, Ordering::Release);
        let mut names = vec![p.name];
        names.extend(p.alias);
        Ok(Some((names, n.to_string())))
    }

    fn get(&self, i: usize) -> usize {
        self.values[i].load(Ordering::Acquire).max(0) as usize
    }

    /// `list-max-listpack-size` and `list-compress-depth`, as a new list takes them (see
    /// [`crate::list::List::set_options`]).
    pub(crate) fn list_options(&self) -> (i64, i64) {
        (
            self.values[LIST_FILL].load(Ordering::Acquire),
            self.values[LIST_DEPTH].load(Ordering::Acquire),
        )
    }

    /// `set-max-intset-entries`.
    pub(crate) fn set_max_intset_entries(&self) -> usize {
        self.get(SET_INTSET)
    }

    /// `hash-max-listpack-entries`: up to this many fields Redis keeps a hash in insertion
    /// order (a listpack), past it in a hash table of no particular order.
    pub(crate) fn hash_max_entries(&self) -> usize {
        self.get(HASH_ENTRIES)
    }

    /// What `OBJECT ENCODING` answers for a hash of `len` fields whose longest field or value
    /// has `longest` bytes: `listpack` within both limits, `hashtable` past either.
    pub(crate) fn hash_encoding(&self, len: usize, longest: usize) -> &'static str {
        if len <= self.get(HASH_ENTRIES) && longest <= self.get(HASH_VALUE) {
            "listpack"
        } else {
            "hashtable"
        }
    }

    /// `zset-max-listpack-entries`: up to this many members Redis keeps a sorted set in a
    /// listpack (score order), past it in a skiplist and a hash table.
    pub(crate) fn zset_max_entries(&self) -> usize {
        self.get(ZSET_ENTRIES)
    }

    /// What `OBJECT ENCODING` answers for a sorted set of `len` members whose longest member
    /// has `longest` bytes: `listpack` within both limits, `skiplist` past either.
    pub(crate) fn zset_encoding(&self, len: usize, longest: usize) -> &'static str {
        if len <= self.get(ZSET_ENTRIES) && longest <= self.get(ZSET_VALUE) {
            "listpack"
        } else {
            "skiplist"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_set_both_names_and_ranges_are_redis_s() {
        let e = Encodings::default();
        let (names, text) = e.set("hash-max-ziplist-entries", "3").unwrap().unwrap();
        assert_eq!(
            names,
            ["hash-max-listpack-entries", "hash-max-ziplist-entries"]
        );
        assert_eq!(text, "3");
        assert_eq!(e.hash_encoding(3, 10), "listpack");
        assert_eq!(e.hash_encoding(4, 10), "hashtable");
        assert_eq!(
            e.set("hash-max-ziplist-entries", "-1"),
            Err("argument must be between 0 and 9223372036854775807 inclusive".to_string())
        );
        assert_eq!(
            e.set("list-max-ziplist-size", "5k"),
            Err("argument couldn't be parsed into an integer".to_string())
        );
        assert!(e.set("list-max-ziplist-size", "-6").is_ok());
        assert_eq!(e.set("maxmemory", "1").unwrap(), None);
        e.set("set-max-intset-entries", "7").unwrap();
        assert_eq!(e.set_max_intset_entries(), 7);
    }
}
