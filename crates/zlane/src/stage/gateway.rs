//! The `zlane-gateway` stage: [`Gateway`] over whole bursts.

use core::any::Any;

use mac::Aes;
use packet::checksum::fold;
use packet::scion::epic::{FLAG_Q, HVF_LEN};
use packet::scion::path::HOP_LEN;
use pipeline::{
    config_of, Batch, DropReason, Element, Now, PacketBuf, Proto, Reconfigured, Refused, Stage,
    NO_OFFSET,
};

use crate::config::GatewayConfig;
use crate::gateway::{as_hvf_block, Admit, Gateway};
use crate::hvf::Hvf;
use crate::rewrite::{patch_udp_checksum, span_sum, Rewrite, FLAGS_OFF, HVFS_OFF};

/// One AS-level HVF of a burst: the on-path AS key and V_i (then Ṽ_i).
#[derive(Clone, Copy, Debug, Default)]
struct Job {
    key: u32,
    v: Hvf,
}

/// A burst packet waiting for its AS-level HVFs.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    /// Index in the batch.
    idx: u8,
    /// Offset of the SCION header in the frame.
    scion: usize,
    /// Offset of the EPIC-Z path in the SCION packet.
    path_off: usize,
    /// Hops (= jobs from `first`).
    n: usize,
    first: usize,
    /// Underlay UDP header offset, if any.
    udp: Option<usize>,
    old_sum: u16,
}

/// Where a packet sits in its frame.
#[derive(Clone, Copy)]
struct At {
    /// Offset of the SCION header.
    scion: usize,
    /// Offset of the underlay UDP header, if any.
    udp: Option<usize>,
}

impl At {
    /// Patches the underlay UDP checksum after `rw` (offsets in the SCION packet).
    #[inline]
    fn patch(&self, frame: &mut [u8], rw: &Rewrite) {
        if let Some(u) = self.udp {
            patch_udp_checksum(frame, u, self.scion + rw.offset, rw);
        }
    }
}

/// The gateway as a pipeline stage (class and port are left as they are).
///
/// A burst is processed in passes: parse and police every packet (over-rate
/// packets are finished without MAC work), then compute the AS-level HVFs of
/// all authorized packets, eight at a time interleaved whatever their
/// on-path AS keys (one call per burst instead of one per hop and packet),
/// then write HVFs, Q and the patched underlay UDP checksum back. Results
/// are identical to [`Gateway::process`] per packet.
///
/// A live change ([`Element::reconfigure`] with a [`GatewayConfig`]) is
/// [`Gateway::reconfigure`]: host state and counters stay.
pub struct ZlaneGateway {
    inner: Gateway,
    waiting: Vec<Waiting>,
    jobs: Vec<Job>,
    blocks: Vec<[u8; 16]>,
}

impl ZlaneGateway {
    /// Wraps a gateway (scratch space for a burst of 32 packets × 8 hops is
    /// allocated here; longer paths grow it once).
    pub fn new(inner: Gateway) -> Self {
        const JOBS: usize = pipeline::BURST * 8;
        ZlaneGateway {
            inner,
            waiting: Vec::with_capacity(pipeline::BURST),
            jobs: Vec::with_capacity(JOBS),
            blocks: vec![[0; 16]; JOBS],
        }
    }

    /// The gateway.
    pub fn gateway(&self) -> &Gateway {
        &self.inner
    }

    /// The gateway, mutable (keys, hops between bursts).
    pub fn gateway_mut(&mut self) -> &mut Gateway {
        &mut self.inner
    }

    /// Pass 1 for packet `i`: parse and police; an authorized packet's HVFs
    /// become jobs, everything else is finished here.
    #[inline]
    fn admit<B: PacketBuf>(&mut self, batch: &mut Batch<B>, i: usize, now: Now) {
        let meta = batch.meta(i);
        let Some(scion) = scion::scion_offset(meta) else { return };
        // The underlay UDP header, if the parser found SCION inside UDP.
        let udp = (meta.proto == Proto::Scion && meta.l4_off != NO_OFFSET)
            .then_some(usize::from(meta.l4_off));
        let at = At { scion, udp };
        let data = batch.buf_mut(i).data_mut();
        let Some(pkt) = data.get_mut(scion..) else {
            batch.drop_packet(i, DropReason::Truncated);
            return;
        };
        match self.inner.admit(pkt, now) {
            Ok(Admit::Done(_, Some(rw))) => at.patch(data, &rw),
            Ok(Admit::Done(_, None)) => {}
            Ok(Admit::Authorize { path_off, n, hops_off }) => {
                self.collect(data, at, i, path_off, n, hops_off);
            }
            Err(reason) => batch.drop_packet(i, reason),
        }
    }

    /// Queues the HVFs of an authorized packet as jobs, or demotes it if a
    /// hop has no known AS key (as [`Gateway::process`] does).
    ///
    /// The hop fields and HVFs are sliced once (the EPIC-Z path was
    /// validated by [`Gateway::admit`]): no bounds check per hop. The folded
    /// sum of the span the checksum patch needs (flags word and HVFs, as
    /// [`span_sum`] sums it) is added up from the words read here.
    #[inline]
    fn collect(
        &mut self,
        frame: &mut [u8],
        at: At,
        i: usize,
        path_off: usize,
        n: usize,
        hops_off: usize,
    ) {
        let path = &mut frame[at.scion + path_off..];
        let first = self.jobs.len();
        let mut known = true;
        let mut acc;
        {
            let hops = &path[hops_off..hops_off + n * HOP_LEN];
            let span = &path[FLAGS_OFF..HVFS_OFF + n * HVF_LEN];
            let (flags, hvfs) = span.split_at(HVFS_OFF - FLAGS_OFF);
            acc = u64::from(u32::from_be_bytes([flags[0], flags[1], flags[2], flags[3]]));
            for (hop, v) in hops.chunks_exact(HOP_LEN).zip(hvfs.chunks_exact(HVF_LEN)) {
                // The hop field's MAC σ (its last 6 bytes) names the AS.
                let Some(key) = self.inner.key_of(&hop[6..]) else {
                    known = false;
                    break;
                };
                let v: Hvf = [v[0], v[1], v[2], v[3]];
                acc += u64::from(u32::from_be_bytes(v));
                self.jobs.push(Job { key, v });
            }
        }
        if !known {
            self.jobs.truncate(first);
            let rw = self.inner.unknown_hop(path, path_off);
            at.patch(frame, &rw);
            return;
        }
        let old_sum = fold(acc);
        let (idx, scion, udp) = (i as u8, at.scion, at.udp);
        self.waiting.push(Waiting { idx, scion, path_off, n, first, udp, old_sum });
    }

    /// Pass 2: Ṽ_i for every job of the burst, each under its on-path AS
    /// key, eight at a time interleaved (keys may differ per lane, so no
    /// grouping by key is needed).
    fn compute(&mut self) {
        let n = self.jobs.len();
        if self.blocks.len() < n {
            self.blocks.resize(n, [0; 16]);
        }
        let gw = &self.inner;
        for (b, job) in self.blocks.iter_mut().zip(&self.jobs) {
            *b = as_hvf_block(gw.key_at(job.key), job.v);
        }
        let jobs = &self.jobs;
        Aes::encrypt_each(|j| gw.key_at(jobs[j].key).aes(), &mut self.blocks[..n]);
        for (job, t) in self.jobs.iter_mut().zip(&self.blocks) {
            job.v.copy_from_slice(&t[..HVF_LEN]);
        }
    }

    /// Pass 3: HVFs, Q and the patched checksum back into the packets.
    fn write_back<B: PacketBuf>(&mut self, batch: &mut Batch<B>) {
        for w in &self.waiting {
            let data = batch.buf_mut(usize::from(w.idx)).data_mut();
            let path = &mut data[w.scion + w.path_off..];
            for (h, job) in self.jobs[w.first..w.first + w.n].iter().enumerate() {
                let o = HVFS_OFF + h * HVF_LEN;
                path[o..o + HVF_LEN].copy_from_slice(&job.v);
            }
            path[FLAGS_OFF] |= FLAG_Q;
            self.inner.counters.authorized += 1;
            if w.udp.is_some() {
                let new_sum = span_sum(path, w.n);
                let rw = Rewrite { offset: w.path_off + FLAGS_OFF, old_sum: w.old_sum, new_sum };
                At { scion: w.scion, udp: w.udp }.patch(data, &rw);
            }
        }
    }
}

impl Element for ZlaneGateway {
    fn name(&self) -> &str {
        "zlane-gateway"
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let cfg = config_of::<GatewayConfig>(config, "zlane-gateway")?;
        self.inner.reconfigure(cfg, now)
    }
}

impl<B: PacketBuf> Stage<B> for ZlaneGateway {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.waiting.clear();
        self.jobs.clear();
        for i in batch.live() {
            self.admit(batch, i, now);
        }
        if self.waiting.is_empty() {
            return;
        }
        // All MACs, interleaved across packets and hops.
        self.compute();
        self.write_back(batch);
    }
}
