//! The component's memory allocator: small blocks from free lists, one per size class, in front
//! of the C library's `malloc` (wasi-libc's dlmalloc).
//!
//! A lock operation allocates a few dozen small things: the command's arguments, the reply's
//! frames, the lease's key and token. Each went through four layers (`__rust_alloc`, std's
//! system allocator, `malloc`, dlmalloc's bins) and cost several hundred wasm instructions with
//! its free: about a tenth of a lock cycle. Here a small allocation is a pop from its class's
//! list and a free a push, a few instructions each.
//!
//! - Sizes up to [`LARGEST`] bytes, aligned to at most [`SMALLEST`], are rounded up to the
//!   next power of two (16, 32, ... 2048 bytes: eight classes). A freed block goes on its
//!   class's list, the first word of the block pointing to the next; with its list empty, a
//!   class takes a fresh block from `malloc`. Blocks are never given back to `malloc`: the
//!   memory a class holds is the most it ever had in use at once. (Fresh blocks come one by
//!   one rather than carved from larger chunks: chunks left a page more of each instance
//!   resident, about 4 KiB per live tenant, for no fewer instructions per lock cycle.)
//! - Anything larger, or more aligned, goes to `malloc` directly, as before.
//!
//! A component has no threads (wasm32-wasip2 has none; the build refuses `atomics`), so the
//! lists need no lock.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

/// The smallest block, and the alignment every block has.
const SMALLEST: usize = 16;

/// How many size classes: `SMALLEST << 0` to `SMALLEST << (CLASSES - 1)` bytes.
const CLASSES: usize = 8;

/// The largest block served from the lists.
const LARGEST: usize = SMALLEST << (CLASSES - 1);

// One thread only: a target with shared-memory threads would need a lock here.
#[cfg(target_feature = "atomics")]
compile_error!("the component's allocator assumes a single thread");

/// The free lists.
struct Lists {
    /// The first free block of each class (null: empty).
    free: [*mut u8; CLASSES],
}

/// The allocator (see the module's documentation).
pub(crate) struct SizeClasses(UnsafeCell<Lists>);

// SAFETY: the component runs on one thread (see `compile_error!` above), so the lists are
// never reached from two threads at once.
unsafe impl Sync for SizeClasses {}

impl SizeClasses {
    /// An allocator with every list empty.
    pub(crate) const fn new() -> SizeClasses {
        SizeClasses(UnsafeCell::new(Lists {
            free: [ptr::null_mut(); CLASSES],
        }))
    }
}

impl Default for SizeClasses {
    fn default() -> SizeClasses {
        SizeClasses::new()
    }
}

/// The class of a `layout` served from the lists, or `None` for `malloc`'s.
fn class(layout: Layout) -> Option<usize> {
    if layout.size() > LARGEST || layout.align() > SMALLEST {
        return None;
    }
    // The power of two at or above the size (at least `SMALLEST`), as an index from 0.
    let size = layout.size().max(SMALLEST);
    let bits = usize::BITS - (size - 1).leading_zeros();
    // At most `CLASSES - 1` already; saying so spares the lists' bounds checks.
    Some((bits as usize - SMALLEST.trailing_zeros() as usize).min(CLASSES - 1))
}

// SAFETY: every block handed out is `SMALLEST << class` bytes, at least the layout's size,
// aligned to `SMALLEST` (asked of `malloc` so), at least the layout's alignment; a block is on
// a free list only after its `dealloc`, and is handed out at most once until freed again. Layouts the lists do not serve go to `System`
// unchanged, in both directions (the class is a function of the layout, which `dealloc` and
// `realloc` receive as it was allocated).
unsafe impl GlobalAlloc for SizeClasses {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc(layout) };
        };
        // SAFETY: one thread, and no call below reenters this allocator.
        let lists = unsafe { &mut *self.0.get() };
        let head = lists.free[c];
        if !head.is_null() {
            // SAFETY: a free block's first word is the next free block (written by `dealloc`).
            lists.free[c] = unsafe { head.cast::<*mut u8>().read() };
            return head;
        }
        // An empty list: a fresh block of the class's size from `malloc`.
        // SAFETY: a non-zero size and a power-of-two alignment.
        unsafe { System.alloc(Layout::from_size_align_unchecked(SMALLEST << c, SMALLEST)) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            // SAFETY: allocated by `System` with this layout (see `alloc`).
            return unsafe { System.dealloc(block, layout) };
        };
        // SAFETY: one thread, and no call below reenters this allocator.
        let lists = unsafe { &mut *self.0.get() };
        // SAFETY: the block is at least `SMALLEST` bytes, aligned for a pointer, and no longer
        // used by its owner: its first word may hold the list's link.
        unsafe { block.cast::<*mut u8>().write(lists.free[c]) };
        lists.free[c] = block;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: a non-zero size that does not overflow when rounded
        // up to the layout's alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new_layout)) {
            // Still fits its block: nothing moves.
            (Some(old), Some(new)) if old == new => block,
            // Both `malloc`'s: its own realloc may grow in place.
            // SAFETY: the caller's contract, passed on.
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: as `alloc`; then both blocks are valid for the smaller size, and
                // the old one is freed with the layout it was allocated with.
                unsafe {
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

// Tested natively (the component's code only builds for wasm): `lib.rs` includes this file
// as a private module of test builds, whose tests each use an allocator of their own on one
// thread.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_never_overlap_are_reused_once_freed_and_keep_their_bytes_when_moved() {
        let a = SizeClasses::new();
        let l = |size| Layout::from_size_align(size, 8).unwrap();
        // SAFETY: each block is used within its layout, and freed once with it.
        unsafe {
            let mut live = Vec::new();
            for i in 0..3000usize {
                let size = 1 + (i * 37) % 3000;
                let p = a.alloc(l(size));
                assert!(!p.is_null());
                assert_eq!(p as usize % SMALLEST, 0, "aligned");
                ptr::write_bytes(p, (i % 251) as u8, size);
                live.push((p, size, (i % 251) as u8));
            }
            // Every block still holds what was written: no two overlap.
            for &(p, size, v) in &live {
                assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == v));
            }
            // A freed small block is the next one handed out for its class.
            let (p, size, _) = live.swap_remove(10);
            assert!(size <= LARGEST, "a small block: {size}");
            a.dealloc(p, l(size));
            let again = a.alloc(l(size));
            assert_eq!(again, p);
            a.dealloc(again, l(size));
            // Growing across classes (and to `malloc`) keeps the contents.
            let p = a.alloc(l(10));
            ptr::copy_nonoverlapping(b"0123456789".as_ptr(), p, 10);
            let p = a.realloc(p, l(10), 100);
            let p = a.realloc(p, l(100), 5000);
            assert_eq!(std::slice::from_raw_parts(p, 10), b"0123456789");
            let q = a.realloc(p, l(5000), 12);
            assert_eq!(std::slice::from_raw_parts(q, 10), b"0123456789");
            // Within one class nothing moves.
            assert_eq!(a.realloc(q, l(12), 16), q);
            a.dealloc(q, l(16));
            for (p, size, _) in live {
                a.dealloc(p, l(size));
            }
        }
    }

    #[test]
    fn sizes_round_up_to_a_power_of_two_class_and_large_or_aligned_ones_go_to_malloc() {
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(class(l(1, 1)), Some(0));
        assert_eq!(class(l(16, 8)), Some(0));
        assert_eq!(class(l(17, 1)), Some(1));
        assert_eq!(class(l(2048, 16)), Some(7));
        assert_eq!(class(l(2049, 1)), None);
        assert_eq!(class(l(8, 32)), None);
    }
}
