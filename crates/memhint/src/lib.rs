//! Memory hints and byte scans for data-plane hot paths, behind safe functions.
//!
//! The protocol crates are `#![forbid(unsafe_code)]`, but three measured
//! optimisations need a call that Rust only offers as `unsafe`:
//!
//! * [`prefetch`] (and [`prefetch_ptr`], by address): `_mm_prefetch` is a `#[target_feature(enable = "sse")]`
//!   intrinsic, so calling it needs an `unsafe` block even though SSE is part
//!   of the x86_64 baseline. Prefetching every packet's table entry before the
//!   burst is processed hides the DRAM latency of large flow tables.
//! * [`huge_filled_vec`]: `madvise(MADV_HUGEPAGE)` on a vector's capacity
//!   before it is first touched, so a multi-gigabyte table is backed by 2 MiB
//!   pages from the start (a 100M-flow table otherwise takes a TLB miss, and a
//!   page walk, on nearly every lookup).
//!
//! This crate is the one place those calls live, each with its `SAFETY`
//! argument; both are hints that never change memory contents, and both are
//! no-ops on targets that lack them.

#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod scan;

pub use scan::{byte_masks, ByteMasks};

use alloc::vec::Vec;

/// Allocations smaller than this are not worth asking huge pages for.
const HUGE_MIN_BYTES: usize = 4 << 20;

/// Hints the CPU to load the cache line holding `r` into all cache levels.
///
/// No effect on targets other than x86_64. Never faults, whatever `r` is.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is enabled on every x86_64 target (it is in the baseline),
    // and a prefetch neither faults nor changes memory; the address comes from
    // a live reference.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Hints the CPU to load the cache line holding the address `p` into all
/// cache levels, without dereferencing it: `p` may dangle, be null or lie
/// outside any allocation.
///
/// For a hot loop that prefetches an element of a slice by an index it has
/// not checked (`items.as_ptr().wrapping_add(i)`): no bounds check, where
/// [`prefetch`] needs a reference and so an index known to be in bounds.
/// No effect on targets other than x86_64. Never faults.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch_ptr<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is in the x86_64 baseline, and a prefetch is a hint that
    // neither faults (whatever the address: unmapped, null, misaligned) nor
    // reads into the program's state nor changes memory; `p` is never
    // dereferenced.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A vector of `n` copies of `v`, with transparent huge pages requested for
/// its memory before the first write.
///
/// Works when THP is in the `madvise` or `always` mode; with `never`, or when
/// the advice fails, or below 4 MiB, the vector is simply backed by normal
/// pages. The contents are exactly those of `vec![v; n]`.
pub fn huge_filled_vec<T: Clone>(n: usize, v: T) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(n);
    let spare = out.spare_capacity_mut();
    advise_huge(spare.as_ptr().cast(), core::mem::size_of_val(spare));
    out.resize(n, v);
    out
}

/// Requests huge pages for the page-aligned part of `[ptr, ptr + len)`.
#[allow(unsafe_code)]
fn advise_huge(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_MIN_BYTES {
        const PAGE: usize = 4096;
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + len) & !(PAGE - 1);
        if end > start {
            // SAFETY: `[start, end)` lies inside the live allocation of the
            // vector being built (its capacity, rounded inward to pages).
            // MADV_HUGEPAGE is advisory: it changes neither the contents nor
            // the protection of the mapping. Failure is harmless, so the
            // return value is ignored on purpose.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_vec_has_the_requested_contents() {
        let small = huge_filled_vec(3, 7u32);
        assert_eq!(small, [7, 7, 7]);
        let big = huge_filled_vec(3 << 20, 0xA5u8); // above the 4 MiB threshold
        assert_eq!(big.len(), 3 << 20);
        assert!(big.iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn prefetch_accepts_any_reference() {
        let v = [1u64, 2, 3];
        prefetch(&v);
        prefetch(&v[2]);
        prefetch("str");
    }

    #[test]
    fn prefetch_ptr_accepts_any_address() {
        let v = [1u64, 2, 3];
        prefetch_ptr(v.as_ptr());
        // Past the end, far out of bounds, null: hints only, never faults.
        prefetch_ptr(v.as_ptr().wrapping_add(3));
        prefetch_ptr(v.as_ptr().wrapping_add(1 << 40));
        prefetch_ptr(core::ptr::null::<u8>());
        assert_eq!(v, [1, 2, 3]);
    }
}
