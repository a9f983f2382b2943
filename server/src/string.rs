//! [`Str`], the bytes of a string value: a short one inline, a long one a shared [`Bytes`].
//!
//! Most string values are short (tokens, counters, flags), and a `Bytes` of one costs two
//! allocations besides the 32 bytes of the `Bytes` itself: the bytes, then, the first time a
//! reader clones the value for a reply, the 24-byte header that makes it shared. A [`Str`]
//! keeps up to [`INLINE`] bytes inside itself, in the 32 bytes the `Bytes` took, and costs no
//! allocation at all; it is what Redis's `embstr` encoding does for its short strings (the
//! bytes in the same allocation as the object). A longer value stays a `Bytes` (boxed, so that
//! the inline case sets the size), so that a reply to `GET` of a large value still shares it
//! instead of copying it.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

/// The longest string kept inline: what fits in 32 bytes beside the variant's tag and the
/// length.
pub(crate) const INLINE: usize = 30;

/// A string value's bytes (see the module's documentation). Reads as a `[u8]` through
/// `Deref`; compares and hashes as its bytes, whichever way they are kept.
#[derive(Clone)]
pub(crate) enum Str {
    /// Up to [`INLINE`] bytes, kept here: `bytes[..len]`.
    Inline {
        /// How many of `bytes` are the string's.
        len: u8,
        /// The bytes, the first `len` of them used.
        bytes: [u8; INLINE],
    },
    /// A longer string (more than [`INLINE`] bytes), shared with the replies that read it.
    Shared(Box<Bytes>),
}

impl Str {
    /// The empty string.
    pub(crate) const fn new() -> Str {
        Str::Inline {
            len: 0,
            bytes: [0; INLINE],
        }
    }

    /// A string holding a copy of `b`.
    pub(crate) fn copy_from_slice(b: &[u8]) -> Str {
        if b.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            Str::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Str::Shared(Box::new(Bytes::copy_from_slice(b)))
        }
    }

    /// The bytes as a `Bytes`, for a reply or a copy that outlives the entry: a copy of a
    /// short string, the shared bytes of a long one.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            Str::Inline { len, bytes } => Bytes::copy_from_slice(&bytes[..*len as usize]),
            Str::Shared(b) => Bytes::clone(b),
        }
    }

    /// The bytes as a `Bytes`, taking them: a long string's without a copy.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            Str::Inline { len, bytes } => Bytes::copy_from_slice(&bytes[..len as usize]),
            Str::Shared(b) => *b,
        }
    }

    /// Whether the bytes are kept inline (for tests and `MEMORY USAGE`'s estimate).
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self, Str::Inline { .. })
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new()
    }
}

impl Deref for Str {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Str::Inline { len, bytes } => &bytes[..*len as usize],
            Str::Shared(b) => b,
        }
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Borrow<[u8]> for Str {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl indexmap::Equivalent<Str> for Bytes {
    /// Lets a table keyed by `Str` (a hash's fields) be searched with a command's `Bytes`
    /// argument as it is; `Bytes` hashes as its `[u8]`, as a `Str` does.
    fn equivalent(&self, key: &Str) -> bool {
        self[..] == key[..]
    }
}

impl From<Bytes> for Str {
    /// Keeps a short `b` inline (a copy) and a long one as it is (no copy).
    fn from(b: Bytes) -> Str {
        if b.len() <= INLINE {
            Str::copy_from_slice(&b)
        } else {
            Str::Shared(Box::new(b))
        }
    }
}

impl From<Vec<u8>> for Str {
    fn from(v: Vec<u8>) -> Str {
        if v.len() <= INLINE {
            Str::copy_from_slice(&v)
        } else {
            Str::Shared(Box::new(Bytes::from(v)))
        }
    }
}

impl From<&[u8]> for Str {
    fn from(b: &[u8]) -> Str {
        Str::copy_from_slice(b)
    }
}

impl From<Str> for Bytes {
    fn from(s: Str) -> Bytes {
        s.into_bytes()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        **self == **other
    }
}

impl Eq for Str {}

impl PartialEq<[u8]> for Str {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl Hash for Str {
    /// Hashes as the `[u8]` it holds, so that a table keyed by `Str` finds it by a `&[u8]`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::fmt::Debug for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&Bytes::copy_from_slice(self), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inline bytes fill what the `Bytes` took, and no more: a `Str` is 32 bytes.
    #[test]
    fn a_str_is_as_large_as_a_bytes() {
        assert_eq!(std::mem::size_of::<Str>(), 32);
    }

    #[test]
    fn short_strings_are_inline_and_long_ones_shared() {
        for n in [0, 1, INLINE - 1, INLINE, INLINE + 1, 1000] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let s = Str::from(Bytes::from(v.clone()));
            assert_eq!(&s[..], &v[..]);
            assert_eq!(s.is_inline(), n <= INLINE, "{n} bytes");
            assert_eq!(&s.to_bytes()[..], &v[..]);
            assert_eq!(Str::from(v.clone()), s);
            assert_eq!(Str::copy_from_slice(&v), s);
            assert_eq!(&s.clone().into_bytes()[..], &v[..]);
        }
    }

    #[test]
    fn a_long_string_is_shared_not_copied() {
        let b = Bytes::from(vec![7u8; 100]);
        let s = Str::from(b.clone());
        assert_eq!(s.to_bytes().as_ptr(), b.as_ptr());
    }

    #[test]
    fn hashes_and_orders_as_its_bytes() {
        let h = ahash::RandomState::new();
        let long = [b'x'; 40];
        for v in [&b"abc"[..], &long[..]] {
            assert_eq!(h.hash_one(Str::from(v)), h.hash_one(v));
        }
        let (short, long) = (Str::from(&b"abc"[..]), Str::from(&long[..]));
        assert!(short < long);
    }
}
