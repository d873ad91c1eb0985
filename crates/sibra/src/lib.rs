//! SIBRA (Scalable Internet Bandwidth Reservation Architecture) for SCION
//! PathType 200: the data plane and reservation processing of one AS, sans-IO.
//!
//! * [`types`]: bandwidth classes ([`BwClass`], exact both ways; grants round
//!   down, requests up), [`Tick`]s, 4-bit [`ResvIdx`], [`SteadyId`] (8 B:
//!   owner AS ‖ suffix), [`EphemeralId`] (16 B: source AS ‖ 80 random bits),
//!   [`ResvInfo`], [`Sof`].
//! * [`token`]: the 48-byte SOF MAC input, issuing and chaining, key rotation
//!   with a grace period ([`token::SofKeys`]), batched verification of a
//!   burst's tokens with pipelined AES, revocations.
//! * [`admission`]: steady and ephemeral admission with per-tick accounting,
//!   offers, confirmation and reclaim, bounded tables.
//! * [`monitor`]: edge token buckets and core count-min overuse detection
//!   with blacklisting.
//! * [`host`]: building requests and data paths, reading replies, renewals.
//! * [`layout`]: the per-stage memo of SIBRA header layouts.
//! * [`stage`]: the pipeline stages [`stage::SibraTransit`],
//!   [`stage::SibraEdge`] and [`stage::SibraControl`]; [`stage::CLASS_R`].
//! * [`config`]: the typed configurations of the `sibra-transit` and
//!   `sibra-control` stage kinds ([`config::TransitConfig`],
//!   [`config::ControlConfig`]; serde behind the `serde` feature), from
//!   which [`stage::SibraTransit::from_config`] and
//!   [`stage::SibraControl::from_config`] build the stages and with which
//!   their `reconfigure` changes them live, keeping reservations, tables and
//!   counters.
//!
//! Nothing here reads a clock: every call takes the time (`pipeline::Now` or
//! a [`Tick`]). State is per worker; admission state belongs to one worker
//! (requests are steered to it by RSS on the reservation ID), while the
//! transit stage's state (keys, blacklist) can be replicated per worker.
//!
//! # Walkthrough: steady setup, ephemeral setup over it, data packets
//!
//! Three ASes on a line, `A (if 1) — (if 2) B (if 3) — (if 4) C`; every router
//! binds interface `n` to port `n`, port 0 is its inside. A sets up a steady
//! path to C, then an ephemeral reservation over it, then sends data.
//!
//! ```
//! use mac::Key;
//! use packet::Ia;
//! use pipeline::{Batch, DropReason, Now, Pipeline, Verdict};
//! use scion::InterfaceTable;
//! use sibra::admission::{Admission, AdmissionConfig, IfaceConfig, Split};
//! use sibra::host::{self, Reply};
//! use sibra::monitor::{CoreConfig, CoreMonitor};
//! use sibra::stage::{RouterConfig, SibraControl, SibraTransit, CLASS_R};
//! use sibra::token::SofKeys;
//! use sibra::{BwClass, EphemeralId, SteadyId, Tick};
//!
//! let now = Now::from_unix_ns(1_700_000_000_000_000_000);
//! let tick = Tick::of(now);
//! let ifs: [&[u16]; 3] = [&[1], &[2, 3], &[4]];
//! let mut routers: Vec<Pipeline<Vec<u8>>> = Vec::new();
//! for (n, ifs) in ifs.iter().enumerate() {
//!     let mut table = InterfaceTable::new();
//!     let mut acfg = AdmissionConfig::default();
//!     for &i in *ifs {
//!         table.bind(i, i);
//!         acfg.interfaces.push(IfaceConfig { ifid: i, capacity_bps: 1_000_000_000, split: Split::default() });
//!     }
//!     let rc = RouterConfig { ifaces: table, ..Default::default() };
//!     let keys = SofKeys::new(&Key::from([n as u8 + 1; 16]));
//!     routers.push(
//!         Pipeline::new()
//!             .with(SibraControl::new(rc.clone(), keys.clone(), Admission::new(acfg, tick).unwrap()))
//!             .with(SibraTransit::new(rc, keys, CoreMonitor::new(CoreConfig::default()).unwrap())),
//!     );
//! }
//! // Feeds `pkt` to AS `at` on `port` and follows it until it is delivered inside an AS.
//! let mut send = |mut at: usize, mut port: u16, pkt: Vec<u8>| -> Result<(usize, Vec<u8>), Verdict> {
//!     let mut pkt = pkt;
//!     loop {
//!         let mut b = Batch::new();
//!         b.push(pkt, port).unwrap();
//!         routers[at].run(&mut b, now);
//!         let v = b.meta(0).verdict;
//!         let mut out = Vec::new();
//!         b.drain(|buf, _| out = buf);
//!         pkt = out;
//!         match v {
//!             Verdict::Forward { port: 0, class } => {
//!                 assert_eq!(class, CLASS_R);
//!                 return Ok((at, pkt));
//!             }
//!             // Links: 1 <-> 2, 3 <-> 4.
//!             Verdict::Forward { port: 1, .. } => (at, port) = (1, 2),
//!             Verdict::Forward { port: 2, .. } => (at, port) = (0, 1),
//!             Verdict::Forward { port: 3, .. } => (at, port) = (2, 4),
//!             Verdict::Forward { port: 4, .. } => (at, port) = (1, 3),
//!             v => return Err(v),
//!         }
//!     }
//! };
//! let (a, c) = (Ia::new(1, 0xa), Ia::new(1, 0xc));
//! let (ha, hc) = ([10, 0, 0, 1], [10, 0, 0, 2]);
//!
//! // 1. Steady setup A -> C for 362 kbit/s each way, 40 ticks; C returns it.
//! let sid = SteadyId::new(0xa, 1);
//! let class10 = BwClass::new(10).unwrap();
//! let req = host::request_info(tick, 40, class10, class10);
//! let path = host::steady_setup(sid, &[(0, 1), (2, 3), (4, 0)], &req).unwrap();
//! let (at, mut pkt) = send(0, 0, host::packet(a, ha, c, hc, &path, b"").unwrap()).unwrap();
//! assert_eq!(at, 2);
//! host::make_reply(&mut host::sibra_path_mut(&mut pkt).unwrap()).unwrap();
//! let (at, pkt) = send(2, 0, pkt).unwrap();
//! assert_eq!(at, 0);
//! let Ok(Reply::Granted(steady)) = host::reply(&host::sibra_path(&pkt).unwrap()) else { panic!() };
//! assert_eq!(steady.sofs.len(), 3);
//!
//! // 2. Ephemeral setup over the steady path: 11.6 Mbit/s for 4 ticks.
//! let eid = EphemeralId::new(0xa, [7; 10]);
//! let class20 = BwClass::new(20).unwrap();
//! let ereq = host::request_info(tick, 4, class20, class20);
//! let path = host::ephemeral_setup(eid, &[(sid, &steady)], &ereq).unwrap();
//! let (_, mut pkt) = send(0, 0, host::packet(a, ha, c, hc, &path, b"").unwrap()).unwrap();
//! host::make_reply(&mut host::sibra_path_mut(&mut pkt).unwrap()).unwrap();
//! let (_, pkt) = send(2, 0, pkt).unwrap();
//! let Ok(Reply::Granted(eph)) = host::reply(&host::sibra_path(&pkt).unwrap()) else { panic!() };
//!
//! // 3. Data packets on the ephemeral reservation reach C in class R ...
//! let data = host::packet(a, ha, c, hc, &host::ephemeral_data(eid, &eph).unwrap(), b"hello").unwrap();
//! let (at, delivered) = send(0, 0, data.clone()).unwrap();
//! assert_eq!(at, 2);
//! assert_eq!(host::sibra_path(&delivered).unwrap().curr_hop(), 2);
//! // ... and one with a forged token (C's MAC, the path's last byte) is dropped at C.
//! let mut forged = data;
//! let mac_end = forged.len() - b"hello".len() - 1;
//! forged[mac_end] ^= 1;
//! assert_eq!(send(0, 0, forged), Err(Verdict::Drop(DropReason::BadMac)));
//! ```
#![forbid(unsafe_code)]

pub mod admission;
pub mod config;
pub mod error;
pub mod host;
pub mod layout;
pub mod monitor;
#[cfg(test)]
mod mutate;
pub mod stage;
pub mod token;
pub mod types;

pub use error::Error;
pub use types::{
    BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, Sof, SteadyId, Tick, EPHEMERAL_HORIZON,
    MAX_CLASS, STEADY_HORIZON, TICK_SECS,
};
