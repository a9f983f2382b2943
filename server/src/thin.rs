//! [`Thin`]: an immutable byte string behind one thin pointer, shared by a reference count.
//!
//! The keyspace table holds a million keys as easily as ten, and every byte of a table slot is
//! paid about twice per key (a hash table runs about half empty right after it doubles). A
//! `Box<[u8]>` is a fat pointer, 16 bytes in the slot; a `Bytes` is 32, and a second
//! allocation (its shared header) once cloned. A [`Thin`] is 8 bytes: one pointer to a single
//! allocation that holds a reference count, the length and the bytes, so a 10-byte key costs
//! an 8-byte pointer and one 16-byte allocation.
//!
//! The count lets two tables that need the same bytes share them instead of each keeping a
//! copy: the keyspace table and the expiry index hold one allocation per key with a TTL, and a
//! sorted set's member table and its ordered index one per member (Redis shares its `sds`
//! strings the same way: its `expires` dictionary points at the main dictionary's key, its
//! skiplist at the dictionary's member). The count is atomic because the holders may be used
//! and dropped on different threads (a value is freed off the hot path, see
//! [`crate::lazyfree`]).
//!
//! Layout of the allocation, aligned to 4:
//!
//! ```text
//!   [ references: u32 ][ length: LEB128, 1 byte below 128 ][ the bytes ]
//! ```
//!
//! The length is a variable-length integer so that a short string pays one byte for it: a key
//! such as `lock:order:1234` (15 bytes) still fits the allocator's 32-byte class, and `key:N`
//! keys up to a million its 16-byte class.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Bytes of the reference count at the start of the allocation.
const COUNT: usize = std::mem::size_of::<AtomicU32>();

/// Past this many references a clone aborts the process, as `Arc` does: a count that wrapped
/// would free bytes still in use. No client reaches it (every reference is a stored key or
/// member, and memory runs out long before two billion of them share one string).
const MAX_REFS: u32 = i32::MAX as u32;

/// An immutable byte string, one thin pointer to its count, length and bytes (see the module's
/// documentation). Cloning shares the bytes; the last holder frees them. Reads as a `[u8]`
/// through `Deref`, and hashes, compares and orders as its bytes, so a table of `Thin`s is
/// searched with a plain `&[u8]`.
pub(crate) struct Thin(NonNull<u8>);

// SAFETY: the bytes are never written after construction, and the count is atomic: sharing and
// sending a `Thin` is as safe as sharing and sending an `Arc<[u8]>`.
unsafe impl Send for Thin {}
// SAFETY: see `Send`.
unsafe impl Sync for Thin {}

/// How many bytes the LEB128 encoding of `n` takes (7 bits a byte).
#[inline]
const fn length_bytes(n: usize) -> usize {
    if n < 0x80 {
        return 1;
    }
    let bits = (usize::BITS - n.leading_zeros()) as usize;
    bits.div_ceil(7)
}

/// The size of the allocation holding a string of `len` bytes: count, length, bytes.
#[inline]
const fn size(len: usize) -> usize {
    COUNT + length_bytes(len) + len
}

/// The layout of an allocation holding a string of `len` bytes.
fn layout(len: usize) -> Layout {
    // A slice this long already exists in memory, so the sum cannot overflow `isize`.
    Layout::from_size_align(size(len), std::mem::align_of::<AtomicU32>())
        .expect("a string that exists has a layout")
}

impl Thin {
    /// A new string holding a copy of `bytes`, with one reference.
    pub(crate) fn new(bytes: &[u8]) -> Thin {
        let len = bytes.len();
        let layout = layout(len);
        // SAFETY: the layout's size is at least `COUNT` (never zero); every byte written below
        // lies inside it: the count, `length_bytes(len)` bytes of length, then `len` bytes.
        unsafe {
            let p = alloc(layout);
            if p.is_null() {
                handle_alloc_error(layout);
            }
            p.cast::<AtomicU32>().write(AtomicU32::new(1));
            let mut at = p.add(COUNT);
            let mut n = len;
            while n >= 0x80 {
                at.write((n as u8) | 0x80);
                at = at.add(1);
                n >>= 7;
            }
            at.write(n as u8);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(1), len);
            Thin(NonNull::new_unchecked(p))
        }
    }

    /// The reference count.
    fn refs(&self) -> &AtomicU32 {
        // SAFETY: the allocation starts with the count, aligned for it, alive while `self` is.
        unsafe { &*self.0.as_ptr().cast::<AtomicU32>() }
    }

    /// Where the bytes start, and how many there are.
    #[inline]
    fn parts(&self) -> (*const u8, usize) {
        // SAFETY: the length was written by `new` right after the count; the loop reads its
        // bytes up to the last one (high bit clear), all inside the allocation.
        unsafe {
            let mut at = self.0.as_ptr().add(COUNT).cast_const();
            let first = *at;
            if first < 0x80 {
                return (at.add(1), first as usize);
            }
            let (mut len, mut shift) = (0usize, 0u32);
            loop {
                let b = *at;
                at = at.add(1);
                len |= ((b & 0x7F) as usize) << shift;
                if b < 0x80 {
                    return (at, len);
                }
                shift += 7;
            }
        }
    }

    /// The bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        let (p, len) = self.parts();
        // SAFETY: `len` bytes were copied there by `new` and are never written again.
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// The bytes as a `Bytes` (a copy), for a reply or anything that outlives the holder.
    pub(crate) fn to_bytes(&self) -> bytes::Bytes {
        bytes::Bytes::copy_from_slice(self)
    }

    /// How many holders share these bytes (for tests).
    #[cfg(test)]
    pub(crate) fn holders(&self) -> u32 {
        self.refs().load(Ordering::Acquire)
    }

    /// Whether `self` and `other` are the same allocation (not merely equal bytes).
    #[cfg(test)]
    pub(crate) fn shares(&self, other: &Thin) -> bool {
        self.0 == other.0
    }

    /// What the allocation of a string of `len` bytes asks the allocator for (for the memory
    /// estimate, see [`crate::memory`], which every write computes twice: plain arithmetic).
    #[inline]
    pub(crate) fn allocation(len: usize) -> usize {
        size(len)
    }
}

impl Clone for Thin {
    /// Another holder of the same bytes: the count goes up, nothing is copied.
    fn clone(&self) -> Thin {
        // Relaxed, as `Arc` does: a new holder is made from an existing one, which keeps the
        // allocation alive meanwhile; the release in `drop` orders what matters.
        let old = self.refs().fetch_add(1, Ordering::Relaxed);
        if old > MAX_REFS {
            std::process::abort();
        }
        Thin(self.0)
    }
}

impl Drop for Thin {
    fn drop(&mut self) {
        if self.refs().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // The last holder: every other holder's use happened before its decrement, which this
        // fence makes visible before the bytes are freed (the `Arc` protocol).
        fence(Ordering::Acquire);
        let layout = layout(self.as_slice().len());
        // SAFETY: allocated by `new` with this very layout (the length has not changed), and
        // no holder is left.
        unsafe { dealloc(self.0.as_ptr(), layout) }
    }
}

impl Deref for Thin {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Thin {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Borrow<[u8]> for Thin {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl From<&[u8]> for Thin {
    fn from(b: &[u8]) -> Thin {
        Thin::new(b)
    }
}

impl PartialEq for Thin {
    fn eq(&self, other: &Thin) -> bool {
        self.0 == other.0 || **self == **other
    }
}

impl Eq for Thin {}

impl PartialEq<[u8]> for Thin {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl Hash for Thin {
    /// Hashes as the `[u8]` it holds, so that a table of `Thin`s finds one by a `&[u8]`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl PartialOrd for Thin {
    fn partial_cmp(&self, other: &Thin) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Thin {
    fn cmp(&self, other: &Thin) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::fmt::Debug for Thin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&bytes::Bytes::copy_from_slice(self), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thin_string_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Thin>(), 8);
        assert_eq!(std::mem::size_of::<Option<Thin>>(), 8);
    }

    /// Lengths around every change of the length's width, the empty string included.
    #[test]
    fn round_trips_every_length_width() {
        for n in [0, 1, 127, 128, 129, 1000, 16383, 16384, 70_000] {
            let v: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let t = Thin::new(&v);
            assert_eq!(&t[..], &v[..], "{n} bytes");
            assert_eq!(Thin::allocation(n), 4 + length_bytes(n) + n);
        }
        assert_eq!(length_bytes(0), 1);
        assert_eq!(length_bytes(127), 1);
        assert_eq!(length_bytes(128), 2);
        assert_eq!(length_bytes(16384), 3);
    }

    #[test]
    fn a_ten_byte_key_fits_sixteen_bytes() {
        assert_eq!(Thin::allocation(b"key:999999".len()), 15);
    }

    #[test]
    fn clones_share_and_the_last_one_frees() {
        let a = Thin::new(b"shared");
        let b = a.clone();
        assert!(a.shares(&b));
        assert_eq!(a.holders(), 2);
        drop(a);
        assert_eq!(b.holders(), 1);
        assert_eq!(&b[..], b"shared");
    }

    #[test]
    fn hashes_and_orders_as_its_bytes() {
        let h = ahash::RandomState::new();
        let t = Thin::new(b"abc");
        assert_eq!(h.hash_one(&t), h.hash_one(&b"abc"[..]));
        assert!(Thin::new(b"abc") < Thin::new(b"abd"));
        assert!(Thin::new(b"") < Thin::new(b"\0"));
        assert_eq!(Thin::new(b"x"), Thin::new(b"x"));
    }

    /// Holders on many threads, dropped in any order: the bytes stay intact until the last.
    #[test]
    fn clones_dropped_across_threads() {
        let t = Thin::new(&[42u8; 300]);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mine: Vec<Thin> = (0..1000).map(|_| t.clone()).collect();
                std::thread::spawn(move || mine.iter().all(|m| m[..] == [42u8; 300]))
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap());
        }
        assert_eq!(t.holders(), 1);
    }
}
