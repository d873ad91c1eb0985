//! Z-Lane: zero-setup intermediate-rate communication guarantees over SCION.
//!
//! * [`config`]: the typed configuration of the stage kinds
//!   `zlane-classify` ([`RouterConfig`]) and `zlane-gateway`
//!   ([`GatewayConfig`]) and of the `zlane` egress ([`SchedulerConfig`]),
//!   with their checks ([`pipeline::Validate`]).
//! * [`stage`]: the pipeline stages [`ZlaneClassify`] (border router) and
//!   [`ZlaneGateway`] (source AS), both changed live in place
//!   ([`pipeline::Element::reconfigure`]).
//! * [`classify`]: the border router's [`Classifier`] — EPIC-Z HVF
//!   verification (host- or AS-level per Q), freshness, optional duplicate
//!   suppression ([`replay`]), classification into R/N/G/A/U and
//!   per-AS/per-ISD 8-byte token buckets ([`bucket`]).
//! * [`gateway`]: the source AS's [`Gateway`] — per-host token buckets in a
//!   fixed-capacity table, the Q flag, and HVF replacement V_i → Ṽ_i under
//!   the on-path ASes' keys (mapped from hop fields), reporting each
//!   [`rewrite`] for checksum patches.
//! * [`sched`]: the five-queue egress scheduler ([`Scheduler`], a
//!   `pipeline::Egress`) enforcing the μ bounds in virtual time.
//! * [`host`]: what a sending host does (EPIC-Z packets with host-level HVFs).
//! * [`hvf`], [`keys`], [`class`]: HVFs and freshness, DRKey keys, the
//!   traffic classes.
//!
//! Sans-IO: every function takes `Now`. A border-router pipeline is
//! `[ZlaneClassify, scion::ScionForward]` followed by the scheduler; SIBRA's
//! verification stage (if any) runs before `ZlaneClassify`, which puts
//! PathType 200 into R.
//!
//! # State sharing
//! Buckets are per worker. The sheet asks for one bucket per AS/ISD per
//! egress; with several workers the runtime must steer each egress's G
//! traffic through one worker (or split the rates per worker) — the crate
//! does not lock.
//!
//! # Choices (documented, configurable where it matters)
//! * V_i input is the 40 listed bytes (see [`hvf::host_input`]); Ṽ_i MACs
//!   V_i followed by 12 zero bytes (one block).
//! * Routers verify the HVF of the hop field current on arrival (at a
//!   segment cross-over, the first of the AS's two hop fields).
//! * Keys come from the `drkey` crate ([`keys`]): K_i is the generic
//!   level-2 AS-host key with protocol id 64, derived from the per-worker
//!   `drkey::Level1Cache` and kept expanded in a per-worker
//!   [`keys::HostKeyCache`] per (epoch, source AS, host), flushed when the
//!   acceptable epochs change; during the 5 s grace period after an epoch
//!   change, routers also accept the previous epoch's keys.
//! * Bursts are processed in passes (VPP style): the classifier parses all
//!   packets, resolves their keys, then runs the HVF MACs back to back; the
//!   gateway polices all packets first (overuse never reaches MAC work) and
//!   then computes all AS-level HVFs of the burst in one interleaved
//!   multi-key call (eight AES chains in flight, each under its own key).
//!   The classifier likewise runs every packet's V_i and Ṽ_i interleaved
//!   across the burst, each under the packet's own host or AS key.
//! * EPIC-Z checks at the router, per `zlane.md`: the path parses as a
//!   SCION path with one HVF per hop field; the packet time (first info
//!   field's Timestamp + TsRel × 4 µs) lies within the freshness window
//!   (2 s past, 1 s future; `Expired` / `FromFuture`); reserved flag bits
//!   are zero (`RouterConfig::strict_flags`, `Malformed`); the current hop's
//!   HVF verifies as V_i (Q clear) or Ṽ_i (Q set); optionally no replay
//!   within the window ([`replay::ReplayFilter::for_freshness`]). The
//!   info-field timestamp is authenticated through σ_i, which
//!   `scion::ScionForward` verifies next (with hop expiry).
//! * EPIC L3's destination path validation (routers revealing a second HVF
//!   half) does not exist in EPIC-Z: the sheet fixes ℓ_val = 4 and one
//!   4-byte HVF per hop, so there is nothing to rewrite on the way.
//!
//! # Example: gateway and border router
//! ```
//! use drkey::{Epoch, Protocol, SecretValue, DEFAULT_GRACE_NS};
//! use mac::{Cmac, Key};
//! use packet::scion::{AddrHdrRepr, RawHostAddr};
//! use packet::{HostAddr, Ia};
//! use pipeline::{Batch, Egress, Now, Pipeline};
//! use scion::build::{self, HopSpec};
//! use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};
//! use zlane::config::{GatewayConfig, Origin, Rate, RateConfig, RouterConfig, SchedulerConfig};
//! use zlane::keys::{RouterKeys, EPIC_Z_PROTOCOL};
//! use zlane::{Classifier, Gateway, Scheduler, ZlaneClassify, ZlaneGateway};
//!
//! let now = Now::from_unix_ns(1_700_000_000_000_000_000);
//! let (src, transit) = (Ia::new(1, 10), Ia::new(1, 20));
//! // The transit AS: forwarding key, DRKey (generic) secret value of this epoch.
//! let fwd_key = ForwardingKey::new(&Key::from([1; 16]));
//! let epoch = Epoch::new(1_699_990_000, 1_700_076_400).unwrap();
//! let sv = SecretValue::derive(b"transit master secret", Protocol::GENERIC, epoch).unwrap();
//! // A one-segment path: source AS (hop 0) -> transit AS (hop 1) -> destination.
//! let hops: Vec<HopSpec> = [(0, 1), (2, 3), (4, 0)]
//!     .iter()
//!     .map(|&(i, e)| HopSpec { key: fwd_key.clone(), cons_ingress: i, cons_egress: e, exp_time: 255 })
//!     .collect();
//! let mut path = build::path(&[build::segment(true, 7, 1_700_000_000, &hops)]).unwrap();
//! // The packet is at the transit AS: hop 1, SegID chained past hop 0.
//! path.curr_hf = 1;
//! path.info_fields[0].seg_id = scion::chain_seg_id(7, &path.hops()[0].mac);
//! let host = RawHostAddr::from(HostAddr::V4([10, 0, 0, 1]));
//! let hdr = AddrHdrRepr { qos: 0, flow_id: 1, next_hdr: 17, payload_len: 0,
//!     dst_ia: Ia::new(1, 30), src_ia: src, dst_host: host, src_host: host };
//! // The host derives HVFs with its AS-host keys (every hop uses the transit key here):
//! // generic level 2 with protocol id 64, from K_{transit→src}.
//! let host_key = sv.level1(src).generic_as_host(Protocol(EPIC_Z_PROTOCOL), &HostAddr::V4([10, 0, 0, 1]));
//! let k = Cmac::new(&host_key);
//! let mut pkt = zlane::host::epic_packet(&hdr, &path, &[&k, &k, &k], 0, 0, 1, b"hi").unwrap();
//!
//! // Gateway in the source AS: K_{transit,src} fetched via DRKey, hops registered.
//! let mut gw = Gateway::new(GatewayConfig::default()).unwrap();
//! gw.set_as_key(transit, &sv.level1_key(src));
//! for h in path.hops() { gw.register_hop(h.mac, transit); }
//! let mut gw_stage = Pipeline::new().with(ZlaneGateway::new(gw));
//! let mut batch = Batch::new();
//! batch.push(pkt, 0).unwrap();
//! gw_stage.run(&mut batch, now);
//!
//! // Border router of the transit AS: classify, forward, schedule.
//! let rate = RateConfig { origin: Origin::As(src), rate: Some(Rate::Bps(100_000_000)) };
//! let cfg = RouterConfig { local_ia: transit, rates: vec![rate], ..Default::default() };
//! let mut keys = RouterKeys::new(4096, 0x5eed, DEFAULT_GRACE_NS);
//! keys.install(sv).unwrap();
//! let classify = ZlaneClassify::new(Classifier::new(&cfg, keys, now.mono_ns).unwrap());
//! let forward = ScionForward::new(Forwarder::new(fwd_key, InterfaceTable::new().with(2, 5).with(3, 6),
//!     ForwardConfig::default()));
//! let mut router = Pipeline::new().with(classify).with(forward);
//! let mut batch2 = Batch::new();
//! batch.drain(|b, _| { batch2.push(b, 5).unwrap(); });
//! router.run(&mut batch2, now);
//! assert_eq!(batch2.meta(0).class(), Some(zlane::class::G), "{:?}", batch2.meta(0).verdict);
//! assert_eq!(batch2.meta(0).verdict, pipeline::Verdict::Forward { port: 6, class: zlane::class::G });
//! let mut sched: Scheduler<Vec<u8>> = Scheduler::new(SchedulerConfig::default()).unwrap();
//! let mut out = Vec::new();
//! batch2.drain(|b, m| { sched.enqueue(b, m.class().unwrap(), now).unwrap(); });
//! assert_eq!(sched.dequeue(now, 32, &mut out), 1);
//! ```
#![forbid(unsafe_code)]

mod as_keys;
pub mod bucket;
pub mod class;
pub mod classify;
pub mod config;
pub mod gateway;
pub mod host;
mod host_table;
pub mod hvf;
pub mod keys;
pub mod replay;
pub mod rewrite;
pub mod sched;
pub mod stage;

pub use bucket::TokenBucket;
pub use classify::Classifier;
pub use config::{Bounds, GatewayConfig, Origin, Rate, RateConfig, RouterConfig, SchedulerConfig};
pub use gateway::Gateway;
pub use sched::Scheduler;
pub use stage::{ZlaneClassify, ZlaneGateway};
