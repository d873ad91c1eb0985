//! The border router's classifier: EPIC-Z verification, classification
//! into R/N/G/A/U and per-AS/per-ISD token buckets (the
//! [`ZlaneClassify`](crate::ZlaneClassify) stage runs it over bursts).
//!
//! [`Classifier::reconfigure`] applies a new [`RouterConfig`] in place:
//! rates, μ_G, capacity and burst retune the buckets, each keeping its level;
//! the key caches, the replay filter and the counters stay.

use drkey::Selection;
use mac::{Aes, Block, Cmac};
use packet::scion::epic::FLAG_Q;
use packet::scion::header::common_header_ok;
use packet::scion::{epic_fields_memo, next_hdr, EpicShape, PathType, ScionHeader};
use packet::Ia;
use pipeline::{
    Batch, Class, DropReason, Indices, Invalid, Now, PacketBuf, Reconfigured, Refused, ScionHint,
    Validate, BURST,
};

use crate::bucket::{rate_units, FixedMap, TokenBucket};
use crate::class::{A, G, N, R, U};
use crate::config::{Origin, RouterConfig};
use crate::hvf::{FreshWindow, Freshness, Hvf, INPUT_LEN};
use crate::keys::{EpochWord, HostKeyCache, HostKeys, RouterKeys};
use crate::replay::ReplayFilter;
use layout::{Layout, Pending};

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
    /// Fills unused lanes of the burst's key table (never MACs anything).
    placeholder: HostKeys,
    /// The last source AS policed (`Ia::to_u64`) and its bucket's slot:
    /// bursts mostly come from few source ASes (slots never move once
    /// configured), and comparing the source skips working out its key.
    last_bucket: (u64, Option<usize>),
    /// Layout of the last EPIC-Z packet read (its path checks are skipped
    /// for packets of the same layout; see `packet::scion::epic_fields_memo`).
    shape: EpicShape,
    /// Layout of the last EPIC-Z packet the burst reader learned (packets
    /// of that layout are read at known offsets; see [`Layout`]).
    layout: Layout,
    /// The MAC passes' lane tables, kept between bursts (initialising them
    /// on the stack cost a `memset` per burst); taken out during a burst.
    lanes: Option<Box<LaneBufs>>,
}

/// The burst passes' tables: the parsed EPIC-Z packets and their key slots,
/// the per-lane MAC inputs and tags of [`Classifier::verify_burst`]; only
/// the entries of the current burst are written and read.
struct LaneBufs {
    /// The burst's EPIC-Z packets awaiting their HVF check, in packet order.
    pend: [Pending; BURST],
    /// Their host-key slots under the first acceptable epoch (`usize::MAX`:
    /// none; written by pass 2 for the burst's packets before any read).
    slot: [usize; BURST],
    /// Each lane's V_i input, its padded last block XORed with K2.
    msgs: [[Block; 3]; BURST],
    /// Each lane's full V_i tag, then (from `BURST` on) the Q lanes' full
    /// Ṽ_i tags in lane order.
    tags: [Block; 2 * BURST],
}

impl LaneBufs {
    fn new() -> Box<Self> {
        Box::new(LaneBufs {
            pend: [Pending::default(); BURST],
            slot: [usize::MAX; BURST],
            msgs: [[[0; 16]; 3]; BURST],
            tags: [[0; 16]; 2 * BURST],
        })
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
            placeholder: HostKeys::placeholder(),
            shape: EpicShape::default(),
            layout: Layout::default(),
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
        let (p, time_ns) = Pending::from_fields(&f);
        self.check_read(&p, time_ns, fresh)?;
        Ok(p)
    }

    /// [`prepare_epic`](Self::prepare_epic) for a packet the burst reader's
    /// layout does not fit: the general reader, then its layout is learned.
    #[cold]
    #[inline(never)]
    fn prepare_epic_learn(
        &mut self,
        pkt: &[u8],
        fresh: FreshWindow,
        out: &mut Pending,
    ) -> Result<(), DropReason> {
        let f = epic_fields_memo(pkt, &mut self.shape)?;
        // Only layouts of host kinds with keys are remembered: their
        // packets need no host-kind check (`check_fresh`).
        if let Some(l) = Layout::learn(pkt, &f).filter(|l| host_kind_ok(l.type_len())) {
            self.layout = l;
        }
        let time_ns;
        (*out, time_ns) = Pending::from_fields(&f);
        self.check_read(out, time_ns, fresh)
    }

    /// The checks after reading, in the order of the header and path
    /// checks: flags, freshness, host kind.
    #[inline(always)]
    fn check_read(&self, r: &Pending, time_ns: u64, fresh: FreshWindow) -> Result<(), DropReason> {
        check_fresh(self.strict_flags, fresh, r.flags, time_ns)?;
        // DRKey derives keys for IPv4, IPv6 and service addresses only
        // (the key itself is derived, from the decoded address, on a miss).
        if !host_kind_ok(r.type_len) {
            return Err(packet::Error::unsupported("host address type/length").into());
        }
        Ok(())
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
        // (Absent only after a burst that unwound.)
        let mut lanes = self.lanes.take().unwrap_or_else(LaneBufs::new);
        let n = self.parse_burst(batch, now, &mut lanes);
        self.verify_burst(batch, now, sel, &mut lanes, n);
        self.lanes = Some(lanes);
    }

    /// Pass 1 of [`classify_burst`](Self::classify_burst): parse, classify
    /// non-EPIC traffic, freshness; EPIC-Z packets go to `bufs.pend`, whose
    /// count it returns. (Its own function: inlined into the MAC passes,
    /// the loop ran out of registers.)
    ///
    /// While the remembered layout lies in the reader's window (the usual
    /// case), a template loop reads each packet that has it (compared as a
    /// few masked words, [`Layout::read_window`]) straight into its record
    /// and checks its freshness; any other packet takes the per-packet
    /// steps ([`parse_one`](Self::parse_one), which learn its layout), out
    /// of line. After a layout outside the window the rest of the burst
    /// takes the per-packet loop, where those steps are inlined.
    #[inline(never)]
    fn parse_burst<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        now: Now,
        bufs: &mut LaneBufs,
    ) -> usize {
        let fresh = self.freshness.window(now.unix_ns);
        let strict = self.strict_flags;
        // Under strict flags a reserved flag bit is a difference from the
        // layout: such a packet takes `parse_one`, which names the error.
        let flags = layout::NUM_HVF_MASK | if strict { layout::RESERVED_FLAGS_MASK } else { 0 };
        let mut n = 0;
        let mut live = batch.live_mask();
        while self.layout.in_window() && live != 0 {
            (n, live) = template_run(&self.layout, batch, &mut bufs.pend, n, live, fresh, flags);
            if live == 0 {
                break;
            }
            // A packet the layout does not fit, step by step.
            let i = live.trailing_zeros() as usize;
            live &= live - 1;
            let out = &mut bufs.pend[n & (BURST - 1)];
            if self.parse_miss(batch, i, fresh, out) {
                out.idx = i as u8;
                n += 1;
            }
        }
        if live == 0 {
            return n;
        }
        self.parse_rest(batch, fresh, &mut bufs.pend, n, live)
    }

    /// The per-packet loop of [`parse_burst`](Self::parse_burst) over the
    /// packets of `live`, records from `pend[n]` on; returns the new count.
    /// (Its own function: beside the template loop's, its state took
    /// reloads.)
    #[inline(never)]
    fn parse_rest<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        fresh: FreshWindow,
        pend: &mut [Pending; BURST],
        mut n: usize,
        live: u32,
    ) -> usize {
        // (A local copy: read from `self`, every field took a reload.)
        let mut layout = self.layout;
        for i in Indices::of(live) {
            // (At most `BURST` live packets, so `n < BURST` here: the mask
            // only spares a bounds check.)
            let out = &mut pend[n & (BURST - 1)];
            if self.parse_one(batch, i, fresh, &mut layout, out) {
                out.idx = i as u8;
                n += 1;
            }
        }
        n
    }

    /// [`parse_one`](Self::parse_one) out of line, for the template loop
    /// of [`parse_burst`](Self::parse_burst).
    #[inline(never)]
    fn parse_miss<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        fresh: FreshWindow,
        out: &mut Pending,
    ) -> bool {
        let mut layout = self.layout;
        self.parse_one(batch, i, fresh, &mut layout, out)
    }

    /// Pass 1 for packet `i` (live) one step after the other: its class
    /// from the parse stage's hint or its header if it is not EPIC-Z;
    /// else read at `layout`'s offsets if it has that layout, or by the
    /// general reader (whose layout is learned, into `layout` too), and
    /// checked (flags, freshness). Whether it is an EPIC-Z packet awaiting
    /// its HVF check, read into `out` (all but `idx`); a packet that failed
    /// a check is dropped.
    #[inline(always)]
    fn parse_one<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        fresh: FreshWindow,
        layout: &mut Layout,
        out: &mut Pending,
    ) -> bool {
        // Another path type whose header the parse stage checked: its
        // class from the hint, without reading the packet.
        if let Some((t, next)) = batch.meta(i).scion.get() {
            if t != PathType::EPIC_Z {
                self.class_by_path(batch, i, t.0, next);
                return false;
            }
        }
        let Some(off) = scion::scion_offset(batch.meta(i)) else {
            batch.set_class(i, U);
            return false;
        };
        let Some(pkt) = batch.data(i).get(off..) else {
            batch.drop_packet(i, DropReason::Truncated);
            return false;
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
            return false;
        }
        let r = if let Some(time_ns) = layout.read_opt(pkt, out) {
            // (The layout's host kind has keys: see `prepare_epic_learn`.)
            check_fresh(self.strict_flags, fresh, out.flags, time_ns)
        } else {
            let r = self.prepare_epic_learn(pkt, fresh, out);
            *layout = self.layout;
            r
        };
        match r {
            Ok(()) => true,
            Err(r) => {
                batch.drop_packet(i, r);
                false
            }
        }
    }

    /// Passes 2 to 4 of [`classify_burst`](Self::classify_burst) over the
    /// first `n` EPIC-Z packets in `bufs.pend`.
    #[inline(never)]
    fn verify_burst<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        now: Now,
        sel: Selection,
        bufs: &mut LaneBufs,
        n: usize,
    ) {
        let LaneBufs { pend, slot, msgs, tags } = bufs;
        let scratch = &pend[..n.min(BURST)];
        // (A burst without EPIC-Z packets skips the lane tables' setup.)
        if scratch.is_empty() {
            return;
        }
        // Pass 2: key slots under the first acceptable epoch. A uniform burst
        // (the usual one: only Q packets of one source AS, every key cached)
        // is looked up in one loop that also gathers each lane's keys and
        // the last block of its V_i input, and takes the uniform passes; any
        // other burst is looked up again (the same state at the end) for
        // the general passes.
        let first = sel.iter().next();
        let misses_before = self.host_keys.stats().misses;
        if let Some(epoch) = first {
            let ew = EpochWord::new(epoch);
            let src0 = scratch[0].src_wire();
            let mut hk: [&HostKeys; BURST] = [&self.placeholder; BURST];
            // (Zipped: one pointer step per table, no index arithmetic.)
            let uniform = scratch
                .iter()
                .zip(hk.iter_mut())
                .take_while(|(p, _)| p.q() & (p.src_wire() == src0));
            let hosts = uniform.map(|(p, hk_j)| (p.type_len, padded_host(p), hk_j));
            let all =
                self.host_keys.hit_run(ew, scratch[0].src(), scratch.len(), hosts, |hk_j, h| {
                    *hk_j = h;
                });
            if all {
                uniform_macs(pend, scratch.len(), &hk, tags);
                self.uniform_verdicts(batch, now, sel, scratch, tags);
                return;
            }
            let hosts = scratch.iter().map(|p| (p.src(), p.type_len, padded_host(p)));
            self.host_keys.get_slots(&mut self.keys, ew, hosts, slot);
        }
        // Without a miss in pass 2 nothing was replaced: every slot still
        // holds its packet's keys.
        let replaced = self.host_keys.stats().misses != misses_before;
        // Pass 3: MACs. A slot evicted by a later packet of the same burst
        // (cache collision) is not trusted: that packet takes the slow path.
        // Every trusted packet's V_i (a 3-block CMAC under its own host key)
        // runs interleaved with the others', then every Q packet's Ṽ_i (one
        // block under its source AS's level-1 key).
        // Scratch packet k's full tag in `bufs.tags` (V_i, or Ṽ_i from
        // `BURST` on), `NO_TAG` if pass 3 did not MAC it.
        const NO_TAG: u8 = u8::MAX;
        let mut tag_at = [NO_TAG; BURST];
        if let Some(epoch) = first {
            let ew = EpochWord::new(epoch);
            let mut hk: [&HostKeys; BURST] = [&self.placeholder; BURST];
            // Each trusted packet's V_i input, gathered contiguously with the
            // CMAC subkey K2 already XORed into its padded last block.
            // The Q lanes (in lane order), and whether they come from more
            // than one source AS (compared with the burst's first EPIC-Z
            // packet: if that one is a non-Q packet of another AS, the burst
            // only takes the general path below).
            let mut q = [0u8; BURST];
            let mut nq = 0;
            let src0 = scratch.first().map_or(0, |p| p.src());
            let mut mixed = false;
            // (Lane and packet indices are below BURST, a power of two: the
            // masks only spare the loops and closures their bounds checks.)
            let lane_of = |j: usize| j & (BURST - 1);
            let mut m = 0;
            for (k, p) in scratch.iter().enumerate() {
                let s = slot[lane_of(k)];
                if replaced
                    && !self.host_keys.holds_word(s, ew, p.src(), p.type_len, padded_host(p))
                {
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
                tag_at[lane_of(k)] = if p.q() { (BURST + nq) as u8 } else { j as u8 };
                nq += usize::from(p.q());
                mixed |= p.q() & (p.src() != src0);
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
        for (k, p) in scratch.iter().enumerate() {
            let t = usize::from(tag_at[k & (BURST - 1)]);
            let v = if t == usize::from(NO_TAG) {
                self.verify(sel, p)
            } else if hvf_eq(&mac::truncate::<4>(&tags[t & (2 * BURST - 1)]), &p.hvf) {
                Ok(())
            } else {
                self.verify_after_first(sel, p)
            };
            let d = v.and_then(|()| self.police(p, now));
            // (Batch indices are below BURST: the mask spares a bounds check.)
            self.apply(batch, usize::from(p.idx) & (BURST - 1), d);
        }
    }

    /// Pass 4 of [`verify_burst`](Self::verify_burst) for a uniform burst
    /// (`scratch`, whose Ṽ_i [`uniform_macs`] put into
    /// `tags` from `BURST` on). Decides exactly as the general passes.
    #[inline(always)]
    fn uniform_verdicts<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        now: Now,
        sel: Selection,
        scratch: &[Pending],
        tags: &[Block; 2 * BURST],
    ) {
        let lane_of = |j: usize| j & (BURST - 1);
        let as_tags = &tags[BURST..];
        // Pass 4: compare each HVF (Ṽ_i), then police in packet order.
        // Without a replay filter, every packet (all Q, one source AS)
        // draws from the one bucket `police` would find for it: a tight
        // loop over the packets whose HVF matched under the first epoch,
        // up to the first that needs the other epochs (its own `&mut self`
        // call); the rest takes `police`. (HVF checks and policing touch
        // disjoint state: checking a packet after policing the ones before
        // it decides the same.)
        let mut done = 0;
        if self.replay.is_none() {
            let src = scratch[0].src();
            let slot = if src == self.last_bucket.0 {
                self.last_bucket.1
            } else {
                let o = Origin::As(Ia::from_u64(src)).policed_at(self.local_isd);
                let s = self.buckets.find(o.key());
                self.last_bucket = (src, s);
                s
            };
            let burst = self.burst;
            if let Some(slot_b) = slot.and_then(|s| self.buckets.at_mut(s)) {
                // (A local copy, written back after the loops: the bucket
                // stays in a register instead of a load and store per packet.)
                let mut b = *slot_b;
                // The packets of the first loop (bit = batch index) and
                // those of them that conformed (G; the others go to A), and
                // the packets of the settled loop that went to A: classes
                // are set after the loops, for the whole burst at once if
                // every live packet is G.
                let (mut checked, mut conformed, mut over) = (0u32, 0u32, 0u32);
                let bit = |p: &Pending| 1u32 << (u32::from(p.idx) & (BURST as u32 - 1));
                let hvf_ok = |k: usize| hvf_eq(&mac::truncate::<4>(&as_tags[k]), &scratch[k].hvf);
                // Up to the packet that settles the bucket at this instant
                // (usually the first), then (settled, it stays so for the
                // burst: only its tokens are read) a tighter loop, which
                // notes only the packets that go to A (rare).
                let mut settled = false;
                while done < scratch.len() && !settled && hvf_ok(done) {
                    let p = &scratch[done];
                    checked |= bit(p);
                    if b.take_in_burst(p.len(), burst, now.mono_ns) {
                        conformed |= bit(p);
                    }
                    settled = b.settled(burst, now.mono_ns);
                    done += 1;
                }
                let tight = done;
                if settled {
                    let mut tokens = b.settled_tokens();
                    while done < scratch.len() && hvf_ok(done) {
                        let p = &scratch[done];
                        if !tokens.take(p.len) {
                            over |= bit(p);
                        }
                        done += 1;
                    }
                    tokens.store(&mut b);
                }
                *slot_b = b;
                // Every live packet is G when every packet of `scratch` was
                // done and went to G, and `scratch` holds exactly the live
                // packets: its indices rise, so they are 0..n when the last
                // is n - 1, and those are the live ones when the live mask
                // is their mask.
                let n = scratch.len();
                let whole = usize::from(scratch[n - 1].idx) == n - 1
                    && batch.live_mask() == u32::MAX >> (BURST - n);
                let under = checked ^ conformed;
                if whole && done == n && (under | over) == 0 {
                    batch.class_all(G);
                } else {
                    for p in &scratch[tight..done] {
                        checked |= bit(p);
                    }
                    let conformed = checked & !(under | over);
                    for i in Indices::of(checked) {
                        batch.set_class(i, if conformed >> i & 1 != 0 { G } else { A });
                    }
                }
                // (Both masks are usually empty: no bit count then.)
                let count = |m: u32| if m == 0 { 0 } else { u64::from(m.count_ones()) };
                let a = count(under) + count(over);
                let g = done as u64 - a;
                self.counters.classes[G_QUEUE] += g;
                self.counters.classes[A_QUEUE] += a;
                self.counters.over_bucket += a;
            }
        }
        for (k, p) in scratch.iter().enumerate().skip(done) {
            let v = if hvf_eq(&mac::truncate::<4>(&as_tags[lane_of(k)]), &p.hvf) {
                Ok(())
            } else {
                self.verify_after_first(sel, p)
            };
            let d = v.and_then(|()| self.police(p, now));
            self.apply(batch, usize::from(p.idx) & (BURST - 1), d);
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
            .get_slot_word(&mut self.keys, EpochWord::new(epoch), p.src(), p.type_len, padded)
            .ok_or(DropReason::UnknownKey)?;
        let hk = self.host_keys.at(i).ok_or(DropReason::UnknownKey)?;
        let v = mac::truncate::<4>(&hk.host.mac(&p.blocks.as_flattened()[..INPUT_LEN]));
        let expect = if p.q() { hk.as_hvf(&v) } else { v };
        Ok(hvf_eq(&expect, &p.hvf))
    }

    /// After a valid HVF: replay filter, then the Q flag and the AS/ISD bucket.
    #[inline(always)]
    fn police(&mut self, p: &Pending, now: Now) -> Decision {
        if let Some(f) = self.replay.as_mut() {
            let host = &p.blocks[1];
            let pkt_id: &[u8; 8] = p.blocks[0][..8].try_into().unwrap_or(&[0; 8]);
            if !f.check_and_insert(Ia::from_u64(p.src()), host, pkt_id, now.mono_ns) {
                return Err(DropReason::Replay);
            }
        }
        if !p.q() {
            return Ok(A);
        }
        let burst = self.burst;
        let src = p.src();
        let slot = if src == self.last_bucket.0 {
            self.last_bucket.1
        } else {
            let s =
                self.buckets.find(Origin::As(Ia::from_u64(src)).policed_at(self.local_isd).key());
            self.last_bucket = (src, s);
            s
        };
        let bucket = slot.and_then(|s| self.buckets.at_mut(s));
        let conform = bucket.is_some_and(|b| b.take_in_burst(p.len(), burst, now.mono_ns));
        match conform {
            true => Ok(G),
            false => {
                self.counters.over_bucket += 1;
                Ok(A)
            }
        }
    }
}

/// The template loop of [`Classifier::parse_burst`]: reads the packets of
/// `live` (lowest first) that have `layout` into `pend` from its entry `n`
/// on, up to the first packet the layout does not fit or that is not
/// fresh (or the end); returns the new count and the packets left, that
/// one first. Without calls or writes to the batch, so that its state
/// stays in registers (and its own function, so that the per-packet steps
/// around it take no registers from it). `flags`: as
/// [`Layout::read_window`] takes it.
#[inline(never)]
fn template_run<B: PacketBuf>(
    layout: &Layout,
    batch: &Batch<B>,
    pend: &mut [Pending; BURST],
    mut n: usize,
    mut live: u32,
    fresh: FreshWindow,
    flags: u32,
) -> (usize, u32) {
    while live != 0 {
        let i = live.trailing_zeros() as usize;
        let m = batch.meta(i);
        // (At most `BURST` live packets, so `n < BURST` here: the mask
        // only spares a bounds check.)
        let out = &mut pend[n & (BURST - 1)];
        // A packet the parse stage found to have another path type is
        // not read (the per-packet steps class it by its hint).
        let time = match m.scion.path_type() {
            None | Some(PathType::EPIC_Z) => scion::scion_offset(m)
                .and_then(|off| batch.data(i).get(off..))
                .and_then(|pkt| layout.read_burst(pkt, flags, out)),
            Some(_) => None,
        };
        // (The layout's host kind has keys: see `prepare_epic_learn`;
        // reserved flags were compared under `flags`.)
        match time {
            Some(t) if check_fresh(false, fresh, 0, t).is_ok() => {}
            _ => break,
        }
        out.idx = i as u8;
        n += 1;
        live &= live - 1;
    }
    (n, live)
}

/// Pass 3 of [`Classifier::verify_burst`] for a uniform burst, the first
/// `m` packets of `pend`, every one a Q packet of one source AS whose keys
/// are `hk`. Lane k is packet k: its full Ṽ_i tag into `tags[BURST + k]`
/// (the V_i tags are not written).
#[inline(always)]
fn uniform_macs(
    pend: &[Pending; BURST],
    m: usize,
    hk: &[&HostKeys; BURST],
    tags: &mut [Block; 2 * BURST],
) {
    // Lane j as entry `j & 7` of group `j >> 3` of each table (masked:
    // below BURST, a power of two, so the masks only spare the closures
    // their bounds checks). The kernel runs groups of eight lanes `base | l`
    // with `base` a multiple of eight, so each lane of a group is then a
    // constant offset from the group's first entry (flat indices took an
    // index computation per lane and step).
    const GROUP: usize = 8;
    let at = |j: usize| ((j / GROUP) & (BURST / GROUP - 1), j % GROUP);
    let (pend, _) = pend.as_chunks::<GROUP>();
    let (hk, _) = hk.as_chunks::<GROUP>();
    let m = m.min(BURST);
    // Ṽ_i = AES_K̃((V_i ‖ 0¹²) ⊕ K1), all under the source AS's level-1
    // key, each V_i straight from its own MAC (only the Ṽ_i are written).
    // (The V_i input's last block carries its padding: the kernel XORs
    // K2 in.)
    let h = hk[0][0];
    Cmac::mac_padded_multi_nested(
        3,
        |j| {
            let (g, l) = at(j);
            &hk[g][l].host
        },
        |j| {
            let (g, l) = at(j);
            &hk[g][l].host_k2
        },
        |j, b| {
            let (g, l) = at(j);
            pend[g][l].blocks[b]
        },
        &h.as_aes,
        &FIRST4,
        &h.as_k1,
        &mut tags[BURST..BURST + m],
    );
}

/// Whether DRKey derives keys for source hosts of type/length code
/// `type_len`: IPv4, IPv6 and service addresses only.
#[inline(always)]
fn host_kind_ok(type_len: u8) -> bool {
    matches!(type_len, TL_IPV4 | TL_IPV6 | TL_SVC)
}

/// The first checks after reading an EPIC-Z packet: reserved flag bits
/// (under `strict` flags), then freshness of the packet time `time_ns`.
#[inline(always)]
fn check_fresh(
    strict: bool,
    fresh: FreshWindow,
    flags: u8,
    time_ns: u64,
) -> Result<(), DropReason> {
    if strict && flags & !FLAG_Q != 0 {
        return Err(DropReason::Malformed);
    }
    // Inside the window in one compare (`oldest_ns ≤ newest_ns`: a time
    // below `oldest_ns` wraps past the span); the error names the side.
    let span = fresh.newest_ns.wrapping_sub(fresh.oldest_ns);
    if time_ns.wrapping_sub(fresh.oldest_ns) <= span {
        return Ok(());
    }
    fresh.check(time_ns)
}

/// Whether a packet with `path_type` and `NextHdr` `next` is best effort
/// (U) for [`path_class`], decided first.
#[inline(always)]
fn best_effort(path_type: u8, next: u8) -> bool {
    // EMPTY (0), SCION (1) and EPIC-HP (3); BFD goes to N.
    path_type <= 3 && path_type != PathType::ONE_HOP.0 && next != next_hdr::BFD
}

/// The class queues of U, G and A.
const U_QUEUE: usize = crate::class::queue_of(U);
const G_QUEUE: usize = crate::class::queue_of(G);
const A_QUEUE: usize = crate::class::queue_of(A);

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

/// `V ‖ 0¹²` for the V_i whose full tag is `tag` (its first four bytes):
/// one 128-bit AND, no byte shuffling.
#[inline(always)]
fn vi_block(tag: &Block) -> Block {
    (u128::from_ne_bytes(*tag) & u128::from_ne_bytes(FIRST4)).to_ne_bytes()
}

/// Keeps the first four bytes of a block (V_i of its full tag).
const FIRST4: Block = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

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

/// The burst classifier's reader of EPIC-Z packets of one remembered layout.
///
/// [`packet::scion::epic_fields`] checks and reads every packet on its own.
/// A burst mostly holds packets of one layout (same header length, host
/// address types, `NumHVF` and meta-header word: the packets of one path
/// through the same hop), whose offsets are then known: [`Layout::read`]
/// compares those bytes and reads the fields the classifier needs straight
/// into the V_i input blocks, without the intermediate
/// [`EpicFields`](packet::scion::EpicFields).
///
/// A layout is only remembered after [`Layout::learn`] read a packet that
/// `epic_fields` accepted and got exactly `epic_fields`' answer for it. A
/// later packet with the same header length, address types, `NumHVF` and
/// meta-header word that passes the per-packet checks (version, path type,
/// header and payload inside the buffer) has the same structure, so
/// `epic_fields` accepts it too and reads it at the same offsets (the rule
/// `packet::scion::EpicShape` relies on as well). For anything else the
/// reader answers `false`, and the caller takes the general reader.
mod layout {
    use mac::Block;
    use packet::scion::epic::{EPIC_LEN, FLAG_Q, HVF_LEN};
    use packet::scion::header::{host_len, ADDR_FIXED_LEN, COMMON_LEN};
    use packet::scion::path::{HOP_LEN, INFO_LEN, META_LEN};
    use packet::scion::{EpicFields, PathType};

    use crate::hvf::{packet_time_ns, Hvf};

    /// Offset of the source ISD-AS in the SCION header (after the
    /// destination ISD-AS).
    const SRC_IA: usize = COMMON_LEN + 8;
    /// Offset of the destination host address in the SCION header.
    const ADDR_HOSTS: usize = COMMON_LEN + ADDR_FIXED_LEN;
    /// Offset of `NumHVF` in the EPIC block.
    const NUM_HVF: usize = 9;
    /// Offset of the flags byte in the EPIC block.
    const FLAGS: usize = 8;

    /// What the classifier takes from an EPIC-Z packet for its checks, kept
    /// per packet of a burst until its HVF is checked: one cache line (the
    /// source AS is read from the input blocks, the packet time is checked
    /// at once and not kept).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    #[repr(align(64))]
    pub(crate) struct Pending {
        /// The 40-byte V_i input (PktID ‖ A_0 ‖ H_S ‖ σ_i ‖ PayloadLen) as three
        /// blocks, the last one already carrying CMAC's `10*` padding.
        pub blocks: [Block; 3],
        /// HVF of the current hop field.
        pub hvf: Hvf,
        /// SCION packet length (header + payload, below 2¹⁷).
        pub len: u32,
        /// Type/length code of the source host address.
        pub type_len: u8,
        /// The EPIC flags byte.
        pub flags: u8,
        /// Index of the packet in its burst (set by the burst classifier).
        pub idx: u8,
    }

    const _: () = assert!(core::mem::size_of::<Pending>() == 64);

    impl Pending {
        /// The same values, from the general reader's fields, and the packet
        /// time (Unix ns).
        #[inline(always)]
        pub fn from_fields(f: &EpicFields) -> (Pending, u64) {
            // Built as 128-bit values: narrow byte stores right before the MAC's
            // 16-byte loads would stall on store forwarding.
            let b0 = (u128::from(u64::from_be_bytes(f.pkt_id)) << 64
                | u128::from(f.src_ia.to_u64()))
            .to_be_bytes();
            let m = f.hop_mac;
            let sigma = u64::from_be_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
            let b2 =
                (u128::from(sigma | u64::from(f.payload_len)) << 64 | 0x80 << 56).to_be_bytes();
            let p = Pending {
                blocks: [b0, f.src_host, b2],
                hvf: f.hvf,
                // (HdrLen ≤ 1020 plus a 16-bit PayloadLen.)
                len: (f.header_len + usize::from(f.payload_len)) as u32,
                type_len: f.src_type_len,
                flags: f.flags,
                idx: 0,
            };
            (p, packet_time_ns(f.info0_timestamp, f.ts_rel()))
        }

        /// Source ISD-AS (`Ia::to_u64`): the input's bytes 8-15.
        #[inline(always)]
        pub fn src(&self) -> u64 {
            let b = &self.blocks[0];
            u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
        }

        /// [`src`](Self::src) as the bytes are on the wire, read as a
        /// little-endian word (for compares: no byte swap).
        #[inline(always)]
        pub fn src_wire(&self) -> u64 {
            let b = &self.blocks[0];
            u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
        }

        /// SCION packet length (header + payload).
        #[inline(always)]
        pub fn len(&self) -> usize {
            self.len as usize
        }

        /// The Q flag.
        #[inline(always)]
        pub fn q(&self) -> bool {
            self.flags & FLAG_Q != 0
        }
    }

    /// The offsets of one EPIC-Z packet layout (see the module docs); the
    /// default remembers nothing.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Layout {
        /// Byte 5 (HdrLen) of the common header.
        hdr_len: u8,
        /// Byte 9 (DT/DL/ST/SL) of the common header.
        addr_types: u8,
        /// `NumHVF` (never 0).
        n: u8,
        /// The meta-header word.
        meta: u32,
        /// Keeps the source host address's bytes of a 16-byte load (native order).
        host_mask: u128,
        /// Offsets from the packet start: source host, path, meta header
        /// (followed by the first info field), current HVF, current hop field's
        /// ConsEgress (followed by its MAC).
        src_host: u16,
        path: u16,
        meta_at: u16,
        hvf: u16,
        hop_egress: u16,
        /// Whether every field read starts in the first [`WINDOW`] bytes.
        in_window: bool,
        /// The offsets again as bytes (for a layout `in_window`): one load
        /// each, where the compiler packed the `u16` ones into a vector
        /// register (two instructions each).
        win: Window,
        /// The words [`read_window`](Self::read_window) compares (besides
        /// the version): HdrLen, PathType and DT/DL/ST/SL in bytes 2-9 of
        /// the common header (see [`COMMON_MASK`]; `1`, which no masked
        /// word equals, in a layout not `in_window`), bytes 8-11 of the
        /// EPIC block with only `NumHVF` kept, and the meta-header word,
        /// each as a little-endian load gives it.
        common: u64,
        /// [`COMMON_MASK`], read from here (an operand in memory: as a
        /// constant it took an instruction per packet in the template
        /// loop, which has no register to spare for it).
        common_mask: u64,
        epic: u32,
        meta_le: u32,
    }

    /// HdrLen, PathType and DT/DL/ST/SL in the little-endian word at
    /// byte 2 of the common header (the flow label's last bytes,
    /// `NextHdr`, HdrLen, `PayloadLen`, PathType, DT/DL/ST/SL).
    const COMMON_MASK: u64 = 0xffff_0000_ff00_0000;
    /// Offset of `PayloadLen` in the common header.
    const PAYLOAD_LEN: u8 = 6;

    /// `NumHVF` in the little-endian word at byte 8 of the EPIC block
    /// (flags, `NumHVF`, reserved).
    pub(crate) const NUM_HVF_MASK: u32 = 0xff00;

    /// The flag bits besides Q in that word: with `strict_flags`, the
    /// burst reader compares them too (with zero), so that a packet with
    /// a reserved flag set leaves it for the checks that name the error.
    pub(crate) const RESERVED_FLAGS_MASK: u32 = (!FLAG_Q) as u32;

    /// The offsets of a layout `in_window` (see [`Layout`]).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct Window {
        src_host: u8,
        path: u8,
        meta_at: u8,
        hvf: u8,
        hop_egress: u8,
    }

    /// Where the fields of a compact layout start: in the first `WINDOW`
    /// bytes of the packet, which [`Layout::read`] takes with a single bounds
    /// check (with room for a 16-byte field at the last offset).
    const WINDOW: usize = 128;
    /// Bytes [`Layout::read`] takes for a compact layout.
    const SPAN: usize = WINDOW + 16;

    /// `N` (≤ 16) bytes at `at` of the packet's first [`SPAN`] bytes: `at` is
    /// masked below [`WINDOW`] (a no-op for the offsets of a layout
    /// `in_window`), so no bounds check is left to fail.
    #[inline(always)]
    fn at<const N: usize>(w: &[u8; SPAN], at: u8) -> [u8; N] {
        let at = usize::from(at) & (WINDOW - 1);
        let mut x = [0; N];
        x.copy_from_slice(&w[at..at + N]);
        x
    }

    impl Default for Layout {
        /// A layout no packet has (`n` 0; not `in_window`).
        fn default() -> Self {
            Layout {
                hdr_len: 0,
                addr_types: 0,
                n: 0,
                meta: 0,
                host_mask: 0,
                src_host: 0,
                path: u16::MAX,
                meta_at: 0,
                hvf: 0,
                hop_egress: 0,
                in_window: false,
                win: Window::default(),
                common: 1,
                common_mask: COMMON_MASK,
                epic: 0,
                meta_le: 0,
            }
        }
    }

    /// `N` bytes at `at`, if in bounds (never panics).
    #[inline(always)]
    fn take<const N: usize>(b: &[u8], at: u16) -> Option<[u8; N]> {
        let at = usize::from(at);
        b.get(at..at + N)?.first_chunk().copied()
    }

    impl Layout {
        /// The layout of `pkt`, if [`read`](Self::read) gives exactly what
        /// `epic_fields` gives for it (`f`, which it accepted).
        pub fn learn(pkt: &[u8], f: &EpicFields) -> Option<Layout> {
            let c: &[u8; ADDR_HOSTS] = pkt.first_chunk()?;
            let hl = usize::from(c[5]) * 4;
            let (dl, sl) = (host_len(c[9] >> 4), host_len(c[9] & 0x0f));
            let po = ADDR_HOSTS + dl + sl;
            let path = pkt.get(po..hl)?;
            let n = usize::from(*path.get(NUM_HVF)?);
            let meta_rel = EPIC_LEN + n * HVF_LEN;
            let w = u32::from_be_bytes(*path.get(meta_rel..)?.first_chunk()?);
            let curr_hf = ((w >> 24) & 0x3f) as usize;
            let n_inf = usize::from(w & 0x3_f000 != 0)
                + usize::from(w & 0xfc0 != 0)
                + usize::from(w & 0x3f != 0);
            let hops = meta_rel + META_LEN + n_inf * INFO_LEN;
            let off = |x: usize| u16::try_from(x).ok();
            let mask: [u8; 16] = core::array::from_fn(|i| if i < sl { 0xff } else { 0 });
            let mut layout = Layout {
                hdr_len: c[5],
                addr_types: c[9],
                n: u8::try_from(n).ok()?,
                meta: w,
                host_mask: u128::from_ne_bytes(mask),
                src_host: off(ADDR_HOSTS + dl)?,
                path: off(po)?,
                meta_at: off(po + meta_rel)?,
                hvf: off(po + EPIC_LEN + curr_hf * HVF_LEN)?,
                hop_egress: off(po + hops + curr_hf * HOP_LEN + 4)?,
                in_window: false,
                win: Window::default(),
                common: 1,
                common_mask: COMMON_MASK,
                epic: u32::from(u8::try_from(n).ok()?) << 8,
                meta_le: w.swap_bytes(),
            };
            let ends = [
                layout.src_host + 16,
                layout.path + EPIC_LEN as u16,
                layout.meta_at + (META_LEN + INFO_LEN) as u16,
                layout.hvf + HVF_LEN as u16,
                layout.hop_egress + 8,
            ];
            layout.in_window = ends.iter().all(|&e| usize::from(e) <= WINDOW);
            if layout.in_window {
                layout.common = u64::from_le_bytes([0, 0, 0, c[5], 0, 0, c[8], c[9]]);
                let b = |o: u16| u8::try_from(o).ok();
                layout.win = Window {
                    src_host: b(layout.src_host)?,
                    path: b(layout.path)?,
                    meta_at: b(layout.meta_at)?,
                    hvf: b(layout.hvf)?,
                    hop_egress: b(layout.hop_egress)?,
                };
            }
            // (Every field is at most 16 bytes long.)
            const _: () = assert!(META_LEN + INFO_LEN <= 16 && SPAN == WINDOW + 16);
            let mut got = Pending::default();
            (n != 0
                && layout.read(pkt, &mut got) == Some(Pending::from_fields(f).1)
                && got == Pending::from_fields(f).0)
                .then_some(layout)
        }

        /// Whether every field of this layout lies in the window
        /// [`read_burst`](Self::read_burst) reads.
        #[inline(always)]
        pub fn in_window(&self) -> bool {
            self.in_window
        }

        /// [`read_window`](Self::read_window) for `pkt`, which must be at
        /// least [`SPAN`] bytes long (`None` otherwise).
        #[inline(always)]
        pub fn read_burst(&self, pkt: &[u8], flags: u32, out: &mut Pending) -> Option<u64> {
            self.read_window(pkt.first_chunk()?, pkt.len(), flags, out)
        }

        /// The source host's type/length code of packets of this layout.
        pub fn type_len(&self) -> u8 {
            self.addr_types & 0x0f
        }

        /// If `pkt` has this layout and passes the per-packet checks
        /// (version, path type, header and payload inside the buffer): its
        /// packet time, and its fields in `out` (all but `idx`), exactly as
        /// `epic_fields` would read them. (`out` is written in place: a
        /// returned record went through the stack first.)
        #[inline(always)]
        pub fn read(&self, pkt: &[u8], out: &mut Pending) -> Option<u64> {
            match pkt.first_chunk::<SPAN>() {
                Some(w) if self.in_window => self.read_window(w, pkt.len(), NUM_HVF_MASK, out),
                _ => self.read_opt(pkt, out),
            }
        }

        /// [`read`](Self::read) for a packet of at least [`SPAN`] bytes
        /// (`len`), whose first bytes are `w`: every field from the one
        /// window, the layout's bytes compared as four masked words (the
        /// same checks and values; `None` for any packet if the layout is
        /// not `in_window`). `flags` selects the bits of the EPIC block's
        /// word at byte 8 that must equal the layout's: [`NUM_HVF_MASK`],
        /// and [`RESERVED_FLAGS_MASK`] to also require the reserved flags
        /// clear.
        #[inline(always)]
        pub fn read_window(
            &self,
            w: &[u8; SPAN],
            len: usize,
            flags: u32,
            out: &mut Pending,
        ) -> Option<u64> {
            let o = self.win;
            // The version, then bytes 2-9 of the common header.
            let v = w[0];
            let c = u64::from_le_bytes(at(w, 2));
            // PktID, then flags, NumHVF and the reserved bytes.
            let head = u128::from_le_bytes(at(w, o.path));
            // The meta-header word and the first info field.
            let meta = u128::from_le_bytes(at(w, o.meta_at));
            let epic = (head >> 64) as u32;
            let differ = ((c & self.common_mask) ^ self.common)
                | u64::from((epic & flags) ^ self.epic)
                | u64::from(meta as u32 ^ self.meta_le);
            // PayloadLen as on the wire (for the V_i input) and as a number.
            let payload_wire = u16::from_le_bytes(at(w, PAYLOAD_LEN));
            let total = usize::from(self.hdr_len) * 4 + usize::from(payload_wire.swap_bytes());
            if v >> 4 != 0 || differ != 0 || total > len {
                return None;
            }
            let src = u64::from_le_bytes(at(w, SRC_IA as u8));
            let host = u128::from_ne_bytes(at(w, o.src_host)) & self.host_mask;
            let hop = u64::from_le_bytes(at(w, o.hop_egress));
            // The blocks are byte strings: little-endian words keep each
            // byte where it is on the wire (no byte swaps).
            let b0 = u128::from(head as u64) | u128::from(src) << 64;
            let b2 = u128::from(hop >> 16 | u64::from(payload_wire) << 48) | 0x80 << 64;
            out.blocks = [b0.to_le_bytes(), host.to_ne_bytes(), b2.to_le_bytes()];
            out.type_len = self.addr_types & 0x0f;
            out.flags = epic as u8;
            out.hvf = at(w, o.hvf);
            out.len = total as u32;
            let ts_rel = (head as u32).swap_bytes();
            let info0_ts = ((meta >> 64) as u32).swap_bytes();
            Some(packet_time_ns(info0_ts, ts_rel))
        }

        /// [`read`](Self::read) one field at a time at the layout's
        /// offsets, for a layout in the window or not (the same answers):
        /// for the per-packet steps, which then carry none of the window
        /// reader's constants through their loop.
        #[inline(always)]
        pub fn read_opt(&self, pkt: &[u8], out: &mut Pending) -> Option<u64> {
            let c: &[u8; ADDR_HOSTS] = pkt.first_chunk()?;
            let hl = usize::from(c[5]) * 4;
            let payload = [c[6], c[7]];
            // (`n` is 0 only in the default layout, which fits nothing.)
            let same = self.n != 0
                && c[0] >> 4 == 0
                && c[8] == PathType::EPIC_Z.0
                && c[5] == self.hdr_len
                && c[9] == self.addr_types
                && hl + usize::from(u16::from_be_bytes(payload)) <= pkt.len();
            if !same {
                return None;
            }
            // PktID, flags, NumHVF, reserved.
            let head: [u8; EPIC_LEN] = take(pkt, self.path)?;
            // The meta-header word and the first info field (its timestamp last).
            let meta: [u8; META_LEN + INFO_LEN] = take(pkt, self.meta_at)?;
            let (w, info0) = meta.split_first_chunk::<META_LEN>()?;
            if head[NUM_HVF] != self.n || u32::from_be_bytes(*w) != self.meta {
                return None;
            }
            let host = u128::from_ne_bytes(take(pkt, self.src_host)?) & self.host_mask;
            // ConsEgress and the hop field's MAC σ in one 8-byte load.
            let hop = u64::from_le_bytes(take(pkt, self.hop_egress)?);
            let hvf: Hvf = take(pkt, self.hvf)?;
            let (pkt_id, _) = head.split_first_chunk::<8>()?;
            let src: &[u8; 8] = c[SRC_IA..].first_chunk()?;
            // The blocks are byte strings: little-endian words keep each byte
            // where it is on the wire (no byte swaps).
            let b0 = u128::from(u64::from_le_bytes(*pkt_id))
                | u128::from(u64::from_le_bytes(*src)) << 64;
            let b2 =
                u128::from(hop >> 16 | u64::from(u16::from_le_bytes(payload)) << 48) | 0x80 << 64;
            let ts_rel = u32::from_be_bytes(*pkt_id.first_chunk()?);
            out.blocks = [b0.to_le_bytes(), host.to_ne_bytes(), b2.to_le_bytes()];
            out.type_len = self.addr_types & 0x0f;
            out.flags = head[FLAGS];
            out.hvf = hvf;
            out.len = (hl + usize::from(u16::from_be_bytes(payload))) as u32;
            Some(packet_time_ns(u32::from_be_bytes(*info0.last_chunk()?), ts_rel))
        }
    }
}
