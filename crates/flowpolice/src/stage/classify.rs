//! Pass 1, classifying: legacy packets (and their cap), requests (their cap
//! and puzzle, insertion prefetch) and regular packets (flow binding, hash,
//! tag prefetch, MAC input); pass 1b turns the tags into a slot hint.

use mac::Block;
use packet::flowpolice::{FlowPolice as Shim, PacketType, Puzzle};
use pipeline::{Batch, DropReason, PacketBuf, BURST};

use super::scratch::{Carried, Reg, NO_HINT};
use super::Burst;
use super::FlowPolice;
use crate::class;
use crate::config::LinkLayer;
use crate::flow::FlowEntry;
use crate::table::{prefetch_entry, FlowTable};

/// Pass 1b for one regular packet's record `r`: its window's tags name
/// the likely slot of its flow (its hint, to `*out`); load just that
/// entry's line(s), nothing when no tag matches (the flow is absent).
/// Without hints: the rest of the home chunk.
/// `entries`: the table's ([`FlowTable::entries`], borrowed once by a loop
/// over many packets).
#[inline(always)]
fn hint(table: &FlowTable, entries: &[FlowEntry], r: &Reg, out: &mut u32, slot_hints: bool) {
    let home = r.home as usize;
    if !slot_hints {
        table.prefetch_rest(home);
        *out = NO_HINT;
        return;
    }
    // No matching tag: the flow is absent (pass 3 reads no entry).
    *out = match table.slot_hint(r.hash, home) {
        Some(h) => {
            prefetch_entry(entries, h);
            h as u32
        }
        None => NO_HINT,
    };
}

/// What [`FlowPolice::classify`] made of a packet.
pub(super) enum Classified {
    /// A regular packet, for [`FlowPolice::regular`].
    Regular(Carried),
    /// A request, recorded for pass 3.
    Request,
    /// Legacy, or dropped: nothing more to do in this burst.
    Done,
}

impl FlowPolice {
    /// Pass 1 for a regular packet: flow binding, hash, tag (or first chunk
    /// line) prefetch, MAC input to `blocks[*n]`. `false`: the flow ID does
    /// not match the addresses (counted here; the caller drops the packet).
    #[inline(always)]
    pub(super) fn regular(&mut self, i: usize, c: Carried, n: &mut usize, b: Burst) -> bool {
        if b.check_binding && c.fid != c.addr_fid {
            // Counted as regular here; the others by their number.
            self.counters.regular += 1;
            self.counters.flow_mismatch += 1;
            return false;
        }
        let table = self.router.table();
        let hash = table.hash(c.fid);
        let home = table.home(hash);
        if b.slot_hints {
            // The tags say which entry of the chunk to load (`hint`, a few
            // packets later; reading them here would stall on each packet's
            // tag line: measured slower at 1M flows).
            table.prefetch_tags(home);
        } else {
            table.prefetch_first(home);
        }
        // `*n < BURST` (one per live packet): the modulo only spares the
        // bounds checks.
        let k = *n % BURST;
        self.s.reg[k].record(&c, hash, home, i);
        self.s.ord[i % BURST] = k as u8;
        self.blocks[k] = c.block;
        *n += 1;
        // Pass 1b, `lag` regular packets behind (one per new packet; the
        // last `lag` after the loop).
        if *n > b.lag {
            self.hint(*n - 1 - b.lag, b);
        }
        true
    }

    /// Pass 1b for the `k`-th regular packet: its window's tags name the
    /// likely slot of its flow; load just that entry's line(s), nothing when
    /// no tag matches (the flow is absent). Without hints: the rest of the
    /// home chunk.
    #[inline(always)]
    pub(super) fn hint(&mut self, k: usize, b: Burst) {
        let table = self.router.table();
        let s = &mut self.s;
        hint(table, table.entries(), &s.reg[k % BURST], &mut s.hint[k % BURST], b.slot_hints);
    }

    /// Pass 1 for a burst of common packets only: every packet live and
    /// taken by [`Self::fast_regular`] (with a matching flow binding, if
    /// checked). Records what [`Self::regular`] records (the ordinal of
    /// each packet is its batch index) and runs pass 1b the same, in one
    /// loop over the burst's slices: no batch mutation, no per-packet
    /// index or bounds checks into the batch. `None` at the first other
    /// packet: nothing but scratch and prefetches was touched, and the
    /// caller runs the general pass 1 from the start. Returns the number
    /// of packets and whether they are all raw IP read by the fixed view
    /// (each shim at [`IP_SHIM`](super::IP_SHIM)).
    #[inline(always)]
    pub(super) fn pass1_common<B: PacketBuf>(
        &mut self,
        batch: &Batch<B>,
        b: Burst,
    ) -> Option<(usize, bool)> {
        // The burst's settings as constants of the loop (no per-packet tests,
        // fewer live registers).
        // Raw IP input no stage parsed (the usual case): the IP header at
        // 0, checked for the burst once.
        let ip = self.link == LinkLayer::Ip
            && (batch.layers_unparsed() || Self::all_fresh(batch.metas()));
        // Without protected IPv4 destinations (the usual case) a raw IP
        // packet's flow ID of the addresses is its destination.
        let plain = ip && !self.keying.has_secure_v4();
        let lag = b.lag;
        let n = match (ip, plain, b.slot_hints, b.check_binding) {
            (true, true, true, true) => {
                self.pass1_common_with::<B, true, true, true, true>(batch, lag)
            }
            (true, true, true, false) => {
                self.pass1_common_with::<B, true, true, true, false>(batch, lag)
            }
            (true, true, false, true) => {
                self.pass1_common_with::<B, true, true, false, true>(batch, lag)
            }
            (true, true, false, false) => {
                self.pass1_common_with::<B, true, true, false, false>(batch, lag)
            }
            (true, false, true, true) => {
                self.pass1_common_with::<B, true, false, true, true>(batch, lag)
            }
            (true, false, true, false) => {
                self.pass1_common_with::<B, true, false, true, false>(batch, lag)
            }
            (true, false, false, true) => {
                self.pass1_common_with::<B, true, false, false, true>(batch, lag)
            }
            (true, false, false, false) => {
                self.pass1_common_with::<B, true, false, false, false>(batch, lag)
            }
            (false, _, true, true) => {
                self.pass1_common_with::<B, false, false, true, true>(batch, lag)
            }
            (false, _, true, false) => {
                self.pass1_common_with::<B, false, false, true, false>(batch, lag)
            }
            (false, _, false, true) => {
                self.pass1_common_with::<B, false, false, false, true>(batch, lag)
            }
            (false, _, false, false) => {
                self.pass1_common_with::<B, false, false, false, false>(batch, lag)
            }
        }?;
        Some((n, ip))
    }

    /// [`Self::pass1_common`] with slot hints (`HINTS`) and the flow
    /// binding check (`BINDING`) on or off; `IP`: every packet is raw IP
    /// (no metadata to consult); `PLAIN` (with `IP`): no protected IPv4
    /// destinations ([`Self::fast_regular_at`]).
    #[inline(always)]
    fn pass1_common_with<
        B: PacketBuf,
        const IP: bool,
        const PLAIN: bool,
        const HINTS: bool,
        const BINDING: bool,
    >(
        &mut self,
        batch: &Batch<B>,
        lag: usize,
    ) -> Option<usize> {
        let n = batch.len();
        if n == 0 || n > BURST || !batch.all_live() {
            return None;
        }
        let FlowPolice { router, keying, link, s, blocks, .. } = self;
        let (link, table) = (*link, router.table());
        let entries = table.entries();
        // The records cut to the burst's `n`: `k < n` indexes them without
        // a check or a mask.
        let (Some(reg), Some(hints), Some(blocks)) =
            (s.reg.get_mut(..n), s.hint.get_mut(..n), blocks.get_mut(..n))
        else {
            return None;
        };
        // The first `lag` packets, then each next one followed by pass 1b
        // for the one `lag` before it (two loops: no per-packet test of
        // `k >= lag`).
        let first = lag.min(n);
        let (Some((m0, m1)), Some((b0, b1))) =
            (batch.metas().split_at_checked(first), batch.bufs().split_at_checked(first))
        else {
            return None;
        };
        for (k, (m, buf)) in m0.iter().zip(b0).enumerate() {
            Self::take::<B, IP, PLAIN, HINTS, BINDING>(
                link, keying, table, m, buf, k, reg, blocks,
            )?;
        }
        // `j = k - lag`: this loop runs only when `lag < n`, so `first = lag`.
        for (j, (m, buf)) in m1.iter().zip(b1).enumerate() {
            let k = j + first;
            Self::take::<B, IP, PLAIN, HINTS, BINDING>(
                link, keying, table, m, buf, k, reg, blocks,
            )?;
            hint(table, entries, &reg[j], &mut hints[j], HINTS);
        }
        for j in n.saturating_sub(lag)..n {
            hint(table, entries, &reg[j], &mut hints[j], HINTS);
        }
        Some(n)
    }

    /// [`Self::pass1_common_with`] for packet `k` (`m`, `buf`): its record
    /// in `reg[k]` and MAC input in `blocks[k]`, or `None` when the fast
    /// path does not take it.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn take<
        B: PacketBuf,
        const IP: bool,
        const PLAIN: bool,
        const HINTS: bool,
        const BINDING: bool,
    >(
        link: LinkLayer,
        keying: &crate::flowkey::FlowKeying,
        table: &FlowTable,
        m: &pipeline::Meta,
        buf: &B,
        k: usize,
        reg: &mut [Reg],
        blocks: &mut [Block],
    ) -> Option<()> {
        let c = if IP {
            Self::fast_regular_at::<PLAIN>(0, keying, buf.data())?
        } else {
            Self::fast_regular_with(link, keying, m, buf.data())?
        };
        if BINDING && c.fid != c.addr_fid {
            return None;
        }
        let hash = table.hash(c.fid);
        let home = table.home(hash);
        if HINTS {
            table.prefetch_tags(home);
        } else {
            table.prefetch_first(home);
        }
        // Packet `k`, and (raw IP) its shim at `IP_SHIM`: passes 3 and 4
        // know that of a burst taken here ([`Shape`](super::Shape)).
        let r = &mut reg[k];
        (r.hash, r.home) = (hash, home as u32);
        if !IP {
            r.shim = c.shim as u16;
        }
        blocks[k] = c.block;
        Some(())
    }

    /// Pass 1 for a packet the fast path did not take: classify, cheap
    /// checks, hash and prefetch. A regular packet's capability is returned
    /// for the caller's [`Self::regular`]; a request is recorded here. Out of
    /// line, and borrowing none of the caller's loop state: keeps the fast
    /// path's loop small (its counters stay in registers).
    #[inline(never)]
    pub(super) fn classify<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now: pipeline::Now,
    ) -> Classified {
        let located = match self.locate(batch, i) {
            Ok(Some(l)) => l,
            Ok(None) => {
                let len = batch.data(i).len();
                if let Some(b) = &mut self.legacy_cap {
                    if !b.try_take(len, now.mono_ns) {
                        self.counters.legacy_cap += 1;
                        batch.drop_packet(i, DropReason::ChannelCap);
                        return Classified::Done;
                    }
                }
                self.counters.legacy += 1;
                batch.set_class(i, class::LEGACY);
                return Classified::Done;
            }
            Err(e) => {
                self.counters.malformed += 1;
                batch.drop_packet(i, e.into());
                return Classified::Done;
            }
        };
        let data = batch.data(i);
        let fp = Shim::new_unchecked(data.get(located.shim..).unwrap_or_default());
        let flow_id = self.flow_id_of(data, &located);
        if fp.packet_type() == Some(PacketType::Request) {
            self.counters.requests += 1;
            if let Some(b) = &mut self.request_cap {
                if !b.try_take(data.len(), now.mono_ns) {
                    self.counters.request_cap += 1;
                    batch.drop_packet(i, DropReason::ChannelCap);
                    return Classified::Done;
                }
            }
            let puzzle = Puzzle {
                epoch: fp.puzzle_epoch().unwrap_or(0),
                level: fp.puzzle_level().unwrap_or(0),
                nonce: fp.puzzle_nonce().unwrap_or(0),
            };
            let level = puzzle.level;
            let (src, dst) = Self::addrs(data, &located);
            if !self.puzzle.check(&self.seeds, now.unix_ms(), src, dst, &puzzle) {
                self.counters.bad_puzzle += 1;
                batch.drop_packet(i, DropReason::BadPuzzle);
                return Classified::Done;
            }
            let hash = self.router.table().hash(flow_id);
            self.router.table().prefetch_insert(hash);
            let s = &mut self.s;
            s.shim[i] = located.shim as u16;
            s.level[i] = level;
            s.fid[i] = flow_id;
            s.hash[i] = hash;
            Classified::Request
        } else {
            // `locate` checked the 28 bytes.
            let h: Option<&[u8; 28]> = data.get(located.shim..).and_then(|h| h.first_chunk());
            let Some(h) = h else { return Classified::Done };
            Classified::Regular(Self::carried(h, located.shim, flow_id))
        }
    }
}

/// The common-burst pass 1 against the general one.
#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use pipeline::{Batch, DropReason, Now, Stage, Verdict};

    use crate::config::{Config, LinkLayer};
    use crate::host::{ipv4_packet, ipv6_packet, Sender};
    use crate::puzzle::{self, PuzzlePolicy, SeedChain};
    use crate::FlowPolice;
    use crate::{Capability, Puzzle};

    const T0: u64 = 1_000_000_000_000; // ns

    fn seeds() -> SeedChain {
        SeedChain::generate([42; 32], 0, 64)
    }

    fn stage(common: bool, hints: bool, lag: usize, binding: bool, eth: bool) -> FlowPolice {
        stage_protecting(common, hints, lag, binding, eth, &[])
    }

    /// [`stage`] with protected IPv4 destinations (flows keyed by source).
    fn stage_protecting(
        common: bool,
        hints: bool,
        lag: usize,
        binding: bool,
        eth: bool,
        protected: &[Ipv4Addr],
    ) -> FlowPolice {
        let mut c = Config::new(mac::Key::from([7; 16]), [1, 2], 256, seeds());
        c.protected_v4 = protected.to_vec();
        c.link = if eth { LinkLayer::Ethernet } else { LinkLayer::Ip };
        c.puzzle = PuzzlePolicy { epoch_ms: 60_000, min_level: 1, accept_previous_epoch: true };
        c.slot_hints = Some(hints);
        c.hint_lag = Some(lag);
        c.check_flow_binding = binding;
        let mut s = FlowPolice::new(c).unwrap();
        s.common_bursts = common;
        s
    }

    fn dst(f: u32) -> Ipv4Addr {
        Ipv4Addr::from(0xc000_0000 + f * 7919)
    }

    fn regular(src: Ipv4Addr, to: Ipv4Addr, cap: Capability) -> Vec<u8> {
        let mut s = Sender::new();
        s.on_returned(cap);
        let mut shim = [0u8; 28];
        s.write_regular(&mut shim, 17).unwrap();
        ipv4_packet(src, to, &shim, b"payload")
    }

    fn request(src: Ipv4Addr, to: Ipv4Addr, at: Now) -> Vec<u8> {
        let epoch = PuzzlePolicy::default().epoch_at(at.unix_ms());
        let nonce =
            puzzle::solve(seeds().seed(epoch).unwrap(), &src.octets(), &to.octets(), 1, 0).unwrap();
        let mut shim = [0u8; 44];
        Sender::write_request(&mut shim, 17, Puzzle { epoch, level: 1, nonce }).unwrap();
        ipv4_packet(src, to, &shim, b"req")
    }

    /// The capability a packet carries in an IPv4 shim (at `20 + l2`).
    fn cap_of(p: &[u8], l2: usize) -> Option<Capability> {
        let s = packet::flowpolice::FlowPolice::new_checked(p.get(20 + l2..)?).ok()?;
        Some(Capability { p_id: s.p_id(), flow_id: s.flow_id(), ts: s.ts(), mac: s.mac() })
    }

    /// Random bursts, half of them of common packets only (the common-burst
    /// loop takes them), the others mixing in what it refuses (requests,
    /// legacy, IPv6, truncated, hostile bytes, altered fixed fields, flow
    /// IDs of other addresses, packets dropped before the stage), run through
    /// two stages that differ only in whether pass 1 tries the common-burst
    /// loop (and so in whether passes 3 and 4 take the shapes it allows:
    /// packet `k` the `k`-th regular one, raw IP shims at a fixed offset,
    /// MACs written without records when every packet got a capability):
    /// same verdicts, bytes, counters and table, for slot hints on and
    /// off, several lags, with and without the flow binding check, on raw
    /// IP and on Ethernet, with and without metadata of a parse stage (right
    /// or wrong), with and without protected destinations (one of them a
    /// destination the bursts use: its packets' flow IDs are the source's).
    #[test]
    fn common_bursts_equal_the_general_pass() {
        let mut common_runs = 0;
        for (hints, lag, binding, eth, protect) in [
            (true, 8, true, false, false),
            (true, 1, true, false, false),
            (false, 8, true, false, false),
            (true, 32, false, false, false),
            (true, 3, false, false, false),
            (true, 8, true, true, false),
            (false, 2, false, true, false),
            (true, 8, true, false, true),
            (true, 3, false, false, true),
        ] {
            let l2 = if eth { 14 } else { 0 };
            let protected: &[Ipv4Addr] =
                if protect { &[Ipv4Addr::new(192, 0, 2, 1), dst(3)] } else { &[] };
            let mut a = stage_protecting(true, hints, lag, binding, eth, protected);
            let mut b = stage_protecting(false, hints, lag, binding, eth, protected);
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ lag as u64;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let src = Ipv4Addr::new(10, 0, 0, 1);
            let mut caps: Vec<(u32, Capability)> = Vec::new();
            let mut next = 0u32;
            let mut ms = 10u64;
            for round in 0..120 {
                ms += rnd() % 700;
                let at = Now::from_unix_ns(T0 + ms * 1_000_000);
                let t_ms = at.mono_ns / 1_000_000;
                // New flows through the router (both stages alike).
                while caps.len() < 40 || rnd() % 8 == 0 {
                    let f = u64::from(u32::from(dst(next)));
                    let ia = a.router_mut().on_request(f, t_ms);
                    assert_eq!(ia, b.router_mut().on_request(f, t_ms));
                    if let Ok(i) = ia {
                        caps.push((next, i.capability));
                    }
                    next += 1;
                }
                let common = round % 2 == 0;
                let len = 1 + (rnd() % 32) as usize;
                let mut pkts = Vec::new();
                for _ in 0..len {
                    let (f, mut cap) = caps[(rnd() % caps.len() as u64) as usize];
                    let r = rnd() % 24;
                    if r == 0 {
                        cap.mac[(rnd() % 8) as usize] ^= 1; // forged
                    }
                    let mut p = regular(src, dst(f), cap);
                    if r == 1 {
                        p = regular(src, dst(f + 1), cap); // another flow's capability
                    }
                    if !common {
                        match r {
                            2 => p = request(src, dst(next + 1000 + (rnd() % 4) as u32), at),
                            3 => p[9] = 17, // legacy
                            4 => p.truncate((rnd() % 60) as usize),
                            5 => p = (0..rnd() % 80).map(|_| rnd() as u8).collect(),
                            6 => {
                                p = (0..48 + rnd() % 40).map(|_| rnd() as u8).collect();
                                p[0] = 0x45;
                                p[9] = 254;
                            }
                            7 => p[21] = 0x40, // a request's type on a regular shim
                            8 => p[23] ^= 4,   // shim length
                            9 => p[7] = 1,     // a later fragment
                            10 => p[3] = 47,   // IP total length below the shim's end
                            11 => {
                                let mut s = [0u8; 28];
                                let mut snd = Sender::new();
                                snd.on_returned(cap);
                                snd.write_regular(&mut s, 17).unwrap();
                                let d6 = Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(f));
                                p = ipv6_packet(Ipv6Addr::LOCALHOST, d6, &s, b"v6");
                            }
                            _ => {}
                        }
                    }
                    if eth {
                        let v6 = p.first().is_some_and(|b| b >> 4 == 6);
                        let mut e = vec![0u8; 14];
                        e[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
                        if r == 12 && !common {
                            e[12] = 0x88; // not IP
                        }
                        e.extend_from_slice(&p);
                        p = e;
                    }
                    pkts.push(p);
                }
                // Metadata of a parse stage: none, right (IP header and
                // shim where they are), or a shim offset that is wrong.
                let metas = rnd() % 4;
                let meta_of = |m: &mut pipeline::Meta, k: u64| {
                    if metas >= 2 {
                        m.l3 = pipeline::L3::Ipv4;
                        m.l3_off = l2 as u16;
                        m.proto = pipeline::Proto::FlowPolice;
                        m.proto_off = (l2 + 20) as u16;
                        if metas == 3 && k.is_multiple_of(5) {
                            m.proto_off += 4;
                        }
                    }
                };
                let pre_drop = !common && rnd() % 4 == 0;
                let mut outs = Vec::new();
                for st in [&mut a, &mut b] {
                    let mut batch: Batch<Vec<u8>> = Batch::new();
                    for p in &pkts {
                        let i = batch.push(p.clone(), 3).unwrap();
                        meta_of(batch.meta_mut(i), i as u64);
                    }
                    if pre_drop {
                        batch.drop_packet(0, DropReason::Malformed);
                    }
                    st.process(&mut batch, at);
                    let v: Vec<Verdict> = (0..len).map(|i| batch.meta(i).verdict).collect();
                    let mut bytes = Vec::new();
                    batch.drain(|buf, _| bytes.push(buf));
                    outs.push((v, bytes));
                }
                let ctx = format!(
                    "hints {hints} lag {lag} binding {binding} eth {eth} protect {protect} \
                     round {round}"
                );
                assert_eq!(outs[0], outs[1], "{ctx}");
                assert_eq!(a.counters(), b.counters(), "{ctx}");
                // No packet changes length.
                let lens = |ps: &[Vec<u8>]| ps.iter().map(Vec::len).collect::<Vec<_>>();
                assert_eq!(lens(&outs[0].1), lens(&pkts), "{ctx}");
                let all_regular = outs[0].0.iter().all(|v| !matches!(v, Verdict::Drop(_)));
                common_runs += usize::from(common && !pre_drop && all_regular);
                // Carry the newest capabilities from now on.
                for (k, p) in outs[0].1.iter().enumerate() {
                    if let (Verdict::Forward { .. }, Some(c)) = (outs[0].0[k], cap_of(p, l2)) {
                        if let Some(e) =
                            caps.iter_mut().find(|e| u64::from(u32::from(dst(e.0))) == c.flow_id)
                        {
                            e.1 = c;
                        }
                    }
                }
            }
            let (ta, tb) = (a.router().table(), b.router().table());
            for i in 0..ta.slots() {
                assert_eq!(ta.entry(i), tb.entry(i), "slot {i}");
            }
            let c = a.counters();
            assert!(c.privileged > 0 && c.best_effort > 0 && c.bad_mac > 0 && c.restamped > 0);
            if binding {
                assert!(c.flow_mismatch > 0 && c.malformed > 0 && c.legacy > 0 && c.requests > 0);
            }
        }
        // Rounds the common-burst loop took whole (every packet forwarded).
        assert!(common_runs > 50, "{common_runs}");
    }

    /// The fields of a carried capability, for comparisons.
    fn fields(c: &super::Carried) -> (usize, u64, u64, mac::Block) {
        (c.shim, c.addr_fid, c.fid, c.block)
    }

    /// Bytes of a regular IPv4 packet whose value `fast_regular_at` ignores
    /// (type of service, ID, TTL, checksum, addresses, the shim's next
    /// header and capability), and bits of the bytes it reads in part
    /// (the IP flags beside the fragment offset; the shim's flag bits and
    /// the type's low bit beside its top bit).
    fn ignored(pos: usize) -> u8 {
        match pos {
            1 | 4 | 5 | 8 | 10..=20 | 24..=47 => 0xff,
            6 => 0xe0,
            21 => 0x7f,
            _ => 0,
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The capability fields and MAC input block read from a regular
        /// shim's bytes (by pass 1, and by pass 3 with any new packet ID)
        /// equal its fields as the shim view reads them and the block built
        /// from them.
        #[test]
        fn the_carried_capability_is_the_shims(
            h in proptest::prelude::any::<[u8; 28]>(),
            new_id in proptest::prelude::any::<u16>(),
        ) {
            let c = FlowPolice::carried(&h, 20, 5);
            let s = packet::flowpolice::FlowPolice::new_unchecked(&h[..]);
            let (pid, fid, ts) = (s.p_id(), s.flow_id(), s.ts());
            proptest::prop_assert_eq!(c.fid, fid);
            proptest::prop_assert_eq!(c.block, crate::capability::mac_block(pid, fid, ts));
            proptest::prop_assert_eq!((c.shim, c.addr_fid), (20, 5));
            let r = crate::stage::scratch::Cap::read(h.first_chunk().unwrap());
            proptest::prop_assert_eq!((r.pid(), r.fid, r.ts()), (pid, fid, ts));
            proptest::prop_assert_eq!(r.mac, u64::from_ne_bytes(s.mac()));
            proptest::prop_assert_eq!(r.block(), c.block);
            let renewed = crate::capability::mac_block(new_id, fid, ts);
            proptest::prop_assert_eq!(r.block_with(new_id), renewed);
        }

        /// The common-packet reader (`fast_regular_at`, the first loop of
        /// pass 1) against the generic walk (`locate`, `classify`), over
        /// random changes to the header and shim bytes and the length of a
        /// regular IPv4 packet: whatever it takes is a regular packet the
        /// generic walk reads the same way, and it takes every packet whose
        /// changes lie in bits it ignores. Its variant for a keying without
        /// protected destinations reads the same.
        #[test]
        fn the_common_packet_reader_agrees_with_the_generic_walk(
            changes in proptest::collection::vec((0usize..48, proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..12,
            grow in proptest::prelude::any::<bool>(),
        ) {
            let mut st = stage(true, true, 8, true, false);
            let at = Now::from_unix_ns(T0);
            let cap = Capability { p_id: 3, flow_id: 0xc000_1234, ts: 77, mac: [9; 8] };
            let orig = regular(Ipv4Addr::new(10, 0, 0, 1), dst(5), cap);
            let mut p = orig.clone();
            for &(pos, v) in &changes {
                p[pos] = v;
            }
            if grow {
                p.extend_from_slice(&[0xee; 5]);
            } else {
                p.truncate(p.len() - cut);
            }
            let fast = FlowPolice::fast_regular_at::<false>(0, &st.keying, &p);
            // Without protected destinations (as here) the plain reader
            // reads the same.
            let plain = FlowPolice::fast_regular_at::<true>(0, &st.keying, &p);
            proptest::prop_assert_eq!(plain.as_ref().map(fields), fast.as_ref().map(fields));
            let expected = (grow || cut == 0)
                && (0..48).all(|k| (p[k] ^ orig[k]) & !ignored(k) == 0);
            if expected {
                proptest::prop_assert!(fast.is_some(), "{changes:?} cut {cut} grow {grow}");
            }
            let mut batch: Batch<Vec<u8>> = Batch::new();
            batch.push(p, 3).unwrap();
            let generic = st.classify(&mut batch, 0, at);
            if let Some(f) = fast {
                match generic {
                    super::Classified::Regular(g) => proptest::prop_assert_eq!(fields(&f), fields(&g)),
                    _ => proptest::prop_assert!(false, "taken by the fast path only: {changes:?}"),
                }
            }
        }
    }
}
