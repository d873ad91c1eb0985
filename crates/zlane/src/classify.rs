//! The border router's classifier: EPIC-Z verification, classification
//! into R/N/G/A/U and per-AS/per-ISD token buckets (the
//! [`ZlaneClassify`](crate::ZlaneClassify) stage runs it over bursts).
//!
//! [`Classifier::reconfigure`] applies a new [`RouterConfig`] in place:
//! rates, μ_G, capacity and burst retune the buckets, each keeping its level;
//! the key caches, the replay filter and the counters stay.

use drkey::Selection;
use mac::{Aes, Block};
use packet::scion::epic::FLAG_Q;
use packet::scion::header::common_header_ok;
use packet::scion::{epic_fields_memo, next_hdr, EpicFields, EpicShape, PathType, ScionHeader};
use packet::Ia;
use pipeline::{
    Batch, Class, DropReason, Invalid, Now, PacketBuf, Reconfigured, Refused, ScionHint, Validate,
    BURST,
};

use crate::bucket::{rate_units, FixedMap, TokenBucket};
use crate::class::{A, G, N, R, U};
use crate::config::{Origin, RouterConfig};
use crate::hvf::{packet_time_ns, FreshWindow, Freshness, Hvf, INPUT_LEN};
use crate::keys::{HostKeyCache, HostKeys, RouterKeys};
use crate::replay::ReplayFilter;

// Lane indices are masked with `BURST - 1` (see `verify_burst`).
const _: () = assert!(BURST.is_power_of_two());

/// Source host type/length codes DRKey derives keys for.
const TL_IPV4: u8 = 0x0;
const TL_IPV6: u8 = 0x3;
const TL_SVC: u8 = 0x4;

/// Counters of the classifier (per class chosen and per reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifyCounters {
    /// Packets classified into R, N, G, A, U.
    pub classes: [u64; 5],
    /// Q-flagged packets that went to A because their bucket was empty (or absent).
    pub over_bucket: u64,
    /// Packets whose HVF verified only under the previous epoch's key (grace period).
    pub previous_epoch: u64,
}

/// What the classifier decided for one packet.
pub type Decision = Result<Class, DropReason>;

/// An EPIC-Z packet parsed and checked for freshness, awaiting its HVF check.
#[derive(Clone, Copy, Debug)]
struct Pending {
    src: Ia,
    /// Type/length code of the source host address.
    type_len: u8,
    q: bool,
    hvf: Hvf,
    /// The 40-byte V_i input (PktID ‖ A_0 ‖ H_S ‖ σ_i ‖ PayloadLen) as
    /// three blocks, the last one already carrying CMAC's `10*` padding.
    blocks: [Block; 3],
    /// SCION packet length (header + payload) for the bucket.
    len: usize,
}

/// First classification step: a class without MAC work, or a pending check.
enum Prep {
    Done(Class),
    Epic(Pending),
}

/// The per-interface classifier: keys, buckets, freshness, optional replay filter.
pub struct Classifier {
    cfg: RouterConfig,
    keys: RouterKeys,
    host_keys: HostKeyCache,
    last_sel: Selection,
    local_isd: u16,
    burst: u16,
    buckets: FixedMap<TokenBucket>,
    freshness: Freshness,
    strict_flags: bool,
    replay: Option<ReplayFilter>,
    counters: ClassifyCounters,
    /// EPIC-Z packets of the current burst awaiting their HVF check.
    scratch: Vec<(u8, Pending)>,
    /// Fills unused lanes of the burst's key table (never MACs anything).
    placeholder: HostKeys,
    /// The last source AS policed (`Ia::to_u64`) and its bucket's slot:
    /// bursts mostly come from few source ASes (slots never move once
    /// configured), and comparing the source skips working out its key.
    last_bucket: (u64, Option<usize>),
    /// Layout of the last EPIC-Z packet read (its path checks are skipped
    /// for packets of the same layout; see `packet::scion::epic_fields_memo`).
    shape: EpicShape,
    /// The MAC passes' lane tables, kept between bursts (initialising them
    /// on the stack cost a `memset` per burst); taken out during a burst.
    lanes: Option<Box<LaneBufs>>,
}

/// Per-lane MAC inputs and tags of [`Classifier::verify_burst`]; only the
/// lanes of the current burst are written and read.
struct LaneBufs {
    /// Each lane's V_i input, its padded last block XORed with K2.
    msgs: [[Block; 3]; BURST],
    /// Each lane's full V_i tag, then (from `BURST` on) the Q lanes' full
    /// Ṽ_i tags in lane order.
    tags: [Block; 2 * BURST],
}

impl LaneBufs {
    fn new() -> Box<Self> {
        Box::new(LaneBufs { msgs: [[[0; 16]; 3]; BURST], tags: [[0; 16]; 2 * BURST] })
    }
}

impl Classifier {
    /// Builds a classifier from a configuration (validated here) and the
    /// router's DRKey state (`RouterKeys`, `SvKeys` for a fixed secret
    /// value, or [`RouterConfig::keys`]); `now_ns` starts the buckets. The
    /// replay filter is the one `replay_pps` asks for.
    pub fn new(
        cfg: &RouterConfig,
        keys: impl Into<RouterKeys>,
        now_ns: u64,
    ) -> Result<Self, Invalid> {
        cfg.validate()?;
        let buckets = bucket_table(cfg, &cfg.resolve()?, now_ns, None)?;
        let local_isd = cfg.local_ia.isd();
        Ok(Classifier {
            keys: keys.into(),
            host_keys: HostKeyCache::new(
                cfg.host_key_cache,
                cfg.local_ia.to_u64() ^ 0x2c1a_55e5,
                cfg.protocol_id,
            ),
            last_sel: Selection::default(),
            local_isd,
            burst: cfg.burst,
            last_bucket: first_memo(&buckets, local_isd),
            buckets,
            freshness: cfg.freshness,
            strict_flags: cfg.strict_flags,
            replay: cfg.replay_filter(),
            counters: ClassifyCounters::default(),
            scratch: Vec::with_capacity(BURST),
            placeholder: HostKeys::placeholder(),
            shape: EpicShape::default(),
            lanes: Some(LaneBufs::new()),
            cfg: cfg.clone(),
        })
    }

    /// Replaces the duplicate-suppression filter (e.g. one sized for another
    /// false-positive rate than `replay_pps` asks for).
    pub fn with_replay_filter(mut self, f: ReplayFilter) -> Self {
        self.replay = Some(f);
        self
    }

    /// The running configuration.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// Applies `cfg` (validated) in place at `now`: rates, μ_G, capacity and
    /// burst retune the AS/ISD buckets (each keeps its level: tokens earned
    /// so far count at the old rate, then the new rate applies, clamped to
    /// the new burst); an origin no longer listed loses its bucket, a new
    /// one starts full. Freshness, strict flags and the protocol id (which
    /// flushes the host-key cache) change too; the replay filter can be
    /// turned on or off. The DRKey state, host-key cache, replay filter and
    /// counters stay. `local_ia`, `sv`, `epoch`, `host_key_cache`, a new
    /// filter size (`replay_pps`) and a new freshness window under a replay
    /// filter need a restart. On `Err` nothing changed.
    pub fn reconfigure(&mut self, cfg: &RouterConfig, now: Now) -> Result<Reconfigured, Refused> {
        if *cfg == self.cfg {
            return Ok(Reconfigured::Unchanged);
        }
        let old = &self.cfg;
        let replay_resized =
            matches!((old.replay_pps, cfg.replay_pps), (Some(a), Some(b)) if a != b);
        let window_moved = self.replay.is_some() && cfg.freshness != old.freshness;
        let fixed = [
            ("local_ia", old.local_ia != cfg.local_ia),
            ("sv", old.sv != cfg.sv),
            ("epoch", old.epoch != cfg.epoch),
            ("host_key_cache", old.host_key_cache != cfg.host_key_cache),
            ("replay_pps", replay_resized),
            ("freshness", window_moved && cfg.replay_pps.is_some()),
        ];
        if let Some((key, _)) = fixed.iter().find(|(_, changed)| *changed) {
            return Err(Refused::NeedsRestart((*key).into()));
        }
        let rates = cfg.resolve().map_err(Refused::Invalid)?;
        let old_buckets = Some((&self.buckets, self.burst));
        let buckets =
            bucket_table(cfg, &rates, now.mono_ns, old_buckets).map_err(Refused::Invalid)?;
        // Nothing below can fail.
        self.last_bucket = first_memo(&buckets, self.local_isd);
        self.buckets = buckets;
        self.burst = cfg.burst;
        self.freshness = cfg.freshness;
        self.strict_flags = cfg.strict_flags;
        if cfg.protocol_id != old.protocol_id {
            self.host_keys.set_protocol(cfg.protocol_id);
        }
        if cfg.replay_pps != old.replay_pps {
            self.replay = cfg.replay_filter();
        }
        self.cfg.clone_from(cfg);
        Ok(Reconfigured::APPLIED)
    }

    /// Counters.
    pub fn counters(&self) -> &ClassifyCounters {
        &self.counters
    }

    /// The DRKey state.
    pub fn keys(&self) -> &RouterKeys {
        &self.keys
    }

    /// The expanded level-2 host-key cache (statistics).
    pub fn host_keys(&self) -> &HostKeyCache {
        &self.host_keys
    }

    /// The DRKey state, mutable (install/expire secret values between bursts).
    pub fn keys_mut(&mut self) -> &mut RouterKeys {
        &mut self.keys
    }

    /// The token bucket that polices `origin` (for inspection and tests).
    pub fn bucket(&self, origin: Origin) -> Option<TokenBucket> {
        self.buckets.get(origin.policed_at(self.local_isd).key()).copied()
    }

    /// The epochs whose keys are acceptable now (installing a fixed secret
    /// value's epoch first if needed); once per burst.
    #[inline]
    fn epochs(&mut self, now: Now) -> Selection {
        self.keys.refresh(now.unix_ns);
        let sel = self.keys.select(now.unix_ns);
        if sel != self.last_sel {
            // Keys of epochs no longer acceptable must not linger in the cache.
            self.host_keys.flush();
            self.last_sel = sel;
        }
        sel
    }

    /// Classifies the SCION packet `pkt` (starting at its common header).
    pub fn classify(&mut self, pkt: &[u8], now: Now) -> Decision {
        let sel = self.epochs(now);
        self.classify_in(pkt, now, sel)
    }

    /// [`classify`](Self::classify) with the burst's acceptable epochs.
    #[inline]
    fn classify_in(&mut self, pkt: &[u8], now: Now, sel: Selection) -> Decision {
        let d = match self.prepare(pkt, self.freshness.window(now.unix_ns)) {
            Ok(Prep::Done(c)) => Ok(c),
            Ok(Prep::Epic(p)) => self.verify(sel, &p).and_then(|()| self.police(&p, now)),
            Err(r) => Err(r),
        };
        self.count(d)
    }

    #[inline]
    fn count(&mut self, d: Decision) -> Decision {
        if let Ok(c) = d {
            self.counters.classes[crate::class::queue_of(c)] += 1;
        }
        d
    }

    /// Parses, classifies non-EPIC-Z traffic, and checks EPIC-Z freshness.
    #[inline]
    fn prepare(&mut self, pkt: &[u8], fresh: FreshWindow) -> Result<Prep, DropReason> {
        if PathType::peek(pkt) == Some(PathType::EPIC_Z) {
            return self.prepare_epic(pkt, fresh).map(Prep::Epic);
        }
        non_epic_class(pkt).map(Prep::Done)
    }

    /// The EPIC-Z checks before any MAC: one pass over fixed offsets
    /// (`packet::scion::epic_fields_memo`, which validates exactly what the
    /// full header and path views validate, the path structure only once
    /// per layout), flags, host kind, freshness.
    #[inline]
    fn prepare_epic(&mut self, pkt: &[u8], fresh: FreshWindow) -> Result<Pending, DropReason> {
        let f = epic_fields_memo(pkt, &mut self.shape)?;
        if self.strict_flags && f.flags & !FLAG_Q != 0 {
            return Err(DropReason::Malformed);
        }
        fresh.check(packet_time_ns(f.info0_timestamp, f.ts_rel()))?;
        // DRKey derives keys for IPv4, IPv6 and service addresses only
        // (the key itself is derived, from the decoded address, on a miss).
        if !matches!(f.src_type_len, TL_IPV4 | TL_IPV6 | TL_SVC) {
            return Err(packet::Error::unsupported("host address type/length").into());
        }
        Ok(Pending {
            src: f.src_ia,
            type_len: f.src_type_len,
            q: f.q(),
            hvf: f.hvf,
            blocks: input_blocks(&f),
            len: f.header_len + usize::from(f.payload_len),
        })
    }

    /// Classifies a whole burst in passes: parse and freshness for every
    /// packet, then key lookup (cache hits need no derivation), then every
    /// packet's HVF MACs back to back (independent AES chains the CPU
    /// overlaps), then replay filter and buckets in packet order. Decides
    /// exactly what [`classify`](Self::classify) decides per packet.
    pub(crate) fn classify_burst<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now: Now) {
        // A burst of best effort that shares one header hint of the parse
        // stage (plain SCION traffic) is class U as a whole, without the
        // epochs and lanes EPIC-Z needs.
        if let Some((t, next)) = batch.common_scion_hint().and_then(ScionHint::get) {
            if best_effort(t.0, next) {
                self.counters.classes[U_QUEUE] += u64::from(batch.live_mask().count_ones());
                batch.class_all(U);
                return;
            }
        }
        let sel = self.epochs(now);
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        self.parse_burst(batch, now, sel, &mut scratch);
        // (Absent only after a burst that unwound.)
        let mut lanes = self.lanes.take().unwrap_or_else(LaneBufs::new);
        self.verify_burst(batch, now, sel, &mut scratch, &mut lanes);
        self.lanes = Some(lanes);
        self.scratch = scratch;
    }

    /// Pass 1 of [`classify_burst`](Self::classify_burst): parse, classify
    /// non-EPIC traffic, freshness; EPIC-Z packets go to `scratch`. (Its
    /// own function: inlined into the MAC passes, the loop ran out of
    /// registers.)
    #[inline(never)]
    fn parse_burst<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        now: Now,
        sel: Selection,
        scratch: &mut Vec<(u8, Pending)>,
    ) {
        let fresh = self.freshness.window(now.unix_ns);
        for i in batch.live() {
            // Another path type whose header the parse stage checked: its
            // class from the hint, without reading the packet.
            if let Some((t, next)) = batch.meta(i).scion.get() {
                if t != PathType::EPIC_Z {
                    self.class_by_path(batch, i, t.0, next);
                    continue;
                }
            }
            let Some(off) = scion::scion_offset(batch.meta(i)) else {
                batch.set_class(i, U);
                continue;
            };
            let Some(pkt) = batch.data(i).get(off..) else {
                batch.drop_packet(i, DropReason::Truncated);
                continue;
            };
            if PathType::peek(pkt) != Some(PathType::EPIC_Z) {
                // Plain SCION (and EPIC-HP, empty) traffic passes on as U
                // after the header checks alone.
                match common_header_ok(pkt) {
                    Some(c) => self.class_by_path(batch, i, c[8], c[4]),
                    None => {
                        let d = other_class(pkt);
                        self.apply(batch, i, d);
                    }
                }
                continue;
            }
            match self.prepare_epic(pkt, fresh) {
                Ok(p) if scratch.len() < BURST => scratch.push((i as u8, p)),
                Ok(p) => {
                    let d = self.verify(sel, &p).and_then(|()| self.police(&p, now));
                    self.apply(batch, i, d);
                }
                Err(r) => batch.drop_packet(i, r),
            }
        }
    }

    /// Passes 2 to 4 of [`classify_burst`](Self::classify_burst) over the
    /// EPIC-Z packets in `scratch`.
    #[inline(never)]
    fn verify_burst<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        now: Now,
        sel: Selection,
        scratch: &mut [(u8, Pending)],
        bufs: &mut LaneBufs,
    ) {
        // (A burst without EPIC-Z packets skips the lane tables' setup.)
        if scratch.is_empty() {
            return;
        }
        // Pass 2: key slots under the first acceptable epoch.
        let first = sel.iter().next();
        let mut slot = [usize::MAX; BURST];
        let misses_before = self.host_keys.stats().misses;
        if let Some(epoch) = first {
            for (k, (_, p)) in scratch.iter().enumerate() {
                let padded = padded_host(p);
                if let Some(s) =
                    self.host_keys.get_slot_raw(&mut self.keys, epoch, p.src, p.type_len, padded)
                {
                    slot[k] = s;
                }
            }
        }
        // Pass 3: MACs. A slot evicted by a later packet of the same burst
        // (cache collision) is not trusted: that packet takes the slow path.
        // Every trusted packet's V_i (a 3-block CMAC under its own host key)
        // runs interleaved with the others', then every Q packet's Ṽ_i (one
        // block under its source AS's level-1 key).
        // Scratch packet k's full tag in `bufs.tags` (V_i, or Ṽ_i from
        // `BURST` on), `NO_TAG` if pass 3 did not MAC it.
        const NO_TAG: u8 = u8::MAX;
        let mut tag_at = [NO_TAG; BURST];
        // Without a miss in pass 2 nothing was replaced: every slot still
        // holds its packet's keys.
        let replaced = self.host_keys.stats().misses != misses_before;
        if let Some(epoch) = first {
            let mut hk: [&HostKeys; BURST] = [&self.placeholder; BURST];
            // Each trusted packet's V_i input, gathered contiguously with the
            // CMAC subkey K2 already XORed into its padded last block.
            let LaneBufs { msgs, tags } = bufs;
            // The Q lanes (in lane order), and whether they come from more
            // than one source AS (compared with the burst's first EPIC-Z
            // packet: if that one is a non-Q packet of another AS, the burst
            // only takes the general path below).
            let mut q = [0u8; BURST];
            let mut nq = 0;
            let src0 = scratch.first().map_or(0, |(_, p)| p.src.to_u64());
            let mut mixed = false;
            // (Lane and packet indices are below BURST, a power of two: the
            // masks only spare the loops and closures their bounds checks.)
            let lane_of = |j: usize| j & (BURST - 1);
            let mut m = 0;
            for (k, (_, p)) in scratch.iter().enumerate() {
                let s = slot[lane_of(k)];
                if replaced && !self.host_keys.holds(s, epoch, p.src, p.type_len, padded_host(p)) {
                    continue;
                }
                let Some(h) = self.host_keys.at(s) else { continue };
                let j = lane_of(m);
                hk[j] = h;
                let k2 = u128::from_ne_bytes(*h.host.subkeys().1);
                let last = (u128::from_ne_bytes(p.blocks[2]) ^ k2).to_ne_bytes();
                let msg = &mut msgs[j];
                msg[0] = p.blocks[0];
                msg[1] = p.blocks[1];
                msg[2] = last;
                q[lane_of(nq)] = j as u8;
                tag_at[lane_of(k)] = if p.q { (BURST + nq) as u8 } else { j as u8 };
                nq += usize::from(p.q);
                mixed |= p.q & (p.src.to_u64() != src0);
                m += 1;
            }
            Aes::cbc_mac_multi(
                3,
                |j| hk[lane_of(j)].host.aes(),
                |j, b| msgs[lane_of(j)][b],
                &mut tags[..m],
            );
            // Ṽ_i = AES_K̃((V_i ‖ 0¹²) ⊕ K1) for the Q lanes. Its key is the
            // level-1 key of the packet's source AS (the epoch is the same
            // for the whole pass): when every Q packet comes from one AS, as
            // usual in a burst, all run under that one key, four blocks per
            // VAES instruction where the CPU has it.
            let (tags, as_tags) = tags.split_at_mut(BURST);
            let v_block = |j: u8| vi_block(&tags[lane_of(usize::from(j))]);
            if nq > 0 && !mixed {
                let h = hk[usize::from(q[0])];
                h.as_aes.cbc_mac_batch(
                    1,
                    |i, _| xor_block(&v_block(q[i]), &h.as_k1),
                    &mut as_tags[..nq],
                );
            } else {
                Aes::cbc_mac_multi(
                    1,
                    |i| &hk[usize::from(q[i])].as_aes,
                    |i, _| xor_block(&v_block(q[i]), &hk[usize::from(q[i])].as_k1),
                    &mut as_tags[..nq],
                );
            }
        }
        // Pass 4: compare each MACed packet's HVF (a Q packet's is Ṽ_i, any
        // other's V_i); failures retry the other epochs, packets pass 3 did
        // not MAC take the general path; then police in order.
        for (k, (i, p)) in scratch.iter().enumerate() {
            let t = usize::from(tag_at[k & (BURST - 1)]);
            let v = if t == usize::from(NO_TAG) {
                self.verify(sel, p)
            } else if hvf_eq(&mac::truncate::<4>(&bufs.tags[t & (2 * BURST - 1)]), &p.hvf) {
                Ok(())
            } else {
                self.verify_after_first(sel, p)
            };
            let d = v.and_then(|()| self.police(p, now));
            // (Batch indices are below BURST: the mask spares a bounds check.)
            self.apply(batch, usize::from(*i) & (BURST - 1), d);
        }
    }

    /// Classes packet `i`, not EPIC-Z, of a checked header with
    /// `path_type` and `NextHdr` `next`: best effort (the common case)
    /// inline, the rest through [`path_class`].
    #[inline(always)]
    fn class_by_path<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        path_type: u8,
        next: u8,
    ) {
        if best_effort(path_type, next) {
            self.counters.classes[U_QUEUE] += 1;
            batch.set_class(i, U);
        } else {
            self.apply(batch, i, path_class(path_type, next));
        }
    }

    /// Records and applies a decision to packet `i` of `batch`.
    #[inline]
    fn apply<B: PacketBuf>(&mut self, batch: &mut Batch<B>, i: usize, d: Decision) {
        match self.count(d) {
            Ok(c) => batch.set_class(i, c),
            Err(r) => batch.drop_packet(i, r),
        }
    }

    /// [`verify`](Self::verify) for a packet that already failed under the
    /// first acceptable epoch: tries the remaining one (grace period).
    fn verify_after_first(&mut self, sel: Selection, p: &Pending) -> Result<(), DropReason> {
        for (n, epoch) in sel.iter().enumerate().skip(1) {
            if self.verify_epoch(epoch, p)? {
                self.counters.previous_epoch += n as u64;
                return Ok(());
            }
        }
        Err(DropReason::BadMac)
    }

    /// Checks the HVF under the current epoch's key, then (grace period) the
    /// previous epoch's.
    #[inline]
    fn verify(&mut self, sel: Selection, p: &Pending) -> Result<(), DropReason> {
        if sel.is_empty() {
            return Err(DropReason::UnknownKey);
        }
        for (n, epoch) in sel.iter().enumerate() {
            if self.verify_epoch(epoch, p)? {
                self.counters.previous_epoch += n as u64;
                return Ok(());
            }
        }
        Err(DropReason::BadMac)
    }

    /// Whether the HVF verifies under the keys of `epoch`: the cached (or
    /// freshly derived) expanded host key for V_i, then for Q packets one
    /// more block under the cached level-1 schedule for Ṽ_i.
    #[inline]
    fn verify_epoch(&mut self, epoch: drkey::Epoch, p: &Pending) -> Result<bool, DropReason> {
        let padded = padded_host(p);
        let i = self
            .host_keys
            .get_slot_raw(&mut self.keys, epoch, p.src, p.type_len, padded)
            .ok_or(DropReason::UnknownKey)?;
        let hk = self.host_keys.at(i).ok_or(DropReason::UnknownKey)?;
        let v = mac::truncate::<4>(&hk.host.mac(&p.blocks.as_flattened()[..INPUT_LEN]));
        let expect = if p.q { hk.as_hvf(&v) } else { v };
        Ok(hvf_eq(&expect, &p.hvf))
    }

    /// After a valid HVF: replay filter, then the Q flag and the AS/ISD bucket.
    #[inline(always)]
    fn police(&mut self, p: &Pending, now: Now) -> Decision {
        if let Some(f) = self.replay.as_mut() {
            let host = &p.blocks[1];
            let pkt_id: &[u8; 8] = p.blocks[0][..8].try_into().unwrap_or(&[0; 8]);
            if !f.check_and_insert(p.src, host, pkt_id, now.mono_ns) {
                return Err(DropReason::Replay);
            }
        }
        if !p.q {
            return Ok(A);
        }
        let burst = self.burst;
        let src = p.src.to_u64();
        let slot = if src == self.last_bucket.0 {
            self.last_bucket.1
        } else {
            let s = self.buckets.find(Origin::As(p.src).policed_at(self.local_isd).key());
            self.last_bucket = (src, s);
            s
        };
        let bucket = slot.and_then(|s| self.buckets.at_mut(s));
        let conform = bucket.is_some_and(|b| b.take_in_burst(p.len, burst, now.mono_ns));
        match conform {
            true => Ok(G),
            false => {
                self.counters.over_bucket += 1;
                Ok(A)
            }
        }
    }
}

/// Whether a packet with `path_type` and `NextHdr` `next` is best effort
/// (U) for [`path_class`], decided first.
#[inline(always)]
fn best_effort(path_type: u8, next: u8) -> bool {
    // EMPTY (0), SCION (1) and EPIC-HP (3); BFD goes to N.
    path_type <= 3 && path_type != PathType::ONE_HOP.0 && next != next_hdr::BFD
}

/// The class queue of U.
const U_QUEUE: usize = crate::class::queue_of(U);

/// The class of a packet that is not EPIC-Z, by path type and `NextHdr`.
#[inline(always)]
fn path_class(path_type: u8, next: u8) -> Result<Class, DropReason> {
    Ok(match PathType(path_type) {
        PathType::SIBRA => R,
        PathType::ONE_HOP => N,
        _ if next == next_hdr::BFD => N,
        // EPIC-HP is SCION's own path type: unauthenticated for Z-Lane
        // (its HVFs are checked by `scion-forward`), so best effort.
        PathType::SCION | PathType::EPIC_HP | PathType::EMPTY => U,
        _ => return Err(DropReason::Unsupported),
    })
}

/// The class (or the header view's error) of a packet that is not EPIC-Z.
#[inline(never)]
fn non_epic_class(pkt: &[u8]) -> Decision {
    match common_header_ok(pkt) {
        Some(c) => path_class(c[8], c[4]),
        None => other_class(pkt),
    }
}

/// The class (or the header view's error) of a packet that is not EPIC-Z
/// and failed [`common_header_ok`].
#[cold]
#[inline(never)]
fn other_class(pkt: &[u8]) -> Result<Class, DropReason> {
    let h = ScionHeader::new_checked(pkt)?;
    path_class(h.path_type().0, h.next_hdr())
}

/// The zero-padded source host address inside a pending packet's V_i input.
#[inline]
fn padded_host(p: &Pending) -> &[u8; 16] {
    &p.blocks[1]
}

/// The V_i input (`hvf::host_input`) as three blocks, built straight from
/// the packet's fields, with CMAC's `10*` padding after the 40 bytes.
#[inline(always)]
fn input_blocks(f: &EpicFields) -> [Block; 3] {
    // Built as 128-bit values: narrow byte stores right before the MAC's
    // 16-byte loads would stall on store forwarding (and cost more
    // instructions, measured).
    let b0 = (u128::from(u64::from_be_bytes(f.pkt_id)) << 64 | u128::from(f.src_ia.to_u64()))
        .to_be_bytes();
    let sigma = u64::from_be_bytes([
        f.hop_mac[0],
        f.hop_mac[1],
        f.hop_mac[2],
        f.hop_mac[3],
        f.hop_mac[4],
        f.hop_mac[5],
        0,
        0,
    ]);
    let b2 = (u128::from(sigma | u64::from(f.payload_len)) << 64 | 0x80 << 56).to_be_bytes();
    [b0, f.src_host, b2]
}

/// `V ‖ 0¹²` for the V_i whose full tag is `tag` (its first four bytes):
/// one 128-bit AND, no byte shuffling.
#[inline(always)]
fn vi_block(tag: &Block) -> Block {
    const FIRST4: u128 =
        u128::from_ne_bytes([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    (u128::from_ne_bytes(*tag) & FIRST4).to_ne_bytes()
}

/// `a ⊕ b` as one 128-bit operation.
#[inline(always)]
fn xor_block(a: &Block, b: &Block) -> Block {
    (u128::from_ne_bytes(*a) ^ u128::from_ne_bytes(*b)).to_ne_bytes()
}

/// Compares two HVFs as one 32-bit word (no early exit on a byte).
#[inline]
fn hvf_eq(a: &Hvf, b: &Hvf) -> bool {
    u32::from_ne_bytes(*a) ^ u32::from_ne_bytes(*b) == 0
}

/// The AS/ISD buckets of `cfg` for its resolved `rates` (bucket origin,
/// bit/s), at `now_ns`. With `old` (the running table and its burst), an
/// origin that had a bucket keeps it: retuned if its rate or the burst
/// changed, as it was otherwise.
fn bucket_table(
    cfg: &RouterConfig,
    rates: &[(Origin, u64)],
    now_ns: u64,
    old: Option<(&FixedMap<TokenBucket>, u16)>,
) -> Result<FixedMap<TokenBucket>, Invalid> {
    let burst = cfg.burst;
    let mut buckets = FixedMap::with_capacity(rates.len().max(16), cfg.local_ia.to_u64());
    for (i, (o, bps)) in rates.iter().enumerate() {
        let units = rate_units(*bps).unwrap_or(u16::MAX);
        let bucket = match old.and_then(|(m, b)| Some((*m.get(o.key())?, b))) {
            Some((mut kept, old_burst)) => {
                if kept.rate_units() != units || old_burst != burst {
                    kept.retune(units, old_burst, burst, now_ns);
                }
                kept
            }
            None => TokenBucket::new(units, burst, now_ns),
        };
        if !buckets.insert(o.key(), bucket) {
            return Err(Invalid::at(format!("rates[{i}]"), "no room in the AS/ISD bucket table"));
        }
    }
    Ok(buckets)
}

/// The bucket memo for source 0 (whatever its key), which the classifier
/// starts with.
fn first_memo(buckets: &FixedMap<TokenBucket>, local_isd: u16) -> (u64, Option<usize>) {
    let origin0 = Origin::As(Ia::from_u64(0)).policed_at(local_isd);
    (0, buckets.find(origin0.key()))
}
