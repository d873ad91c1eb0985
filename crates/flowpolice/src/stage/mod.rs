//! The FlowPolice pipeline stage.
//!
//! Per burst (a regular packet's state is one record, indexed by its
//! ordinal among the burst's regular packets, of where the packet and its
//! flow are: the capability it carries stays in the packet, which pass 3
//! reads and writes anyway; requests keep theirs in
//! per-field arrays by batch index; per-packet counters are tallied per
//! burst, and the classes of the packets Algorithm 1's fast path accepted
//! are set for the burst at once):
//! 1. **Locate and classify** every live packet. A burst of common packets
//!    only (every packet live, option-less IPv4 directly followed by a
//!    regular shim, flow binding matching) takes one loop over the burst's
//!    slices, its settings constants of the loop; at the first other packet
//!    that loop gives up (it changed nothing but scratch and prefetches) and
//!    the general loop runs. There the common packet reads one
//!    fixed 48-byte view; anything else uses `meta.proto/proto_off` if a
//!    parse stage found the shim, otherwise walks Ethernet (optional) →
//!    IPv4/IPv6 → shim with the `packet` views. Packets without the shim are
//!    *legacy*. Requests are checked against the ingress request cap and
//!    their puzzle, and their insertion lines prefetched. Regular packets have
//!    their capability's MAC input gathered and the **tags** of their window
//!    prefetched; `lag` regular packets later ([`Config::hint_lag`](crate::Config::hint_lag), same
//!    loop) the tags name the slot of the flow
//!    ([`FlowTable::slot_hint`](crate::FlowTable::slot_hint), the whole
//!    window) and only that entry's one or two cache lines are prefetched
//!    (about 1.5 lines per packet instead of the home chunk's three, and no
//!    dependent misses for flows past their home chunk: the table is
//!    memory-bound at 1M+ flows; measured in BENCHMARKS.md).
//! 2. **Verify** all carried capabilities with one batched AES call; each
//!    tag is compared as a word: in a burst of regular packets only just
//!    before the packet's update, otherwise branch-free into a drop mask.
//! 3. **Update** the flow table (Algorithm 1) packet by packet, in arrival
//!    order, at the hinted slot (a tag-guided window lookup when the hint is
//!    wrong or the flow was created by a request earlier in the burst). In a
//!    burst of regular packets only, runs of common packets (a verified tag,
//!    a right hint, Algorithm 1's fast path) take a loop without calls, and
//!    when pass 1 took the burst whole (a `Shape`) the `k`-th regular packet
//!    is packet `k` and, for raw IP, its shim at a fixed offset. Each
//!    packet's type byte and new capability but the MAC (`P_id`; the flow ID
//!    and `ts` are the carried capability's on Algorithm 1's fast path) are
//!    written into the packet here, with the one bounds check that read it.
//!    The new capabilities' MAC inputs go to the AES batch in order, with a
//!    record of each one's packet; in a burst pass 1 took whole, packet
//!    `k`'s to slot `k` instead (no record: its type byte's copy says
//!    whether it got one), packed afterwards unless every packet got one.
//! 4. **Stamp**: MAC all new capabilities with one batched AES call and write
//!    each MAC in place: the `m`-th to the packet its record names, or in a
//!    burst pass 1 took whole to the `m`-th packet that got one (when every
//!    packet did, packet `m`: no index to read or check).
//!
//! A live change ([`Element::reconfigure`], [`FlowPolice::apply_config`])
//! runs between two bursts and keeps the flow table, the flows' state, the
//! policers' levels and the counters.
//!
//! # Modules
//! `locate` finds the shim and addresses, `classify` runs pass 1 (and 1b),
//! `update` pass 3, `scratch` holds the per-burst state, `counters` the
//! stage's [`Counters`] and `reconfigure` the live changes; passes 2 and 4
//! are the batched AES calls in [`Stage::process`].

use core::any::Any;

use mac::Block;
use pipeline::{
    config_of, Batch, DropReason, Element, Indices, Now, PacketBuf, Reconfigured, Refused, Stage,
    TokenBucket, BURST,
};

use crate::class;
use crate::config::{ChannelCap, Clock, Config, LinkLayer};
use crate::flowkey::FlowKeying;
use crate::puzzle::{PuzzlePolicy, SeedChain};
use crate::router::{ConfigError, Router};

mod classify;
mod counters;
mod locate;
mod reconfigure;
mod scratch;
mod update;

use classify::Classified;
pub use counters::Counters;
use scratch::{Fast, Scratch, Tally, BEST_EFFORT_BYTE, EMPTY_SCRATCH, PRIVILEGED_BYTE};

/// Default regular packets between prefetching a packet's tags and reading
/// them to prefetch its entry (pass 1b runs this far behind pass 1) for
/// tables of at most [`AUTO_HINT_MAX_SLOTS`] slots (measured at 1M flows:
/// 43–55 ns with 8 vs 57–73 with 4 and 60–68 with 32; BENCHMARKS.md).
pub const HINT_LAG: usize = 8;

/// Largest table (slots) for which [`Config::hint_lag`] `None` means
/// [`HINT_LAG`]: 8 Mi tag bytes, a quarter of this machine's 32 MiB L3, so
/// that the tags stay cached next to the entry traffic and a short lag
/// suffices. Larger tables default to a lag of [`BURST`] (each tag line is a
/// DRAM miss of its own). The same bound as the table's whole-chunk
/// insertion prefetch: one definition of "a largely cached table".
pub const AUTO_HINT_MAX_SLOTS: usize = crate::table::AUTO_WHOLE_CHUNK_MAX_SLOTS;

/// The FlowPolice stage (one per worker).
pub struct FlowPolice {
    router: Router,
    keying: FlowKeying,
    puzzle: PuzzlePolicy,
    seeds: SeedChain,
    link: LinkLayer,
    check_binding: bool,
    slot_hints: bool,
    /// [`Config::clock`].
    clock: Clock,
    request_cap: Option<TokenBucket>,
    legacy_cap: Option<TokenBucket>,
    counters: Counters,
    /// [`Config::hint_lag`], resolved.
    lag: usize,
    /// Pass 1 tries the common-burst loop first (off only in tests, to
    /// compare it with the general pass 1).
    common_bursts: bool,
    s: Scratch,
    /// AES batch (MAC inputs, then tags; then the new capabilities).
    blocks: [Block; BURST],
    /// The configuration the stage runs with (what a live change is
    /// compared against).
    config: Config,
}

impl core::fmt::Debug for FlowPolice {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowPolice")
            .field("router", &self.router)
            .field("counters", &self.counters)
            .finish()
    }
}

impl FlowPolice {
    /// Builds the stage (allocates the whole flow table now).
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        let mut router = Router::new(
            cfg.params,
            &cfg.capability_key,
            cfg.slots,
            cfg.probe_window,
            cfg.table_hash_key(),
        )?;
        if let Some(whole) = cfg.insert_whole_chunk {
            router.table_mut().set_prefetch_whole_chunk(whole);
        }
        Ok(FlowPolice {
            router,
            keying: cfg.flow_keying(),
            puzzle: cfg.puzzle,
            seeds: cfg.seeds.clone(),
            link: cfg.link,
            check_binding: cfg.check_flow_binding,
            clock: cfg.clock,
            slot_hints: cfg.slot_hints.unwrap_or(true),
            request_cap: cfg.request_cap.map(|c| bucket(c, 0)),
            legacy_cap: cfg.legacy_cap.map(|c| bucket(c, 0)),
            counters: Counters::default(),
            lag: resolved_lag(&cfg),
            common_bursts: true,
            s: EMPTY_SCRATCH,
            blocks: [[0; 16]; BURST],
            config: cfg,
        })
    }

    /// The protocol state.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The protocol state, mutable (control plane, between bursts).
    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// The stage counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The configuration the stage runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the published seed chain (control plane, between bursts).
    pub fn set_seeds(&mut self, seeds: SeedChain) {
        self.config.seeds = seeds.clone();
        self.seeds = seeds;
    }
}

/// [`Config::hint_lag`], the default for the table size filled in.
fn resolved_lag(cfg: &Config) -> usize {
    cfg.hint_lag
        .unwrap_or(if cfg.slots <= AUTO_HINT_MAX_SLOTS { HINT_LAG } else { BURST })
        .clamp(1, BURST)
}

/// The shim offset of a raw IP packet the common-burst loop of pass 1
/// takes (an option-less IPv4 header first).
pub(super) const IP_SHIM: u16 = 20;

/// How pass 1 took a burst, what passes 3 and 4 may rely on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Packet by packet: any regular packet's batch index, any shim offset.
    General,
    /// The common-burst loop: the `k`-th regular packet is packet `k`.
    Common,
    /// [`Shape::Common`] of raw IP packets: each shim at [`IP_SHIM`].
    CommonIp,
}

/// Settings pass 1 reads per packet, copied out of the stage once per
/// burst (kept in registers: the stage's own fields would be reloaded
/// after every store into its scratch).
#[derive(Clone, Copy)]
pub(super) struct Burst {
    pub(super) check_binding: bool,
    pub(super) slot_hints: bool,
    pub(super) lag: usize,
}

/// The classes of the packets Algorithm 1's fast path accepted (`fast`),
/// set for the burst at once: with one walk of the metadata when they are
/// all the burst's live packets and of one class (the common burst),
/// otherwise packet by packet.
#[inline(always)]
fn set_classes<B: PacketBuf>(batch: &mut Batch<B>, fast: Fast) {
    let (all, privileged) = (fast.accepted, fast.privileged);
    if all == 0 {
        return;
    }
    if all == batch.live_mask() && (privileged == 0 || privileged == all) {
        batch.class_all(if privileged == 0 { class::BEST_EFFORT } else { class::PRIVILEGED });
        return;
    }
    for i in Indices::of(all) {
        let c = if privileged & (1 << i) != 0 { class::PRIVILEGED } else { class::BEST_EFFORT };
        batch.set_class(i, c);
    }
}

/// The set bits of `mask`, a mask of a burst's packets (`n`: its regular
/// packets). A common burst's masks are empty or hold its `n` packets
/// (indices `0..n`): those two are answered without the bit-counting
/// sequence (the baseline x86_64 instruction set has no `popcnt`).
#[inline(always)]
fn ones(mask: u32, n: usize) -> u64 {
    if mask == 0 {
        0
    } else if mask == full(n) {
        n as u64
    } else {
        u64::from(mask.count_ones())
    }
}

/// The lowest `n` bits (`n ≤ 32`).
#[inline(always)]
fn full(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1 << n) - 1
    }
}

/// Bytes `at..at + 26` of packet `i` (a shim's type byte through its
/// capability), if the packet holds them.
#[inline(always)]
fn capability_bytes<B: PacketBuf>(bufs: &mut [B], i: usize, at: u16) -> Option<&mut [u8; 26]> {
    let at = usize::from(at);
    let d = bufs.get_mut(i)?.data_mut().get_mut(at..at + 26)?;
    d.try_into().ok()
}

/// Pass 4 of a burst whose `k`-th new capability is packet `k`'s (all of
/// `bufs`): each MAC into its packet's shim, at `AT` (unless 0, where the
/// `k`-th record says).
#[inline(always)]
fn own_macs<B: PacketBuf, const AT: u16>(
    bufs: &mut [B],
    reg: &[scratch::Reg; BURST],
    blocks: &[Block; BURST],
) {
    let mut k = 0;
    while k < bufs.len() {
        let at = usize::from(if AT != 0 { AT } else { reg[k % BURST].shim });
        if let Some(d) = bufs[k].data_mut().get_mut(at + 18..at + 26) {
            d.copy_from_slice(&blocks[k % BURST][..8]);
        }
        k += 1;
    }
}

/// A full ingress policer of `cap` at `now_ns`.
fn bucket(cap: ChannelCap, now_ns: u64) -> TokenBucket {
    TokenBucket::new(cap.bytes_per_sec(), cap.burst(), now_ns)
}

impl Element for FlowPolice {
    fn name(&self) -> &str {
        "flowpolice"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = self.counters();
        out("requests", c.requests);
        out("flows_created", c.flows_created);
        out("flows_reclaimed", c.flows_reclaimed);
        out("table_full", c.table_full);
        out("privileged", c.privileged);
        out("best_effort", c.best_effort);
        out("legacy", c.legacy);
    }

    fn named_gauges(&self, out: &mut dyn FnMut(&'static str, u64)) {
        out("table_entries", self.router().table().len() as u64);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        self.apply_config(config_of::<Config>(config, "flowpolice")?, now)
    }
}

impl FlowPolice {
    /// Pass 1: classify, hash, prefetch the tags, gather the MAC inputs;
    /// `lag` regular packets behind, read their tags and prefetch their
    /// entries (pass 1b, see `hint`). Returns the number of regular packets,
    /// the mask of requests, and the burst's [`Shape`].
    #[inline(always)]
    fn pass1<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now: Now) -> (usize, u32, Shape) {
        let mut request = 0u32;
        let mut n = 0;
        let b =
            Burst { check_binding: self.check_binding, slot_hints: self.slot_hints, lag: self.lag };
        if self.common_bursts {
            if let Some((n, ip)) = self.pass1_common(batch, b) {
                return (n, 0, if ip { Shape::CommonIp } else { Shape::Common });
            }
        }
        for i in batch.live() {
            let c = match self.fast_regular(batch.meta(i), batch.data(i)) {
                Some(c) => c,
                None => match self.classify(batch, i, now) {
                    Classified::Regular(c) => c,
                    Classified::Request => {
                        request |= 1 << i;
                        continue;
                    }
                    Classified::Done => continue,
                },
            };
            if !self.regular(i, c, &mut n, b) {
                batch.drop_packet(i, DropReason::BadMac);
            }
        }
        for k in n.saturating_sub(b.lag)..n {
            self.hint(k, b);
        }
        (n.min(BURST), request, Shape::General)
    }

    /// Pass 3 of a burst of regular packets only (`n` of them): their
    /// ordinals `k` follow arrival order, and each tag is compared just
    /// before the packet's update (no separate pass, no per-packet type
    /// test). New capabilities go to `blocks[m]`, `m ≤ k`: tag `k` is read
    /// first. Returns `m` and, with `IDENT`, the ordinals that got one.
    /// `IDENT`: the `k`-th regular packet is packet `k` (the common-burst
    /// loop of pass 1 took the burst): its new capability goes to
    /// `blocks[k]`, packed at the end, and no record is kept; `AT` (unless
    /// 0): every shim is at `AT` ([`Shape`]). Out of line: a loop with the
    /// registers to itself.
    #[inline(never)]
    fn pass3_regular<B: PacketBuf, const IDENT: bool, const AT: u16>(
        &mut self,
        batch: &mut Batch<B>,
        n: usize,
        now_ms: u64,
        fast: &mut Fast,
        t: &mut Tally,
    ) -> (usize, u32) {
        let n = n.min(BURST);
        // Runs of common packets (a verified tag, a right slot hint and
        // Algorithm 1's fast path) in a loop without calls, its state in
        // registers; each other packet, in order, out of line. The ordinals
        // left form the range `k..n`.
        let (mut m, mut k, mut others, mut rest_got) = (0, 0, 0u32, 0u32);
        while k < n {
            k = if IDENT {
                self.pass3_ident_run::<B, AT>(batch, k, n, now_ms)
            } else {
                self.pass3_common_run(batch, k, n, now_ms, &mut m)
            };
            if k >= n {
                break;
            }
            // Each ordinal a run stopped at is handled here; the runs took
            // the others (no run start kept live across a run).
            others |= 1 << (k % BURST);
            let (bufs, _) = batch.bufs_mut_metas();
            // Packet `k` at `AT` in a burst pass 1 took whole, else as
            // recorded.
            let r = &self.s.reg[k % BURST];
            let i = if IDENT { k } else { usize::from(r.i) };
            let at = if AT != 0 { AT } else { r.shim };
            if update::tag_ok(&self.blocks, bufs, k, i, at) {
                if IDENT {
                    // Its new capability, if any, in slot `k` too.
                    let end = self.regular_pass3_rest(batch, k, i, at, now_ms, k, t);
                    rest_got |= u32::from(end > k) << k;
                } else {
                    m = self.regular_pass3_rest(batch, k, i, at, now_ms, m, t);
                }
            } else {
                self.drop_bad_mac(batch, i);
            }
            k += 1;
        }
        // The ordinals the runs accepted, their type bytes in `s.ty`.
        let runs = full(n) & !others;
        // The privileged among them: the type bytes' differing bit, eight
        // ordinals a word (only those of `runs` were written this burst).
        let privileged = scratch::type_bits(&self.s.ty, PRIVILEGED_BYTE ^ BEST_EFFORT_BYTE) & runs;
        *fast = if IDENT {
            Fast { accepted: runs, privileged }
        } else {
            let mut f = Fast::default();
            for j in Indices::of(runs) {
                let i = usize::from(self.s.reg[j % BURST].i) % BURST;
                f.accepted |= 1 << i;
                f.privileged |= (privileged >> j & 1) << i;
            }
            f
        };
        if !IDENT {
            return (m, 0);
        }
        // The ordinals with a new capability, their MAC inputs packed in
        // order (in place: slot `j` ≤ ordinal `k`).
        let got = scratch::type_bits(&self.s.ty, 1) & runs | rest_got;
        if got != full(n) {
            for (j, k) in Indices::of(got).enumerate() {
                self.blocks[j % BURST] = self.blocks[k % BURST];
            }
        }
        (got.count_ones() as usize, got)
    }

    /// Drops packet `i`, whose capability does not verify (rare, out of
    /// line).
    #[cold]
    #[inline(never)]
    fn drop_bad_mac<B: PacketBuf>(&mut self, batch: &mut Batch<B>, i: usize) {
        self.counters.bad_mac += 1;
        batch.drop_packet(i, DropReason::BadMac);
    }
}

impl<B: PacketBuf> Stage<B> for FlowPolice {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        let now_ms = match self.clock {
            Clock::Monotonic => now.mono_ns / 1_000_000,
            Clock::Unix => now.unix_ms(),
        };
        let (mut t, mut fast) = (Tally::default(), Fast::default());
        let (n, request, shape) = self.pass1(batch, now);
        // Pass 2: verify every carried capability in one batched AES call
        // (while the entries load).
        self.router.key().mac_burst(&mut self.blocks, n);
        // Pass 3: table updates in arrival order; new capabilities' MAC
        // inputs gathered for pass 4.
        let (mut m, mut got) = (0, 0);
        if request == 0 {
            // The common burst: regular packets only, their ordinals `k` in
            // arrival order; each tag is compared just before the packet's
            // update (no separate pass, no per-packet type test). New
            // capabilities go to `blocks[m]`, `m ≤ k`: tag `k` is read first.
            (m, got) = match shape {
                Shape::CommonIp => {
                    self.pass3_regular::<B, true, IP_SHIM>(batch, n, now_ms, &mut fast, &mut t)
                }
                Shape::Common => {
                    self.pass3_regular::<B, true, 0>(batch, n, now_ms, &mut fast, &mut t)
                }
                Shape::General => {
                    self.pass3_regular::<B, false, 0>(batch, n, now_ms, &mut fast, &mut t)
                }
            };
        } else {
            // Compare the tags with the carried MACs.
            let mut bad = 0u32;
            let (bufs, _) = batch.bufs_mut_metas();
            for (k, r) in self.s.reg[..n].iter().enumerate() {
                let ok = update::tag_ok(&self.blocks, bufs, k, usize::from(r.i), r.shim);
                bad |= u32::from(!ok) << (usize::from(r.i) % BURST);
            }
            if bad != 0 {
                self.counters.bad_mac += u64::from(bad.count_ones());
                for i in Indices::of(bad) {
                    batch.drop_packet(i, DropReason::BadMac);
                }
            }
            // The regular packets' batch indices as a mask.
            let regular =
                self.s.reg[..n].iter().fold(0u32, |r, g| r | 1 << (usize::from(g.i) % BURST));
            for i in Indices::of((regular | request) & batch.live_mask()) {
                if request & (1 << i) != 0 {
                    self.request_pass3(batch, i, now_ms, &mut m, &mut t);
                } else {
                    let k = usize::from(self.s.ord[i % BURST]);
                    self.regular_pass3(batch, k, now_ms, &mut m, &mut fast, &mut t);
                }
            }
        }
        let classes = Fast {
            accepted: fast.accepted | t.accepted.accepted,
            privileged: fast.privileged | t.accepted.privileged,
        };
        set_classes(batch, classes);
        // Pass 4: MAC the new capabilities together (the MAC of
        // `P_id ‖ flow_id ‖ ts`, bytes 4..18 of the shim, which pass 3
        // wrote with the type byte) and write each MAC.
        let m = m.min(BURST);
        self.router.key().mac_burst(&mut self.blocks, m);
        // All buffers at once: their slice stays in registers. (An index
        // loop: a little shorter per packet than zipped iterators.)
        let (bufs, _) = batch.bufs_mut_metas();
        let at = |s: &Scratch, k: usize| match shape {
            Shape::CommonIp => IP_SHIM,
            _ => s.reg[k % BURST].shim,
        };
        let ident = shape != Shape::General && request == 0;
        if let (true, true, Some(bufs)) = (ident, m == n, bufs.get_mut(..m)) {
            // Every regular packet got a new capability, each its own in
            // arrival order, and the `k`-th is packet `k`: the `k`-th MAC
            // is packet `k`'s (no batch index to read or check).
            if shape == Shape::CommonIp {
                own_macs::<B, IP_SHIM>(bufs, &self.s.reg, &self.blocks);
            } else {
                own_macs::<B, 0>(bufs, &self.s.reg, &self.blocks);
            }
        } else if ident {
            // The `k`-th regular packet is packet `k`; the new capabilities
            // are those of the ordinals in `got`, in order.
            for (mac, k) in self.blocks[..m].iter().zip(Indices::of(got)) {
                if let Some(d) = capability_bytes(bufs, k, at(&self.s, k)) {
                    d[18..26].copy_from_slice(&mac[..8]);
                }
            }
        } else {
            let mut k = 0;
            while k < m {
                let (st, mac) = (&self.s.stamp[k % BURST], &self.blocks[k % BURST]);
                if let Some(d) = capability_bytes(bufs, usize::from(st.i), st.at) {
                    d[18..26].copy_from_slice(&mac[..8]);
                }
                k += 1;
            }
        }
        // Per-burst tallies into the counters.
        let c = &mut self.counters;
        // Every accepted regular packet is in `classes`; those the fast
        // path did not take are also in `t.feedback`.
        let accepted = ones(classes.accepted, n);
        let privileged = ones(classes.privileged, n);
        let fast_current = accepted - t.feedback.iter().sum::<u64>();
        c.regular += n as u64;
        c.privileged += privileged;
        c.best_effort += accepted - privileged;
        c.feedback_current += t.feedback[0] + fast_current;
        c.feedback_previous += t.feedback[1];
        c.feedback_unissued += t.feedback[2];
        c.restamped += m as u64 - t.requests_stamped;
    }
}
