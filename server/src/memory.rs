//! Memory accounting: how many bytes the server holds, for `INFO memory` and `maxmemory`.
//!
//! Two sources, the better one wins:
//!
//! - **A counting allocator.** [`CountingAllocator`] wraps the allocator (jemalloc, as
//!   Redis ships with, under the `jemalloc` feature that the binary is built with; the
//!   system's malloc otherwise) and keeps a
//!   running total of the bytes currently allocated. The `latchkey-server` binary installs it
//!   as its `#[global_allocator]`; then `used_memory` is that total, which covers everything
//!   (keys, values, client buffers, Lua, the replication backlog) as Redis's `zmalloc` count
//!   does. The library never installs it: an embedder keeps whatever allocator it chose, and
//!   may install this one itself.
//! - **The keyspace estimate**, always kept: every [`Db`](crate::db::Db) adds up an estimate
//!   of the bytes of its keys, values and expiry-index pairs ([`DbMemory`]), updated on every
//!   insert, change and removal, plus the size of its hash table. Without the counting
//!   allocator (an embedded server) `used_memory` is this estimate.
//!
//! How close is it? Measured with the binary (counting allocator) holding one million
//! 100-byte string keys written by `redis-benchmark`-style pipelined `SET`s, `used_memory` was
//! within a few percent below the process's resident set size (`RSS`, which also counts code,
//! thread stacks and the allocator's free lists); the keyspace estimate alone was within 10%
//! of `used_memory`. `scripts/memory-vs-rss` repeats the measurement.
//!
//! The estimate must be a function of the entry's current state alone, so that adding the
//! change of every mutation never drifts: it is charged when an entry appears, the difference
//! when it changes, and discharged when it goes. For collections it samples a few elements at
//! fixed positions and extrapolates (as Redis's `MEMORY USAGE` samples), so it stays O(1).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicIsize, Ordering};

use bytes::Bytes;
use dashmap::mapref::one::RefMut;

use crate::value::Key;
use crate::value::{Entry, Value};

/// Bytes allocated less bytes freed, as the threads have reported them: signed, since one
/// thread may report a free before another reports the allocation.
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The allocator [`CountingAllocator`] forwards to: jemalloc with the `jemalloc` feature (as
/// the binary is built), the system's malloc without it.
#[cfg(feature = "jemalloc")]
const INNER: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[cfg(not(feature = "jemalloc"))]
const INNER: std::alloc::System = std::alloc::System;

/// What `INFO memory` says the allocator is (`mem_allocator`), when the counting allocator
/// is in use; an embedder's own allocator is not known and is reported as `libc`.
pub(crate) fn allocator_name() -> &'static str {
    if cfg!(feature = "jemalloc") && INSTALLED.load(Ordering::Relaxed) {
        "jemalloc-5.3.0"
    } else {
        "libc"
    }
}

/// The process's allocator (jemalloc with the `jemalloc` feature, else the system's) with a
/// running count of the bytes allocated through it. Install it
/// in the program that embeds the server, with
/// `#[global_allocator] static A: CountingAllocator = CountingAllocator;`, and `INFO memory`'s
/// `used_memory` and the `maxmemory` limit count every byte the process allocates (without
/// it they count an estimate of the keyspace alone).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAllocator;

// SAFETY: every call is forwarded to `INNER` unchanged; only a counter is updated besides.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = INNER.alloc(layout);
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = INNER.alloc_zeroed(layout);
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        INNER.dealloc(ptr, layout);
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = INNER.realloc(ptr, layout, new_size);
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// How far a thread's own count may run before it is added to [`ALLOCATED`]: `used_memory`
/// may miss up to this much per thread, and in exchange an allocation costs no atomic
/// read-modify-write (which, locked, was a twelfth of a Lua script's time: scripts allocate
/// tables and strings by the dozen).
const LOCAL_SLACK: isize = 16 * 1024;

/// A thread's bytes allocated less bytes freed, not yet added to [`ALLOCATED`]. Its
/// destructor adds what is left when the thread ends, so nothing drifts.
struct LocalCount(Cell<isize>);

impl Drop for LocalCount {
    fn drop(&mut self) {
        flush(self.0.replace(0));
    }
}

thread_local! {
    static LOCAL: LocalCount = const { LocalCount(Cell::new(0)) };
}

fn flush(n: isize) {
    ALLOCATED.fetch_add(n, Ordering::Relaxed);
}

/// Counts an allocation of `n` bytes, and notes that the counting allocator is in use.
///
/// Out of line, as [`count`] is: the allocator's methods are inlined into every place that
/// allocates or frees, and a copy of this bookkeeping (a thread-local with a destructor)
/// at each of them made the hot paths longer than the instruction cache (issue 17: a
/// pipelined `SET` ran a dozen copies of it). One call to one shared copy is cheaper.
#[inline(never)]
fn count_alloc(n: usize) {
    count(n as isize);
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

/// Counts `n` bytes allocated (negative: freed) on this thread's own count, and moves it to
/// the process's once it passes [`LOCAL_SLACK`]. A thread whose count is gone (it is ending)
/// counts on the process's directly. Out of line, see [`count_alloc`].
#[inline(never)]
fn count(n: isize) {
    let counted = LOCAL.try_with(|local| {
        let v = local.0.get() + n;
        if v.abs() >= LOCAL_SLACK {
            local.0.set(0);
            flush(v);
        } else {
            local.0.set(v);
        }
    });
    if counted.is_err() {
        flush(n);
    }
}

/// Bytes currently allocated through [`CountingAllocator`], or `None` when the process does
/// not use it (the library embedded with another allocator).
pub(crate) fn allocated_bytes() -> Option<usize> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| ALLOCATED.load(Ordering::Relaxed).max(0) as usize)
}

/// jemalloc's own statistics report (`malloc_stats_print`, what `MEMORY MALLOC-STATS`
/// answers), when the process allocates through [`CountingAllocator`] on jemalloc; `None`
/// otherwise (the system's allocator, or an embedder's own).
pub(crate) fn allocator_report() -> Option<String> {
    #[cfg(feature = "jemalloc")]
    if INSTALLED.load(Ordering::Relaxed) {
        unsafe extern "C" fn write(out: *mut std::ffi::c_void, text: *const std::ffi::c_char) {
            // SAFETY: `out` is the `String` passed below, alive for the whole call, and
            // jemalloc hands a NUL-terminated string.
            let (out, text) =
                unsafe { (&mut *(out as *mut String), std::ffi::CStr::from_ptr(text)) };
            out.push_str(&text.to_string_lossy());
        }
        let mut out = String::new();
        // SAFETY: the callback only appends to `out`; no options string (NULL) is allowed.
        unsafe {
            tikv_jemalloc_sys::malloc_stats_print(
                Some(write),
                &mut out as *mut String as *mut std::ffi::c_void,
                std::ptr::null(),
            );
        }
        return Some(out);
    }
    None
}

/// Asks the allocator to give its dirty pages back to the system (`MEMORY PURGE`): jemalloc's
/// `arena.<narenas>.purge` (every arena) when the process runs on it, as Redis asks it; on any
/// other allocator there is nothing to ask, as in a Redis built without jemalloc. `false` when
/// jemalloc refused.
pub(crate) fn purge() -> bool {
    #[cfg(feature = "jemalloc")]
    if INSTALLED.load(Ordering::Relaxed) {
        let mut narenas: u32 = 0;
        let mut size = std::mem::size_of::<u32>();
        // SAFETY: the names are NUL-terminated; `narenas` is the `unsigned` the first call
        // reads into, with its size; the purge reads and writes nothing.
        unsafe {
            if tikv_jemalloc_sys::mallctl(
                c"arenas.narenas".as_ptr(),
                &mut narenas as *mut u32 as *mut std::ffi::c_void,
                &mut size,
                std::ptr::null_mut(),
                0,
            ) != 0
            {
                return false;
            }
            let name = std::ffi::CString::new(format!("arena.{narenas}.purge"))
                .expect("no NUL in a number");
            return tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            ) == 0;
        }
    }
    true
}

/// What an allocation of `n` bytes costs with glibc's malloc: the request plus an 8-byte
/// header, rounded up to 16, at least 32. Close enough for other allocators too.
pub(crate) fn alloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    ((n + 8 + 15) & !15).max(32)
}

/// A key's allocation in the keyspace table (its count, length and bytes, see [`Key`]).
fn key_size(key: &[u8]) -> usize {
    alloc_size(Key::allocation(key.len()))
}

/// One `(deadline, key)` pair of the expiry index in a B-tree node (a 16-byte
/// [`Pair`](crate::expiry_index::Pair); nodes run from half to full, about two-thirds on
/// average). The pair shares the table's allocation of the key, so the key's bytes are not
/// counted again.
const EXPIRY_PAIR: usize = 16 * 3 / 2 + 8;

/// How many elements of a collection the estimate looks at.
const SAMPLES: usize = 5;

/// The mean allocation of up to [`SAMPLES`] elements at evenly spaced positions, times the
/// number of elements: `at(i)` gives the bytes of element `i`.
///
/// Every write to a collection measures it twice (see [`EntryMut`]), so the divisions here
/// are by the constant [`SAMPLES`] (which the compiler turns into multiplications) whenever
/// there are that many elements; with fewer, each element is its own sample and there is
/// nothing to divide. Both give what `sum * len / n` over `i * len / n` gives.
fn extrapolate(len: usize, at: impl Fn(usize) -> usize) -> usize {
    if len < SAMPLES {
        return (0..len).map(at).sum();
    }
    let sum: usize = (0..SAMPLES).map(|i| at(i * len / SAMPLES)).sum();
    sum * len / SAMPLES
}

/// The allocation of a collection's boxed header (see [`Value`]: hashes, sets and sorted sets
/// live behind a box).
fn boxed<T>(_: &T) -> usize {
    alloc_size(std::mem::size_of::<T>())
}

/// The bytes a [`Str`](crate::value::Str) holds outside itself: none when short (inline),
/// else a boxed `Bytes` (32 bytes) and the bytes.
fn str_size(s: &crate::value::Str) -> usize {
    if s.is_inline() {
        0
    } else {
        alloc_size(32) + alloc_size(s.len())
    }
}

/// Estimated bytes of one value, including its collection's own tables.
pub(crate) fn value_size(v: &Value) -> usize {
    match v {
        Value::Str(s) => str_size(s),
        Value::Hash(h) => {
            // IndexMap: a vector of (hash, key, value) buckets plus a table of indices.
            let tables = h.capacity() * (8 + 32 + 32) + h.capacity() * 8 / 7 * (8 + 1);
            boxed(&**h)
                + tables
                + extrapolate(h.len(), |i| {
                    h.get_index(i).map_or(0, |(k, v)| str_size(k) + str_size(v))
                })
        }
        Value::List(l) => boxed(&**l) + l.estimate_bytes(alloc_size),
        Value::ZSet(z) => {
            // A table member -> score (a bucket of hash, member pointer and score, and an
            // index) and a B-tree of (score, member pointer), nodes about two-thirds full;
            // both point at one allocation of the member's bytes (see `zset::Member`),
            // sampled at evenly spaced positions.
            let per_member = (8 + 8 + 8) + (8 + 1) * 8 / 7 + (8 + 8) * 3 / 2;
            boxed(&**z)
                + z.len() * per_member
                + extrapolate(z.len(), |i| {
                    z.at_position(i)
                        .map_or(0, |(m, _)| alloc_size(Key::allocation(m.len())))
                })
        }
        Value::Set(s) => {
            boxed(&**s)
                + match s.ints() {
                    // An intset: one sorted vector of 8-byte integers.
                    Some(v) => 8 * v.len().next_power_of_two().max(4),
                    // An IndexSet: a vector of (hash, member) buckets plus a table of indices.
                    None => {
                        let n = s.len();
                        n * (8 + 32)
                            + n * 8 / 7 * (8 + 1)
                            + extrapolate(n, |i| alloc_size(s.sample_member_len(i)))
                    }
                }
        }
        Value::Stream(s) => {
            // The stream's header, then per entry: a B-tree slot (ID and vector, nodes about
            // two-thirds full), the vector's buffer and the fields' bytes, sampled from the
            // first entries (entries of one stream tend to look alike).
            let per_entry = (16 + 24) * 3 / 2;
            let sample: Vec<usize> = s
                .range(
                    crate::stream::StreamId::MIN,
                    crate::stream::StreamId::MAX,
                    false,
                    SAMPLES,
                )
                .into_iter()
                .map(|(_, f)| {
                    alloc_size(f.len() * 32) + f.iter().map(|b| alloc_size(b.len())).sum::<usize>()
                })
                .collect();
            let fields = if sample.is_empty() {
                0
            } else {
                sample.iter().sum::<usize>() * s.len() / sample.len()
            };
            128 + s.len() * per_entry + fields
        }
    }
}

/// Estimated bytes one key holds, not counting its slot in the database's table (see
/// [`DbMemory::table_bytes`]).
pub(crate) fn entry_size(key: &[u8], e: &Entry) -> usize {
    let ttl = if e.expires_at().is_some() {
        EXPIRY_PAIR
    } else {
        0
    };
    key_size(key) + FIELDS + value_size(&e.value) + ttl
}

/// The allocation an entry points to: its value, deadline and access stamp (see
/// [`Entry`]).
const FIELDS: usize = std::mem::size_of::<crate::value::Fields>();

/// One database's running estimate: bytes of its entries, and how many have a TTL (the keys
/// `volatile-*` eviction may choose from).
#[derive(Debug, Default)]
pub(crate) struct DbMemory {
    bytes: AtomicI64,
    volatile: AtomicI64,
}

impl DbMemory {
    /// Charges a new entry.
    pub(crate) fn added(&self, key: &[u8], e: &Entry) {
        self.bytes
            .fetch_add(entry_size(key, e) as i64, Ordering::Relaxed);
        if e.expires_at().is_some() {
            self.volatile.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Discharges an entry that left.
    pub(crate) fn removed(&self, key: &[u8], e: &Entry) {
        self.bytes
            .fetch_sub(entry_size(key, e) as i64, Ordering::Relaxed);
        if e.expires_at().is_some() {
            self.volatile.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Discharges many entries that left together (a step of the expiry cycle): one update
    /// of the counters for the lot.
    pub(crate) fn removed_all<'a>(&self, gone: impl Iterator<Item = (&'a [u8], &'a Entry)>) {
        let (mut bytes, mut volatile) = (0i64, 0i64);
        for (key, e) in gone {
            bytes += entry_size(key, e) as i64;
            volatile += i64::from(e.expires_at().is_some());
        }
        if bytes != 0 {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        if volatile != 0 {
            self.volatile.fetch_sub(volatile, Ordering::Relaxed);
        }
    }

    /// Applies the change of an entry: `before` is what [`measure`](DbMemory::measure) said
    /// of it then.
    ///
    /// A change that leaves a count as it was (a value overwritten by one of the same size,
    /// a key that keeps its TTL or its lack of one: most writes) skips that count's atomic
    /// read-modify-write, which would add nothing.
    pub(crate) fn changed(&self, before: Measure, key: &[u8], e: &Entry) {
        let after = DbMemory::measure(key, e);
        let bytes = after.bytes as i64 - before.bytes as i64;
        if bytes != 0 {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        let volatile = after.volatile as i64 - before.volatile as i64;
        if volatile != 0 {
            self.volatile.fetch_add(volatile, Ordering::Relaxed);
        }
    }

    /// Applies the removal of an entry measured as `before`.
    pub(crate) fn changed_to_nothing(&self, before: Measure) {
        self.bytes.fetch_sub(before.bytes as i64, Ordering::Relaxed);
        if before.volatile {
            self.volatile.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// An entry's contribution, taken before it changes.
    pub(crate) fn measure(key: &[u8], e: &Entry) -> Measure {
        Measure {
            bytes: entry_size(key, e),
            volatile: e.expires_at().is_some(),
        }
    }

    /// Exchanges the counts with `other`'s (`SWAPDB`).
    pub(crate) fn swap_with(&self, other: &DbMemory) {
        let b = self.bytes.load(Ordering::Relaxed);
        self.bytes
            .store(other.bytes.swap(b, Ordering::Relaxed), Ordering::Relaxed);
        let v = self.volatile.load(Ordering::Relaxed);
        self.volatile
            .store(other.volatile.swap(v, Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Forgets everything (the database was emptied).
    pub(crate) fn clear(&self) {
        self.bytes.store(0, Ordering::Relaxed);
        self.volatile.store(0, Ordering::Relaxed);
    }

    /// Estimated bytes of the entries.
    pub(crate) fn entry_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed).max(0) as usize
    }

    /// Number of keys with a TTL.
    pub(crate) fn volatile_keys(&self) -> usize {
        self.volatile.load(Ordering::Relaxed).max(0) as usize
    }

    /// Bytes of a hash table with room for `capacity` entries: one `(key, entry)` slot and
    /// one control byte per bucket.
    pub(crate) fn table_bytes(capacity: usize) -> usize {
        let slot = std::mem::size_of::<(crate::value::Key, Entry)>() + 1;
        capacity * 8 / 7 * slot
    }
}

/// An entry's contribution to [`DbMemory`] at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measure {
    bytes: usize,
    volatile: bool,
}

/// A live entry borrowed for modification in place (`HSET`, `LPUSH`, ...). It measures the
/// entry when taken and again when dropped, and charges the difference to its database, so
/// that growth through a borrowed entry is counted like any other write. It locks the key's
/// shard as the map's own guard does: drop it before touching another key of the database.
pub(crate) struct EntryMut<'a> {
    inner: RefMut<'a, Key, Entry>,
    mem: &'a DbMemory,
    before: Measure,
}

impl<'a> EntryMut<'a> {
    pub(crate) fn new(inner: RefMut<'a, Key, Entry>, mem: &'a DbMemory) -> EntryMut<'a> {
        let before = DbMemory::measure(inner.key(), inner.value());
        EntryMut { inner, mem, before }
    }
}

impl Deref for EntryMut<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        self.inner.value()
    }
}

impl DerefMut for EntryMut<'_> {
    fn deref_mut(&mut self) -> &mut Entry {
        self.inner.value_mut()
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        // A collection that deletions left mostly empty gives its room back now, so that the
        // measure below, and the process, see the smaller table.
        self.inner.value_mut().value.shrink_if_sparse();
        self.mem
            .changed(self.before, self.inner.key(), self.inner.value());
    }
}

/// Gives request arguments their own small allocations before a write stores them. The
/// parser hands out arguments as views into the connection's read buffer (no copy); a stored
/// view would keep the whole 16 KiB block it came from alive, so memory would not shrink
/// when keys are deleted or evicted, and `used_memory` would not tell what the keyspace
/// holds. Arguments of 32 KiB or more mostly fill their block on their own and are kept, and
/// so are those `is_key` names: a key the command stores is copied into its own allocation
/// anyway ([`crate::value::Key`]), so an early copy would be thrown away (an `INCR` paid an
/// allocation and a free for nothing).
pub(crate) fn detach_args(args: &mut [Bytes], is_key: impl Fn(usize) -> bool) {
    for (i, a) in args.iter_mut().enumerate().skip(1) {
        if !is_key(i) {
            *a = detached(a);
        }
    }
}

/// The bytes of `arg` to store, by [`detach_args`]'s rule: a copy of its own, unless it is
/// 32 KiB or more. What a handler flagged `COPIES_ARGS` calls for an argument it stores as
/// a `Bytes` (a set's member, a hash's long field or value).
pub(crate) fn detached(arg: &Bytes) -> Bytes {
    if arg.len() < 32 * 1024 {
        Bytes::copy_from_slice(arg)
    } else {
        arg.clone()
    }
}

/// Resident set size of this process in bytes, from `/proc/self/statm` (0 where there is no
/// such file).
pub(crate) fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Redis's way of printing a byte count for people (`bytesToHuman`): `512B`, `1.50K`,
/// `2.00M`, ...
pub(crate) fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 10, "K"),
        (1 << 20, "M"),
        (1 << 30, "G"),
        (1 << 40, "T"),
        (1 << 50, "P"),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    let (div, unit) = UNITS
        .iter()
        .rev()
        .find(|(d, _)| n >= *d)
        .copied()
        .unwrap_or((1 << 10, "K"));
    format!("{:.2}{unit}", n as f64 / div as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_matches_redis() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1024), "1.00K");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(100 * 1024 * 1024), "100.00M");
        assert_eq!(human(3 << 30), "3.00G");
    }

    #[test]
    fn the_estimate_of_a_collection_follows_its_growth() {
        let mut h = indexmap::IndexMap::new();
        let small = value_size(&Value::Hash(Box::new(h.clone())));
        for i in 0..1000u32 {
            h.insert(
                Bytes::from(format!("field{i}")).into(),
                Bytes::from(vec![b'x'; 100]).into(),
            );
        }
        let big = value_size(&Value::Hash(Box::new(h)));
        assert!(big > small + 1000 * 100, "{big} vs {small}");
    }
}
