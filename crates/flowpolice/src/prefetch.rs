//! Cache-line prefetch, the one place in the crate that needs `unsafe`.
//!
//! `_mm_prefetch` is a `#[target_feature(enable = "sse")]` intrinsic, which
//! Rust still requires an `unsafe` block for even though SSE is part of the
//! x86_64 baseline. Measured on the flow-table benchmark (see BENCHMARKS.md),
//! prefetching every packet's entry before processing the burst is what keeps
//! the 100M-flow lookups close to the 1M-flow ones.

/// Hints the CPU to load the cache line holding `r` (no effect on other targets).
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is enabled on every x86_64 target (baseline), and a prefetch
    // never faults or changes memory; the pointer comes from a live reference.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
