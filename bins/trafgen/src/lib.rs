//! `trafgen`: traffic of legitimate senders and attackers for the
//! project's data planes, written to pcap files at a given rate.
//!
//! * [`profile`]: groups of senders (TOML), built-in profiles per protocol.
//! * [`gen`]: the time-ordered generator. Packets come from the router
//!   runtime's protocol templates (`runtime::templates`), which run the
//!   protocols' end-host logic: FlowPolice requests with solved puzzles and
//!   regular packets carrying the echoed capability (`flowpolice::host`),
//!   SIBRA ephemeral reservations with their SOF chain (`sibra::host`),
//!   EPIC-Z packets with host-level HVFs (`zlane::host`) or through the
//!   source AS's Z-Lane gateway, FAIR packets stamped by the source stage
//!   (`fair::source`). Attackers are the same templates with forged MACs,
//!   HVFs, tokens, capabilities or puzzles, plus the generator's behaviours:
//!   floods (rate), on-off shrew senders, flow regeneration, replays of
//!   another group's packets after a delay, request floods.
//! * [`check`]: pcap writing and reading, and replay of a capture through
//!   the real stages of a router configuration, tallying verdicts per group.
//! * [`progress`]: the progress counter (a live line on a terminal, plain
//!   periodic lines in logs) and output that ends quietly on a closed pipe.
//!
//! Timestamps in the capture follow the rates: a constant sender at R pps
//! has packets exactly 1/R apart; templates are rebuilt every `refresh_ms`
//! with the current second, so protocol timestamps stay fresh.
//!
//! # Limits of open-loop generation
//! * Within one refresh period a flow's packet is repeated byte for byte
//!   (as in the runtime's synthetic backend). Routers with per-packet
//!   duplicate suppression (Z-Lane's optional replay filter, FAIR's
//!   destination) see the repeats as duplicates; give such a group
//!   `flows` ≥ `rate_pps` × `refresh_ms` / 1000 to make every packet unique.
//! * FlowPolice capabilities are the ones the router issues to each flow's
//!   request at capture start (the built-in profile sends the requests
//!   first); the router accepts them for two detection periods. Later
//!   capabilities need the router's replies (closed loop): the simulator's
//!   FlowPolice scenario runs that loop.
//! * SIBRA reservation *requests* need the steady path set up and confirmed
//!   by the router's reply first (closed loop); SIBRA request floods are in
//!   the simulator's Fig. 7 scenario. `trafgen` sends SIBRA data packets on
//!   ephemeral reservations, forged and stale ones.
//!
//! # Sending to a DPDK port
//! The runtime's DPDK backend is a router I/O backend bound to a router
//! configuration, not a reusable transmit path, so `trafgen` writes pcap
//! only. To put a capture on a DPDK port, replay it with DPDK's `net_pcap`
//! driver, e.g. `dpdk-testpmd --vdev 'net_pcap0,rx_pcap=out.pcap' --vdev
//! <real port> -- --forward-mode=io`, or run the router itself with
//! `[io.dpdk] eal_args = ["--vdev", "net_pcap0,rx_pcap=out.pcap", ...]`
//! (the pcap's timestamps then give the order, not the pace).
#![forbid(unsafe_code)]

pub mod check;
pub mod gen;
pub mod profile;
pub mod progress;

pub use gen::{GenOptions, Generator};
pub use profile::{Expect, Profile};
