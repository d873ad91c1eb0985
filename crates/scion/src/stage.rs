//! The [`ScionForward`] pipeline stage.

use core::any::Any;
use core::ops::Range;

use mac::Block;
use packet::scion::{PathType, ScionHeader};
use pipeline::{
    config_of, Batch, Element, Now, PacketBuf, Reconfigured, Refused, Stage, Validate, BURST,
};

use crate::config::ScionForwardConfig;
use crate::forward::{Exit, Forwarded, Forwarder};
use crate::hopmac::HopMac;
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
}

/// SCION forwarding as a pipeline stage, for PathType 1 (SCION) and 201
/// (EPIC-Z, whose embedded SCION path it processes): verify the current hop
/// field, update the SegID, advance CurrHF/CurrINF (cross-over included), and
/// set the egress port. Other path types (SIBRA, empty) are left to their
/// own stages. The traffic class is kept.
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
        self.config = Some(c.clone());
        Ok(Reconfigured::APPLIED)
    }
}

impl<B: PacketBuf> Stage<B> for ScionForward {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let mut inputs: [Block; BURST] = [[0; 16]; BURST];
        let mut which: [(u8, usize, Range<usize>); BURST] = core::array::from_fn(|_| (0, 0, 0..0));
        let mut n = 0;
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
            if !matches!(loc.path_type, PathType::SCION | PathType::EPIC_Z) {
                self.counters.skipped += 1;
                continue;
            }
            match Forwarder::prepare(&data[loc.scion.clone()]) {
                Ok(inp) => {
                    inputs[n] = inp;
                    which[n] = (i as u8, loc.hdr, loc.scion);
                    n += 1;
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
        // Pass 2: one batched MAC computation for the burst.
        let mut macs: [HopMac; BURST] = [[0; 6]; BURST];
        self.fwd.key().mac_batch(&inputs[..n], &mut macs[..n]);
        // Pass 3: verify, update, advance, route.
        let addressed = self.fwd.config().local_ia.is_some();
        for (k, (i, hdr, range)) in which[..n].iter().enumerate() {
            let i = usize::from(*i);
            let ingress = self.fwd.interfaces().ingress_if(batch.meta(i).port);
            let (buf, meta) = batch.get_mut(i);
            let data = buf.data_mut();
            let done = if addressed {
                // `locate` checked the header in pass 1.
                let h = ScionHeader::new_unchecked(&data[*hdr..]);
                let (src, dst) = (h.src_ia(), h.dst_ia());
                let path = &mut data[range.clone()];
                self.fwd.finish_addressed(path, &macs[k], ingress, now.unix_ns, src, dst)
            } else {
                self.fwd.finish(&mut data[range.clone()], &macs[k], ingress, now.unix_ns)
            };
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
