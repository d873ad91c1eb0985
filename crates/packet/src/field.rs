//! Byte-order helpers shared by the header views.
//!
//! Callers check lengths once in `new_checked`; these helpers then index a
//! buffer that is known to be long enough. They still never panic on short
//! input in release builds because every call site is covered by that check
//! and by the truncation tests.

use core::ops::Range;

/// A byte range of a header field.
pub type Field = Range<usize>;

/// Reads a big-endian `u16` at `at`.
#[inline(always)]
pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian 24-bit value at `at`.
#[inline(always)]
pub fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

/// Reads a big-endian `u32` at `at`.
#[inline(always)]
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a big-endian 48-bit value at `at`.
#[inline(always)]
pub fn be48(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes([0, 0, b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5]])
}

/// Reads a big-endian `u64` at `at`.
#[inline(always)]
pub fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Writes a big-endian `u16` at `at`.
#[inline(always)]
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian 24-bit value (the low 24 bits of `v`) at `at`.
#[inline(always)]
pub fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Writes a big-endian `u32` at `at`.
#[inline(always)]
pub fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian 48-bit value (the low 48 bits of `v`) at `at`.
#[inline(always)]
pub fn put48(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 6].copy_from_slice(&v.to_be_bytes()[2..]);
}

/// Writes a big-endian `u64` at `at`.
#[inline(always)]
pub fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Copies `N` bytes starting at `at` into an array.
#[inline(always)]
pub fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut x = [0u8; N];
    x.copy_from_slice(&b[at..at + N]);
    x
}
