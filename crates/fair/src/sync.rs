//! Synchronization primitives of the source's shared sequence counter, swapped
//! for `loom`'s model-checked versions under `--cfg loom` (P-8,
//! `tests/loom_seqno.rs`). Everything else uses `std` directly.

#[cfg(loom)]
pub use loom::sync::{
    atomic::{AtomicU32, Ordering},
    Arc,
};
#[cfg(not(loom))]
pub use std::sync::{
    atomic::{AtomicU32, Ordering},
    Arc,
};
