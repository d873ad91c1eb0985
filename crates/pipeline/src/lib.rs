//! The data-plane contract shared by every protocol crate and the runtime.
//!
//! A burst of packets travels as a [`Batch`] (up to [`BURST`] buffers plus
//! [`Meta`]data) through a [`Pipeline`] of [`Stage`]s. Each stage decides a
//! [`Verdict`] per packet; dropped packets leave the live set and are counted
//! per [`DropReason`]. What the control plane needs of a stage or egress
//! discipline (name, named counters, live changes) is its [`Element`] side,
//! which does not depend on the buffer type. Buffers are generic ([`PacketBuf`]) so DPDK mbufs,
//! pooled [`Frame`]s and `Vec<u8>` all fit.
//!
//! ```
//! use pipeline::{Batch, DropReason, Element, Now, PacketBuf, Pipeline, Stage};
//!
//! /// Drops packets shorter than 20 bytes.
//! struct MinLen;
//! impl Element for MinLen {
//!     fn name(&self) -> &str { "min-len" }
//! }
//! impl<B: PacketBuf> Stage<B> for MinLen {
//!     fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
//!         for i in batch.live() {
//!             if batch.data(i).len() < 20 {
//!                 batch.drop_packet(i, DropReason::Truncated);
//!             }
//!         }
//!     }
//! }
//!
//! let mut pipeline = Pipeline::new().with(MinLen);
//! let mut batch: Batch<Vec<u8>> = Batch::new();
//! batch.push(vec![0; 64], 0).unwrap();
//! batch.push(vec![0; 8], 0).unwrap();
//! pipeline.run(&mut batch, Now::default());
//! let (_, counters) = pipeline.counters().next().unwrap();
//! assert_eq!(counters.drops.get(DropReason::Truncated), 1);
//! ```
#![forbid(unsafe_code)]

pub mod batch;
pub mod buf;
pub mod counters;
pub mod egress;
pub mod element;
pub mod parse;
pub mod priority;
pub mod stage;
pub mod time;
pub mod validate;
pub mod verdict;

pub use batch::{Batch, Indices, Meta, Proto, ScionHint, BURST, L3, NO_OFFSET};
pub use buf::{Frame, NoRoom, PacketBuf};
pub use counters::{DropCounters, StageCounters};
pub use egress::{Egress, Fifo};
pub use element::{config_of, replace_whole, Element, Reconfigured, Refused};
pub use parse::{classify, ipv4_header_checksum_ok, Layers, Parse, ParseConfig};
pub use priority::{StrictPriority, TokenBucket};
pub use stage::{Pipeline, Stage};
pub use time::Now;
pub use validate::{Invalid, Validate};
pub use verdict::{Class, DropReason, Verdict};
