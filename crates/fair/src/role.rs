//! Node role dispatch (spec §5.1): one FAIR border router that is at the same
//! time source (egress of its own hosts' traffic), cooperating transit AS
//! (egress of transit traffic) and destination (ingress of traffic to its
//! hosts), deciding per packet which procedure applies.
//!
//! [`dispatch`] is the table of §5.1 as a pure function; [`FairNode`] is a
//! pipeline stage that classifies a burst with it and runs the enabled role
//! stages ([`FairSource`], [`SuspiciousBit`] + [`FairTransit`],
//! [`FairDestination`]) on their packets only.
//!
//! **Decisions.**
//! * "Output port external" is read from the verdict a forwarding stage
//!   placed *before* this one chose (`Verdict::Forward { port, .. }`), against
//!   the configured external-port bitmap; "arrived on an external port" is
//!   `Meta::port` against the same bitmap.
//! * A malformed FAIR header counts as "FAIR header present": the role stage
//!   it goes to drops and counts it (`malformed`).
//! * Rows the table leaves open are plain forwarding: no FAIR header with a
//!   local source towards a local destination, or towards an internal port
//!   (stamping happens at the egress border router).
//! * A role that is not enabled forwards its packets unmodified (a node
//!   without the destination role delivers FAIR packets with the header).
//! * When a whole burst has one role (the common case) the role stage runs on
//!   the burst in place; mixed bursts are split into per-role sub-batches
//!   (buffer handles move, bytes do not) and reassembled in order.

use std::net::IpAddr;

use pipeline::{Batch, DropReason, Element, Meta, Now, PacketBuf, Stage, Verdict, BURST};

use crate::common::{l3_of, locate_meta, Codes, Framing};
use crate::dest::FairDestination;
use crate::lpm::{key_v4, key_v6, PrefixTable};
use crate::record::RecordSink;
use crate::sb::SuspiciousBit;
use crate::source::FairSource;
use crate::transit::FairTransit;

/// The facts about one packet that §5.1 decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleInput {
    /// A FAIR header is present (or a malformed one).
    pub has_fair: bool,
    /// The source address is in one of this AS's prefixes.
    pub src_local: bool,
    /// The destination address is in one of this AS's prefixes.
    pub dst_local: bool,
    /// The output port leads to another AS.
    pub out_external: bool,
    /// The packet arrived from another AS.
    pub in_external: bool,
}

/// The procedure §5.1 selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Procedure 1 (`send`): stamp if the FIB maps the destination to a channel.
    Send,
    /// Drop: an internal host pre-filled a FAIR header (`src_preexisting_fair`, SEC-25).
    DropPreexisting,
    /// Procedure 2 (`forward`), preceded by the SB stage when `sb` (arrived externally).
    Mark {
        /// Run Procedure 4 first.
        sb: bool,
    },
    /// A FAIR packet on an internal hop: forward unmodified.
    ForwardUnmodified,
    /// Procedure 3 (`receive`) at ingress.
    Receive,
    /// No FAIR header to a local destination: deliver, or drop under `require_policy`
    /// (decided by the destination stage).
    DeliverPlain,
    /// Plain IP forwarding.
    Plain,
}

/// The dispatch table of §5.1.
pub fn dispatch(i: RoleInput) -> Role {
    match (i.has_fair, i.src_local, i.dst_local) {
        (true, true, _) => Role::DropPreexisting,
        (true, false, true) => Role::Receive,
        (true, false, false) if i.out_external => Role::Mark { sb: i.in_external },
        (true, false, false) => Role::ForwardUnmodified,
        (false, true, false) if i.out_external => Role::Send,
        (false, false, true) => Role::DeliverPlain,
        (false, _, _) => Role::Plain,
    }
}

/// Node configuration.
#[derive(Clone, Copy, Debug)]
pub struct NodeConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Bitmap of ports that lead to other ASes (bit p = port p < 64).
    pub external_ports: u64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig { codes: Codes::default(), framing: Framing::Ethernet, external_ports: 0 }
    }
}

/// Packets per role (the §5.1 rows), plus `src_preexisting_fair` drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Procedure 1.
    pub send: u64,
    /// Procedure 2 (with or without SB).
    pub mark: u64,
    /// Procedure 3.
    pub receive: u64,
    /// Plain packets to local destinations.
    pub deliver_plain: u64,
    /// FAIR packets forwarded unmodified on internal hops.
    pub forward_unmodified: u64,
    /// Plain forwarding.
    pub plain: u64,
    /// Internal hosts' pre-filled FAIR headers (dropped, `Policy`).
    pub src_preexisting_fair: u64,
}

/// A FAIR border router with every role (§5.1), as one stage.
pub struct FairNode<B: PacketBuf, S: RecordSink> {
    cfg: NodeConfig,
    local: PrefixTable<()>,
    /// Source role (Procedure 1).
    pub source: Option<FairSource>,
    /// Suspicious-bit application (Procedure 4), before marking.
    pub sb: Option<SuspiciousBit>,
    /// Transit role (Procedure 2).
    pub transit: Option<FairTransit>,
    /// Destination role (Procedure 3).
    pub dest: Option<FairDestination<S>>,
    scratch: Batch<B>,
    /// Counters.
    pub stats: NodeStats,
}

impl<B: PacketBuf, S: RecordSink> core::fmt::Debug for FairNode<B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FairNode").field("cfg", &self.cfg).field("stats", &self.stats).finish()
    }
}

const R_SEND: usize = 0;
const R_MARK: usize = 1;
const R_DEST: usize = 2;

impl<B: PacketBuf, S: RecordSink> FairNode<B, S> {
    /// A node with no role enabled and no local prefix.
    pub fn new(cfg: NodeConfig) -> Self {
        FairNode {
            cfg,
            local: PrefixTable::new(),
            source: None,
            sb: None,
            transit: None,
            dest: None,
            scratch: Batch::new(),
            stats: NodeStats::default(),
        }
    }

    /// Declares `addr/len` as one of this AS's prefixes.
    pub fn add_local_prefix(&mut self, addr: IpAddr, len: u8) {
        self.local.insert(addr, len, ());
    }

    fn is_external(&self, port: u16) -> bool {
        port < 64 && self.cfg.external_ports & (1u64 << port) != 0
    }

    /// The §5.1 inputs of one packet (`None`: not IP, plain forwarding).
    pub fn classify(&self, frame: &[u8], meta: &Meta) -> Option<RoleInput> {
        let (l3_off, l3) = l3_of(frame, meta, self.cfg.framing)?;
        let ip = frame.get(l3_off..)?;
        let (src, dst) = match l3 {
            pipeline::L3::Ipv6 if ip.len() >= 40 => {
                (key_v6(ip[8..24].try_into().ok()?), key_v6(ip[24..40].try_into().ok()?))
            }
            pipeline::L3::Ipv4 if ip.len() >= 20 => {
                (key_v4([ip[12], ip[13], ip[14], ip[15]]), key_v4([ip[16], ip[17], ip[18], ip[19]]))
            }
            _ => return None,
        };
        let has_fair =
            !matches!(locate_meta(frame, meta, self.cfg.framing, self.cfg.codes), Ok(None));
        let out_external = match meta.verdict {
            Verdict::Forward { port, .. } => self.is_external(port),
            _ => false,
        };
        Some(RoleInput {
            has_fair,
            src_local: self.local.lookup(src).is_some(),
            dst_local: self.local.lookup(dst).is_some(),
            out_external,
            in_external: self.is_external(meta.port),
        })
    }
}

/// Runs `f` on the packets of `mask` only (see the module docs).
fn run_subset<B: PacketBuf>(
    batch: &mut Batch<B>,
    scratch: &mut Batch<B>,
    mask: u32,
    f: impl FnOnce(&mut Batch<B>),
) {
    if mask == 0 {
        return;
    }
    if mask == batch.live_mask() {
        f(batch);
        return;
    }
    let mut slots: [Option<(B, Meta)>; BURST] = std::array::from_fn(|_| None);
    let mut n = 0;
    batch.drain(|b, m| {
        slots[n] = Some((b, m));
        n += 1;
    });
    let mut origin = [0u8; BURST];
    scratch.clear();
    for (i, slot) in slots.iter_mut().enumerate().take(n) {
        if mask & (1 << i) != 0 {
            if let Some((b, m)) = slot.take() {
                if let Ok(k) = scratch.push(b, m.port) {
                    *scratch.meta_mut(k) = m;
                    origin[k] = i as u8;
                }
            }
        }
    }
    f(scratch);
    let mut k = 0;
    scratch.drain(|b, m| {
        slots[origin[k] as usize] = Some((b, m));
        k += 1;
    });
    for slot in slots.iter_mut().take(n) {
        let Some((b, m)) = slot.take() else { continue };
        let Ok(i) = batch.push(b, m.port) else { continue };
        *batch.meta_mut(i) = m;
        match m.verdict {
            Verdict::Drop(r) => batch.drop_packet(i, r),
            Verdict::ToControl => batch.to_control(i),
            Verdict::Forward { .. } => {}
        }
    }
}

impl<B: PacketBuf + Send, S: RecordSink> Element for FairNode<B, S> {
    fn name(&self) -> &str {
        "fair-node"
    }
}

impl<B: PacketBuf + Send, S: RecordSink> Stage<B> for FairNode<B, S> {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let mut masks = [0u32; 3];
        let mut sb_mask = 0u32;
        for i in batch.live() {
            let role = match self.classify(batch.data(i), batch.meta(i)) {
                Some(input) => dispatch(input),
                None => Role::Plain,
            };
            let bit = 1u32 << i;
            match role {
                Role::Send => {
                    self.stats.send += 1;
                    masks[R_SEND] |= bit;
                }
                Role::DropPreexisting => {
                    self.stats.src_preexisting_fair += 1;
                    batch.drop_packet(i, DropReason::Policy);
                }
                Role::Mark { sb } => {
                    self.stats.mark += 1;
                    masks[R_MARK] |= bit;
                    if sb {
                        sb_mask |= bit;
                    }
                }
                Role::ForwardUnmodified => self.stats.forward_unmodified += 1,
                Role::Receive => {
                    self.stats.receive += 1;
                    masks[R_DEST] |= bit;
                }
                Role::DeliverPlain => {
                    self.stats.deliver_plain += 1;
                    masks[R_DEST] |= bit;
                }
                Role::Plain => self.stats.plain += 1,
            }
        }
        if let Some(s) = self.source.as_mut() {
            run_subset(batch, &mut self.scratch, masks[R_SEND], |b| s.process(b, now));
        }
        if let Some(sb) = self.sb.as_mut() {
            run_subset(batch, &mut self.scratch, sb_mask & batch.live_mask(), |b| {
                sb.process(b, now)
            });
        }
        if let Some(t) = self.transit.as_mut() {
            run_subset(batch, &mut self.scratch, masks[R_MARK] & batch.live_mask(), |b| {
                t.process(b, now)
            });
        }
        if let Some(d) = self.dest.as_mut() {
            run_subset(batch, &mut self.scratch, masks[R_DEST] & batch.live_mask(), |b| {
                d.process(b, now)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inp(has_fair: bool, src: bool, dst: bool, out: bool, inn: bool) -> RoleInput {
        RoleInput { has_fair, src_local: src, dst_local: dst, out_external: out, in_external: inn }
    }

    /// U-P4: every row of the §5.1 table.
    #[test]
    fn u_p4_role_dispatch_table() {
        for inn in [false, true] {
            // no FAIR, src local, dst remote, external egress → send.
            assert_eq!(dispatch(inp(false, true, false, true, inn)), Role::Send);
            // FAIR, src local → drop (any dst / port).
            for (dst, out) in [(false, false), (false, true), (true, false), (true, true)] {
                assert_eq!(dispatch(inp(true, true, dst, out, inn)), Role::DropPreexisting);
            }
            // FAIR, transit, external egress → mark (SB iff arrived externally).
            assert_eq!(dispatch(inp(true, false, false, true, inn)), Role::Mark { sb: inn });
            // FAIR, transit, internal hop → unmodified.
            assert_eq!(dispatch(inp(true, false, false, false, inn)), Role::ForwardUnmodified);
            // FAIR to a local destination → receive.
            for out in [false, true] {
                assert_eq!(dispatch(inp(true, false, true, out, inn)), Role::Receive);
                // no FAIR to a local destination → deliver / require_policy.
                assert_eq!(dispatch(inp(false, false, true, out, inn)), Role::DeliverPlain);
                // no FAIR, neither local → plain.
                assert_eq!(dispatch(inp(false, false, false, out, inn)), Role::Plain);
            }
            // Open rows: local → local, and local → internal egress, are plain.
            assert_eq!(dispatch(inp(false, true, true, true, inn)), Role::Plain);
            assert_eq!(dispatch(inp(false, true, false, false, inn)), Role::Plain);
        }
    }
}
