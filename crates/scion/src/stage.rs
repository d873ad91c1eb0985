//! The [`ScionForward`] pipeline stage.

use core::any::Any;
use core::ops::Range;

use mac::Block;
use packet::scion::epic_hp::EPIC_HP_META_LEN;
use packet::scion::{EpicHpPath, HvfOrigin, PathType, ScionHeader};
use pipeline::{
    config_of, Batch, DropReason, Element, Now, PacketBuf, Reconfigured, Refused, Stage, Validate,
    BURST,
};

use crate::config::ScionForwardConfig;
use crate::epic::{verify_hvf, FreshWindow};
use crate::forward::{Exit, Forwarded, Forwarder};
use crate::locate::{locate, scion_offset};

/// Counters of [`ScionForward`] beyond the pipeline's per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounters {
    /// Packets forwarded out of an external interface.
    pub forwarded: u64,
    /// Packets delivered inside the AS.
    pub local: u64,
    /// Segment cross-overs.
    pub xovers: u64,
    /// Packets of path types this stage leaves alone.
    pub skipped: u64,
    /// EPIC-HP packets whose PHVF or LHVF verified (at the penultimate or
    /// last hop; the others are forwarded as plain SCION).
    pub epic_hp_checked: u64,
}

/// SCION forwarding as a pipeline stage, for PathType 1 (SCION), 3 (EPIC-HP)
/// and 201 (EPIC-Z), whose embedded SCION path it processes: verify the
/// current hop field, update the SegID, advance CurrHF/CurrINF (cross-over
/// included), and set the egress port. Other path types (SIBRA, empty) are
/// left to their own stages. The traffic class is kept.
///
/// An EPIC-HP packet whose hop fields verify is also checked as SCION's
/// EPIC-HP requires when the last hop field this router verified is the
/// path's penultimate or last one: the packet time must lie in
/// [`ForwardConfig::epic_hp_freshness`](crate::ForwardConfig::epic_hp_freshness)
/// (`expired`, `from_future`), then the PHVF or LHVF must verify under that
/// hop field's full MAC (`bad_mac`). "Last verified" differs from SCION's
/// router, which looks at CurrHF on arrival, only at a segment cross-over:
/// where the penultimate AS crosses over into a two-hop last segment (a
/// leaf attached to a core AS), SCION checks no PHVF at all, this stage
/// checks it with the authenticator the source used for it. A source that
/// computes its HVFs as SCION specifies passes both.
///
/// EPIC-Z's HVFs are Z-Lane's (`zlane-classify`, which runs before this
/// stage); a border pipeline runs both, in that order.
///
/// Hop-field MACs of a burst are computed in one batch.
///
/// A live change ([`Element::reconfigure`] with a [`ScionForwardConfig`])
/// replaces the key and the interface bindings in place; the counters and
/// the [`ForwardConfig`](crate::ForwardConfig) options stay.
#[derive(Clone, Debug)]
pub struct ScionForward {
    fwd: Forwarder,
    counters: ForwardCounters,
    /// The configuration the stage runs with, when it was built from one.
    config: Option<ScionForwardConfig>,
}

impl ScionForward {
    /// A stage over `fwd`.
    pub fn new(fwd: Forwarder) -> Self {
        ScionForward { fwd, counters: ForwardCounters::default(), config: None }
    }

    /// A stage with the key and interfaces of `cfg` (see
    /// [`Forwarder::from_config`]).
    pub fn from_config(cfg: &ScionForwardConfig) -> Self {
        ScionForward { config: Some(cfg.clone()), ..Self::new(Forwarder::from_config(cfg)) }
    }

    /// The configuration the stage runs with (`None` if it was built from a
    /// [`Forwarder`], or its forwarder was changed through
    /// [`forwarder_mut`](Self::forwarder_mut), and it was not reconfigured
    /// since).
    pub fn config(&self) -> Option<&ScionForwardConfig> {
        self.config.as_ref()
    }

    /// The forwarding state.
    pub fn forwarder(&self) -> &Forwarder {
        &self.fwd
    }

    /// The forwarding state, mutable (between bursts). The stage then no
    /// longer knows its configuration: the next live change applies whatever
    /// it holds.
    pub fn forwarder_mut(&mut self) -> &mut Forwarder {
        self.config = None;
        &mut self.fwd
    }

    /// Counters since creation.
    pub fn counters(&self) -> &ForwardCounters {
        &self.counters
    }

    fn note(&mut self, f: &Forwarded) {
        match f.exit {
            Exit::Interface { .. } => self.counters.forwarded += 1,
            Exit::Local { .. } => self.counters.local += 1,
        }
        self.counters.xovers += u64::from(f.xover);
    }
}

impl Element for ScionForward {
    fn name(&self) -> &str {
        "scion-forward"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = &self.counters;
        out("forwarded", c.forwarded);
        out("local", c.local);
        out("xovers", c.xovers);
        out("skipped", c.skipped);
        out("epic_hp_checked", c.epic_hp_checked);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    /// Replaces the key and the interface bindings (no packet is held, so
    /// nothing is lost); counters and options are kept.
    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        let c = config_of::<ScionForwardConfig>(config, "scion-forward")?;
        if self.config.as_ref() == Some(c) {
            return Ok(Reconfigured::Unchanged);
        }
        c.validate().map_err(Refused::Invalid)?;
        self.fwd.set_key(c.forwarding_key());
        self.fwd.interfaces_mut().rebind(&c.interfaces);
        self.fwd.set_local_ia(c.local_ia);
        self.fwd.set_epic_hp_freshness(c.epic_hp_freshness);
        self.config = Some(c.clone());
        Ok(Reconfigured::APPLIED)
    }
}

impl<B: PacketBuf> Stage<B> for ScionForward {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let mut inputs: [Block; BURST] = [[0; 16]; BURST];
        let mut which: [(u8, bool, usize, Range<usize>); BURST] =
            core::array::from_fn(|_| (0, false, 0, 0..0));
        let mut n = 0;
        let fresh = self.fwd.config().epic_hp_freshness.window(now.unix_ns);
        // Pass 1: parse and gather MAC inputs.
        for i in batch.live() {
            let Some(off) = scion_offset(batch.meta(i)) else {
                self.counters.skipped += 1;
                continue;
            };
            let data = batch.data(i);
            let loc = match locate(data, off) {
                Ok(l) => l,
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            };
            if !matches!(loc.path_type, PathType::SCION | PathType::EPIC_Z | PathType::EPIC_HP) {
                self.counters.skipped += 1;
                continue;
            }
            match Forwarder::prepare(&data[loc.scion.clone()]) {
                Ok(inp) => {
                    inputs[n] = inp;
                    which[n] = (i as u8, loc.path_type == PathType::EPIC_HP, loc.hdr, loc.scion);
                    n += 1;
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
        // Pass 2: one batched MAC computation for the burst (full 16-byte
        // tags: EPIC-HP keys its HVFs with them).
        let mut tags: [Block; BURST] = [[0; 16]; BURST];
        self.fwd.key().full_mac_batch(&inputs[..n], &mut tags[..n]);
        // Pass 3: verify, update, advance, route.
        let addressed = self.fwd.config().local_ia.is_some();
        for (k, (i, epic_hp, hdr, range)) in which[..n].iter().enumerate() {
            let i = usize::from(*i);
            let ingress = self.fwd.interfaces().ingress_if(batch.meta(i).port);
            let (buf, meta) = batch.get_mut(i);
            let data = buf.data_mut();
            let mac = mac::truncate(&tags[k]);
            let done = if addressed {
                // `locate` checked the header in pass 1.
                let h = ScionHeader::new_unchecked(&data[*hdr..]);
                let (src, dst) = (h.src_ia(), h.dst_ia());
                let path = &mut data[range.clone()];
                self.fwd.finish_addressed(path, &mac, ingress, now.unix_ns, src, dst)
            } else {
                self.fwd.finish(&mut data[range.clone()], &mac, ingress, now.unix_ns)
            };
            let done = done.and_then(|f| {
                if *epic_hp && check_epic_hp(data, *hdr, range.start, &f, &tags[k], &fresh)? {
                    self.counters.epic_hp_checked += 1;
                }
                Ok(f)
            });
            match done {
                Ok(f) => {
                    let class = meta.class().unwrap_or_default();
                    self.note(&f);
                    batch.forward(i, f.exit.port(), class);
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
    }
}

/// The EPIC-HP checks of a packet that [`Forwarder::finish`] forwarded as
/// `f` (its header at `hdr`, its SCION path at `scion`, `tag` the full MAC
/// of the hop field it verified first): none unless the last hop field it
/// verified is the path's penultimate or last; then freshness, then the
/// PHVF or LHVF under that hop field's full MAC. Whether it checked an HVF.
///
/// Forwarding changed only SegID and CurrINF/CurrHF, none of which the HVF
/// covers; the hop-field count and the first info field's Timestamp are
/// as they arrived.
#[inline]
fn check_epic_hp(
    data: &[u8],
    hdr: usize,
    scion: usize,
    f: &Forwarded,
    tag: &Block,
    fresh: &FreshWindow,
) -> Result<bool, DropReason> {
    let epic = EpicHpPath::new_unchecked(&data[scion - EPIC_HP_META_LEN..]);
    let p = epic.scion_path();
    let (n, last) = (p.num_hf(), usize::from(f.hop) + usize::from(f.xover));
    let got = if last + 1 == n {
        epic.lhvf()
    } else if last + 2 == n {
        epic.phvf()
    } else {
        return Ok(false);
    };
    let info0 = p.info_field(0).ok_or(DropReason::Malformed)?.timestamp();
    fresh.check_epic_hp(info0, epic.epic_ts())?;
    let origin = HvfOrigin::from_header(&ScionHeader::new_unchecked(&data[hdr..]));
    let input = origin.epic_hp_input(&epic.pkt_id_bytes(), info0);
    let sigma = f.xover_mac.as_ref().unwrap_or(tag);
    if verify_hvf(sigma, &input, &got) {
        Ok(true)
    } else {
        Err(DropReason::BadMac)
    }
}
