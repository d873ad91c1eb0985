//! Zero-copy views and representations of every header the data planes touch.
//!
//! Each header module follows one shape (after smoltcp's `wire` module):
//!
//! * a view `Xxx<T: AsRef<[u8]>>` wrapping a buffer, with `new_unchecked`,
//!   `new_checked` (which validates every length against the buffer so that the
//!   getters cannot index out of bounds), getters, and setters when
//!   `T: AsMut<[u8]>`;
//! * a `XxxRepr` with `parse(&view) -> Result<Repr>` and `emit(&self, &mut view)`,
//!   plus `buffer_len()`; `parse(emit(r)) == r` is property-tested.
//!
//! The crate is `no_std`, never allocates, and contains no `unsafe`. No input
//! can make a parser panic: every rejection is an [`Error`].
#![no_std]
#![forbid(unsafe_code)]

pub mod error;
pub mod field;
pub mod host;
pub mod ia;
pub mod scion;

// L2/L3/L4 headers, FlowPolice shim and FAIR header (packet-l3).
pub mod checksum;
pub mod ethernet;
pub mod fair;
pub mod flowpolice;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
pub mod udp;

pub use error::{Error, Result};
pub use host::HostAddr;
pub use ia::Ia;
