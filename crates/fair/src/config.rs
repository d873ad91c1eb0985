//! Typed configuration of the router's FAIR stage kinds, shaped like their
//! TOML tables (deserialized with feature `serde`), and their validation
//! ([`Validate`]: every refusal names its key).
//!
//! | Stage kind | Configuration | Stage | Settings the stage runs with |
//! |---|---|---|---|
//! | `fair-source` | [`FairSourceConfig`] | [`FairSource`](crate::source::FairSource) | [`SourceConfig`] |
//! | `fair-transit` | [`FairTransitConfig`] | [`FairTransit`](crate::transit::FairTransit) | [`TransitConfig`] |
//! | `fair-destination` | [`FairDestinationConfig`] | [`FairDestination`](crate::dest::FairDestination) | [`DestConfig`] |
//! | `suspicious-bit` | [`SuspiciousBitConfig`] | [`SuspiciousBit`](crate::sb::SuspiciousBit) | [`SbConfig`] |
//!
//! A configuration holds what an operator writes (channels with their keys
//! and policies, key ranges, actions); the *settings* are the part the
//! per-packet path reads, which embedders that build stages in code (tests,
//! simulations, benchmarks) set directly. The stages are built from a
//! configuration and changed in place by it in [`crate::stage`].
//!
//! Keys are 32 hex digits ([`mac::Key`], never printed); prefixes are
//! `address/length` without host bits ([`Prefix`]).

use core::fmt;
use core::str::FromStr;
use std::net::IpAddr;
use std::path::PathBuf;

use mac::Key;
use pipeline::{Class, Invalid, Validate};

use crate::common::{Codes, Framing};
use crate::crypto::MarkBinding;
use crate::dest::{DestConfig, UnknownChannel};
use crate::keys::{data_key_ring, KeyError, KeyRing, MAX_DERIVED_EPOCHS};
use crate::sb::{PortClear, SbAction, SbConfig};
use crate::source::{NonConforming, SourceConfig};
use crate::transit::{MalformedAction, OverflowAction, TransitConfig};

/// Most slots a FAIR header has (§2.5).
const MAX_SLOTS: usize = packet::fair::MAX_SLOTS;
/// Largest committed rate of a channel (1 Tbit/s): larger values are typos.
pub const MAX_CIR_BPS: u64 = 1_000_000_000_000;
/// Smallest committed burst: one full Ethernet frame.
pub const MIN_CBS_BYTES: u64 = 1518;
/// Largest committed burst (4 GiB).
pub const MAX_CBS_BYTES: u64 = 1 << 32;

/// Defaults of the optional keys (serde's `default = "..."` names them).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
mod defaults {
    pub(super) fn key_period_s() -> u64 {
        crate::keys::DELTA_K
    }
    pub(super) fn seed() -> u64 {
        0x0fa1_5eed
    }
    pub(super) fn mtu() -> u16 {
        1500
    }
    pub(super) fn yes() -> bool {
        true
    }
    pub(super) fn low_class() -> u8 {
        1
    }
    pub(super) fn sus_ttl_s() -> u64 {
        86_400
    }
}

/// An IPv4 or IPv6 prefix, `address/length`, without host bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// `addr/len`, if `len` fits the address family and no host bit is set.
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, &'static str> {
        let (bits, host) = match addr {
            IpAddr::V4(a) => (32, u128::from(u32::from(a)) << 96),
            IpAddr::V6(a) => (128, u128::from(a)),
        };
        if len > bits {
            return Err(if bits == 32 {
                "has a prefix length above 32"
            } else {
                "has a prefix length above 128"
            });
        }
        if len < 128 && host << len != 0 {
            return Err("has host bits set");
        }
        Ok(Prefix { addr, len })
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Prefix, String> {
        let bad = |why: &str| format!("`{s}` {why}");
        let (a, l) = s.trim().split_once('/').ok_or_else(|| bad("is not `address/length`"))?;
        let addr: IpAddr = a.parse().map_err(|_| bad("has no valid IPv4 or IPv6 address"))?;
        let len: u8 = l.parse().map_err(|_| bad("has no valid prefix length"))?;
        Prefix::new(addr, len).map_err(bad)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Prefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Prefix;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a prefix `address/length` without host bits")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Prefix, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// `fair-transit` (Procedure 2): marking with data keys derived from a
/// master ([`crate::keys::data_epoch_key`]) for every epoch of
/// `[keys_from, keys_until)`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct FairTransitConfig {
    /// Master data key (32 hex digits).
    pub data_key: Key,
    /// Data-key rotation period Δ_K, seconds (8..=86400, default 60).
    #[cfg_attr(feature = "serde", serde(default = "defaults::key_period_s"))]
    pub key_period_s: u64,
    /// First second covered by installed keys (Unix).
    pub keys_from: u64,
    /// End of the covered time (Unix, exclusive); at most 100 000 epochs.
    pub keys_until: u64,
    /// Slot-MAC binding: `paper` (default) or `bound`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub binding: MarkBinding,
    /// No free slot: `drop` (default) or `forward`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub slot_overflow: OverflowAction,
    /// Forward malformed FAIR headers unmarked instead of dropping them.
    #[cfg_attr(feature = "serde", serde(default))]
    pub forward_malformed: bool,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    #[cfg_attr(feature = "serde", serde(default))]
    pub protocol: Option<u8>,
    /// Nonce generator seed of worker 0 (worker w uses seed + w).
    #[cfg_attr(feature = "serde", serde(default = "defaults::seed"))]
    pub seed: u64,
}

impl FairTransitConfig {
    /// The settings of the per-packet path.
    pub fn settings(&self) -> TransitConfig {
        TransitConfig {
            codes: codes(self.protocol),
            framing: Framing::Ethernet,
            overflow: self.slot_overflow,
            malformed: if self.forward_malformed {
                MalformedAction::ForwardUnmarked
            } else {
                MalformedAction::Drop
            },
        }
    }

    /// The data-key ring of the configured range (retention T_m).
    pub fn key_ring(&self) -> Result<KeyRing, KeyError> {
        data_key_ring(
            &self.data_key,
            self.key_period_s,
            crate::keys::T_M,
            (self.keys_from, self.keys_until),
            self.binding,
        )
    }

    /// Whether `other` derives other data keys.
    pub(crate) fn same_keys(&self, other: &FairTransitConfig) -> bool {
        (self.data_key == other.data_key)
            & (self.key_period_s == other.key_period_s)
            & (self.keys_from == other.keys_from)
            & (self.keys_until == other.keys_until)
            & (self.binding == other.binding)
    }
}

impl Validate for FairTransitConfig {
    fn validate(&self) -> Result<(), Invalid> {
        if !(8..=86_400).contains(&self.key_period_s) {
            return Err(Invalid::at(
                "key_period_s",
                format!("{} is not in 8..=86400 seconds", self.key_period_s),
            ));
        }
        if self.keys_until <= self.keys_from {
            return Err(Invalid::at(
                "keys_until",
                format!("{} must be after keys_from = {}", self.keys_until, self.keys_from),
            ));
        }
        let epochs = (self.keys_until - 1) / self.key_period_s - self.keys_from / self.key_period_s;
        if epochs >= MAX_DERIVED_EPOCHS {
            return Err(Invalid::at(
                "keys_until",
                format!("the range covers {} epochs (at most {MAX_DERIVED_EPOCHS})", epochs + 1),
            ));
        }
        check_protocol(self.protocol)
    }
}

/// `fair-source` (Procedure 1): one channel per destination prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct FairSourceConfig {
    /// Channels (longest prefix wins).
    pub channels: Vec<SourceChannelConfig>,
    /// Network-layer MTU of the egress (68..=65535, default 1500).
    #[cfg_attr(feature = "serde", serde(default = "defaults::mtu"))]
    pub mtu: u16,
    /// Spare IPv4 slots beyond `m`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub v4_spare: usize,
    /// Stamp and forward packets over the channel's rate instead of dropping them.
    #[cfg_attr(feature = "serde", serde(default))]
    pub forward_nonconforming: bool,
}

/// One channel of `fair-source` (a sending policy granted to this AS).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct SourceChannelConfig {
    /// Destination prefix routed into this channel (its identity across live changes).
    pub prefix: Prefix,
    /// Destination ASN.
    #[cfg_attr(feature = "serde", serde(default))]
    pub dst_asn: u32,
    /// K_SD (32 hex digits).
    pub k_sd: Key,
    /// Cooperating transit ASes to reserve slots for.
    pub m: u8,
    /// Committed rate, bit/s (the sending policy's CIR).
    pub cir_bps: u64,
    /// Committed burst, bytes.
    pub cbs_bytes: u64,
}

impl FairSourceConfig {
    /// The settings of the per-packet path.
    pub fn settings(&self) -> SourceConfig {
        SourceConfig {
            codes: Codes::default(),
            framing: Framing::Ethernet,
            v4_spare: self.v4_spare,
            mtu: self.mtu,
            nonconforming: if self.forward_nonconforming {
                NonConforming::Forward
            } else {
                NonConforming::Drop
            },
        }
    }
}

impl Validate for FairSourceConfig {
    fn validate(&self) -> Result<(), Invalid> {
        if self.mtu < 68 {
            return Err(Invalid::at("mtu", format!("{} is below 68 (the IPv4 minimum)", self.mtu)));
        }
        if self.v4_spare > MAX_SLOTS {
            return Err(Invalid::at("v4_spare", format!("{} is not in 0..=127", self.v4_spare)));
        }
        for (i, c) in self.channels.iter().enumerate() {
            let at = format!("channels[{i}]");
            if usize::from(c.m) + self.v4_spare > MAX_SLOTS {
                let max = MAX_SLOTS - self.v4_spare;
                let why = format!("{} is not in 0..={max} (127 slots with v4_spare)", c.m);
                return Err(Invalid::at("m", why).under(&at));
            }
            check_policy(c.cir_bps, c.cbs_bytes).map_err(|e| e.under(&at))?;
            if let Some(j) = self.channels[..i].iter().position(|o| o.prefix == c.prefix) {
                let why = format!("{} is the prefix of channels[{j}] too", c.prefix);
                return Err(Invalid::at("prefix", why).under(&at));
            }
        }
        Ok(())
    }
}

/// `fair-destination` (Procedure 3): the policies this AS granted. The
/// header store (`store_dir`, `retention_s`) is the embedder's: this crate
/// writes records to a [`RecordSink`](crate::record::RecordSink).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct FairDestinationConfig {
    /// Channels (policies granted to source ASes).
    pub channels: Vec<DestChannelConfig>,
    /// Header store directory (worker w writes `<dir>/worker-<w>`); absent = no capture.
    #[cfg_attr(feature = "serde", serde(default))]
    pub store_dir: Option<PathBuf>,
    /// Header store retention, seconds (60..=2592000, default T_m = 43 200).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retention_s: Option<u64>,
    /// Drop packets over the arrival-time bucket (default: detect, store, alarm).
    #[cfg_attr(feature = "serde", serde(default))]
    pub drop_nonconforming: bool,
    /// Drop traffic without a FAIR header.
    #[cfg_attr(feature = "serde", serde(default))]
    pub require_policy: bool,
    /// Strip the IPv6 extension header before delivery (default true; IPv4 always).
    #[cfg_attr(feature = "serde", serde(default = "defaults::yes"))]
    pub strip_ipv6: bool,
    /// FAIR packets of unknown channels: `drop` (default) or `deliver`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub unknown_channel: UnknownChannel,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    #[cfg_attr(feature = "serde", serde(default))]
    pub protocol: Option<u8>,
    /// Ingress port → neighbor AS (for channels with a `neighbor`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub port_neighbors: Vec<PortNeighbor>,
}

/// One channel of `fair-destination` (a sending policy this AS granted).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct DestChannelConfig {
    /// A prefix of the source AS (traffic from it belongs to `src_asn`).
    pub src_prefix: Prefix,
    /// Source ASN.
    pub src_asn: u32,
    /// K_SD of the direction source → this AS (32 hex digits).
    pub k_sd: Key,
    /// Cooperating transit ASes of the policy (expected marks).
    pub m: u8,
    /// Slot count of the channel's headers (m..=127, default `m`: IPv4 without spares).
    #[cfg_attr(feature = "serde", serde(default))]
    pub n_slots: Option<u8>,
    /// Neighbor AS the channel enters from (0 = any ingress).
    #[cfg_attr(feature = "serde", serde(default))]
    pub neighbor: u32,
    /// The policy's CIR, bit/s.
    pub cir_bps: u64,
    /// The policy's CBS, bytes.
    pub cbs_bytes: u64,
    /// Duplicate-filter window, sequence numbers per second (0 = off,
    /// else 64..=16777216; default from the rate).
    #[cfg_attr(feature = "serde", serde(default))]
    pub dup_window: Option<u32>,
}

impl DestChannelConfig {
    /// The slot count its headers have.
    pub fn slots(&self) -> u8 {
        self.n_slots.unwrap_or(self.m)
    }

    /// What classifies a packet into this channel (its identity across live
    /// changes): source AS, ingress neighbor, slot count.
    pub fn class(&self) -> (u32, u32, u8) {
        (self.src_asn, self.neighbor, self.slots())
    }
}

/// Ingress port → neighbor AS.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct PortNeighbor {
    /// Port id.
    pub port: u16,
    /// Neighbor ASN.
    pub asn: u32,
}

impl FairDestinationConfig {
    /// The settings of the per-packet path.
    pub fn settings(&self) -> DestConfig {
        DestConfig {
            codes: codes(self.protocol),
            framing: Framing::Ethernet,
            strip_ipv6: self.strip_ipv6,
            drop_nonconforming: self.drop_nonconforming,
            require_policy: self.require_policy,
            unknown_channel: self.unknown_channel,
        }
    }
}

impl Validate for FairDestinationConfig {
    fn validate(&self) -> Result<(), Invalid> {
        if let Some(r) = self.retention_s {
            if !(60..=2_592_000).contains(&r) {
                return Err(Invalid::at("retention_s", format!("{r} is not in 60..=2592000")));
            }
        }
        check_protocol(self.protocol)?;
        for (i, c) in self.channels.iter().enumerate() {
            check_dest_channel(c, &self.channels[..i])
                .map_err(|e| e.under(&format!("channels[{i}]")))?;
        }
        for (i, p) in self.port_neighbors.iter().enumerate() {
            if let Some(j) = self.port_neighbors[..i].iter().position(|o| o.port == p.port) {
                return Err(Invalid::at(
                    format!("port_neighbors[{i}].port"),
                    format!("port {} is listed in port_neighbors[{j}] too", p.port),
                ));
            }
        }
        Ok(())
    }
}

/// One destination channel, against the channels listed before it.
fn check_dest_channel(c: &DestChannelConfig, before: &[DestChannelConfig]) -> Result<(), Invalid> {
    if usize::from(c.m) > MAX_SLOTS {
        return Err(Invalid::at("m", format!("{} is not in 0..=127", c.m)));
    }
    let n = c.slots();
    if n < c.m || usize::from(n) > MAX_SLOTS {
        return Err(Invalid::at("n_slots", format!("{n} is not in m..=127 ({}..=127)", c.m)));
    }
    check_policy(c.cir_bps, c.cbs_bytes)?;
    if let Some(w) = c.dup_window {
        if w != 0 && !(64..=1 << 24).contains(&w) {
            return Err(Invalid::at(
                "dup_window",
                format!("{w} is not 0 (off) or in 64..=16777216"),
            ));
        }
    }
    if let Some(j) = before.iter().position(|o| o.class() == c.class()) {
        return Err(Invalid::at(
            "",
            format!("same (src_asn, neighbor, n_slots) = {:?} as channels[{j}]", c.class()),
        ));
    }
    if let Some(o) = before.iter().find(|o| o.src_prefix == c.src_prefix && o.src_asn != c.src_asn)
    {
        return Err(Invalid::at(
            "src_prefix",
            format!("{} is a prefix of AS {} in another channel", c.src_prefix, o.src_asn),
        ));
    }
    Ok(())
}

/// `suspicious-bit` (Procedure 4).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct SuspiciousBitConfig {
    /// "forward/drop/delay": `low-priority` (default), `forward` or `drop`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub action: SbAction,
    /// Traffic class of `low-priority` (default 1).
    #[cfg_attr(feature = "serde", serde(default = "defaults::low_class"))]
    pub low_class: u8,
    /// Port clearing: `paper` (default: any SB packet clears) or `require-flagged-source`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub port_clear: PortClear,
    /// Apply the action on the clearing branch too (paper: forward).
    #[cfg_attr(feature = "serde", serde(default))]
    pub action_on_clearing_branch: bool,
    /// Ports that lead to other ASes (below 64; only their packets run
    /// Procedure 4); default: all.
    #[cfg_attr(feature = "serde", serde(default))]
    pub external_ports: Option<Vec<u16>>,
    /// Lifetime of `suspicious_sources` entries, seconds (1..=31536000, default 24 h).
    #[cfg_attr(feature = "serde", serde(default = "defaults::sus_ttl_s"))]
    pub sus_ttl_s: u64,
    /// Source prefixes this AS acknowledged violations for.
    #[cfg_attr(feature = "serde", serde(default))]
    pub suspicious_sources: Vec<Prefix>,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    #[cfg_attr(feature = "serde", serde(default))]
    pub protocol: Option<u8>,
}

impl SuspiciousBitConfig {
    /// The settings of the per-packet path.
    pub fn settings(&self) -> SbConfig {
        let external_ports = match &self.external_ports {
            None => u64::MAX,
            Some(ports) => ports.iter().filter(|p| **p < 64).fold(0, |m, p| m | 1 << p),
        };
        SbConfig {
            codes: codes(self.protocol),
            framing: Framing::Ethernet,
            action: self.action,
            port_clear: self.port_clear,
            action_on_clearing_branch: self.action_on_clearing_branch,
            low_class: Class(self.low_class),
            external_ports,
            sus_ttl: self.sus_ttl_s,
        }
    }
}

impl Validate for SuspiciousBitConfig {
    fn validate(&self) -> Result<(), Invalid> {
        for (i, &p) in self.external_ports.iter().flatten().enumerate() {
            let at = format!("external_ports[{i}]");
            if p >= 64 {
                return Err(Invalid::at(at, format!("port {p} is not below 64")));
            }
            if self.external_ports.iter().flatten().take(i).any(|o| *o == p) {
                return Err(Invalid::at(at, format!("port {p} is listed twice")));
            }
        }
        if !(1..=31_536_000).contains(&self.sus_ttl_s) {
            let why = format!("{} is not in 1..=31536000 seconds", self.sus_ttl_s);
            return Err(Invalid::at("sus_ttl_s", why));
        }
        for (i, p) in self.suspicious_sources.iter().enumerate() {
            if self.suspicious_sources[..i].contains(p) {
                return Err(Invalid::at(
                    format!("suspicious_sources[{i}]"),
                    format!("{p} is listed twice"),
                ));
            }
        }
        check_protocol(self.protocol)
    }
}

/// The protocol codes of an optional `protocol` key.
fn codes(protocol: Option<u8>) -> Codes {
    protocol.map_or_else(Codes::default, |c| Codes { v4: c, v6: c })
}

/// Codes the stages read as headers of their own: IPv6 Hop-by-Hop,
/// Routing, Fragment and Destination Options, TCP, UDP, ICMPv6, No Next Header.
const TAKEN_CODES: [u8; 8] = [0, 6, 17, 43, 44, 58, 59, 60];

fn check_protocol(protocol: Option<u8>) -> Result<(), Invalid> {
    match protocol {
        Some(p) if TAKEN_CODES.contains(&p) => Err(Invalid::at(
            "protocol",
            format!(
                "{p} names a header the stages parse past (use 253 or 254, the experimental codes)"
            ),
        )),
        _ => Ok(()),
    }
}

/// A channel's sending policy: CIR of at least one byte per second and at
/// most [`MAX_CIR_BPS`], CBS of a full frame up to [`MAX_CBS_BYTES`].
fn check_policy(cir_bps: u64, cbs_bytes: u64) -> Result<(), Invalid> {
    if !(8..=MAX_CIR_BPS).contains(&cir_bps) {
        let why = format!("{cir_bps} bit/s is not in 8..={MAX_CIR_BPS} (1 byte/s .. 1 Tbit/s)");
        return Err(Invalid::at("cir_bps", why));
    }
    if !(MIN_CBS_BYTES..=MAX_CBS_BYTES).contains(&cbs_bytes) {
        let why = format!(
            "{cbs_bytes} is not in {MIN_CBS_BYTES}..={MAX_CBS_BYTES} bytes (a full frame at least)"
        );
        return Err(Invalid::at("cbs_bytes", why));
    }
    Ok(())
}
