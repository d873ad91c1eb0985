//! Procedure 1: source stamping at the source AS's egress border router (spec §5.2).
//!
//! The extended FIB maps a destination prefix to a channel; the channel holds
//! K_SD (expanded), the 24-bit sequence counter (shared by all workers through
//! an `Arc<AtomicU32>`, so `(ts, seqno)` stays unique, A23) and this worker's
//! token-bucket share. The stage inserts the FAIR header with
//! `pipeline::buf::insert_gap`, stamps timestamp and sequence number, and
//! computes the ICVs of the whole burst with pipelined AES.

use crate::sync::{Arc, AtomicU32, Ordering};
use std::net::IpAddr;

use mac::{Aes, Block, Key};
use packet::fair::Carrier;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage, BURST, L3, NO_OFFSET};

use crate::bucket::TokenBucket;
use crate::common::{l3_of, locate_meta, set_meta, Codes, Framing};
use crate::crypto::icv_block;
use crate::lpm::{key_v4, key_v6, PrefixTable};
use crate::time::now16;
use crate::wire::{self, InsertError};

/// One communication channel as the source sees it.
#[derive(Debug)]
pub struct SourceChannel {
    /// Channel id (local).
    pub id: u32,
    k_sd: Aes,
    seq: Arc<AtomicU32>,
    bucket: TokenBucket,
    /// Cooperating transit ASes the header must have room for (`m`).
    pub m: u8,
    /// Destination ASN.
    pub dst_asn: u32,
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

/// The source stage (Procedure 1).
#[derive(Debug)]
pub struct FairSource {
    cfg: SourceConfig,
    channels: Vec<SourceChannel>,
    fib: PrefixTable<u32>,
    /// Counters.
    pub stats: SourceStats,
}

impl FairSource {
    /// An empty stage.
    pub fn new(cfg: SourceConfig) -> Self {
        FairSource {
            cfg,
            channels: Vec::new(),
            fib: PrefixTable::new(),
            stats: SourceStats::default(),
        }
    }

    /// Adds a channel; returns its index.
    pub fn add_channel(&mut self, ch: SourceChannel) -> usize {
        self.channels.push(ch);
        self.channels.len() - 1
    }

    /// Routes destination prefix `addr/len` into channel `idx`.
    pub fn route(&mut self, addr: IpAddr, len: u8, idx: usize) {
        self.fib.insert(addr, len, idx as u32);
    }

    /// The channel at `idx`, mutable (policy updates between bursts).
    pub fn channel_mut(&mut self, idx: usize) -> Option<&mut SourceChannel> {
        self.channels.get_mut(idx)
    }
}

impl<B: PacketBuf> Stage<B> for FairSource {
    fn name(&self) -> &str {
        "fair-source"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_s = now.unix_secs();
        let ts = now16(now_s);
        // Pass 1: classify, police, insert, stamp; gather ICV blocks.
        let mut todo: [(u8, u32, u16, u16); BURST] = [(0, 0, 0, 0); BURST]; // (packet, channel, fair_off, len_field)
        let mut last: Option<(u128, Option<u32>)> = None;
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        let mut n = 0usize;
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let Some((l3_off, l3)) = l3_of(frame, meta, self.cfg.framing) else { continue };
            // Common case without a header walk: the IP header names an upper-layer
            // protocol directly (IPv6 TCP/UDP/ICMPv6/no-next, IPv4 anything but FAIR).
            let plain = match l3 {
                L3::Ipv6 => frame
                    .get(l3_off + 6)
                    .is_some_and(|nh| matches!(nh, 6 | 17 | 58 | 59) && *nh != self.cfg.codes.v6),
                L3::Ipv4 => frame.get(l3_off + 9).is_some_and(|p| *p != self.cfg.codes.v4),
                L3::None => false,
            };
            match if plain {
                Ok(None)
            } else {
                locate_meta(frame, meta, self.cfg.framing, self.cfg.codes)
            } {
                Ok(None) => {}
                Ok(Some(_)) => {
                    self.stats.src_preexisting_fair += 1;
                    batch.drop_packet(i, DropReason::Policy);
                    continue;
                }
                Err(r) => {
                    batch.drop_packet(i, r);
                    continue;
                }
            }
            let ip = &frame[l3_off..];
            let (key, carrier, len_field) = match l3 {
                L3::Ipv6 if ip.len() >= 40 => {
                    let dst: [u8; 16] = ip[24..40].try_into().unwrap_or([0; 16]);
                    (key_v6(dst), Carrier::Ipv6, u16::from_be_bytes([ip[4], ip[5]]))
                }
                L3::Ipv4 if ip.len() >= 20 => (
                    key_v4([ip[16], ip[17], ip[18], ip[19]]),
                    Carrier::Ipv4,
                    u16::from_be_bytes([ip[2], ip[3]]),
                ),
                _ => {
                    batch.drop_packet(i, DropReason::Truncated);
                    continue;
                }
            };
            // Destinations repeat within a burst: one FIB lookup per run.
            let ci = match last {
                Some((k, c)) if k == key => c,
                _ => {
                    let c = self.fib.lookup(key).copied();
                    last = Some((key, c));
                    c
                }
            };
            let Some(ci) = ci else {
                self.stats.no_channel += 1;
                continue;
            };
            let ch = &mut self.channels[ci as usize];
            let Some((n_slots, fair_len)) = wire::layout(carrier, ch.m as usize, self.cfg.v4_spare)
            else {
                batch.drop_packet(i, DropReason::Unsupported);
                continue;
            };
            let net = wire::net_len(carrier, len_field);
            if net + fair_len as u64 > self.cfg.mtu as u64 {
                self.stats.too_big += 1;
                batch.to_control(i);
                continue;
            }
            if !ch.bucket.try_consume(net + fair_len as u64, now.mono_ns) {
                self.stats.nonconforming += 1;
                if self.cfg.nonconforming == NonConforming::Drop {
                    batch.drop_packet(i, DropReason::OverRate);
                    continue;
                }
            }
            let (buf, meta) = batch.get_mut(i);
            let p = match wire::insert(buf, l3_off, l3, n_slots, self.cfg.codes.for_l3(l3)) {
                Ok(p) => p,
                Err(InsertError::Jumbogram) => {
                    self.stats.jumbo_unmarked += 1;
                    continue;
                }
                Err(InsertError::Malformed(e)) => {
                    batch.drop_packet(i, e.into());
                    continue;
                }
                Err(InsertError::TooBig) => {
                    self.stats.too_big += 1;
                    batch.to_control(i);
                    continue;
                }
                Err(InsertError::NoRoom) => {
                    batch.drop_packet(i, DropReason::Unsupported); // no headroom in the buffer
                    continue;
                }
            };
            if meta.l4_off != NO_OFFSET {
                meta.l4_off += fair_len as u16;
            }
            set_meta(meta, &p);
            let len_field = p.len_field(buf.data());
            todo[n] = (i as u8, ci, p.fair_off() as u16, len_field);
            n += 1;
            self.stats.stamped += 1;
        }
        // Pass 2: sequence numbers reserved once per run of one channel (one
        // atomic add per run instead of per packet; the numbers stay unique
        // and consecutive), timestamps, ICV inputs, then the ICVs pipelined.
        let mut s = 0;
        while s < n {
            let ci = todo[s].1;
            let mut e = s + 1;
            while e < n && todo[e].1 == ci {
                e += 1;
            }
            let ch = &self.channels[ci as usize];
            let base = ch.reserve_seqnos((e - s) as u32);
            for (k, t) in todo[s..e].iter().enumerate() {
                let seq = base.wrapping_add(k as u32) & 0x00FF_FFFF;
                let off = t.2 as usize;
                if let Some(h) = batch.buf_mut(t.0 as usize).data_mut().get_mut(off + 2..off + 7) {
                    h[0..2].copy_from_slice(&ts.to_be_bytes());
                    h[2..5].copy_from_slice(&seq.to_be_bytes()[1..]);
                }
                blocks[s + k] = icv_block(t.3, ts, seq);
            }
            ch.k_sd.encrypt_blocks(&mut blocks[s..e]);
            s = e;
        }
        // Pass 3: write the ICVs.
        for k in 0..n {
            let (i, _, off, _) = todo[k];
            if let Some(b) = batch.buf_mut(i as usize).data_mut().get_mut(off as usize + 7) {
                *b = blocks[k][0];
            }
        }
    }
}
