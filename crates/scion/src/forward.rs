//! Per-hop processing of a standard SCION path: verify, update SegID, advance,
//! choose the egress interface and port.

use mac::Block;
use packet::scion::path::{HOP_LEN, INFO_LEN, INF_FLAG_CONS_DIR, INF_FLAG_PEER, META_LEN};
use packet::scion::{curr_segment_bounds, meta_word_valid, path_len_of, ScionPath};
use packet::Ia;
use pipeline::DropReason;

use crate::config::ScionForwardConfig;
use crate::epic::Freshness;
use crate::hopmac::{chain_seg_id, hop_input, is_expired, mac_eq, ForwardingKey, HopMac};
use crate::interfaces::{InterfaceTable, INTERNAL_IF};

/// Where a forwarded packet leaves the router: the egress-interface decision
/// of its hop field (interface 0 meaning the AS itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Out of external interface `ifid` on `port`.
    Interface {
        /// Egress interface ID.
        ifid: u16,
        /// Port bound to it.
        port: u16,
    },
    /// The path ends here: deliver inside the AS on the internal port.
    Local {
        /// The internal port.
        port: u16,
    },
}

impl Exit {
    /// The port to send on.
    pub fn port(&self) -> u16 {
        match *self {
            Exit::Interface { port, .. } | Exit::Local { port } => port,
        }
    }
}

/// Result of forwarding one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// CurrHF on arrival (the hop field of this AS that was verified first;
    /// EPIC-Z verifies its HVF).
    pub hop: u8,
    /// Whether a segment cross-over happened (two hop fields processed).
    pub xover: bool,
    /// At a cross-over, the full 16-byte MAC of the second hop field (the
    /// one whose MAC [`Forwarder::finish`] computes itself): EPIC-HP keys
    /// its HVF with the MAC of the last hop field verified.
    pub xover_mac: Option<Block>,
    /// Where it leaves.
    pub exit: Exit,
}

/// Whether the current hop is one of the two peering hop fields of a peering
/// path (last of segment 0 or first of segment 1, with the P flag set): their
/// SegID is not chained and no cross-over happens between them.
pub fn is_peering_hop<T: AsRef<[u8]>>(p: &ScionPath<T>) -> bool {
    if !p.current_info().peering() {
        return false;
    }
    let [s0, s1, s2] = p.seg_lens();
    if s0 == 0 || s1 == 0 || s2 != 0 {
        return false;
    }
    let hf = p.curr_hf();
    hf + 1 == s0 || hf == s0
}

/// The SegID the current hop's MAC is computed over: β_i. In construction
/// direction the field holds β_i; against it, β_{i+1} = β_i ⊕ σ_i[0:2], so β_i
/// is recovered with the hop's own MAC. Peering hops use the field as is.
#[inline]
fn beta_for_mac<T: AsRef<[u8]>>(p: &ScionPath<T>, peering: bool) -> u16 {
    let info = p.current_info();
    let seg = info.seg_id();
    if info.cons_dir() || peering {
        seg
    } else {
        chain_seg_id(seg, &p.current_hop().mac())
    }
}

/// The MAC input of the current hop (after `ScionPath::new_checked`).
#[inline]
pub fn current_input<T: AsRef<[u8]>>(p: &ScionPath<T>) -> Block {
    let peering = is_peering_hop(p);
    hop_input(beta_for_mac(p, peering), &p.current_info(), &p.current_hop())
}

/// Outcome of [`process_hop`] for the current hop field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopOutcome {
    /// Interface the packet enters this AS through (traversal direction).
    pub ingress_if: u16,
    /// Interface the packet leaves this AS through (traversal direction).
    pub egress_if: u16,
    /// Whether this was a peering hop.
    pub peering: bool,
}

/// Verifies the current hop field against `mac` (the MAC computed by the
/// caller over [`current_input`]), checks expiry, and updates the SegID for
/// the next hop. Does not advance and does not check interfaces.
///
/// On success the SegID holds what the next hop of the same segment expects:
/// β_{i+1} in construction direction, β_i against it.
pub fn process_hop(
    p: &mut ScionPath<&mut [u8]>,
    computed: &HopMac,
    now_unix_ns: u64,
) -> Result<HopOutcome, DropReason> {
    let peering = is_peering_hop(p);
    let (cons, seg, ts) = {
        let i = p.current_info();
        (i.cons_dir(), i.seg_id(), i.timestamp())
    };
    let hop = p.current_hop();
    let (ing, egr, exp, wire_mac) =
        (hop.cons_ingress(), hop.cons_egress(), hop.exp_time(), hop.mac());
    if !mac_eq(computed, &wire_mac) {
        return Err(DropReason::BadMac);
    }
    if is_expired(ts, exp, now_unix_ns) {
        return Err(DropReason::Expired);
    }
    if !peering {
        // Both directions apply the same XOR: forward it yields β_{i+1} from β_i,
        // backward β_i from β_{i+1}.
        p.current_info_mut().set_seg_id(chain_seg_id(seg, &wire_mac));
    }
    let (ingress_if, egress_if) = if cons { (ing, egr) } else { (egr, ing) };
    Ok(HopOutcome { ingress_if, egress_if, peering })
}

/// Options of a [`Forwarder`] beyond its key and interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardConfig {
    /// Port for packets whose path ends in this AS.
    pub local_port: u16,
    /// Whether a packet from an external interface must arrive on the
    /// interface its hop field names (SCION requires it; off only for labs).
    pub check_ingress: bool,
    /// This AS. When set, a packet is delivered locally because its
    /// destination ISD-AS is this AS, as SCION's border router decides, and
    /// the addresses must agree with the path ([`Forwarder::finish_addressed`]);
    /// without it, a path whose last hop has egress interface 0 ends here.
    pub local_ia: Option<Ia>,
    /// Accepted age of EPIC-HP packets at the two hops that check their
    /// HVFs (SCION's: 3 s old, 1 s ahead).
    pub epic_hp_freshness: Freshness,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            local_port: 0,
            check_ingress: true,
            local_ia: None,
            epic_hp_freshness: Freshness::EPIC_HP,
        }
    }
}

/// One router's SCION forwarding state: its AS's forwarding key, interface
/// tables and local port.
#[derive(Clone, Debug)]
pub struct Forwarder {
    key: ForwardingKey,
    ifaces: InterfaceTable,
    cfg: ForwardConfig,
}

impl Forwarder {
    /// A forwarder with `key`, interface table and configuration.
    pub fn new(key: ForwardingKey, ifaces: InterfaceTable, cfg: ForwardConfig) -> Self {
        Forwarder { key, ifaces, cfg }
    }

    /// A forwarder with the key, interfaces and local ISD-AS of `cfg` and
    /// default options otherwise.
    pub fn from_config(cfg: &ScionForwardConfig) -> Self {
        let opts = ForwardConfig {
            local_ia: cfg.local_ia,
            epic_hp_freshness: cfg.epic_hp_freshness,
            ..ForwardConfig::default()
        };
        Self::new(cfg.forwarding_key(), cfg.interface_table(), opts)
    }

    /// Sets the EPIC-HP freshness window (reconfiguration between bursts).
    pub fn set_epic_hp_freshness(&mut self, f: Freshness) {
        self.cfg.epic_hp_freshness = f;
    }

    /// Sets (or clears) the local ISD-AS (reconfiguration between bursts).
    pub fn set_local_ia(&mut self, ia: Option<Ia>) {
        self.cfg.local_ia = ia;
    }

    /// The AS forwarding key.
    pub fn key(&self) -> &ForwardingKey {
        &self.key
    }

    /// Replaces the AS forwarding key (reconfiguration between bursts).
    pub fn set_key(&mut self, key: ForwardingKey) {
        self.key = key;
    }

    /// The interface tables.
    pub fn interfaces(&self) -> &InterfaceTable {
        &self.ifaces
    }

    /// The interface tables, mutable (reconfiguration between bursts).
    pub fn interfaces_mut(&mut self) -> &mut InterfaceTable {
        &mut self.ifaces
    }

    /// The configuration.
    pub fn config(&self) -> &ForwardConfig {
        &self.cfg
    }

    /// Checks `path` (exactly the path bytes) and returns the MAC input of its
    /// current hop, so a stage can MAC a whole burst in one batch.
    pub fn prepare(path: &[u8]) -> Result<Block, DropReason> {
        HopPlan::parse(path).map(|p| p.mac_input())
    }

    /// Forwards a packet whose path is `path` (exactly the path bytes), arrived
    /// on external interface `ingress_if` ([`INTERNAL_IF`] from inside the AS).
    pub fn forward(
        &self,
        path: &mut [u8],
        ingress_if: u16,
        now_unix_ns: u64,
    ) -> Result<Forwarded, DropReason> {
        let plan = HopPlan::parse(path)?;
        let mac = self.key.mac(&plan.mac_input());
        let arrival = Arrival { ingress_if, now_unix_ns, addrs: None };
        self.apply_inner(path, &plan, &mac, None, &arrival)
    }

    /// Second half of [`forward`](Self::forward): `mac` is the MAC of the input
    /// [`prepare`](Self::prepare) returned for this same `path`.
    pub fn finish(
        &self,
        path: &mut [u8],
        mac: &HopMac,
        ingress_if: u16,
        now_unix_ns: u64,
    ) -> Result<Forwarded, DropReason> {
        let plan = HopPlan::parse(path)?;
        let arrival = Arrival { ingress_if, now_unix_ns, addrs: None };
        self.apply_inner(path, &plan, mac, None, &arrival)
    }

    /// [`finish`](Self::finish) for a packet with source and destination
    /// ISD-AS `src`, `dst` (from its address header). With
    /// [`ForwardConfig::local_ia`] set, it applies SCION's rules: a packet
    /// from an external interface must not claim this AS as its source, and
    /// its path ends here exactly when its destination is this AS; a packet
    /// from inside the AS must come from this AS on its first hop and must
    /// not be addressed to it. Violations are dropped (`policy` for the
    /// source, `no_route` for the destination). Local delivery then follows
    /// the destination.
    pub fn finish_addressed(
        &self,
        path: &mut [u8],
        mac: &HopMac,
        ingress_if: u16,
        now_unix_ns: u64,
        src: Ia,
        dst: Ia,
    ) -> Result<Forwarded, DropReason> {
        let plan = HopPlan::parse(path)?;
        let arrival = Arrival { ingress_if, now_unix_ns, addrs: Some((src, dst)) };
        self.apply_inner(path, &plan, mac, None, &arrival)
    }

    /// Forwards a packet parsed earlier into `plan` ([`HopPlan::parse`] of
    /// this same `path`, unchanged since), without parsing it again: `tag`
    /// is the full MAC of [`HopPlan::mac_input`] (from a batch, e.g.
    /// [`ForwardingKey::full_mac_in_place`]). When the plan
    /// [`crosses_over`](HopPlan::crosses_over), `xover` may bring the plan of
    /// the next hop field ([`HopPlan::next`]) with its full MAC, MACed in
    /// the same batch; without it the MAC is computed here.
    ///
    /// Same decisions and the same path updates as [`finish`](Self::finish)
    /// (or [`finish_addressed`](Self::finish_addressed) when
    /// `arrival.addrs` is set).
    #[inline]
    pub fn apply(
        &self,
        path: &mut [u8],
        plan: &HopPlan,
        tag: &Block,
        xover: Option<(&HopPlan, &Block)>,
        arrival: &Arrival,
    ) -> Result<Forwarded, DropReason> {
        self.apply_inner(path, plan, &mac::truncate(tag), xover, arrival)
    }

    #[inline(always)]
    fn apply_inner(
        &self,
        path: &mut [u8],
        plan: &HopPlan,
        mac: &HopMac,
        xover: Option<(&HopPlan, &Block)>,
        a: &Arrival,
    ) -> Result<Forwarded, DropReason> {
        let mut next = None;
        if plan.crosses_over() {
            next = match xover {
                Some((p, t)) => Some((*p, *t)),
                None => match plan.next(path) {
                    Ok(p) => Some((p, self.key.full_mac(&p.mac_input()))),
                    Err(_) => None,
                },
            };
        }
        let second = next.as_ref().map(|(p, t)| (p, mac::truncate(t)));
        let c = self.check(plan, mac, second.as_ref().map(|(p, m)| (*p, m)), a.now_unix_ns);
        let exit = self.apply_checked(path, plan, &c, a)?;
        let xover_mac = next.map(|(_, t)| t);
        Ok(Forwarded { hop: plan.curr_hf(), xover: xover_mac.is_some(), xover_mac, exit })
    }

    /// The checks of `plan` that do not depend on how its packet arrived
    /// (MAC and expiry of its hop field and, at a cross-over, of the next
    /// one, `xover`), and the decisions and path updates that follow: a
    /// burst needs them once per distinct plan.
    #[inline(always)]
    pub(crate) fn check(
        &self,
        plan: &HopPlan,
        mac: &HopMac,
        xover: Option<(&HopPlan, &HopMac)>,
        now_unix_ns: u64,
    ) -> HopCheck {
        let (ingress, egress) = plan.interfaces();
        let mut c = HopCheck {
            first: plan.verify(mac, now_unix_ns),
            second: Ok(()),
            xover: false,
            ingress,
            egress,
            last: plan.is_last(),
            port: None,
            seg: [plan.seg_update(), (0, 0)],
            meta_xover: plan.meta,
            meta_next: plan.advanced(),
        };
        if plan.crosses_over() {
            // Cross-over: the next hop field (first of the next segment) also
            // belongs to this AS and names the egress interface.
            c.xover = true;
            c.meta_xover = plan.advanced();
            match xover {
                Some((next, m)) => {
                    c.second = next.verify(m, now_unix_ns);
                    c.egress = next.interfaces().1;
                    c.last = next.is_last();
                    c.seg[1] = next.seg_update();
                    c.meta_next = next.advanced();
                }
                // A valid plan always has a next one.
                None => c.second = Err(DropReason::Malformed),
            }
        }
        c.port = self.ifaces.port(c.egress);
        c
    }

    /// Finishes a packet of `plan` from the plan's [`check`](Self::check):
    /// the checks that depend on its arrival, in SCION's order (addresses,
    /// then the hop field's MAC and expiry, the ingress interface, the
    /// cross-over hop field, the exit), and the path updates.
    #[inline(always)]
    pub(crate) fn apply_checked(
        &self,
        path: &mut [u8],
        plan: &HopPlan,
        c: &HopCheck,
        a: &Arrival,
    ) -> Result<Exit, DropReason> {
        // SCION's source/destination checks, before any MAC work is trusted.
        let dst_local = self.check_addrs(plan, a)?;
        c.first?;
        write_seg_id(path, c.seg[0])?;
        if self.cfg.check_ingress && a.ingress_if != INTERNAL_IF && c.ingress != a.ingress_if {
            return Err(DropReason::WrongInterface);
        }
        if c.xover {
            write_meta(path, c.meta_xover)?;
            c.second?;
            write_seg_id(path, c.seg[1])?;
        }
        // Local delivery: by destination ISD-AS when the addresses are known
        // (the path ends here: checked above), else by egress interface 0.
        let local = dst_local.unwrap_or(c.egress == INTERNAL_IF);
        if local {
            if !c.last {
                return Err(DropReason::NoRoute);
            }
            Ok(Exit::Local { port: self.cfg.local_port })
        } else {
            if c.last {
                return Err(DropReason::NoRoute);
            }
            let port = c.port.ok_or(DropReason::NoRoute)?;
            write_meta(path, c.meta_next)?;
            Ok(Exit::Interface { ifid: c.egress, port })
        }
    }

    /// [`apply_checked`](Self::apply_checked) for a packet without
    /// addresses whose check is a [`PlainExit`]: the same path updates and
    /// decisions, with everything that depends only on the plan decided.
    #[inline(always)]
    pub(crate) fn apply_plain(
        &self,
        path: &mut [u8],
        e: &PlainExit,
        ingress_if: u16,
    ) -> Result<Exit, DropReason> {
        e.apply(path, self.accepts(e, ingress_if))
    }

    /// Whether a packet of `e` that arrived on `ingress_if` passes the
    /// ingress check.
    #[inline(always)]
    pub(crate) fn accepts(&self, e: &PlainExit, ingress_if: u16) -> bool {
        !(self.cfg.check_ingress && ingress_if != INTERNAL_IF && e.ingress != ingress_if)
    }

    /// SCION's source/destination rules when this AS and the packet's
    /// addresses are known: whether the destination is this AS.
    #[inline(always)]
    fn check_addrs(&self, plan: &HopPlan, a: &Arrival) -> Result<Option<bool>, DropReason> {
        let (Some(local), Some((src, dst))) = (self.cfg.local_ia, a.addrs) else {
            return Ok(None);
        };
        let (src_local, dst_local) = (src == local, dst == local);
        if a.ingress_if == INTERNAL_IF {
            if dst_local {
                return Err(DropReason::NoRoute);
            }
            if plan.curr_hf() == 0 && !src_local {
                return Err(DropReason::Policy);
            }
        } else {
            if src_local {
                return Err(DropReason::Policy);
            }
            if plan.is_last() != dst_local {
                return Err(DropReason::NoRoute);
            }
        }
        Ok(Some(dst_local))
    }
}

/// How a packet arrived, for [`Forwarder::apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The interface it came in on ([`INTERNAL_IF`] from inside the AS).
    pub ingress_if: u16,
    /// The router's clock.
    pub now_unix_ns: u64,
    /// Source and destination ISD-AS from its address header, when the
    /// caller has them (see [`Forwarder::finish_addressed`]).
    pub addrs: Option<(Ia, Ia)>,
}

/// [`HopPlan`] flag: the current info field is in construction direction.
const CONS: u8 = 1;
/// [`HopPlan`] flag: the current hop is one of the two peering hop fields.
const PEERING: u8 = 2;

/// The current hop field of a standard SCION path, parsed once: its
/// position, every field its processing reads, and where the one field it
/// writes besides the meta header (the SegID) lies.
///
/// A burst is parsed into plans, their MAC inputs are MACed in one batch,
/// and [`Forwarder::apply`] finishes each packet from its plan without
/// reading the path again (it writes the SegID and the meta header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopPlan {
    /// PathMetaHdr on arrival.
    meta: u32,
    /// The current info field, as on the wire.
    info: [u8; INFO_LEN],
    /// The current hop field, as on the wire.
    hop: [u8; HOP_LEN],
    /// Offset of the current info field in the path.
    info_off: u16,
    /// Offset of the current hop field in the path.
    hop_off: u16,
    /// Length of the path.
    len: u16,
    /// Index one past the last hop field of the current segment.
    seg_end: u8,
    /// Number of hop fields.
    n_hf: u8,
    /// [`CONS`] | [`PEERING`].
    flags: u8,
}

impl HopPlan {
    /// A placeholder (the last and only hop of an empty path) for arrays
    /// filled by [`parse`](Self::parse).
    pub const EMPTY: HopPlan = HopPlan {
        meta: 0,
        info: [0; INFO_LEN],
        hop: [0; HOP_LEN],
        info_off: 0,
        hop_off: 0,
        len: 0,
        seg_end: 0,
        n_hf: 0,
        flags: 0,
    };

    /// Parses `path`, exactly the path bytes, checked as
    /// [`ScionPath::new_checked`] checks it (`truncated` / `malformed`); a
    /// buffer longer than the path is `malformed`.
    #[inline]
    pub fn parse(path: &[u8]) -> Result<HopPlan, DropReason> {
        let Some(head) = path.first_chunk::<META_LEN>() else {
            return Err(DropReason::Truncated);
        };
        let w = u32::from_be_bytes(*head);
        if !meta_word_valid(w) {
            return Err(DropReason::Malformed);
        }
        let len = path_len_of(w);
        if path.len() != len {
            return Err(if path.len() < len {
                DropReason::Truncated
            } else {
                DropReason::Malformed
            });
        }
        Self::at(path, w).ok_or(DropReason::Malformed)
    }

    /// The plan at the position the (valid) meta word `w` names in `path`.
    #[inline(always)]
    fn at(path: &[u8], w: u32) -> Option<HopPlan> {
        let (s0, s1, s2) = ((w >> 12) & 0x3f, (w >> 6) & 0x3f, w & 0x3f);
        let (inf, hf) = (w >> 30, (w >> 24) & 0x3f);
        let n_inf = u32::from(s0 != 0) + u32::from(s1 != 0) + u32::from(s2 != 0);
        let n_hf = s0 + s1 + s2;
        let info_off = META_LEN + inf as usize * INFO_LEN;
        let hop_off = META_LEN + n_inf as usize * INFO_LEN + hf as usize * HOP_LEN;
        let info: &[u8; INFO_LEN] = path.get(info_off..)?.first_chunk()?;
        let hop: &[u8; HOP_LEN] = path.get(hop_off..)?.first_chunk()?;
        let seg_end = curr_segment_bounds(w).1;
        // The two peering hop fields: last of segment 0, first of segment 1.
        let peering = info[0] & INF_FLAG_PEER != 0
            && s0 != 0
            && s1 != 0
            && s2 == 0
            && (hf + 1 == s0 || hf == s0);
        let cons = info[0] & INF_FLAG_CONS_DIR != 0;
        Some(HopPlan {
            meta: w,
            info: *info,
            hop: *hop,
            info_off: info_off as u16,
            hop_off: hop_off as u16,
            len: path.len() as u16,
            seg_end: seg_end as u8,
            n_hf: n_hf as u8,
            flags: (u8::from(cons) * CONS) | (u8::from(peering) * PEERING),
        })
    }

    /// The plan of the hop field after this one, as the path is once
    /// advanced (at a cross-over, the first hop field of the next segment);
    /// `path` is the one this plan was parsed from. `malformed` at the last
    /// hop field.
    #[inline]
    pub fn next(&self, path: &[u8]) -> Result<HopPlan, DropReason> {
        if self.is_last() {
            return Err(DropReason::Malformed);
        }
        // A valid position advances to a valid one.
        Self::at(path, self.advanced()).ok_or(DropReason::Malformed)
    }

    /// Whether `path` parses to this same plan: same length, meta header,
    /// current info field and current hop field, as for the next packet of
    /// a flow at the same hop. Its parse and its MAC can then be reused.
    #[inline(always)]
    pub fn matches(&self, path: &[u8]) -> bool {
        let (i, h) = (usize::from(self.info_off), usize::from(self.hop_off));
        let (Some(info), Some(hop), Some(head)) =
            (path.get(i..i + INFO_LEN), path.get(h..h + HOP_LEN), path.first_chunk::<META_LEN>())
        else {
            return false;
        };
        // Word compares: the fields differ in few bytes, if at all.
        let w8 = |b: &[u8]| b.first_chunk::<8>().map(|c| u64::from_ne_bytes(*c));
        let w4 = |b: &[u8]| {
            b.get(8..).and_then(|b| b.first_chunk::<4>()).map(|c| u32::from_ne_bytes(*c))
        };
        (path.len() == usize::from(self.len))
            & (u32::from_be_bytes(*head) == self.meta)
            & (w8(info) == w8(&self.info))
            & (w8(hop) == w8(&self.hop))
            & (w4(hop) == w4(&self.hop))
    }

    /// What [`matches`](Self::matches) compares besides the length: the
    /// meta header as on the wire, and the offsets and bytes of the
    /// current info and hop fields.
    #[inline(always)]
    pub(crate) fn key_bytes(
        &self,
    ) -> ([u8; META_LEN], usize, [u8; INFO_LEN], usize, [u8; HOP_LEN]) {
        let (i, h) = (usize::from(self.info_off), usize::from(self.hop_off));
        (self.meta.to_be_bytes(), i, self.info, h, self.hop)
    }

    /// The 16-byte CMAC input of the hop field ([`current_input`]).
    #[inline(always)]
    pub fn mac_input(&self) -> Block {
        let mac01 = u16::from_be_bytes([self.hop[6], self.hop[7]]);
        // β_i: the field as is in construction direction and on peering
        // hops, else β_{i+1} ⊕ σ_i[0:2].
        let beta =
            if self.flags & (CONS | PEERING) != 0 { self.seg_id() } else { self.seg_id() ^ mac01 };
        // Bytes 8-13 are the hop field's bytes 0-5 with its flags cleared.
        let hi = (u64::from(beta) << 32) | u64::from(self.timestamp());
        let lo = u64::from_be_bytes([
            self.hop[0],
            self.hop[1],
            self.hop[2],
            self.hop[3],
            self.hop[4],
            self.hop[5],
            0,
            0,
        ]) & 0x00ff_ffff_ffff_ffff;
        ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes()
    }

    /// SegID of the current info field on arrival.
    #[inline(always)]
    fn seg_id(&self) -> u16 {
        u16::from_be_bytes([self.info[2], self.info[3]])
    }

    /// Timestamp of the current info field.
    #[inline(always)]
    fn timestamp(&self) -> u32 {
        u32::from_be_bytes([self.info[4], self.info[5], self.info[6], self.info[7]])
    }

    /// CurrHF on arrival.
    #[inline(always)]
    pub fn curr_hf(&self) -> u8 {
        ((self.meta >> 24) & 0x3f) as u8
    }

    /// Whether the current hop field is the path's last.
    #[inline(always)]
    pub fn is_last(&self) -> bool {
        self.curr_hf() + 1 >= self.n_hf
    }

    /// Whether the current hop field is one of the two peering hop fields
    /// of a peering path ([`is_peering_hop`]).
    #[inline(always)]
    pub fn is_peering(&self) -> bool {
        self.flags & PEERING != 0
    }

    /// Whether this router also processes the next hop field: the current
    /// one ends its segment, another segment follows, and it is not a
    /// peering hop.
    #[inline(always)]
    pub fn crosses_over(&self) -> bool {
        !self.is_last() && !self.is_peering() && self.curr_hf() + 1 == self.seg_end
    }

    /// The meta header once advanced by one hop field (not at the last).
    #[inline(always)]
    fn advanced(&self) -> u32 {
        let next = u32::from(self.curr_hf()) + 1;
        let inf = (self.meta >> 30) + u32::from(next >= u32::from(self.seg_end));
        (self.meta & 0x00ff_ffff) | (inf << 30) | (next << 24)
    }

    /// MAC and expiry of the hop field, as [`process_hop`] checks them.
    #[inline(always)]
    fn verify(&self, mac: &HopMac, now_unix_ns: u64) -> Result<(), DropReason> {
        if !mac_eq(mac, &self.wire_mac()) {
            return Err(DropReason::BadMac);
        }
        if is_expired(self.timestamp(), self.hop[1], now_unix_ns) {
            return Err(DropReason::Expired);
        }
        Ok(())
    }

    /// The MAC on the wire.
    #[inline(always)]
    fn wire_mac(&self) -> HopMac {
        let h = &self.hop;
        [h[6], h[7], h[8], h[9], h[10], h[11]]
    }

    /// The SegID the next hop expects, where it goes: (offset in the path,
    /// value), or (0, 0) for a peering hop, whose SegID stays.
    #[inline(always)]
    fn seg_update(&self) -> (u16, u16) {
        if self.is_peering() {
            (0, 0)
        } else {
            // Both directions apply the same XOR: forward it yields β_{i+1}
            // from β_i, backward β_i from β_{i+1}.
            (self.info_off + 2, chain_seg_id(self.seg_id(), &self.wire_mac()))
        }
    }

    /// (ingress, egress) interfaces in traversal direction.
    #[inline(always)]
    fn interfaces(&self) -> (u16, u16) {
        let h = &self.hop;
        let (ing, egr) = (u16::from_be_bytes([h[2], h[3]]), u16::from_be_bytes([h[4], h[5]]));
        if self.flags & CONS != 0 {
            (ing, egr)
        } else {
            (egr, ing)
        }
    }
}

/// What [`Forwarder::check`] decided for a hop plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HopCheck {
    /// MAC and expiry of the hop field.
    first: Result<(), DropReason>,
    /// Of the next hop field at a cross-over (`Ok` without one).
    second: Result<(), DropReason>,
    /// Whether there is a cross-over.
    xover: bool,
    /// Ingress interface of the hop field (traversal direction).
    ingress: u16,
    /// Egress interface of the last hop field processed.
    egress: u16,
    /// Whether the last hop field processed is the path's last.
    last: bool,
    /// The port of `egress`, if bound.
    port: Option<u16>,
    /// SegID updates of the hop fields processed ([`HopPlan::seg_update`]).
    seg: [(u16, u16); 2],
    /// The meta header after the cross-over.
    meta_xover: u32,
    /// The meta header once advanced past the last hop field processed.
    meta_next: u32,
}

/// A [`HopCheck`] of the common kind: its hop field verified, no
/// cross-over, and the packet leaves through a bound external interface.
/// A packet of it without addresses needs only the ingress check and the
/// two path writes ([`Forwarder::apply_plain`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainExit {
    /// The SegID update ([`HopPlan::seg_update`]).
    seg: (u16, u16),
    /// The meta header once advanced.
    meta_next: u32,
    /// Ingress interface of the hop field (traversal direction).
    ingress: u16,
    /// Egress interface and its port.
    egress: u16,
    port: u16,
}

impl PlainExit {
    /// The path updates of a packet and its exit, once it is known whether
    /// it passes the ingress check ([`Forwarder::accepts`]); the SegID is
    /// updated either way, as [`Forwarder::apply_checked`] does.
    #[inline(always)]
    pub(crate) fn apply(&self, path: &mut [u8], accepted: bool) -> Result<Exit, DropReason> {
        write_seg_id(path, self.seg)?;
        if !accepted {
            return Err(DropReason::WrongInterface);
        }
        write_meta(path, self.meta_next)?;
        Ok(Exit::Interface { ifid: self.egress, port: self.port })
    }
}

impl HopCheck {
    /// Whether there is a cross-over.
    #[inline(always)]
    pub(crate) fn xover(&self) -> bool {
        self.xover
    }

    /// The check as a [`PlainExit`], if it is one: then
    /// [`Forwarder::apply_plain`] decides as
    /// [`Forwarder::apply_checked`] for any packet without addresses.
    #[inline(always)]
    pub(crate) fn plain(&self) -> Option<PlainExit> {
        match (self.first, self.port) {
            (Ok(()), Some(port)) if !self.xover && !self.last && self.egress != INTERNAL_IF => {
                Some(PlainExit {
                    seg: self.seg[0],
                    meta_next: self.meta_next,
                    ingress: self.ingress,
                    egress: self.egress,
                    port,
                })
            }
            _ => None,
        }
    }

    /// A placeholder for arrays filled by [`Forwarder::check`].
    pub(crate) const EMPTY: HopCheck = HopCheck {
        first: Err(DropReason::Malformed),
        second: Ok(()),
        xover: false,
        ingress: 0,
        egress: 0,
        last: true,
        port: None,
        seg: [(0, 0); 2],
        meta_xover: 0,
        meta_next: 0,
    };
}

/// Writes a SegID update ([`HopPlan::seg_update`]; offset 0: none).
#[inline(always)]
fn write_seg_id(path: &mut [u8], (at, v): (u16, u16)) -> Result<(), DropReason> {
    if at != 0 {
        let at = usize::from(at);
        let f = path.get_mut(at..at + 2).ok_or(DropReason::Malformed)?;
        f.copy_from_slice(&v.to_be_bytes());
    }
    Ok(())
}

/// Writes the meta header word of `path`.
#[inline(always)]
fn write_meta(path: &mut [u8], w: u32) -> Result<(), DropReason> {
    let head = path.first_chunk_mut::<META_LEN>().ok_or(DropReason::Malformed)?;
    *head = w.to_be_bytes();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, HopSpec};
    use crate::interfaces::InterfaceTable;
    use mac::Key;

    /// Path bytes of two segments (against and in construction direction)
    /// at hop `hf`.
    fn path(hf: u8) -> Vec<u8> {
        let key = ForwardingKey::new(&Key::from([3; 16]));
        let hs = |i, e| HopSpec { key: key.clone(), cons_ingress: i, cons_egress: e, exp_time: 9 };
        let up = build::segment(false, 0x1111, 1_700_000_000, &[hs(0, 1), hs(2, 3)]);
        let down = build::segment(true, 0x2222, 1_700_000_050, &[hs(0, 4), hs(5, 0)]);
        let mut repr = build::path(&[up, down]).expect("path");
        repr.curr_hf = hf;
        repr.curr_inf = hf / 2;
        let mut b = vec![0; repr.buffer_len()];
        repr.emit(&mut ScionPath::new_unchecked(&mut b[..])).expect("emit");
        b
    }

    #[test]
    fn plan_reads_what_the_view_reads() {
        for hf in 0..4 {
            let b = path(hf);
            let plan = HopPlan::parse(&b).expect("valid");
            let p = ScionPath::new_checked(&b[..]).expect("valid");
            assert_eq!(plan.mac_input(), current_input(&p), "hop {hf}");
            assert_eq!(plan.curr_hf(), hf);
            assert_eq!(plan.is_last(), p.is_last_hop());
            assert_eq!(plan.crosses_over(), hf == 1, "hop {hf}");
            assert!(plan.matches(&b));
            match plan.next(&b) {
                Ok(next) => {
                    let mut moved = b.clone();
                    ScionPath::new_unchecked(&mut moved[..]).advance().expect("not last");
                    assert_eq!(next, HopPlan::parse(&moved).expect("valid"));
                }
                Err(r) => assert_eq!((hf, r), (3, DropReason::Malformed)),
            }
        }
    }

    #[test]
    fn a_plan_matches_only_its_own_hop() {
        let b = path(1);
        let plan = HopPlan::parse(&b).expect("valid");
        // Any byte of the meta header, current info or hop field differs.
        for at in (0..4).chain(4..12).chain(4 + 16 + 12..4 + 16 + 24) {
            let mut other = b.clone();
            other[at] ^= 0x10;
            assert!(!plan.matches(&other), "byte {at}");
        }
        // Other info and hop fields are not part of the plan.
        let mut other = b.clone();
        other[4 + 16] ^= 0x10;
        assert!(plan.matches(&other));
        assert!(!plan.matches(&b[..b.len() - 1]));
        assert!(!plan.matches(&[]));
    }

    #[test]
    fn parse_refuses_like_the_view() {
        let b = path(0);
        assert_eq!(HopPlan::parse(&b[..3]), Err(DropReason::Truncated));
        assert_eq!(HopPlan::parse(&b[..b.len() - 1]), Err(DropReason::Truncated));
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(HopPlan::parse(&longer), Err(DropReason::Malformed));
        let mut bad = b;
        bad[0] = 0x3f; // CurrHF 63
        assert_eq!(HopPlan::parse(&bad), Err(DropReason::Malformed));
    }

    #[test]
    fn apply_with_batched_macs_equals_finish() {
        let key = ForwardingKey::new(&Key::from([3; 16]));
        let ifaces = InterfaceTable::new().with(2, 5).with(4, 3);
        let fwd = Forwarder::new(key.clone(), ifaces, ForwardConfig::default());
        let now = 1_700_000_100 * 1_000_000_000;
        // Along the whole path (every hop under this key), hop by hop.
        let (mut a, mut b) = (path(0), path(0));
        let mut trace = Vec::new();
        for ingress in [INTERNAL_IF, 1, 5] {
            let plan = HopPlan::parse(&a).expect("valid");
            let next = plan.crosses_over().then(|| plan.next(&a).expect("not last"));
            let mut tags = vec![plan.mac_input()];
            tags.extend(next.map(|n| n.mac_input()));
            key.full_mac_in_place(&mut tags);
            let xover = next.as_ref().zip(tags.get(1));
            let arrival = Arrival { ingress_if: ingress, now_unix_ns: now, addrs: None };
            let got = fwd.apply(&mut a, &plan, &tags[0], xover, &arrival);
            let mac = key.mac(&Forwarder::prepare(&b).expect("valid"));
            let want = fwd.finish(&mut b, &mac, ingress, now);
            assert_eq!(got, want, "hop {}", plan.curr_hf());
            assert_eq!(a, b, "hop {}", plan.curr_hf());
            let Ok(f) = got else { break };
            trace.push((f.hop, f.xover, f.exit));
            if matches!(f.exit, Exit::Local { .. }) {
                break;
            }
        }
        // Hop 0 (against construction) out of interface 2, the cross-over at
        // hops 1 and 2 out of 4, the last hop local.
        assert_eq!(
            trace,
            [
                (0, false, Exit::Interface { ifid: 2, port: 5 }),
                (1, true, Exit::Interface { ifid: 4, port: 3 }),
                (3, false, Exit::Local { port: 0 }),
            ]
        );
    }
}
