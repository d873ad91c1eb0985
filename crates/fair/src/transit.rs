//! Procedure 2: marking at a cooperating transit AS's egress border router (spec §5.3).
//!
//! Per packet: freshness check (±3 s, wrap-aware), a 4-bit nonce from the
//! per-worker generator, the 4-bit MAC under the data key of the packet's
//! timestamp epoch, and the NextAS increment preserving the suspicious bit.
//! No per-packet or per-flow state. The AES calls of a burst run pipelined.

use std::sync::Arc;

use mac::Block;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage, BURST};

use crate::common::{locate_hot, Codes, Framing};
use crate::crypto::{mark_block, mark_block_paper_w, MarkBinding};
use crate::keys::KeyRing;
use crate::rng::NonceGen;
use crate::time::{is_past, now16, unwrap_near, FRESH};

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
        let n16 = now16(now_s);
        let FairTransit { cfg, keys, rng, stats } = self;
        let keys: &KeyRing = keys;
        // Fresh stamps lie within ±3 s of now: 7 possible offsets, normally one.
        // Their keys are looked up once per burst (no division or ring walk per packet).
        let mut key_of_d: [Option<Option<&crate::keys::DataKey>>; 7] = [None; 7];
        let (mut cur_di, mut cur_key) = (u16::MAX, None);
        // Per marked packet: its index, the frame offset of its slot, its key (offset index).
        let mut pkt = [0u8; BURST];
        let mut pos = [0u16; BURST];
        let mut kidx = [0u8; BURST];
        let mut mixed = false;
        let mut blocks: [Block; BURST] = [[0; 16]; BURST];
        // One generator draw gives the whole burst's nonces (nibble n → n-th mark).
        let nonces = rng.nonces32();
        let mut nw = nonces;
        let mut n = 0usize;
        // Pass 1: checks, MAC inputs, and the NextAS increment.
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data_mut();
            let h = match locate_hot(frame, meta, cfg.framing, cfg.codes) {
                Ok(Some(h)) => h,
                Ok(None) => {
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
            };
            // d ∈ {0..3} ∪ {65533..65535} (stamp = now − d) → di = d + 3 ∈ 0..=6.
            let di = n16.wrapping_sub(h.ts()).wrapping_add(FRESH);
            if di > 2 * FRESH {
                stats.stale += 1;
                batch.drop_packet(
                    i,
                    if is_past(h.ts(), now_s) {
                        DropReason::Expired
                    } else {
                        DropReason::FromFuture
                    },
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
            if di != cur_di {
                mixed |= cur_di != u16::MAX;
                cur_di = di;
                cur_key = *key_of_d[di as usize]
                    .get_or_insert_with(|| keys.get(keys.epoch_of(unwrap_near(h.ts(), now_s))));
            }
            let Some(key) = cur_key else {
                stats.no_key += 1;
                batch.drop_packet(i, DropReason::UnknownKey);
                continue;
            };
            let nonce = (nw & 0xF) as u8;
            nw >>= 4;
            blocks[n] = if key.binding == MarkBinding::Bound {
                let (src, dst) = h.addr32(frame);
                mark_block(key.binding, h.len_field, h.ts(), h.seqno(), nonce, src, dst)
            } else {
                mark_block_paper_w(h.len_field, h.w, nonce)
            };
            // ptr < N ≤ 127, so +1 never carries into the SB.
            let at = h.fair_off as usize + 8;
            if let Some(b) = frame.get_mut(at) {
                *b = h.next_as + 1;
            }
            pkt[n] = i as u8;
            pos[n] = (at + 1 + s as usize) as u16;
            kidx[n] = di as u8;
            n += 1;
        }
        // Pass 2: MACs, one pipelined call per key (normally one for the burst).
        if !mixed {
            if let Some(k) = cur_key {
                k.aes.encrypt_blocks(&mut blocks[..n]);
            }
        } else {
            let mut s = 0;
            while s < n {
                let k0 = kidx[s];
                let mut e = s + 1;
                while e < n && kidx[e] == k0 {
                    e += 1;
                }
                if let Some(Some(k)) = key_of_d[k0 as usize] {
                    k.aes.encrypt_blocks(&mut blocks[s..e]);
                }
                s = e;
            }
        }
        // Pass 3: the slot bytes (nonce ‖ top nibble of the MAC).
        let mut nw = nonces;
        for k in 0..n {
            let v = ((nw as u8) << 4) | (blocks[k][0] >> 4);
            nw >>= 4;
            if let Some(b) = batch.buf_mut(pkt[k] as usize).data_mut().get_mut(pos[k] as usize) {
                *b = v;
            }
        }
        stats.marked += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::slot;
    use crate::keys::TestKeySource;
    use pipeline::{Verdict, L3};

    /// IPv6 packet with a 7-slot FAIR header stamped `ts`, NextAS `next_as`.
    fn pkt(ts: u16, seqno: u32, next_as: u8) -> Vec<u8> {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[6] = 17;
        let f = crate::wire::insert(&mut p, 0, L3::Ipv6, 7, 253).unwrap();
        let o = f.fair_off();
        p[o + 2..o + 4].copy_from_slice(&ts.to_be_bytes());
        p[o + 4..o + 7].copy_from_slice(&seqno.to_be_bytes()[1..]);
        p[o + 8] = next_as;
        p
    }

    /// One burst mixing two key epochs (stamps on both sides of a boundary), a
    /// stale stamp and a full header: each mark verifies under its own epoch's
    /// key, NextAS is bumped with the SB kept, the others are dropped untouched.
    #[test]
    fn mixed_epoch_burst() {
        let mut ring = KeyRing::data(60, 3600).unwrap();
        let mut ks = TestKeySource::new(9);
        let now = 60 * 1_000_000u64 + 1; // epoch boundary 1 s ago
        ring.rotate(now, 10, MarkBinding::Paper, || ks.next_key());
        let ring = Arc::new(ring);
        let mut t = FairTransit::new(
            TransitConfig { framing: Framing::Ip, ..Default::default() },
            ring.clone(),
            1,
        );
        t.set_nonce_gen(NonceGen::fixed(0x6));
        let stamps = [now - 2, now, now - 3, now + 3, now - 1, now - 5, now];
        let nas = [0u8, 0x81, 2, 0, 0x80, 0, 7];
        let mut b: Batch<Vec<u8>> = Batch::new();
        for (i, (&s, &n)) in stamps.iter().zip(&nas).enumerate() {
            b.push(pkt(s as u16, i as u32, n), 0).unwrap();
        }
        t.process(&mut b, Now::from_unix_ns(now * 1_000_000_000));
        for (i, (&s, &n)) in stamps.iter().zip(&nas).enumerate() {
            let d = b.data(i);
            let o = 40;
            if i == 5 || i == 6 {
                // Stale stamp / no free slot: dropped, header untouched.
                assert!(matches!(b.meta(i).verdict, Verdict::Drop(_)), "{i}");
                assert_eq!(d[o + 8], n);
                continue;
            }
            let k = ring.for_time(s).unwrap();
            let ptr = (n & 0x7F) as usize;
            let want =
                slot(&k.aes, MarkBinding::Paper, 8 + 16, s as u16, i as u32, 6, [0; 4], [0; 4]);
            assert_eq!(d[o + 9 + ptr], want, "packet {i}");
            assert_eq!(d[o + 8], n + 1, "packet {i}");
        }
        assert_eq!(ring.epoch_of(now - 2) + 1, ring.epoch_of(now));
        assert_eq!((t.stats.marked, t.stats.stale, t.stats.slot_overflow), (5, 1, 1));
    }
}
