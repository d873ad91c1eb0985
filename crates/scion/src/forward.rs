//! Per-hop processing of a standard SCION path: verify, update SegID, advance,
//! choose the egress interface and port.

use mac::Block;
use packet::scion::ScionPath;
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
        let p = ScionPath::new_checked(path)?;
        if p.path_len() != path.len() {
            return Err(DropReason::Malformed);
        }
        Ok(current_input(&p))
    }

    /// Forwards a packet whose path is `path` (exactly the path bytes), arrived
    /// on external interface `ingress_if` ([`INTERNAL_IF`] from inside the AS).
    pub fn forward(
        &self,
        path: &mut [u8],
        ingress_if: u16,
        now_unix_ns: u64,
    ) -> Result<Forwarded, DropReason> {
        let input = Self::prepare(path)?;
        let mac = self.key.mac(&input);
        self.finish(path, &mac, ingress_if, now_unix_ns)
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
        self.finish_inner(path, mac, ingress_if, now_unix_ns, None)
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
        self.finish_inner(path, mac, ingress_if, now_unix_ns, Some((src, dst)))
    }

    fn finish_inner(
        &self,
        path: &mut [u8],
        mac: &HopMac,
        ingress_if: u16,
        now_unix_ns: u64,
        ias: Option<(Ia, Ia)>,
    ) -> Result<Forwarded, DropReason> {
        let mut p = ScionPath::new_checked(path)?;
        let first_hop = p.curr_hf();
        // SCION's source/destination checks, before any MAC work is trusted.
        let dst_local = match (self.cfg.local_ia, ias) {
            (Some(local), Some((src, dst))) => {
                let (src_local, dst_local) = (src == local, dst == local);
                if ingress_if == INTERNAL_IF {
                    if (p.curr_hf() == 0 && !src_local) || dst_local {
                        return Err(if dst_local {
                            DropReason::NoRoute
                        } else {
                            DropReason::Policy
                        });
                    }
                } else {
                    if src_local {
                        return Err(DropReason::Policy);
                    }
                    if p.is_last_hop() != dst_local {
                        return Err(DropReason::NoRoute);
                    }
                }
                Some(dst_local)
            }
            _ => None,
        };
        let mut out = process_hop(&mut p, mac, now_unix_ns)?;
        if self.cfg.check_ingress && ingress_if != INTERNAL_IF && out.ingress_if != ingress_if {
            return Err(DropReason::WrongInterface);
        }
        let mut xover_mac = None;
        if !p.is_last_hop() && !out.peering && self.at_segment_end(&p) {
            // Cross-over: the next hop field (first of the next segment) also
            // belongs to this AS and names the egress interface.
            p.advance()?;
            let full = self.key.full_mac(&current_input(&p));
            out = process_hop(&mut p, &mac::truncate(&full), now_unix_ns)?;
            xover_mac = Some(full);
        }
        // Local delivery: by destination ISD-AS when the addresses are known
        // (the path ends here: checked above), else by egress interface 0.
        let local = dst_local.unwrap_or(out.egress_if == INTERNAL_IF);
        let exit = if local {
            if !p.is_last_hop() {
                return Err(DropReason::NoRoute);
            }
            Exit::Local { port: self.cfg.local_port }
        } else {
            if p.is_last_hop() {
                return Err(DropReason::NoRoute);
            }
            let port = self.ifaces.port(out.egress_if).ok_or(DropReason::NoRoute)?;
            p.advance()?;
            Exit::Interface { ifid: out.egress_if, port }
        };
        Ok(Forwarded { hop: first_hop, xover: xover_mac.is_some(), xover_mac, exit })
    }

    fn at_segment_end<T: AsRef<[u8]>>(&self, p: &ScionPath<T>) -> bool {
        let lens = p.seg_lens();
        let end: usize =
            lens[..=usize::from(p.curr_inf()).min(2)].iter().map(|&l| usize::from(l)).sum();
        usize::from(p.curr_hf()) + 1 == end
    }
}
