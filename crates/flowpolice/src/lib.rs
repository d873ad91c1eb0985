//! FlowPolice: congestion accountability with router-issued capabilities.
//!
//! A FlowPolice router stamps each flow's packets with capabilities
//! (`P_id ‖ flow_id ‖ ts ‖ MAC`, [`capability`]); receivers echo them and senders
//! carry them back ([`host`]). From the capabilities that do *not* come back the
//! router infers each flow's loss rate per detection period and runs
//! Algorithm 1 ([`flow`]): AIMD on a per-flow window of privileged packets,
//! with a loss history that defeats on-off (shrew) attacks. Packets over the
//! window, and all packets of a flow's first period, are marked best effort;
//! any downstream bottleneck only needs strict priority (privileged > best
//! effort > legacy) to protect compliant flows ([`egress`]).
//!
//! The crate is sans-IO: time comes in as arguments (`pipeline::Now`), nothing
//! reads a clock, spawns a thread or allocates per packet.
//!
//! * [`config`]: the typed configuration of the `flowpolice` stage kind
//!   ([`Config`]; serde behind feature `serde`, [`pipeline::Validate`]).
//! * [`params`]: Algorithm 1 parameters with the thesis defaults and range checks.
//! * [`table`]: the preallocated flow table (48-byte entries, four per three
//!   cache lines, bucketized linear probing, huge pages, lazy reclaim of idle
//!   flows, refusal when full; 61 B per flow at the default 80 % load).
//! * [`router`]: the protocol over plain values (requests, regular packets).
//! * [`puzzle`]: the request channel's proof of work and the seed hash chain.
//! * [`stage`]: the batched pipeline stage (live parameter changes in place:
//!   [`FlowPolice::apply_config`]), [`class`]: its traffic classes.
//!
//! # State and sharding
//! One [`stage::FlowPolice`] per worker; the runtime shards by flow (RSS on the
//! source or destination address, matching [`flowkey`]) so that every flow's
//! state lives in exactly one worker and nothing is shared.
//!
//! # Decisions beyond the thesis and spec sheet
//! * A capability of the flow's *previous* period is accepted as a ticket (the
//!   packet is forwarded and restamped) but not as feedback
//!   ([`Params::accept_previous_period`]); older ones are dropped as expired.
//! * `P_R` counts only packets whose capability verified.
//! * A request for a flow already in the table keeps the flow's state.
//! * `W_R` has a floor ([`Params::w_min`], default 1).
//! * `flow_id` of a regular packet must match its addresses
//!   ([`Config::check_flow_binding`]).
//! * The flow table packs four 48-byte entries into three cache lines (61.25 B
//!   per flow at the default load), not one entry per 64-byte line as the spec
//!   sheet has it. Two one-per-line layouts were built and measured at 100M
//!   flows (entries aligned to 64 bytes; a line per slot with an away list
//!   naming where the home's other flows live, 1.4 lines per lookup). Neither
//!   was faster than the packed table, and both need 80 B or more per flow
//!   (BENCHMARKS.md, "Memory floor").
//! * Packets over the window of a flow classified as misbehaving are dropped
//!   at the router, not only demoted, and count as lost capabilities
//!   ([`Params::over_window`], [`OverWindow`]): with demotion alone a flat
//!   flood keeps the capacity the privileged class leaves. *Misbehaving*
//!   follows the thesis' description, "keep sending large volume of traffic
//!   in spite of severe losses": a flow is classified on fresh severe loss
//!   while sending more than [`Params::responsive_volume`] packets per
//!   period, and released as soon as it backs off (to `(1 − β)` of that
//!   volume or to the responsive volume) or its smoothed loss falls to `L↓`.
//!   Without the back-off release the router's own counted drops lock out a
//!   TCP-like flow that starts while a flood is not yet throttled: it is
//!   classified on losses the flood caused, and its minimum rate stays over
//!   a window at the floor, so it never sees a low-loss period
//!   ([`OverWindow::DropWhileLossy`] keeps that earlier behaviour for
//!   comparison). A flat flood never backs off and stays at the floor.
//! * `R_W`, the window policing starts from, is `P_R` of the period just
//!   ended (spec, default); [`InitialWindow::Delivered`] starts from its
//!   delivered part instead ([`Params::initial_window`]). **Recommended:
//!   `Delivered`** for routers that expect floods. With `Received` a flood's
//!   first (all best-effort) period becomes its privileged window: the
//!   flood holds the privileged class for several halvings, and the
//!   legitimate flows' privileged packets are lost with it. Measured with
//!   the `sim` crate's Fig. 5.3/5.4 scenario (50 flooders at 2× C, 5
//!   legitimate flows wanting 0.5× C): non-complying flooders get 5.6 % of
//!   the link and the legitimate flows 45 % of their demand with
//!   `Received`, 2.7 % and 99 % with `Delivered`; against exact-window
//!   attackers the legitimate flows get 75 % vs 96 %. (The FCT scenario
//!   does not separate them: 4.26 vs 4.24 s mean FCT with transfers
//!   starting in the attack.) The spec sheet fixes the default.
//! * Entry fields are narrowed to fit 48 bytes (32-bit `T_A` with wrapping
//!   arithmetic, `f32` `L_R`, 16-bit `S_T`; see [`FlowEntry`]).
//!
//! # Example: a router and one flow
//! ```
//! use std::net::Ipv4Addr;
//! use flowpolice::host::{ipv4_packet, Receiver, Sender};
//! use flowpolice::puzzle::{self, SeedChain};
//! use flowpolice::config::{Config, LinkLayer};
//! use flowpolice::FlowPolice;
//! use flowpolice::{class, Puzzle};
//! use pipeline::{Batch, Now, Pipeline};
//!
//! // Router configuration: secrets, 1000 table slots, raw IP input.
//! let seeds = SeedChain::generate([42; 32], 0, 64);
//! let mut cfg = Config::new(mac::Key::from([7; 16]), [1, 2], 1000, seeds.clone());
//! cfg.link = LinkLayer::Ip;
//! cfg.puzzle.min_level = 4;
//! let mut pipeline = Pipeline::new().with(FlowPolice::new(cfg).unwrap());
//!
//! // The sender solves a puzzle on the current seed and sends a request.
//! let now = Now::from_unix_ns(1_000_000_000);
//! let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 9));
//! let epoch = cfg_epoch(now);
//! let nonce = puzzle::solve(seeds.seed(epoch).unwrap(), &src.octets(), &dst.octets(), 4, 0).unwrap();
//! let mut shim = [0u8; 44];
//! Sender::write_request(&mut shim, 17, Puzzle { epoch, level: 4, nonce }).unwrap();
//! let mut batch: Batch<Vec<u8>> = Batch::new();
//! batch.push(ipv4_packet(src, dst, &shim, b"hello"), 0).unwrap();
//! pipeline.run(&mut batch, now);
//! assert_eq!(batch.meta(0).class(), Some(class::request(4)));
//!
//! // The receiver echoes the stamped capability; the sender carries it back.
//! let mut receiver = Receiver::new();
//! let mut sender = Sender::new();
//! receiver.on_packet(&batch.data(0)[20..]).unwrap();
//! for c in receiver.take_echoes() {
//!     sender.on_returned(c);
//! }
//! let mut shim = [0u8; 28];
//! sender.write_regular(&mut shim, 17).unwrap();
//! batch.clear();
//! batch.push(ipv4_packet(src, dst, &shim, b"data"), 0).unwrap();
//! pipeline.run(&mut batch, now.plus_ns(50_000_000));
//! // First period: forwarded best effort, with a fresh capability (P_id 2).
//! assert_eq!(batch.meta(0).class(), Some(class::BEST_EFFORT));
//! assert_eq!(u16::from_be_bytes([batch.data(0)[24], batch.data(0)[25]]), 2);
//!
//! fn cfg_epoch(now: Now) -> u32 {
//!     flowpolice::puzzle::PuzzlePolicy::default().epoch_at(now.unix_ms())
//! }
//! ```
#![forbid(unsafe_code)]

pub mod capability;
pub mod config;
pub mod egress;
pub mod flow;
pub mod flowkey;
pub mod host;
pub mod params;
pub mod puzzle;
pub mod router;
pub mod stage;
pub mod table;

pub use capability::{Capability, CapabilityKey};
pub use config::Config;
pub use flow::{Feedback, FlowEntry, Mark};
pub use packet::flowpolice::Puzzle;
pub use params::{InitialWindow, OverWindow, Params, ParamsError};
pub use router::{Accepted, Reject, Router};
pub use stage::FlowPolice;
pub use table::FlowTable;

/// The traffic classes the stage assigns (map them to queues with [`egress`]).
///
/// Legacy traffic keeps the pipeline's default class 0, so packets the stage
/// never touched are legacy too.
pub mod class {
    use pipeline::Class;

    /// Packets without a FlowPolice header (lowest priority, capped).
    pub const LEGACY: Class = Class(0);
    /// Best-effort FlowPolice packets (type 10).
    pub const BEST_EFFORT: Class = Class(1);
    /// Privileged FlowPolice packets (type 11).
    pub const PRIVILEGED: Class = Class(2);
    /// First request class; request classes are `REQUEST_BASE + min(level, 31)`.
    pub const REQUEST_BASE: u8 = 16;
    /// Highest puzzle level with its own class.
    pub const MAX_REQUEST_LEVEL: u8 = 31;

    /// The class of a request with puzzle `level`.
    #[inline]
    pub const fn request(level: u8) -> Class {
        let l = if level > MAX_REQUEST_LEVEL { MAX_REQUEST_LEVEL } else { level };
        Class(REQUEST_BASE + l)
    }

    /// Whether `c` is a request class.
    #[inline]
    pub const fn is_request(c: Class) -> bool {
        c.0 >= REQUEST_BASE && c.0 <= REQUEST_BASE + MAX_REQUEST_LEVEL
    }
}
