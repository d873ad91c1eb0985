//! The machine's floor for the flow table's memory traffic, over a buffer of
//! `MB` MiB (huge pages requested, as for the flow table), in bursts of
//! `BATCH` (default 32) accesses. Prints thread CPU time per access.
//!
//! `PATTERN` (default `one`) picks what one access (one packet) touches:
//! * `one`: one random line, prefetched for the whole burst, then read and
//!   written (read-modify-write).
//! * `far`: a random *tag* line, read `LAG` accesses (default 8) after its
//!   prefetch; a byte of it picks a random line of the buffer (the entry),
//!   which is prefetched, then read and written after the burst. Today's
//!   table layout: the tags live in their own array (one byte per 48-byte
//!   entry, so 1/48 of the buffer's size), and the entry is a second miss.
//! * `near`: the same, but the entry lies in the 256 bytes after the tag line
//!   (same page, same DRAM row): a layout that keeps a window's tags next to
//!   its entries.
//!
//! A regular packet touches ≈ 1.5 entry lines plus a tag line, so the
//! `far` figure at the table's size bounds its time from below, whatever
//! the stage's code does (BENCHMARKS.md, FlowPolice).
//!
//! `FLOWS=<n>` measures, in the same run, the FlowPolice stage's regular
//! packet at `n` established flows (bursts of 32 random flows, thread CPU
//! time) and the `far` floor over a buffer of the flow table's own size
//! (entries; the tag array as above), and prints the ratio stage / floor: how
//! far the stage is from the memory traffic it cannot avoid. It also makes
//! the same accesses over the table's own arrays
//! (`FlowTable::floor_pass`) and prints the ratio to that floor, which
//! compares the two on the same pages (a separate buffer's pages can be
//! faster or slower than the table's by more than 10 %). The three
//! alternate in slices of about 50 ms, ten of each per printed line, so that
//! all see the same state of the host. `ROUNDS=<n>` (default 1, at most
//! 100) prints `n` lines over the same table (filled once): the ratio's
//! spread. Each line sends 8 192 000 packets to random flows of that table;
//! below about 10M flows, many rounds send a flow more than `K_th` (128)
//! packets, and its later ones are no longer stamped (less work per packet
//! than a real flow's). In the same slices the stage also runs on a table
//! of `CACHED=<n>` flows (default 10 000, at least 8 192; 0: not run), a
//! new one per slice and small enough to stay in the caches: the stage's own
//! work without the misses, printed as its share of the floor, so that
//! each line splits the ratio into that work and what the misses add to
//! it. Sizes given as arguments are measured as well. 10M flows need ≈ 1.4
//! GiB (the table, the floor buffer and the flows' capabilities the bursts
//! are drawn from), 100M ≈ 14 GiB (13.6 GiB resident, measured).
//! `HINT_LAG=<1..32>` sets the stage's `hint_lag` (default: its own choice
//! for the table's size); `HINT_LAGS=<a,b,..>` measures each of these lags
//! in turn within each slice, on the same table and against the same floor.
//! With two or more rounds a summary follows (per lag): the median,
//! quartiles and range of the ratio over the lines, how many lines are
//! within the goal of 1.3 (`GOAL=<r>` sets another) and the one-sided sign
//! test's p, the chance of at least that many if the median ratio were the
//! goal.
//!
//! `cargo run --release -p flowpolice --example memfloor -- 64 512 6144`
//! `PATTERN=near cargo run --release -p flowpolice --example memfloor -- 6144`
//! `FLOWS=10000000 cargo run --release -p flowpolice --example memfloor`

use std::hint::black_box;
use std::net::Ipv4Addr;

use flowpolice::config::{Config, LinkLayer};
use flowpolice::host::{ipv4_packet, Sender};
use flowpolice::puzzle::SeedChain;
use flowpolice::table::{FlowTable, DEFAULT_LOAD_PERCENT};
use flowpolice::{Capability, FlowPolice};
use packet::flowpolice::{FlowPolice as Shim, PacketType};
use pipeline::{Batch, Now, Stage, BURST};

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    One,
    Far,
    Near,
}

fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A buffer to measure the floor of a pattern over, allocated and filled
/// once (several GB take seconds to fill: measuring again is cheap).
struct Floor {
    pattern: Pattern,
    batch: usize,
    lag: usize,
    buf: Vec<Line>,
    /// `far`: the tag array, one byte per 48-byte entry.
    tags: Vec<Line>,
    rng: u64,
}

impl Floor {
    /// `bytes` of memory for `pattern` in bursts of `batch`, `lag`.
    fn new(bytes: usize, pattern: Pattern, batch: usize, lag: usize) -> Self {
        let lines = (bytes / 64).max(8);
        let tag_lines = if pattern == Pattern::Far { lines * 64 / 48 / 64 } else { 0 };
        Floor {
            pattern,
            batch,
            lag,
            buf: memhint::huge_filled_vec(lines, Line([1; 64])),
            tags: memhint::huge_filled_vec(tag_lines.max(8), Line([1; 64])),
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Runs `bursts` bursts; returns their thread CPU ns.
    fn run(&mut self, bursts: usize) -> f64 {
        let Floor { pattern, batch, lag, ref mut buf, ref tags, ref mut rng } = *self;
        let mut tag = [0usize; 256];
        let mut idx = [0usize; 256];
        // The entry a tag byte leads to: data-dependent on the tag line.
        let entry = |buf: &[Line], t: usize, r: u64| -> usize {
            match pattern {
                Pattern::Near => {
                    let b = usize::from(buf[t].0[(r & 63) as usize]);
                    (t & !3) + 1 + (b + r as usize) % 3
                }
                _ => (r as usize ^ usize::from(tags[t].0[(r & 63) as usize])) % buf.len(),
            }
        };
        let t0 = thread_cpu_ns();
        for _ in 0..bursts {
            for k in 0..batch {
                let r = xorshift(rng);
                if pattern == Pattern::One {
                    idx[k] = (r % buf.len() as u64) as usize;
                    memhint::prefetch(&buf[idx[k]]);
                    continue;
                }
                if pattern == Pattern::Near {
                    // Tag lines start 256-byte blocks; the entries follow.
                    tag[k] = (r % (buf.len() as u64 / 4)) as usize * 4;
                    memhint::prefetch(&buf[tag[k]]);
                } else {
                    tag[k] = (r % tags.len() as u64) as usize;
                    memhint::prefetch(&tags[tag[k]]);
                }
                if k >= lag {
                    let j = k - lag;
                    idx[j] = entry(buf, tag[j], xorshift(rng));
                    memhint::prefetch(&buf[idx[j]]);
                }
            }
            if pattern != Pattern::One {
                for j in batch.saturating_sub(lag)..batch {
                    idx[j] = entry(buf, tag[j], xorshift(rng));
                    memhint::prefetch(&buf[idx[j]]);
                }
            }
            for &i in idx.iter().take(batch) {
                buf[i].0[0] = buf[i].0[0].wrapping_add(1);
            }
        }
        let ns = thread_cpu_ns() - t0;
        black_box(&self.buf);
        ns
    }
}

/// The floor of `pattern` over `bytes` of memory: thread CPU ns per access.
fn floor(bytes: usize, pattern: Pattern, batch: usize, lag: usize) -> f64 {
    let bursts = 4_000_000 / batch;
    Floor::new(bytes, pattern, batch, lag).run(bursts) / (bursts * batch) as f64
}

/// The FlowPolice stage at a number of established flows, with
/// [`Regular::BURSTS`] bursts of regular packets of random flows to run
/// through it.
struct Regular {
    stage: FlowPolice,
    /// The capability each established flow was issued (its flow ID is
    /// the destination address, [`Regular::dst_of`]).
    caps: Vec<Capability>,
    batches: Vec<Batch<Vec<u8>>>,
    rng: u64,
    now: Now,
}

impl Regular {
    const T0_MS: u64 = 10_000_000;
    /// Distinct bursts (they stay cache-warm; rewritten between rounds).
    const BURSTS: usize = 64;

    /// The destination of flow `i`: its flow ID (no protected
    /// destinations, so the flow is keyed by the destination alone).
    fn dst(i: usize) -> Ipv4Addr {
        Ipv4Addr::from(0x0b00_0000u32 + i as u32)
    }

    /// The destination of the flow of `cap` (the inverse of [`Self::dst`]).
    fn dst_of(cap: &Capability) -> Ipv4Addr {
        Ipv4Addr::from(cap.flow_id as u32)
    }

    /// Fills the table with `flows` flows (by requests) and builds the
    /// bursts.
    fn new(flows: usize) -> Self {
        let slots = FlowTable::slots_for(flows, DEFAULT_LOAD_PERCENT);
        let mut cfg = Config::new(
            mac::Key::from([9; 16]),
            [0x1234, 0x5678],
            slots,
            SeedChain::generate([1; 32], 0, 4),
        );
        cfg.link = LinkLayer::Ip;
        cfg.hint_lag = std::env::var("HINT_LAG")
            .ok()
            .map(|s| s.parse().unwrap_or_else(|_| panic!("HINT_LAG={s}: not a number")));
        let mut stage = FlowPolice::new(cfg).expect("stage");
        let caps: Vec<Capability> = (0..flows)
            .filter_map(|i| {
                let f = u64::from(u32::from(Self::dst(i)));
                stage.router_mut().on_request(f, Self::T0_MS).ok().map(|x| x.capability)
            })
            .collect();
        let mut r = Regular {
            stage,
            caps,
            batches: Vec::new(),
            rng: 0x2545_f491_4f6c_dd1d,
            now: Now::from_unix_ns((Self::T0_MS + 100) * 1_000_000),
        };
        for _ in 0..Self::BURSTS {
            let mut b = Batch::new();
            for _ in 0..BURST {
                let cap = r.pick();
                let mut snd = Sender::new();
                snd.on_returned(cap);
                let mut shim = [0u8; 28];
                snd.write_regular(&mut shim, 17).expect("shim");
                let mut pkt =
                    ipv4_packet(Ipv4Addr::new(10, 0, 0, 1), Self::dst_of(&cap), &shim, &[0u8; 32]);
                Shim::new_unchecked(&mut pkt[20..]).set_packet_type(PacketType::BestEffort);
                b.push(pkt, 0).expect("32 fit");
            }
            r.batches.push(b);
        }
        r
    }

    /// A random established flow and the capability it was issued.
    fn pick(&mut self) -> Capability {
        self.caps[(xorshift(&mut self.rng) % self.caps.len() as u64) as usize]
    }

    /// Sets the stage's hint lag (a live change: the table stays).
    fn set_hint_lag(&mut self, lag: Option<usize>) {
        let mut cfg = self.stage.config().clone();
        cfg.hint_lag = lag;
        self.stage.apply_config(&cfg, self.now).expect("a valid hint lag");
    }

    /// The table's bytes.
    fn table_bytes(&self) -> usize {
        self.stage.router().table().memory_bytes()
    }

    /// The `far` floor over the table's own arrays (`FlowTable::floor_pass`,
    /// lag 8): `bursts` bursts of 32 accesses; returns their thread CPU ns.
    fn own_floor(&mut self, rng: &mut u64, bursts: usize) -> f64 {
        let table = self.stage.router_mut().table_mut();
        let t = thread_cpu_ns();
        table.floor_pass(rng, bursts, 8);
        thread_cpu_ns() - t
    }

    /// Runs `rounds` rounds of the bursts (each rewritten with other
    /// random flows before a round); returns their thread CPU ns.
    fn run(&mut self, rounds: usize) -> f64 {
        let mut cpu = 0.0;
        for _ in 0..rounds {
            for b in 0..self.batches.len() {
                for k in 0..BURST {
                    let cap = self.pick();
                    let pkt = self.batches[b].buf_mut(k);
                    pkt[16..20].copy_from_slice(&Self::dst_of(&cap).octets());
                    let mut shim = Shim::new_unchecked(&mut pkt[20..]);
                    shim.set_packet_type(PacketType::BestEffort);
                    shim.set_capability(&cap);
                }
            }
            let t = thread_cpu_ns();
            for b in self.batches.iter_mut() {
                self.stage.process(b, self.now);
            }
            cpu += thread_cpu_ns() - t;
        }
        let c = self.stage.counters();
        assert_eq!(c.bad_mac + c.expired + c.over_window, 0, "every packet valid: {c:?}");
        cpu
    }
}

fn main() {
    let batch = env("BATCH", 32).clamp(1, 256);
    let lag = env("LAG", 8).clamp(1, batch);
    let pattern = match std::env::var("PATTERN").as_deref() {
        Ok("far") => Pattern::Far,
        Ok("near") => Pattern::Near,
        Ok("one") | Err(_) => Pattern::One,
        Ok(p) => {
            eprintln!("memfloor: PATTERN is one, far or near, not {p}");
            std::process::exit(2);
        }
    };
    let what = match pattern {
        Pattern::One => "one random line (read + write)".to_string(),
        Pattern::Far => format!("tag line, then a random entry line (lag {lag})"),
        Pattern::Near => format!("tag line, then an entry line next to it (lag {lag})"),
    };
    for mb in std::env::args().skip(1).filter_map(|a| a.parse::<usize>().ok()) {
        let ns = floor(mb << 20, pattern, batch, lag);
        println!("{mb} MiB, batch {batch}: {ns:.1} ns per access: {what}");
    }
    let flows = env("FLOWS", 0);
    if flows > 0 {
        // The stage and its floor alternate in slices of about 50 ms (ten
        // of each per line, the same number of packets and accesses): both
        // see the same state of the host, whose memory speed moves from
        // one second to the next.
        const SLICES: usize = 10;
        const STAGE_ROUNDS: usize = 400; // 819 200 packets
        const FLOOR_BURSTS: usize = 25_600; // 819 200 accesses (bursts of `BURST`)
        const SLICE_PACKETS: usize = STAGE_ROUNDS * Regular::BURSTS * BURST;

        let cached_flows = env("CACHED", 10_000);
        // Each slice sends `STAGE_ROUNDS` × `Regular::BURSTS` bursts of `BURST` packets to
        // random flows of the cached table: at most 100 per flow on average
        // (82 at the default), well below `K_th` (128), past which a flow's
        // packets are no longer stamped.
        let min_cached = SLICE_PACKETS / 100;
        if cached_flows > 0 && cached_flows < min_cached {
            eprintln!("memfloor: CACHED is 0 or at least {min_cached}, not {cached_flows}");
            std::process::exit(2);
        }
        let rounds = env("ROUNDS", 1).clamp(1, 100);
        // The summary's goal, checked before the table is filled.
        let goal = match std::env::var("GOAL") {
            Err(_) => 1.3,
            Ok(g) => match g.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => r,
                _ => {
                    eprintln!("memfloor: GOAL is a positive ratio, not {g}");
                    std::process::exit(2);
                }
            },
        };
        let mut regular = Regular::new(flows);
        let bytes = regular.table_bytes();
        // The entries alone: `floor` adds the tag array (1/48 of them) itself.
        let entries = bytes / FlowTable::bytes_per_slot() * FlowTable::bytes_per_entry();
        let mut floor = Floor::new(entries, Pattern::Far, BURST, 8);

        // `HINT_LAGS=<a,b,..>`: the stage with each of these hint lags in
        // turn (a live change, the same table), each slice of each against
        // the same floor slices.
        let lags: Vec<Option<usize>> = match std::env::var("HINT_LAGS") {
            Ok(v) => v
                .split(',')
                .map(|l| Some(l.trim().parse().unwrap_or_else(|_| panic!("HINT_LAGS: {l}?"))))
                .collect(),
            Err(_) => vec![None],
        };
        // Every line's ratios (to the separate buffer's floor, to the
        // table's own), per lag, for the summary.
        let mut ratios = vec![[Vec::with_capacity(rounds), Vec::with_capacity(rounds)]; lags.len()];
        let mut own_rng = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..rounds {
            let (mut stage, mut base, mut own, mut work) = (vec![0.0; lags.len()], 0.0, 0.0, 0.0);
            for _ in 0..SLICES {
                for (cost, &lag) in stage.iter_mut().zip(&lags) {
                    if lag.is_some() {
                        regular.set_hint_lag(lag);
                    }
                    *cost += regular.run(STAGE_ROUNDS);
                }
                if cached_flows > 0 {
                    // A new table per slice (see `min_cached`), so that
                    // every packet is still stamped, as at the large table.
                    work += Regular::new(cached_flows).run(STAGE_ROUNDS);
                }
                base += floor.run(FLOOR_BURSTS);
                own += regular.own_floor(&mut own_rng, FLOOR_BURSTS);
            }
            let per_packet = |cpu: f64| cpu / (SLICES * SLICE_PACKETS) as f64;
            let base = base / (SLICES * FLOOR_BURSTS * BURST) as f64;
            let own = own / (SLICES * FLOOR_BURSTS * BURST) as f64;
            let work = match cached_flows {
                1.. => {
                    let w = per_packet(work);
                    format!(
                        "; the stage on a cached table ({cached_flows} flows) {w:.1} ns: {:.2} \
                         of the floor",
                        w / base
                    )
                }
                0 => String::new(),
            };
            for ((cost, lag), [to_base, to_own]) in stage.iter().zip(&lags).zip(&mut ratios) {
                let stage = per_packet(*cost);
                to_base.push(stage / base);
                to_own.push(stage / own);
                let lag = lag.map_or(String::new(), |l| format!(", hint lag {l}"));
                println!(
                    "{flows} flows ({} MiB table){lag}: regular packet {stage:.1} ns, floor \
                     {base:.1} ns (tag line + random entry line, lag 8; alternated): ratio \
                     {:.2}; floor on the table's own memory {own:.1} ns: ratio {:.2}{work}",
                    bytes >> 20,
                    stage / base,
                    stage / own
                );
            }
        }
        if rounds >= 2 {
            for ([to_base, to_own], lag) in ratios.iter_mut().zip(&lags) {
                let lag = lag.map_or(String::new(), |l| format!(", hint lag {l}"));
                println!("{flows} flows{lag}, separate floor buffer: {}", summary(to_base, goal));
                println!("{flows} flows{lag}, the table's own memory: {}", summary(to_own, goal));
            }
        }
    }
}

/// The summary of `ratios` (one per line, sorted in place) against `goal`:
/// median, quartiles, range, lines within the goal, and the one-sided sign
/// test's p (the chance of at least that many lines within the goal if the
/// median ratio were the goal).
fn summary(ratios: &mut [f64], goal: f64) -> String {
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    // Linear interpolation between the closest ranks.
    let at = |q: f64| {
        let x = q * (n - 1) as f64;
        let (i, f) = (x.floor() as usize, x.fract());
        ratios[i] + f * (ratios[(i + 1).min(n - 1)] - ratios[i])
    };
    let within = ratios.iter().filter(|&&r| r <= goal).count();
    format!(
        "over {n} lines, ratio median {:.2}, quartiles {:.2}-{:.2}, range {:.2}-{:.2}; goal \
         {goal}: {within} of {n} lines within it (sign test p = {:.3})",
        at(0.5),
        at(0.25),
        at(0.75),
        ratios[0],
        ratios[n - 1],
        sign_test(within, n)
    )
}

/// P(X ≥ k) for X ~ Binomial(n, 1/2).
fn sign_test(k: usize, n: usize) -> f64 {
    let mut choose = 1.0; // C(n, 0)
    let mut p = 0.0;
    for x in 0..=n {
        if x >= k {
            p += choose;
        }
        choose = choose * (n - x) as f64 / (x + 1) as f64;
    }
    p / 2f64.powi(n as i32)
}
