//! Generic stages that need no protocol crate.
//!
//! | kind | job |
//! |---|---|
//! | `parse` | fills `Meta` l3/l4/proto offsets; put it first |
//! | `nop` | nothing (measures pipeline overhead) |
//! | `port-forward` | sends everything from a port to a fixed port (testpmd's io forwarding) |
//! | `ipv4-forward` | validates Ethernet/IPv4, decrements TTL, longest-prefix-match routing; packets to the router's own `local` addresses go to control |
//! | `classify` | sets the traffic class from the IPv4 source prefix |
//! | `icmp-echo` | answers ICMP echo requests to the router (a slow-path stage, [`crate::local`]) |

use serde::Deserialize;
use std::net::Ipv4Addr;

use std::any::Any;

use pipeline::{
    replace_whole, Batch, Class, DropReason, Element, Indices, Meta, Now, PacketBuf, Parse,
    ParseConfig, Reconfigured, Refused, Stage, Verdict, L3,
};

use crate::config::{typed, ConfigError};
use crate::registry::{BuildContext, Registry};

/// Registers the generic stages.
///
/// These stages keep no soft state: the parsed configuration is the stage
/// itself (its compiled tables), so a live change replaces it whole.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with(
        "parse",
        |_, p| Ok(typed::<ParseParams>(p)?.into_config()),
        |c, _| Ok(Box::new(Parse::new(c.clone()))),
    );
    r.stage_with(
        "nop",
        |_, p| {
            let _: Empty = typed(p)?;
            Ok(Nop)
        },
        |s, _| Ok(Box::new(s.clone())),
    );
    r.stage_with(
        "port-forward",
        |ctx, p| PortForward::new(ctx, typed(p)?),
        |s, _| Ok(Box::new(s.clone())),
    );
    r.stage_with(
        "ipv4-forward",
        |ctx, p| Ipv4Forward::new(ctx, typed(p)?),
        |s, _| Ok(Box::new(s.clone())),
    );
    r.stage_with("classify", |_, p| Classify::new(typed(p)?), |s, _| Ok(Box::new(s.clone())));
    r.stage_with(
        "icmp-echo",
        |_, p| crate::local::IcmpEcho::new(typed(p)?),
        |s, _| Ok(Box::new(s.clone())),
    );
}

/// `parse` parameters (defaults as `pipeline::ParseConfig::default()`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseParams {
    /// UDP destination ports that carry SCION.
    pub scion_ports: Option<Vec<u16>>,
    /// IP protocol of the FAIR header (0 disables FAIR).
    pub fair_protocol: Option<u8>,
    /// IP protocol of the FlowPolice shim (0 disables it).
    pub flowpolice_protocol: Option<u8>,
    /// Verify the IPv4 header checksum.
    pub verify_ipv4_checksum: Option<bool>,
    /// Drop IP fragments.
    pub drop_fragments: Option<bool>,
    /// Drop frames that are not IPv4/IPv6.
    pub drop_non_ip: Option<bool>,
}

impl ParseParams {
    fn into_config(self) -> ParseConfig {
        let d = ParseConfig::default();
        let proto = |p: Option<u8>, d: Option<u8>| match p {
            Some(0) => None,
            Some(p) => Some(p),
            None => d,
        };
        ParseConfig {
            scion_ports: self.scion_ports.unwrap_or(d.scion_ports),
            fair_protocol: proto(self.fair_protocol, d.fair_protocol),
            flowpolice_protocol: proto(self.flowpolice_protocol, d.flowpolice_protocol),
            verify_ipv4_checksum: self.verify_ipv4_checksum.unwrap_or(d.verify_ipv4_checksum),
            drop_fragments: self.drop_fragments.unwrap_or(d.drop_fragments),
            drop_non_ip: self.drop_non_ip.unwrap_or(d.drop_non_ip),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// Does nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nop;

impl Element for Nop {
    fn name(&self) -> &str {
        "nop"
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        replace_whole(self, config, "nop")
    }
}

impl<B: PacketBuf> Stage<B> for Nop {
    fn process(&mut self, _batch: &mut Batch<B>, _now: Now) {}

    fn reads_packets(&self) -> bool {
        false
    }
}

/// `port-forward` parameters: `map = [[in, out], ...]` or `port = out` for all.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortForwardConfig {
    /// Egress port for every packet not matched by `map`.
    pub port: Option<u16>,
    /// Pairs `[ingress, egress]`.
    #[serde(default)]
    pub map: Vec<[u16; 2]>,
}

/// Forwards by ingress port, keeping the class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortForward {
    table: Vec<Option<u16>>,
    default: Option<u16>,
}

impl PortForward {
    /// Checks the ports and builds the table.
    pub fn new(ctx: &BuildContext, c: PortForwardConfig) -> Result<Self, ConfigError> {
        if let Some(p) = c.port {
            ctx.check_port("port", p)?;
        }
        let max = c.map.iter().map(|m| m[0]).max().map_or(0, |m| usize::from(m) + 1);
        let mut table = vec![None; max];
        for (i, [from, to]) in c.map.iter().enumerate() {
            ctx.check_port(&format!("map[{i}][1]"), *to)?;
            table[usize::from(*from)] = Some(*to);
        }
        if c.port.is_none() && c.map.is_empty() {
            return Err(ConfigError::at("port", "needs `port` or `map`"));
        }
        Ok(PortForward { table, default: c.port })
    }

    /// The egress port for packets from `ingress`.
    #[inline]
    fn lookup(&self, ingress: u16) -> Option<u16> {
        self.table.get(usize::from(ingress)).copied().flatten().or(self.default)
    }
}

impl Element for PortForward {
    fn name(&self) -> &str {
        "port-forward"
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        replace_whole(self, config, "port-forward")
    }
}

impl<B: PacketBuf> Stage<B> for PortForward {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        // A burst comes from one RX queue, so it normally has one ingress
        // port: route the whole burst with one lookup.
        if let Some(ingress) = batch.ingress_port() {
            match self.lookup(ingress) {
                Some(out) => batch.forward_all(out),
                None => {
                    for i in batch.live() {
                        batch.drop_packet(i, DropReason::NoRoute);
                    }
                }
            }
            return;
        }
        // Mixed or unknown ingress ports: look the egress up once per run of
        // equal ingress ports.
        let live = batch.live_mask();
        let mut unrouted = 0u32;
        let (mut last_in, mut out) = (u32::MAX, None);
        for (i, m) in batch.metas_mut().iter_mut().enumerate() {
            if (live >> i) & 1 == 0 {
                continue;
            }
            if u32::from(m.port) != last_in {
                last_in = u32::from(m.port);
                out = self.lookup(m.port);
            }
            match (out, m.verdict) {
                (Some(p), Verdict::Forward { class, .. }) => {
                    m.verdict = Verdict::Forward { port: p, class }
                }
                (None, _) => unrouted |= 1 << i,
                _ => {}
            }
        }
        for i in Indices::of(unrouted) {
            batch.drop_packet(i, DropReason::NoRoute);
        }
    }

    /// Routes by the ingress port in the metadata alone.
    fn reads_packets(&self) -> bool {
        false
    }
}

/// An IPv4 prefix `a.b.c.d/len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Network address (host bits cleared).
    pub addr: u32,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// Parses `a.b.c.d/len`; host bits must be zero (`10.0.0.1/8` is a
    /// typo for an address or for `10.0.0.0/8`, not a prefix).
    pub fn parse(s: &str) -> Result<Prefix, &'static str> {
        let (a, l) = s.split_once('/').ok_or("is not an IPv4 prefix a.b.c.d/len")?;
        let addr: Ipv4Addr = a.parse().map_err(|_| "has no valid IPv4 address")?;
        let len: u8 = l.parse().map_err(|_| "has no valid prefix length")?;
        if len > 32 {
            return Err("has a prefix length above 32");
        }
        let addr = u32::from(addr);
        if addr & !Self::mask(len) != 0 {
            return Err("has host bits set");
        }
        Ok(Prefix { addr, len })
    }

    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        }
    }

    /// Whether `a` lies in the prefix.
    #[inline]
    pub fn contains(&self, a: u32) -> bool {
        a & Self::mask(self.len) == self.addr
    }
}

fn prefix(key: &str, s: &str) -> Result<Prefix, ConfigError> {
    Prefix::parse(s).map_err(|why| ConfigError::at(key, format!("`{s}` {why}")))
}

/// A route of `ipv4-forward`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Destination prefix.
    pub prefix: String,
    /// Egress port.
    pub port: u16,
    /// Rewrite the destination MAC to this next hop (`aa:bb:...`).
    pub next_hop_mac: Option<String>,
}

/// `ipv4-forward` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ipv4ForwardConfig {
    /// Routes (longest prefix wins).
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Verify the IPv4 header checksum.
    #[serde(default = "yes")]
    pub verify_checksum: bool,
    /// Decrement the TTL (dropping packets whose TTL would reach 0).
    #[serde(default = "yes")]
    pub decrement_ttl: bool,
    /// The router's own addresses: packets to them go to control (the
    /// slow path, `[slow_path]`) instead of being routed, whatever their TTL.
    #[serde(default)]
    pub local: Vec<Ipv4Addr>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    /// The prefix's network address and mask (precomputed: matched per packet).
    addr: u32,
    mask: u32,
    port: u16,
    mac: Option<[u8; 6]>,
}

/// A minimal IPv4 router: header validation, TTL, longest-prefix match.
///
/// Drops with `Truncated`, `Malformed` (version, IHL, total length, fragments
/// are fine), `BadChecksum`, `HopLimit`, `NoRoute`, `WrongProtocol` (non-IPv4).
/// The route list is scanned linearly, longest prefix first: meant for the
/// handful of routes of a border router's example, not for a full table.
///
/// A burst whose packets are all live, with at most eight routes, is
/// decided in one pass over the frames (untagged IPv4 with a 20-byte header
/// and a route), which collects one packet mask per route; the rest take the
/// general checks one by one. When one route takes the whole burst, the
/// batch learns its common egress port, so the runtime sends it without a
/// scan of the verdicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Forward {
    routes: Vec<Route>,
    verify_checksum: bool,
    decrement_ttl: bool,
    local: Vec<u32>,
}

impl Ipv4Forward {
    /// Checks routes and ports.
    pub fn new(ctx: &BuildContext, c: Ipv4ForwardConfig) -> Result<Self, ConfigError> {
        let mut routes = Vec::with_capacity(c.routes.len());
        for (i, r) in c.routes.iter().enumerate() {
            let key = format!("routes[{i}]");
            ctx.check_port(&format!("{key}.port"), r.port)?;
            let mac = match &r.next_hop_mac {
                Some(m) => Some(crate::templates::parse_mac(m).ok_or_else(|| {
                    ConfigError::at(format!("{key}.next_hop_mac"), "not a MAC address")
                })?),
                None => None,
            };
            let p = prefix(&format!("{key}.prefix"), &r.prefix)?;
            routes.push(Route { addr: p.addr, mask: Prefix::mask(p.len), port: r.port, mac });
        }
        // Longest prefix first (a longer mask is a larger number).
        routes.sort_by_key(|r| std::cmp::Reverse(r.mask));
        Ok(Ipv4Forward {
            routes,
            verify_checksum: c.verify_checksum,
            decrement_ttl: c.decrement_ttl,
            local: c.local.iter().map(|a| u32::from(*a)).collect(),
        })
    }

    /// Whether `dst` is one of the router's own addresses.
    #[inline(always)]
    fn is_local(&self, dst: u32) -> bool {
        !self.local.is_empty() && self.local.contains(&dst)
    }

    #[inline(always)]
    fn check(&self, d: &[u8]) -> Result<(usize, u32), DropReason> {
        // The common case first: untagged IPv4 with a 20-byte header, read
        // through fixed-size arrays (no per-field bounds checks; the checksum
        // unrolls).
        // Same checks in the same order as the general path below.
        let eth = d.first_chunk::<14>();
        let ip = d.get(14..).and_then(<[u8]>::first_chunk::<20>);
        if let (Some(eth), Some(ip)) = (eth, ip) {
            if eth[12..14] == [0x08, 0x00] && ip[0] == 0x45 {
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                if total < 20 {
                    return Err(DropReason::Malformed);
                }
                if d.len() - 14 < total {
                    return Err(DropReason::Truncated);
                }
                if self.verify_checksum && !pipeline::ipv4_header_checksum_ok(ip) {
                    return Err(DropReason::BadChecksum);
                }
                let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
                if self.decrement_ttl && ip[8] <= 1 && !self.is_local(dst) {
                    return Err(DropReason::HopLimit);
                }
                return Ok((20, dst));
            }
        }
        self.check_general(d)
    }

    /// Every other frame (short, VLAN-tagged, IPv4 options, not IPv4).
    #[inline(never)]
    fn check_general(&self, d: &[u8]) -> Result<(usize, u32), DropReason> {
        if d.len() < 14 {
            return Err(DropReason::Truncated);
        }
        if d[12..14] != [0x08, 0x00] {
            return Err(DropReason::WrongProtocol);
        }
        let ip = &d[14..];
        if ip.len() < 20 {
            return Err(DropReason::Truncated);
        }
        if ip[0] >> 4 != 4 {
            return Err(DropReason::Malformed);
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ihl < 20 || total < ihl {
            return Err(DropReason::Malformed);
        }
        if ip.len() < total || ip.len() < ihl {
            return Err(DropReason::Truncated);
        }
        if self.verify_checksum && crate::templates::checksum(0, &ip[..ihl]) != 0 {
            return Err(DropReason::BadChecksum);
        }
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        if self.decrement_ttl && ip[8] <= 1 && !self.is_local(dst) {
            return Err(DropReason::HopLimit);
        }
        Ok((ihl, dst))
    }
}

impl Element for Ipv4Forward {
    fn name(&self) -> &str {
        "ipv4-forward"
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        replace_whole(self, config, "ipv4-forward")
    }
}

/// Routes of which a whole burst's packets are sorted by [`Ipv4Forward::fast_one`]
/// (one mask per route); a table with more routes takes the per-packet path.
const FAST_ROUTES: usize = 8;

/// What [`Ipv4Forward::fast_one`] reads of the first route (the longest
/// prefix), taken out of the table once per burst: its prefix as
/// little-endian words (the destination address is compared as loaded,
/// without a byte swap), its next-hop MAC, and whether any address is the
/// router's own.
struct FirstRoute {
    mask_le: u32,
    addr_le: u32,
    mac: Option<[u8; 6]>,
    local: bool,
}

impl Ipv4Forward {
    /// The whole decision for an untagged IPv4 frame with a 20-byte header
    /// that is forwarded: returns the index of its route after rewriting
    /// TTL, checksum and next-hop MAC. Every other outcome (drop, control,
    /// another layout) returns `None` with the frame untouched, and
    /// [`one`](Self::one) then decides it with the general checks.
    /// `VERIFY` and `TTL` are the configuration's `verify_checksum` and
    /// `decrement_ttl`, as constants for the burst loop. `CHECKED`: the
    /// parse stage ran just before and checked every IPv4 header it
    /// recorded in the metadata `m` (`Batch::ipv4_verified`), so that a
    /// frame it recorded as IPv4 at byte 14, with a 20-byte header, needs
    /// no length or checksum check here. `first` is the first route
    /// (longest prefix) read once per burst.
    #[inline(always)]
    fn fast_one<const VERIFY: bool, const TTL: bool, const CHECKED: bool>(
        &self,
        d: &mut [u8],
        m: &Meta,
        first: &FirstRoute,
    ) -> Option<usize> {
        let len = d.len();
        let h = d.first_chunk_mut::<34>()?;
        if CHECKED {
            // Untagged (IPv4 at 14) with version 4 and a 20-byte header.
            if m.l3 != L3::Ipv4 || m.l3_off != 14 || h[14] != 0x45 {
                return None;
            }
        } else {
            // EtherType, version and IHL, ToS, total length and ID in one
            // little-endian load: IPv4 (0x0800) with a 20-byte header (0x45).
            let w = u64::from_le_bytes(*h[12..].first_chunk::<8>()?);
            if w & 0x00ff_ffff != 0x0045_0008 {
                return None;
            }
            // 20 <= total length <= the bytes after Ethernet (len >= 34
            // here), in one compare: a total below 20 wraps to a huge
            // distance.
            let total = usize::from(((w >> 32) as u16).swap_bytes());
            if total.wrapping_sub(20) > len - 34 {
                return None;
            }
            if VERIFY && !pipeline::ipv4_header_checksum_ok(h[14..].first_chunk::<20>()?) {
                return None;
            }
        }
        let dst_le = u32::from_le_bytes(*h[30..].first_chunk::<4>()?);
        if (TTL && h[22] <= 1) || (first.local && self.is_local(dst_le.swap_bytes())) {
            return None;
        }
        // The first route on its own: its MAC is at hand, and the route
        // index needs no second look-up (most bursts take this route).
        if dst_le & first.mask_le == first.addr_le {
            rewrite::<TTL>(h, first.mac);
            return Some(0);
        }
        let dst = dst_le.swap_bytes();
        let r = self.routes.iter().position(|r| dst & r.mask == r.addr)?;
        rewrite::<TTL>(h, self.routes[r].mac);
        Some(r)
    }

    /// [`fast_one`](Self::fast_one) over every packet of `batch`: the
    /// packets it forwarded, one mask per route, and the others.
    #[inline(always)]
    fn sort_burst<const VERIFY: bool, const TTL: bool, const CHECKED: bool, B: PacketBuf>(
        &self,
        batch: &mut Batch<B>,
    ) -> ([u32; FAST_ROUTES], u32) {
        let mut masks = [0u32; FAST_ROUTES];
        let Some(first) = self.routes.first() else {
            // No route: every packet is dropped by the general checks.
            return (masks, batch.live_mask());
        };
        let first = FirstRoute {
            mask_le: first.mask.swap_bytes(),
            addr_le: first.addr.swap_bytes(),
            mac: first.mac,
            local: !self.local.is_empty(),
        };
        // The first route's mask in a register: most bursts take one route.
        let (mut m0, mut rest) = (0u32, 0u32);
        let (bufs, metas) = batch.bufs_mut_metas();
        for (k, (b, m)) in bufs.iter_mut().zip(metas).enumerate() {
            let bit = 1 << k;
            match self.fast_one::<VERIFY, TTL, CHECKED>(b.data_mut(), m, &first) {
                Some(0) => m0 |= bit,
                Some(r) => masks[r & (FAST_ROUTES - 1)] |= bit,
                None => rest |= bit,
            }
        }
        masks[0] |= m0;
        (masks, rest)
    }

    /// Packet `i` through the checks (any layout, any outcome). `GENERAL`
    /// goes straight to [`check_general`](Self::check_general): for a frame
    /// [`fast_one`](Self::fast_one) already turned down, the common-layout
    /// test of [`check`](Self::check) would be made a second time.
    #[inline(always)]
    fn one<const GENERAL: bool, B: PacketBuf>(&self, batch: &mut Batch<B>, i: usize) {
        let d = batch.data(i);
        let checked = if GENERAL { self.check_general(d) } else { self.check(d) };
        let dst = match checked {
            Ok((_, dst)) => dst,
            Err(r) => {
                batch.drop_packet(i, r);
                return;
            }
        };
        if self.is_local(dst) {
            batch.to_control(i);
            return;
        }
        let Some(route) = self.routes.iter().find(|r| dst & r.mask == r.addr) else {
            batch.drop_packet(i, DropReason::NoRoute);
            return;
        };
        let class = batch.meta(i).class().unwrap_or(Class::BEST_EFFORT);
        let d = batch.buf_mut(i).data_mut();
        if self.decrement_ttl {
            // `check` saw at least 34 bytes.
            if let Some(h) = d.first_chunk_mut::<34>() {
                decrement_ttl(h);
            }
        }
        if let Some(mac) = route.mac {
            d[0..6].copy_from_slice(&mac);
        }
        batch.forward(i, route.port, class);
    }
}

/// The rewrite of a forwarded frame: TTL (when `TTL`) and next-hop MAC.
#[inline(always)]
fn rewrite<const TTL: bool>(h: &mut [u8; 34], mac: Option<[u8; 6]>) {
    if TTL {
        decrement_ttl(h);
    }
    if let Some(mac) = mac {
        h[0..6].copy_from_slice(&mac);
    }
}

/// Decrements the TTL of the IPv4 header at byte 14 and patches its
/// checksum (RFC 1624 incremental update: TTL is the high byte of its word).
#[inline(always)]
fn decrement_ttl(h: &mut [u8; 34]) {
    h[22] -= 1;
    let old = u16::from_be_bytes([h[24], h[25]]);
    h[24..26].copy_from_slice(&packet::checksum::ttl_decremented(old).to_be_bytes());
}

impl<B: PacketBuf> Stage<B> for Ipv4Forward {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        if !batch.all_live() || self.routes.len() > FAST_ROUTES {
            for i in batch.live() {
                self.one::<false, B>(batch, i);
            }
            return;
        }
        // A whole burst: one pass decides and rewrites the common frames
        // into per-route masks; the verdicts are then set per route (one
        // route for the whole burst gives the batch its common egress).
        // Right after the parse stage, the IPv4 headers it recorded skip
        // the length and checksum checks.
        let (masks, rest) = match (batch.ipv4_verified(), self.verify_checksum, self.decrement_ttl)
        {
            (true, _, true) => self.sort_burst::<false, true, true, B>(batch),
            (true, _, false) => self.sort_burst::<false, false, true, B>(batch),
            (false, true, true) => self.sort_burst::<true, true, false, B>(batch),
            (false, true, false) => self.sort_burst::<true, false, false, B>(batch),
            (false, false, true) => self.sort_burst::<false, true, false, B>(batch),
            (false, false, false) => self.sort_burst::<false, false, false, B>(batch),
        };
        for (r, &m) in masks.iter().enumerate().take(self.routes.len()) {
            if m != 0 {
                batch.forward_some(m, self.routes[r].port);
            }
        }
        for i in Indices::of(rest) {
            self.one::<true, B>(batch, i);
        }
    }
}

/// A rule of `classify`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRule {
    /// IPv4 source prefix.
    pub src: String,
    /// Class for matching packets.
    pub class: u8,
}

/// `classify` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyConfig {
    /// Rules, first match wins.
    pub rules: Vec<ClassRule>,
    /// Class of packets no rule matches.
    #[serde(default)]
    pub default: u8,
}

/// Sets the class of IPv4 packets from their source prefix (first match wins).
/// Non-IPv4 packets get the default class; this stage never drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classify {
    rules: Vec<(Prefix, Class)>,
    default: Class,
}

impl Classify {
    /// Parses the rules.
    pub fn new(c: ClassifyConfig) -> Result<Self, ConfigError> {
        let mut rules = Vec::with_capacity(c.rules.len());
        for (i, r) in c.rules.iter().enumerate() {
            rules.push((prefix(&format!("rules[{i}].src"), &r.src)?, Class(r.class)));
        }
        Ok(Classify { rules, default: Class(c.default) })
    }
}

impl Element for Classify {
    fn name(&self) -> &str {
        "classify"
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        replace_whole(self, config, "classify")
    }
}

impl<B: PacketBuf> Stage<B> for Classify {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let d = batch.data(i);
            let class = if d.len() >= 34 && d[12..14] == [0x08, 0x00] {
                let src = u32::from_be_bytes([d[26], d[27], d[28], d[29]]);
                self.rules.iter().find(|(p, _)| p.contains(src)).map_or(self.default, |r| r.1)
            } else {
                self.default
            };
            batch.set_class(i, class);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parse_params_map_onto_config() {
        let t: toml::Table = toml::from_str("fair_protocol = 0\nscion_ports = [50000]").unwrap();
        let c = typed::<ParseParams>(&t).unwrap().into_config();
        assert_eq!(c.fair_protocol, None);
        assert_eq!(c.scion_ports, vec![50000]);
        assert_eq!(c.flowpolice_protocol, ParseConfig::default().flowpolice_protocol);
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        assert!(Registry::<Vec<u8>>::with::<()>().build_stage("parse", &ctx, &t).is_ok());
    }

    use pipeline::{Pipeline, Verdict};

    fn ctx() -> BuildContext {
        BuildContext { worker: 0, workers: 1, ports: vec![0, 1, 2] }
    }

    fn frame(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut t = toml::Table::new();
        t.insert("src".into(), toml::Value::String(Ipv4Addr::from(src).to_string()));
        t.insert("dst".into(), toml::Value::String(Ipv4Addr::from(dst).to_string()));
        t.insert("ttl".into(), toml::Value::Integer(i64::from(ttl)));
        let ctx = crate::templates::TemplateCtx::new(1, [0; 4]);
        crate::templates::Templates::with::<()>().build("ipv4-udp", &t, &ctx).unwrap().remove(0)
    }

    fn registry() -> Registry<Vec<u8>> {
        Registry::with::<()>()
    }

    #[test]
    fn ipv4_forward_routes_and_fixes_checksum() {
        let params: toml::Table = toml::from_str(
            r#"routes = [{ prefix = "10.0.0.0/8", port = 1 }, { prefix = "10.2.0.0/16", port = 2, next_hop_mac = "02:aa:bb:cc:dd:ee" }]"#,
        )
        .unwrap();
        let mut p = Pipeline::new();
        p.push(registry().build_stage("ipv4-forward", &ctx(), &params).unwrap());
        let mut b = Batch::new();
        b.push(frame([10, 1, 0, 1], [10, 2, 0, 9], 64), 0).unwrap();
        b.push(frame([10, 1, 0, 1], [10, 3, 0, 9], 64), 0).unwrap();
        b.push(frame([10, 1, 0, 1], [192, 0, 2, 1], 64), 0).unwrap();
        b.push(frame([10, 1, 0, 1], [10, 3, 0, 9], 1), 0).unwrap();
        let mut bad = frame([10, 1, 0, 1], [10, 3, 0, 9], 64);
        bad[24] ^= 1;
        b.push(bad, 0).unwrap();
        b.push(vec![0; 20], 0).unwrap();
        p.run(&mut b, Now::default());
        assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 2, class: Class(0) });
        assert_eq!(&b.data(0)[0..6], &[2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]);
        assert_eq!(b.data(0)[22], 63);
        assert_eq!(crate::templates::checksum(0, &b.data(0)[14..34]), 0);
        assert_eq!(b.meta(1).verdict, Verdict::Forward { port: 1, class: Class(0) });
        assert_eq!(b.meta(2).verdict, Verdict::Drop(DropReason::NoRoute));
        assert_eq!(b.meta(3).verdict, Verdict::Drop(DropReason::HopLimit));
        assert_eq!(b.meta(4).verdict, Verdict::Drop(DropReason::BadChecksum));
        assert_eq!(b.meta(5).verdict, Verdict::Drop(DropReason::WrongProtocol));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// The fixed-array fast path decides exactly like the general checks.
        #[test]
        fn ipv4_forward_fast_check_matches_general(
            edits in proptest::collection::vec((0usize..40, proptest::prelude::any::<u8>()), 0..3),
            cut in 0usize..40,
            verify in proptest::prelude::any::<bool>(),
            ttl in proptest::prelude::any::<bool>(),
        ) {
            let mut f = frame([10, 1, 0, 1], [10, 2, 0, 9], 64);
            for (at, v) in edits {
                f[at] = v;
            }
            f.truncate(f.len().saturating_sub(cut));
            let fwd = Ipv4Forward { routes: Vec::new(), verify_checksum: verify, decrement_ttl: ttl, local: Vec::new() };
            proptest::prop_assert_eq!(fwd.check(&f), fwd.check_general(&f));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// A whole burst (the per-route fast pass) ends exactly as the same
        /// packets sent one at a time: bytes, verdicts and counters.
        #[test]
        fn ipv4_forward_burst_matches_one_at_a_time(
            pkts in proptest::collection::vec(
                (0u8..4, 0u8..3, proptest::collection::vec((0usize..40, proptest::prelude::any::<u8>()), 0..2), 0usize..8),
                1..=32,
            ),
            verify in proptest::prelude::any::<bool>(),
            ttl in proptest::prelude::any::<bool>(),
            local in proptest::prelude::any::<bool>(),
            table in 0usize..4,
        ) {
            // The first (longest) route with and without a next-hop MAC,
            // later routes, a default route, no route at all.
            let routes = [
                r#"routes = [{ prefix = "10.0.0.0/8", port = 1 }, { prefix = "10.2.0.0/16", port = 2, next_hop_mac = "02:aa:bb:cc:dd:ee" }]"#,
                r#"routes = [{ prefix = "0.0.0.0/0", port = 1, next_hop_mac = "02:aa:bb:cc:dd:ee" }, { prefix = "10.2.0.0/16", port = 2 }]"#,
                r#"routes = [{ prefix = "10.0.0.0/8", port = 2 }]"#,
                "routes = []",
            ];
            let mut params: toml::Table = toml::from_str(routes[table]).unwrap();
            params.insert("verify_checksum".into(), toml::Value::Boolean(verify));
            params.insert("decrement_ttl".into(), toml::Value::Boolean(ttl));
            if local {
                params.insert("local".into(), toml::Value::Array(vec![toml::Value::String("10.2.0.7".into())]));
            }
            let frames: Vec<Vec<u8>> = pkts
                .iter()
                .map(|(net, t, edits, cut)| {
                    let dst = [[10, 2, 0, 7], [10, 3, 0, 9], [192, 0, 2, 1], [10, 2, 9, 9]][usize::from(*net)];
                    let mut f = frame([10, 1, 0, 1], dst, [64, 1, 0][usize::from(*t)]);
                    for &(at, v) in edits {
                        f[at] = v;
                    }
                    f.truncate(f.len().saturating_sub(*cut));
                    f
                })
                .collect();
            let stage = || {
                let mut p = Pipeline::new();
                p.push(registry().build_stage("ipv4-forward", &ctx(), &params).unwrap());
                p
            };
            let b = burst_matches_one_at_a_time(stage, &frames)?;
            let ports: Vec<_> = b.metas().iter().filter_map(|m| match m.verdict {
                Verdict::Forward { port, .. } => Some(port),
                _ => None,
            }).collect();
            // A common egress, which the runtime reads when every packet is
            // live, is every packet's.
            if let (true, Some(port)) = (b.all_live(), b.egress_port()) {
                proptest::prop_assert!(ports.iter().all(|p| *p == port));
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// After the parse stage, whose fully checked packets skip the
        /// layout, length and checksum checks, a whole burst ends exactly as
        /// the same packets parsed and forwarded one at a time.
        #[test]
        fn ipv4_forward_after_parse_matches_one_at_a_time(
            pkts in proptest::collection::vec(
                (0u8..4, 0u8..3, proptest::option::weighted(0.03, (0usize..40, proptest::prelude::any::<u8>()))),
                1..=32,
            ),
            parse_verify in proptest::prelude::any::<bool>(),
            verify in proptest::prelude::any::<bool>(),
            ttl in proptest::prelude::any::<bool>(),
            local in proptest::prelude::any::<bool>(),
        ) {
            let mut params: toml::Table = toml::from_str(
                r#"routes = [{ prefix = "10.2.0.0/16", port = 2, next_hop_mac = "02:aa:bb:cc:dd:ee" }, { prefix = "10.0.0.0/8", port = 1 }]"#,
            ).unwrap();
            params.insert("verify_checksum".into(), toml::Value::Boolean(verify));
            params.insert("decrement_ttl".into(), toml::Value::Boolean(ttl));
            if local {
                params.insert("local".into(), toml::Value::Array(vec![toml::Value::String("10.2.0.7".into())]));
            }
            let mut parse: toml::Table = toml::Table::new();
            parse.insert("verify_ipv4_checksum".into(), toml::Value::Boolean(parse_verify));
            let frames: Vec<Vec<u8>> = pkts
                .iter()
                .map(|(net, t, edit)| {
                    let dst = [[10, 2, 0, 7], [10, 3, 0, 9], [192, 0, 2, 1], [10, 2, 9, 9]][usize::from(*net)];
                    let mut f = frame([10, 1, 0, 1], dst, [64, 1, 0][usize::from(*t)]);
                    if let Some((at, v)) = edit {
                        f[*at] = *v;
                    }
                    f
                })
                .collect();
            let stages = || {
                let mut p = Pipeline::new();
                p.push(registry().build_stage("parse", &ctx(), &parse).unwrap());
                p.push(registry().build_stage("ipv4-forward", &ctx(), &params).unwrap());
                p
            };
            burst_matches_one_at_a_time(stages, &frames)?;
        }
    }

    /// Runs `frames` through the pipeline `stages` builds, once as one
    /// burst and once one at a time (each behind a packet already dropped,
    /// which keeps the batch off the whole-burst passes), and checks that
    /// both end alike: bytes, metadata and counters. Returns the burst.
    fn burst_matches_one_at_a_time(
        stages: impl Fn() -> Pipeline<Vec<u8>>,
        frames: &[Vec<u8>],
    ) -> Result<Batch<Vec<u8>>, proptest::test_runner::TestCaseError> {
        let (mut whole, mut single) = (stages(), stages());
        let mut b = Batch::new();
        for f in frames {
            b.push(f.clone(), 0).unwrap();
        }
        whole.run(&mut b, Now::default());
        for (i, f) in frames.iter().enumerate() {
            let mut one = Batch::new();
            one.push(f.clone(), 0).unwrap();
            one.push(f.clone(), 0).unwrap();
            one.drop_packet(0, DropReason::Malformed);
            single.run(&mut one, Now::default());
            proptest::prop_assert_eq!(b.data(i), one.data(1));
            proptest::prop_assert_eq!(b.meta(i), one.meta(1));
        }
        let counts = |p: &Pipeline<Vec<u8>>| format!("{:?}", p.counters().collect::<Vec<_>>());
        proptest::prop_assert_eq!(counts(&whole), counts(&single));
        Ok(b)
    }

    #[test]
    fn ipv4_forward_gives_a_one_route_burst_its_egress() {
        let params: toml::Table =
            toml::from_str(r#"routes = [{ prefix = "10.2.0.0/16", port = 2 }]"#).unwrap();
        let mut p = Pipeline::new();
        p.push(registry().build_stage("ipv4-forward", &ctx(), &params).unwrap());
        let mut b = Batch::new();
        for k in 0..32 {
            b.push(frame([10, 1, 0, 1], [10, 2, 0, k], 64), 0).unwrap();
        }
        p.run(&mut b, Now::default());
        assert!(b.all_live());
        assert_eq!(b.egress_port(), Some(2));
        for i in 0..32 {
            assert_eq!(b.data(i)[22], 63);
            assert_eq!(crate::templates::checksum(0, &b.data(i)[14..34]), 0);
        }
    }

    #[test]
    fn classify_and_port_forward() {
        let r = registry();
        let mut p = Pipeline::new();
        let c: toml::Table = toml::from_str(
            r#"rules = [{ src = "10.1.0.0/16", class = 3 }]
default = 1"#,
        )
        .unwrap();
        p.push(r.build_stage("classify", &ctx(), &c).unwrap());
        let f: toml::Table = toml::from_str("map = [[0, 2]]\nport = 1").unwrap();
        p.push(r.build_stage("port-forward", &ctx(), &f).unwrap());
        let mut b = Batch::new();
        b.push(frame([10, 1, 0, 1], [1, 1, 1, 1], 9), 0).unwrap();
        b.push(frame([10, 9, 0, 1], [1, 1, 1, 1], 9), 1).unwrap();
        p.run(&mut b, Now::default());
        assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 2, class: Class(3) });
        assert_eq!(b.meta(1).verdict, Verdict::Forward { port: 1, class: Class(1) });
    }

    #[test]
    fn port_forward_routes_a_one_port_burst_at_once() {
        let r = registry();
        let f: toml::Table = toml::from_str("map = [[0, 2]]").unwrap();
        let mut p = Pipeline::new();
        p.push(r.build_stage("port-forward", &ctx(), &f).unwrap());
        // One ingress port: the whole burst is forwarded, classes kept, and
        // the batch knows its common egress port.
        let mut b = Batch::new();
        for k in 0..3 {
            b.push(frame([10, 1, 0, k], [1, 1, 1, 1], 9), 0).unwrap();
        }
        b.set_class(1, Class(4));
        p.run(&mut b, Now::default());
        assert_eq!(b.egress_port(), Some(2));
        assert!(b.all_live());
        assert_eq!(b.meta(1).verdict, Verdict::Forward { port: 2, class: Class(4) });
        assert_eq!(b.meta(2).verdict, Verdict::Forward { port: 2, class: Class(0) });
        // An ingress port without a route: every packet is dropped and counted.
        let mut b = Batch::new();
        for k in 0..3 {
            b.push(frame([10, 1, 0, k], [1, 1, 1, 1], 9), 1).unwrap();
        }
        p.run(&mut b, Now::default());
        assert_eq!(b.live_mask(), 0);
        assert_eq!(b.meta(0).verdict, Verdict::Drop(DropReason::NoRoute));
        let (_, c) = p.counters().next().unwrap();
        assert_eq!(c.drops.get(DropReason::NoRoute), 3);
    }

    #[test]
    fn bad_params_are_config_errors() {
        let r = registry();
        let t: toml::Table =
            toml::from_str(r#"routes = [{ prefix = "10.0.0.0/33", port = 1 }]"#).unwrap();
        assert_eq!(
            r.build_stage("ipv4-forward", &ctx(), &t).err().unwrap().key,
            "routes[0].prefix"
        );
        let t: toml::Table =
            toml::from_str(r#"routes = [{ prefix = "10.0.0.0/8", port = 7 }]"#).unwrap();
        assert_eq!(r.build_stage("ipv4-forward", &ctx(), &t).err().unwrap().key, "routes[0].port");
        let e = r.build_stage("no-such", &ctx(), &toml::Table::new()).err().unwrap();
        assert!(e.reason.contains("unknown stage kind"), "{e}");
        let t: toml::Table = toml::from_str("x = 1").unwrap();
        assert!(r.build_stage("nop", &ctx(), &t).is_err());
    }
}
