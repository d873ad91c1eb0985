//! Procedure 1: source stamping at the source AS's egress border router (spec §5.2).
//!
//! The extended FIB maps a destination prefix to a channel; the channel holds
//! K_SD (expanded), the 24-bit sequence counter (shared by all workers through
//! an `Arc<AtomicU32>`, so `(ts, seqno)` stays unique, A23) and this worker's
//! token-bucket share.
//!
//! ## The burst path
//! A burst whose live packets all go to one destination as plain IPv6 at
//! one offset with one Next Header (one flow's burst, the common case) is
//! stamped as one *lead run* (`lead`): the burst's sequence numbers
//! reserved up front with one atomic add (those left unused given back),
//! each packet checked (one whose IP header starts like the first
//! packet's in a few compares), shaped and given its whole header but the
//! ICV in one touch, the run's ICVs computed as one same-key AES batch and
//! stored through references kept from that touch; no queue, every
//! offset constant. A burst whose lead run ends early has the run sealed
//! the same way and pass 1 goes on from the packet that ended it.
//!
//! Any other burst runs in three passes:
//! 1. **Per packet**: the common packet (IPv6 whose Next Header names
//!    TCP/UDP/ICMPv6/no-next, or IPv4 without options, not already FAIR,
//!    within the MTU, with headroom) has its IP header read once; the channel
//!    comes from the compiled FIB ([`RangeIndex`], memoised per destination
//!    within the burst); the shaper runs per run of one channel with its fill
//!    in a register (the same decisions as per-packet `try_consume`); the IP
//!    header is moved by register copies, patched in place, and the FAIR
//!    header (timestamp, NextAS = 0, zero slots) stored behind it.
//!    After a packet shaped this way, the packets that follow it to the same
//!    destination (plain IPv6 at the same offset, 16-byte FAIR header: one
//!    flow's burst) take a run loop with every offset constant, the fill and
//!    queue length in registers and the destination compared as it lies in
//!    memory, until the first packet that differs.
//!    A burst with more than one destination is classified completely first
//!    (pass 1a, prefetching each new channel's shaper and key lines) and then
//!    shaped and written (pass 1b), so that the cache misses of many channels
//!    overlap (BM-3); a one-destination burst does both per packet.
//!    Anything else takes the per-packet path (`slow_one`), unchanged from the
//!    earlier stage, with the run's shaper state written back first.
//! 2. **Per run of one channel**: sequence numbers reserved with one atomic
//!    add; ICV inputs built; the ICVs computed as same-key batches (VAES where
//!    present) when runs are long, else as one interleaved multi-key batch.
//! 3. **Per packet**: sequence number and ICV written with one 4-byte store.
//!
//! The per-packet path, run alone, is the reference the burst path is
//! tested against (byte-identical packets, verdicts, metadata, counters,
//! shaper fills and sequence counters).
//!
//! Route changes ([`FairSource::route`]) mark the compiled FIB stale; it is
//! rebuilt by [`FairSource::commit_routes`] or, failing that, at the start of
//! the next burst.
//!
//! ## Where things are
//! This module holds the channel, the stage and its burst (the three passes
//! as named steps); `lead` is the lead run, `burst` pass 1 of the burst
//! path (classify, shape, insert), `frame` the header writes it is made
//! of, `reference` the per-packet path. Building the stage from a
//! `fair-source` configuration and changing it live is [`crate::stage`]'s.

use crate::sync::{Arc, AtomicU32, Ordering};
use std::net::IpAddr;

use mac::{Aes, Block, Key};
use packet::fair::Carrier;
use pipeline::{Batch, Now, PacketBuf, Stage, BURST};

use crate::bucket::TokenBucket;
use crate::common::{run_end, Codes, Framing};
use crate::config::FairSourceConfig;
use crate::crypto::{icv_block, icv_hi};
use crate::lpm::{PrefixTable, RangeIndex};
use crate::time::now16;
use crate::wire;

mod burst;
mod frame;
mod lead;
mod reference;
#[cfg(test)]
mod tests;

use burst::{Lane, Pass1};
use lead::{Lead, Route};

/// One communication channel as the source sees it.
///
/// Laid out for the burst path: what pass 1 touches (shaper, counter
/// handle, `m`) in the first cache line, the expanded key in the next three.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct SourceChannel {
    pub(crate) bucket: TokenBucket,
    seq: Arc<AtomicU32>,
    /// Channel id (local).
    pub id: u32,
    /// Destination ASN.
    pub dst_asn: u32,
    /// Cooperating transit ASes the header must have room for (`m`).
    pub m: u8,
    pub(crate) k_sd: Aes,
}

impl SourceChannel {
    /// A channel to `dst_asn` with `m` cooperating ASes, shaped to (CIR, CBS)
    /// (this worker's share), with a sequence counter shared among workers.
    #[allow(clippy::too_many_arguments)] // one per channel attribute
    pub fn new(
        id: u32,
        dst_asn: u32,
        k_sd: &Key,
        m: u8,
        cir: u64,
        cbs: u64,
        now_ns: u64,
        seq: Arc<AtomicU32>,
    ) -> Self {
        SourceChannel {
            id,
            k_sd: Aes::new(k_sd),
            seq,
            bucket: TokenBucket::new(cir, cbs, now_ns),
            m,
            dst_asn,
        }
    }

    /// The next sequence number (first packet 0; wraps after 0xFFFFFF).
    #[inline]
    pub fn next_seqno(&self) -> u32 {
        self.seq.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF
    }

    /// Reserves `k` consecutive sequence numbers; returns the first (mask to 24 bits).
    #[inline]
    pub fn reserve_seqnos(&self, k: u32) -> u32 {
        self.seq.fetch_add(k, Ordering::Relaxed)
    }

    /// Gives back the unused end of a reservation: `reserved` numbers from
    /// `base` ([`reserve_seqnos`](Self::reserve_seqnos)) of which only the
    /// first `used` were taken. The counter then stands where reserving
    /// `used` would have left it, unless another reservation came after
    /// this one: the unused numbers then stay a gap in the channel's
    /// sequence, which the destination tolerates (it needs `(ts, seqno)`
    /// unique, not dense: spec §5.2; its duplicate filter and the
    /// verifiers' deduplication group equal pairs only).
    #[inline]
    pub fn give_back(&self, base: u32, reserved: u32, used: u32) {
        let end = base.wrapping_add(reserved);
        let _ = self.seq.compare_exchange(
            end,
            base.wrapping_add(used),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Applies a newly negotiated policy (CIR, CBS) to this worker's bucket.
    pub fn set_policy(&mut self, cir: u64, cbs: u64, now_ns: u64) {
        self.bucket.reconfigure(cir, cbs, now_ns);
    }

    /// Re-keys the channel (new `key_version`).
    pub fn set_key(&mut self, k_sd: &Key) {
        self.k_sd = Aes::new(k_sd);
    }
}

/// Token-bucket action at the source (§4 `nonconforming_action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NonConforming {
    /// Drop non-conforming packets (policer; default).
    #[default]
    Drop,
    /// Stamp and forward them anyway (the destination will see the violation).
    Forward,
}

/// Source-stage configuration.
#[derive(Clone, Copy, Debug)]
pub struct SourceConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Spare IPv4 slots beyond m (§2.6).
    pub v4_spare: usize,
    /// Network-layer MTU of the egress: larger packets go to control (ICMP PTB / Frag-Needed).
    pub mtu: u16,
    /// What to do with packets over the channel's rate.
    pub nonconforming: NonConforming,
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            codes: Codes::default(),
            framing: Framing::Ethernet,
            v4_spare: 0,
            mtu: 1500,
            nonconforming: NonConforming::Drop,
        }
    }
}

/// Counters beyond the pipeline's drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Packets stamped.
    pub stamped: u64,
    /// Packets without a channel (forwarded as plain IP).
    pub no_channel: u64,
    /// Jumbograms forwarded unmarked.
    pub jumbo_unmarked: u64,
    /// Packets that already carried a FAIR header (dropped).
    pub src_preexisting_fair: u64,
    /// Packets too big for the MTU with the header (to control).
    pub too_big: u64,
    /// Non-conforming packets (dropped or forwarded).
    pub nonconforming: u64,
}

/// One stamped packet of the current burst (pass 1 → passes 2 and 3).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Todo {
    /// Packet index.
    i: u8,
    /// Channel index.
    ci: u32,
    /// Offset of the FAIR header in the frame.
    off: u16,
    /// The MAC'd length field after insertion.
    len_field: u16,
    /// Sequence number (pass 2).
    seq: u32,
}

/// No channel (memo and run sentinel).
pub(crate) const NO_CH: u32 = u32::MAX;

/// The source stage (Procedure 1).
#[derive(Debug)]
pub struct FairSource {
    pub(crate) cfg: SourceConfig,
    pub(crate) channels: Vec<SourceChannel>,
    pub(crate) fib: PrefixTable<u32>,
    /// `fib` compiled for the burst path; rebuilt when `fib_stale`.
    fib_index: Option<RangeIndex>,
    pub(crate) fib_stale: bool,
    /// Counters.
    pub stats: SourceStats,
    /// Per-burst scratch, kept here so that nothing is zeroed per burst.
    todo: [Todo; BURST],
    blocks: [Block; BURST],
    lanes: [Lane; BURST],
    /// The last lead run's route (forgotten when the routes change).
    route: Route,
    /// The `fair-source` configuration it was built from (live changes
    /// compare against it); `None` for a stage built in code.
    pub(crate) configured: Option<Box<FairSourceConfig>>,
    /// Tests: run the reference (per-packet) path only.
    #[cfg(test)]
    slow_only: bool,
}

impl FairSource {
    /// An empty stage.
    pub fn new(cfg: SourceConfig) -> Self {
        FairSource {
            cfg,
            channels: Vec::new(),
            fib: PrefixTable::new(),
            fib_index: None,
            fib_stale: false,
            stats: SourceStats::default(),
            todo: [Todo::default(); BURST],
            blocks: [[0; 16]; BURST],
            lanes: [Lane::default(); BURST],
            route: Route::NONE,
            configured: None,
            #[cfg(test)]
            slow_only: false,
        }
    }

    /// Adds a channel; returns its index.
    pub fn add_channel(&mut self, ch: SourceChannel) -> usize {
        self.channels.push(ch);
        self.channels.len() - 1
    }

    /// Routes destination prefix `addr/len` into channel `idx`. The compiled
    /// FIB is rebuilt by [`commit_routes`](Self::commit_routes) (or by the
    /// next burst).
    pub fn route(&mut self, addr: IpAddr, len: u8, idx: usize) {
        self.fib.insert(addr, len, idx as u32);
        self.fib_stale = true;
    }

    /// Compiles the routes for the burst path (O(n log n); a control plane
    /// calls this after a batch of [`route`](Self::route) calls so that no
    /// burst pays for it).
    pub fn commit_routes(&mut self) {
        if self.fib_stale {
            // `None` only for a channel index of u32::MAX: the table answers then.
            self.fib_index = RangeIndex::build(&self.fib);
            self.fib_stale = false;
            self.route = Route::NONE;
        }
    }

    /// The channel at `idx`, mutable (policy updates between bursts).
    pub fn channel_mut(&mut self, idx: usize) -> Option<&mut SourceChannel> {
        self.channels.get_mut(idx)
    }
}

/// FAIR header length and length code for channel `ci` (§2.5, §2.6);
/// `None` for a slot count the header cannot hold.
#[inline]
pub(crate) fn layout(
    channels: &[SourceChannel],
    v4_spare: usize,
    ci: u32,
    v6: bool,
) -> Option<(usize, u8)> {
    let ch = channels.get(ci as usize)?;
    let carrier = if v6 { Carrier::Ipv6 } else { Carrier::Ipv4 };
    let (n_slots, fair_len) = wire::layout(carrier, ch.m as usize, v4_spare)?;
    Some((fair_len, carrier.hdr_len_for(n_slots).ok()?))
}

/// The channel routed for `key`.
#[inline(always)]
pub(crate) fn fib_lookup(
    fib: &PrefixTable<u32>,
    index: Option<&RangeIndex>,
    key: u128,
) -> Option<u32> {
    match index {
        Some(x) => x.lookup(key),
        None => fib.lookup(key).copied(),
    }
}

impl<B: PacketBuf> Stage<B> for FairSource {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        // Tested here: the common burst finds nothing to compile, without a call.
        if self.fib_stale {
            self.commit_routes();
        }
        #[cfg(test)]
        if self.slow_only {
            return self.process_reference(batch, now);
        }
        let ts = now16(now.unix_secs());
        let FairSource { cfg, channels, fib, fib_index, stats, todo, blocks, lanes, route, .. } =
            self;
        let mut p1 = Pass1::new(*cfg, fib, fib_index.as_ref(), channels, stats, now, ts);
        // One flow's burst is stamped and sealed whole; otherwise its lead
        // run is sealed and pass 1 goes on after it.
        let (live, n) = match p1.lead(batch, route, blocks) {
            Lead::Sealed => return,
            Lead::Rest(live, n) => (live, n),
        };
        // Pass 1: classify, shape, insert, timestamp.
        let n = p1.burst(batch, live, n, todo, lanes);
        // One destination and nothing stamped packet by packet: one run,
        // known without scanning.
        let one_run = p1.lookups <= 1 && !p1.slow_stamped;
        let channels = &*p1.channels;
        if one_run {
            // One channel, known without scanning: one same-key batch.
            if let Some(ch) = todo[..n].first().and_then(|t| channels.get(t.ci as usize)) {
                seal_one_run(batch, ch, &todo[..n], blocks, ts);
            }
            return;
        }
        // Pass 2: sequence numbers and ICVs.
        seal(channels, todo, blocks, n, ts);
        // Pass 3: sequence number and ICV, one 4-byte store.
        for (t, b) in todo[..n].iter().zip(&blocks[..n]) {
            let off = t.off as usize;
            if let Some(h) = batch.buf_mut(t.i as usize).data_mut().get_mut(off + 4..off + 8) {
                h.copy_from_slice(&((t.seq << 8) | b[0] as u32).to_be_bytes());
            }
        }
    }
}

/// Passes 2 and 3 for a burst known to be one run of channel `ch` (`todo`
/// not empty): the sequence numbers reserved with one atomic add, the ICV
/// inputs built (the burst's constant part hoisted) and encrypted as one
/// same-key batch (VAES where present), then per packet the 4-byte store
/// of sequence number and ICV. The sequence numbers are recomputed from
/// the base rather than stored and read back.
#[inline(always)]
fn seal_one_run<B: PacketBuf>(
    batch: &mut Batch<B>,
    ch: &SourceChannel,
    todo: &[Todo],
    blocks: &mut [Block; BURST],
    ts: u16,
) {
    let base = ch.reserve_seqnos(todo.len() as u32);
    // `icv_block` of each packet: the constant part (tag, timestamp) ORed in.
    let head = icv_hi(0, ts, 0);
    let n = todo.len().min(BURST);
    for (k, (t, b)) in todo.iter().zip(&mut blocks[..n]).enumerate() {
        let seq = base.wrapping_add(k as u32) & 0x00FF_FFFF;
        *b = (u128::from(head | icv_hi(t.len_field, 0, seq)) << 64).to_be_bytes();
    }
    ch.k_sd.encrypt_blocks(&mut blocks[..n]);
    for (k, (t, b)) in todo.iter().zip(&blocks[..n]).enumerate() {
        let seq = base.wrapping_add(k as u32) & 0x00FF_FFFF;
        let off = t.off as usize;
        if let Some(h) = batch.buf_mut(t.i as usize).data_mut().get_mut(off + 4..off + 8) {
            h.copy_from_slice(&((seq << 8) | b[0] as u32).to_be_bytes());
        }
    }
}

/// Pass 2: sequence numbers reserved once per run of one channel (one
/// atomic add per run; the numbers stay unique and consecutive) and the
/// ICV inputs, then the ICVs: long runs get same-key batches (VAES where
/// present), short ones one multi-key batch with eight lanes interleaved
/// whatever their keys.
#[inline(always)]
fn seal(
    channels: &[SourceChannel],
    todo: &mut [Todo; BURST],
    blocks: &mut [Block; BURST],
    n: usize,
    ts: u16,
) {
    if n == 0 {
        return;
    }
    let mut runs = 0usize;
    let mut ends = [0u8; BURST];
    let mut s = 0;
    while s < n {
        let e = run_end(&todo[..], s, n, |t| t.ci);
        ends[runs % BURST] = e as u8;
        let base = channels[todo[s].ci as usize].reserve_seqnos((e - s) as u32);
        for (k, (t, b)) in todo[s..e].iter_mut().zip(&mut blocks[s..e]).enumerate() {
            t.seq = base.wrapping_add(k as u32) & 0x00FF_FFFF;
            *b = icv_block(t.len_field, ts, t.seq);
        }
        runs += 1;
        s = e;
    }
    if runs * 8 <= n {
        let mut s = 0;
        for e in ends[..runs].iter().map(|e| *e as usize) {
            channels[todo[s].ci as usize].k_sd.encrypt_blocks(&mut blocks[s..e]);
            s = e;
        }
    } else {
        let todo = &*todo;
        Aes::encrypt_each(|k| &channels[todo[k].ci as usize].k_sd, &mut blocks[..n]);
    }
}
