//! Procedure 2: marking at a cooperating transit AS's egress border router (spec §5.3).
//!
//! Per packet: freshness check (±3 s, wrap-aware), a 4-bit nonce from the
//! per-worker generator, the 4-bit MAC under the data key of the packet's
//! timestamp epoch, and the NextAS increment preserving the suspicious bit.
//! No per-packet or per-flow state. The AES calls of a burst run pipelined.

use std::sync::Arc;

use mac::Block;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage, BURST};

use crate::common::{locate_hot, Codes, Framing, Hot};
use crate::crypto::{mark_block, MarkBinding};
use crate::keys::KeyRing;
use crate::rng::NonceGen;
use crate::time::{is_fresh, is_past, now16, unwrap_near, FRESH};

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

/// One packet to mark (pass 1 → pass 3).
#[derive(Clone, Copy, Default)]
struct Todo {
    pkt: u8,
    slot: u8,
    nonce: u8,
    /// Index into the burst's key cache.
    key: u8,
    off: u16,
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
        let FairTransit { cfg, keys, rng, stats } = self;
        let keys: &KeyRing = keys;
        // Fresh stamps lie within ±3 s of now: 7 possible offsets, normally one.
        // Their keys are looked up once per burst (no division or ring walk per packet).
        let mut key_of_d: [Option<Option<&crate::keys::DataKey>>; 7] = [None; 7];
        let (mut cur_di, mut cur_key) = (usize::MAX, None);
        let mut todo = [Todo::default(); BURST];
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        let mut n = 0usize;
        // Pass 1: checks and MAC inputs.
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let mut h = Hot::default();
            match locate_hot(frame, meta, cfg.framing, cfg.codes, &mut h) {
                Ok(true) => {}
                Ok(false) => {
                    stats.not_fair += 1;
                    continue;
                }
                Err(r) => {
                    stats.malformed += 1;
                    if cfg.malformed == MalformedAction::Drop {
                        batch.drop_packet(i, r);
                    }
                    continue;
                }
            }
            let d = now16(now_s).wrapping_sub(h.ts);
            if !is_fresh(h.ts, now_s) {
                stats.stale += 1;
                batch.drop_packet(
                    i,
                    if is_past(h.ts, now_s) { DropReason::Expired } else { DropReason::FromFuture },
                );
                continue;
            }
            let s = h.ptr();
            if s >= h.n_slots {
                stats.slot_overflow += 1;
                if cfg.overflow == OverflowAction::Drop {
                    batch.drop_packet(i, DropReason::Policy);
                }
                continue;
            }
            // d ∈ {0..3} ∪ {65533..65535} → index 0..6 (stamp = now − d).
            let di = (d.wrapping_add(FRESH) & 0x7) as usize;
            if di != cur_di {
                cur_di = di;
                cur_key = *key_of_d[di]
                    .get_or_insert_with(|| keys.get(keys.epoch_of(unwrap_near(h.ts, now_s))));
            }
            let key = cur_key;
            let Some(key) = key else {
                stats.no_key += 1;
                batch.drop_packet(i, DropReason::UnknownKey);
                continue;
            };
            let nonce = rng.nonce4();
            let (src, dst) =
                if key.binding == MarkBinding::Bound { h.addr32(frame) } else { ([0; 4], [0; 4]) };
            blocks[n] = mark_block(key.binding, h.len_field, h.ts, h.seqno, nonce, src, dst);
            todo[n] = Todo { pkt: i as u8, slot: s, nonce, key: di as u8, off: h.fair_off };
            n += 1;
        }
        // Pass 2: MACs, pipelined across runs of the same key (normally the whole burst).
        let mut s = 0;
        while s < n {
            let k0 = todo[s].key;
            let mut e = s + 1;
            while e < n && todo[e].key == k0 {
                e += 1;
            }
            if let Some(Some(k)) = key_of_d[k0 as usize] {
                k.aes.encrypt_blocks(&mut blocks[s..e]);
            }
            s = e;
        }
        // Pass 3: write slot and NextAS (SB preserved).
        for (t, b) in todo[..n].iter().zip(&blocks[..n]) {
            let d = batch.buf_mut(t.pkt as usize).data_mut();
            let off = t.off as usize;
            if let Some(h) = d.get_mut(off + 8..off + 10 + t.slot as usize) {
                h[1 + t.slot as usize] = (t.nonce << 4) | (b[0] >> 4);
                h[0] = (h[0] & 0x80) | (t.slot + 1);
            }
        }
        stats.marked += n as u64;
    }
}
