//! Procedure 2: marking at a cooperating transit AS's egress border router (spec §5.3).
//!
//! Per packet: freshness check (±3 s, wrap-aware), a 4-bit nonce from the
//! per-worker generator, the 4-bit MAC under the data key of the packet's
//! timestamp epoch, and the NextAS increment preserving the suspicious bit.
//! No per-packet or per-flow state. The AES calls of a burst run pipelined.

use std::sync::Arc;

use mac::Block;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage, BURST};

use crate::common::{locate_meta, set_meta, Codes, Framing};
use crate::crypto::mark_block;
use crate::keys::KeyRing;
use crate::rng::NonceGen;
use crate::time::{is_fresh, is_past, unwrap_near};

/// What to do when the header has no free slot (§4 `slot_overflow_action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OverflowAction {
    /// Drop (default): under-allocation must not evade accountability (SEC-26).
    #[default]
    Drop,
    /// Forward unmarked.
    Forward,
}

/// What to do with a malformed FAIR header (§2.9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MalformedAction {
    /// Drop and count (default).
    #[default]
    Drop,
    /// Forward unmarked (`forward_malformed_unmarked`).
    ForwardUnmarked,
}

/// Transit-stage configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct TransitConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Slot overflow action.
    pub overflow: OverflowAction,
    /// Malformed-header action.
    pub malformed: MalformedAction,
}

/// Counters beyond the pipeline's drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransitStats {
    /// Packets marked.
    pub marked: u64,
    /// Non-FAIR packets passed through.
    pub not_fair: u64,
    /// Stale or future timestamps.
    pub stale: u64,
    /// Malformed FAIR headers.
    pub malformed: u64,
    /// Headers without a free slot.
    pub slot_overflow: u64,
    /// No data key for the packet's epoch.
    pub no_key: u64,
}

/// The transit marking stage (Procedure 2).
#[derive(Debug)]
pub struct FairTransit {
    cfg: TransitConfig,
    keys: Arc<KeyRing>,
    rng: NonceGen,
    /// Counters.
    pub stats: TransitStats,
}

impl FairTransit {
    /// A stage marking with `keys`; `seed` seeds this worker's nonce generator
    /// (give each worker its own seed from the OS CSPRNG).
    pub fn new(cfg: TransitConfig, keys: Arc<KeyRing>, seed: u64) -> Self {
        FairTransit { cfg, keys, rng: NonceGen::new(seed), stats: TransitStats::default() }
    }

    /// Replaces the nonce generator (e.g. [`NonceGen::fixed`] for known answers).
    pub fn set_nonce_gen(&mut self, rng: NonceGen) {
        self.rng = rng;
    }

    /// Publishes a new key ring (after rotation), between bursts.
    pub fn set_keys(&mut self, keys: Arc<KeyRing>) {
        self.keys = keys;
    }

    /// The key ring in use.
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.keys
    }
}

impl<B: PacketBuf> Stage<B> for FairTransit {
    fn name(&self) -> &str {
        "fair-transit"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_s = now.unix_secs();
        let mut todo: [(u8, u16, u8, u8, u64); BURST] = [(0, 0, 0, 0, 0); BURST]; // (pkt, fair_off, slot, nonce, epoch)
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        let mut n = 0usize;
        // Pass 1: checks and MAC inputs.
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let p = match locate_meta(frame, meta, self.cfg.framing, self.cfg.codes) {
                Ok(Some(p)) => p,
                Ok(None) => {
                    self.stats.not_fair += 1;
                    continue;
                }
                Err(r) => {
                    self.stats.malformed += 1;
                    if self.cfg.malformed == MalformedAction::Drop {
                        batch.drop_packet(i, r);
                    }
                    continue;
                }
            };
            set_meta(meta, &p);
            let h = p.view(frame);
            let ts = h.timestamp();
            if !is_fresh(ts, now_s) {
                self.stats.stale += 1;
                batch.drop_packet(
                    i,
                    if is_past(ts, now_s) { DropReason::Expired } else { DropReason::FromFuture },
                );
                continue;
            }
            let s = h.ptr() as usize;
            if s >= h.n_slots() {
                self.stats.slot_overflow += 1;
                if self.cfg.overflow == OverflowAction::Drop {
                    batch.drop_packet(i, DropReason::Policy);
                }
                continue;
            }
            let epoch = self.keys.epoch_of(unwrap_near(ts, now_s));
            let Some(key) = self.keys.get(epoch) else {
                self.stats.no_key += 1;
                batch.drop_packet(i, DropReason::UnknownKey);
                continue;
            };
            let nonce = self.rng.nonce4();
            let (src, dst) = p.addr32(frame);
            blocks[n] = mark_block(key.binding, p.len_field(frame), ts, h.seqno(), nonce, src, dst);
            todo[n] = (i as u8, p.fair_off() as u16, s as u8, nonce, epoch);
            n += 1;
        }
        // Pass 2: MACs, pipelined across runs of the same epoch (normally the whole burst).
        let mut s = 0;
        while s < n {
            let e0 = todo[s].4;
            let mut e = s + 1;
            while e < n && todo[e].4 == e0 {
                e += 1;
            }
            if let Some(k) = self.keys.get(e0) {
                k.aes.encrypt_blocks(&mut blocks[s..e]);
            }
            s = e;
        }
        // Pass 3: write slot and NextAS (SB preserved).
        for k in 0..n {
            let (i, off, slot, nonce, _) = todo[k];
            let d = batch.buf_mut(i as usize).data_mut();
            let off = off as usize;
            d[off + 9 + slot as usize] = (nonce << 4) | (blocks[k][0] >> 4);
            d[off + 8] = (d[off + 8] & 0x80) | (slot + 1);
        }
        self.stats.marked += n as u64;
    }
}
