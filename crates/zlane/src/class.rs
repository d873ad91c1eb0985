//! The five Z-Lane traffic classes as `pipeline::Class` values.

use pipeline::Class;

/// Reservation traffic (SIBRA that passed verification).
pub const R: Class = Class(1);
/// Neighbor traffic (BFD, one-hop paths).
pub const N: Class = Class(2);
/// Guaranteed: AS-authenticated EPIC-Z within its source's token bucket.
pub const G: Class = Class(3);
/// Authenticated best effort (host-authenticated, or over the bucket).
pub const A: Class = Class(4);
/// Unauthenticated (plain SCION, SCMP); also any class the scheduler does not know.
pub const U: Class = Class(5);

/// Queue index (0..5, in R, N, G, A, U order) of a class; unknown classes map to U.
#[inline]
pub const fn queue_of(c: Class) -> usize {
    match c.0 {
        1 => 0,
        2 => 1,
        3 => 2,
        4 => 3,
        _ => 4,
    }
}

/// Queue names in index order.
pub const NAMES: [&str; 5] = ["R", "N", "G", "A", "U"];
