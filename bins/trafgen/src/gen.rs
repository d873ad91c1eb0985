//! The generator: merges the groups' emission schedules in time order and
//! builds each packet from the runtime's protocol templates (which run the
//! protocols' end-host logic: `flowpolice::host::Sender`, `sibra::host`,
//! `zlane::host` and the Z-Lane gateway, FAIR source stamping).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use runtime::templates::{tag_for, TemplateCtx, Templates};

use crate::profile::{shifted_params, Group, Pattern, Profile, ProfileError};

/// Highest total rate (`--rate`) and group rate: the runtime's bound, 1 Gpps.
pub const MAX_RATE_PPS: f64 = runtime::limits::MAX_RATE_PPS;
/// Lowest rate a group may end up with (after `--rate` and `--mix` scaling):
/// one packet every 1000 s.
pub const MIN_RATE_PPS: f64 = 1e-3;
/// Longest capture (`--duration`): the runtime's longest run, one year.
pub const MAX_DURATION_NS: u64 = runtime::limits::MAX_DURATION_MS * 1_000_000;
/// Most packets (`--count`): 10^12, tens of terabytes of pcap.
pub const MAX_COUNT: u64 = 1_000_000_000_000;
/// Largest `--mix` weight (weights are relative: the rest are smaller).
pub const MAX_WEIGHT: f64 = 1e9;
/// The first instant no packet may carry (exclusive), in Unix ns:
/// 2106-02-07 06:28:16 UTC. SCION info fields and FAIR headers carry Unix
/// seconds in 32 bits, and pcap records too; a later capture would wrap
/// to 1970.
pub const END_UNIX_NS: u64 = (1 << 32) * 1_000_000_000;
/// [`END_UNIX_NS`] for people.
pub const END_UNIX_TEXT: &str = "2106-02-07 06:28:16 UTC";

/// Generation options (the command line's `--rate`, `--mix`, `--count`,
/// `--duration`, `--seed`, `--start-unix-ns`).
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Total rate (pps while on) over the selected groups; `None` keeps
    /// the profile's rates.
    pub rate_pps: Option<f64>,
    /// Selected groups and their weights; `None` selects all, weighted by
    /// their `rate_pps`.
    pub mix: Option<Vec<(String, f64)>>,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop at this capture time (ns after the start).
    pub duration_ns: Option<u64>,
    /// Seed of the Poisson gaps and the phases of constant senders.
    pub seed: u64,
    /// Unix time of the capture's first instant (ns).
    pub start_unix_ns: u64,
}

impl GenOptions {
    /// Checks every option, naming the command-line flag: rates, weights,
    /// counts and durations within their bounds, and a capture whose
    /// timestamps stay before [`END_UNIX_NS`] (2106), the end of 32-bit Unix
    /// seconds.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |flag: &str, why: String| Err(GenError::Option(format!("{flag}: {why}")));
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0 && r <= MAX_RATE_PPS) {
                return bad(
                    "--rate",
                    format!("must be a rate in (0, {MAX_RATE_PPS:e}] pps, not {r:?}"),
                );
            }
        }
        if let Some(mix) = &self.mix {
            check_mix(mix).or_else(|e| bad("--mix", e))?;
        }
        match self.count {
            Some(0) => return bad("--count", "must be at least 1".into()),
            Some(c) if c > MAX_COUNT => {
                return bad("--count", format!("{c} is more than the limit of {MAX_COUNT}"))
            }
            _ => {}
        }
        match self.duration_ns {
            Some(0) => return bad("--duration", "must be > 0".into()),
            Some(d) if d > MAX_DURATION_NS => {
                return bad("--duration", format!("{d} ns is longer than one year"))
            }
            _ => {}
        }
        if self.start_unix_ns >= END_UNIX_NS {
            return bad(
                "--start-unix-ns",
                format!(
                    "{} is at or after {END_UNIX_TEXT} (Unix ns {END_UNIX_NS}): SCION and FAIR \
                     timestamps and pcap records hold 32-bit Unix seconds",
                    self.start_unix_ns
                ),
            );
        }
        if let Some(d) = self.duration_ns {
            if self.start_unix_ns.checked_add(d).is_none_or(|end| end > END_UNIX_NS) {
                return bad(
                    "--start-unix-ns",
                    format!(
                        "a capture of {d} ns from {} would end after {END_UNIX_TEXT} (32-bit \
                         Unix seconds); start earlier or shorten --duration",
                        self.start_unix_ns
                    ),
                );
            }
        }
        Ok(())
    }
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            rate_pps: None,
            mix: None,
            count: None,
            duration_ns: Some(1_000_000_000),
            seed: 1,
            start_unix_ns: runtime::synthetic::VIRTUAL_UNIX_START_NS,
        }
    }
}

/// Parses `name=weight,name=weight` (a bare `name` has weight 1): names
/// non-empty and distinct, weights finite numbers in (0, [`MAX_WEIGHT`]].
pub fn parse_mix(s: &str) -> Result<Vec<(String, f64)>, String> {
    let mix: Vec<(String, f64)> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (name, w) = match p.split_once('=') {
                Some((n, w)) => match w.trim().parse::<f64>() {
                    Ok(w) => (n.trim(), w),
                    Err(_) => return Err(format!("bad weight in {p:?}: not a number")),
                },
                None => (p.trim(), 1.0),
            };
            if name.is_empty() {
                return Err(format!("{p:?} names no group"));
            }
            check_weight(name, w)?;
            Ok((name.to_string(), w))
        })
        .collect::<Result<_, _>>()?;
    check_mix(&mix)?;
    Ok(mix)
}

fn check_weight(name: &str, w: f64) -> Result<(), String> {
    if w.is_finite() && w > 0.0 && w <= MAX_WEIGHT {
        Ok(())
    } else {
        Err(format!("weight of `{name}` must be a number in (0, {MAX_WEIGHT:e}], not {w:?}"))
    }
}

fn check_mix(mix: &[(String, f64)]) -> Result<(), String> {
    if mix.is_empty() {
        return Err("names no group".into());
    }
    for (i, (name, w)) in mix.iter().enumerate() {
        check_weight(name, *w)?;
        if mix[..i].iter().any(|(n, _)| n == name) {
            return Err(format!("names group `{name}` twice"));
        }
    }
    Ok(())
}

/// `--duration` (seconds) in ns: a finite number of seconds, at least 1 ns
/// and at most [`MAX_DURATION_NS`] (one year).
pub fn duration_ns_from_secs(s: f64) -> Result<u64, String> {
    let max_s = MAX_DURATION_NS as f64 / 1e9;
    if !(s.is_finite() && s > 0.0 && s <= max_s) {
        return Err(format!("must be a number of seconds in (0, {max_s}] (one year), not {s:?}"));
    }
    let ns = (s * 1e9).round() as u64;
    if ns == 0 {
        return Err(format!("{s:?} s is shorter than a nanosecond"));
    }
    Ok(ns)
}

/// A time in ns from a float (saturating, NaN and negative as 0).
fn ns(f: f64) -> u64 {
    // `as` saturates: NaN -> 0, +inf -> u64::MAX.
    f as u64
}

/// Why generation stopped early.
#[derive(Debug)]
pub enum GenError {
    /// The profile or options are inconsistent.
    Profile(ProfileError),
    /// A command-line option is out of range (the message names it).
    Option(String),
    /// The capture would run past [`END_UNIX_NS`] (only with `--count`
    /// and no `--duration`: the end is not known in advance).
    PastEnd {
        /// Packets generated before.
        emitted: u64,
    },
    /// A template rejected its parameters.
    Template {
        /// The group.
        group: String,
        /// The template's error (names the key).
        error: runtime::ConfigError,
    },
}

impl std::fmt::Display for GenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GenError::Profile(e) => write!(f, "{e}"),
            GenError::Option(e) => write!(f, "{e}"),
            GenError::PastEnd { emitted } => write!(
                f,
                "after {emitted} packets the capture reaches {END_UNIX_TEXT}, past what 32-bit \
                 Unix seconds (SCION and FAIR timestamps, pcap records) hold; start earlier \
                 (--start-unix-ns), lower --count or give a --duration"
            ),
            GenError::Template { group, error } => {
                // The error comes from a template, not a file: name the
                // group and the key only.
                write!(f, "traffic group `{group}`: ")?;
                if !error.key.is_empty() {
                    write!(f, "key `{}`: ", error.key)?;
                }
                write!(f, "{}", error.reason)
            }
        }
    }
}

impl std::error::Error for GenError {}

impl From<ProfileError> for GenError {
    fn from(e: ProfileError) -> Self {
        GenError::Profile(e)
    }
}

/// splitmix64: a small seeded generator (determinism, not secrecy).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

struct State {
    g: Group,
    interval_ns: f64,
    seq: u64,
    /// (refresh index, generation) of `frames`.
    key: Option<(u64, u64)>,
    frames: Vec<Vec<u8>>,
}

/// One generated packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emitted<'a> {
    /// Unix time (ns).
    pub unix_ns: u64,
    /// Group index (the tag in the packet).
    pub group: u16,
    /// The Ethernet frame.
    pub frame: &'a [u8],
}

/// Produces the packets of a profile in time order.
pub struct Generator {
    states: Vec<State>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    templates: Templates,
    refresh_ns: u64,
    opts: GenOptions,
    emitted: u64,
    rng: Rng,
}

impl Generator {
    /// A generator over `profile` with `opts`.
    pub fn new(profile: &Profile, opts: GenOptions) -> Result<Self, GenError> {
        opts.validate()?;
        let all = profile.groups()?;
        let picked: Vec<(Group, f64)> = match &opts.mix {
            None => all.into_iter().map(|g| (g.clone(), g.rate_pps)).collect(),
            Some(mix) => {
                let mut v = Vec::new();
                for (name, w) in mix {
                    let g = all.iter().find(|g| &g.name == name).ok_or_else(|| {
                        ProfileError::Parse(format!("--mix names unknown group `{name}`"))
                    })?;
                    v.push((g.clone(), *w));
                }
                v
            }
        };
        if picked.is_empty() {
            return Err(ProfileError::Parse("no traffic groups selected".into()).into());
        }
        // Set-up groups (with a packet limit) keep their own rate.
        let scaled = |g: &Group| g.max_packets.is_none();
        let total_w: f64 = picked.iter().filter(|p| scaled(&p.0)).map(|p| p.1).sum();
        let total_rate = opts.rate_pps.unwrap_or(total_w);
        let mut rng = Rng(opts.seed ^ 0x7472_6166_6765_6e00);
        let mut states = Vec::with_capacity(picked.len());
        let mut heap = BinaryHeap::new();
        for (g, w) in picked {
            let rate = if scaled(&g) { total_rate * w / total_w } else { g.rate_pps };
            // Weights and rates are bounded, but their quotients may not be.
            if !(rate.is_finite() && (MIN_RATE_PPS..=MAX_RATE_PPS).contains(&rate)) {
                return Err(GenError::Option(format!(
                    "traffic group `{}` would send at {rate:?} pps (--rate and --mix weights must \
                     give every group a rate in [{MIN_RATE_PPS:e}, {MAX_RATE_PPS:e}] pps)",
                    g.name
                )));
            }
            let interval_ns = 1e9 / rate;
            // Random phase, so that constant senders do not emit in lockstep.
            let first = g.start_ns.saturating_add(ns(rng.unit() * interval_ns));
            let mut s = State { g, interval_ns, seq: 0, key: None, frames: Vec::new() };
            let first = next_on(&s.g, first);
            s.g.rate_pps = rate;
            heap.push(Reverse((first, states.len())));
            states.push(s);
        }
        let templates = Templates::with::<adapters::All>();
        Ok(Generator {
            states,
            heap,
            templates,
            refresh_ns: (profile.refresh_ms * 1e6).max(1.0) as u64,
            opts,
            emitted: 0,
            rng,
        })
    }

    /// The groups being generated, with their effective rates.
    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.states.iter().map(|s| &s.g)
    }

    /// The next packet, or `None` at the count or duration.
    pub fn next_packet(&mut self) -> Result<Option<Emitted<'_>>, GenError> {
        if self.opts.count.is_some_and(|c| self.emitted >= c) {
            return Ok(None);
        }
        let Some(&Reverse((t, i))) = self.heap.peek() else { return Ok(None) };
        if self.opts.duration_ns.is_some_and(|d| t >= d) {
            return Ok(None);
        }
        // Validated: without a duration, only the count bounds the capture.
        let unix_ns = match self.opts.start_unix_ns.checked_add(t) {
            Some(u) if u < END_UNIX_NS => u,
            _ => return Err(GenError::PastEnd { emitted: self.emitted }),
        };
        self.heap.pop();
        // Schedule the group's next packet.
        let gap = match self.states[i].g.pattern {
            Pattern::Constant => self.states[i].interval_ns,
            Pattern::Poisson => -self.rng.unit().ln() * self.states[i].interval_ns,
        };
        let next = next_on(&self.states[i].g, t.saturating_add(ns(gap).max(1)));
        if self.states[i].g.max_packets.is_none_or(|m| self.states[i].seq + 1 < m) {
            self.heap.push(Reverse((next, i)));
        }
        self.emitted += 1;
        let refresh_ns = self.refresh_ns;
        let st = &mut self.states[i];
        // Replays carry the packets built for an earlier instant.
        let built_at = unix_ns.saturating_sub(st.g.replay_delay_ns.unwrap_or(0));
        let refresh = built_at / refresh_ns;
        let generation = st.g.regenerate_ns.map_or(0, |p| t / p);
        if st.key != Some((refresh, generation)) {
            let params = if generation == 0 {
                st.g.params.clone()
            } else {
                shifted_params(&st.g.params, (generation as u32).wrapping_mul(st.g.flows))
            };
            let ctx = TemplateCtx {
                flows: st.g.flows,
                tag: tag_for(st.g.index),
                unix_s: refresh * refresh_ns / 1_000_000_000,
            };
            st.frames = self
                .templates
                .build(&st.g.template, &params, &ctx)
                .map_err(|error| GenError::Template { group: st.g.name.clone(), error })?;
            if st.frames.is_empty() {
                let error = runtime::ConfigError::at("template", "built no packets");
                return Err(GenError::Template { group: st.g.name.clone(), error });
            }
            st.key = Some((refresh, generation));
        }
        let frame = &st.frames[(st.seq % st.frames.len() as u64) as usize];
        st.seq += 1;
        Ok(Some(Emitted { unix_ns, group: st.g.index, frame }))
    }

    /// Packets emitted so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }
}

/// `t`, or the start of the next on period if `t` falls in an off period.
fn next_on(g: &Group, t: u64) -> u64 {
    match g.on_off_ns {
        None => t,
        Some((on, off)) => {
            // Both >= 1 ns (see `Profile::groups`).
            let cycle = on.saturating_add(off);
            let phase = t % cycle;
            if phase < on {
                t
            } else {
                (t - phase).saturating_add(cycle)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(extra: &str) -> Profile {
        Profile::parse(&format!(
            "[[traffic]]\nname = 'a'\nrate_pps = 1000\ntemplate = 'ipv4-udp'\nsrc = '10.1.0.1'\nflows = 4\n{extra}"
        ))
        .unwrap()
    }

    fn run(p: &Profile, opts: GenOptions) -> Vec<(u64, Vec<u8>)> {
        let mut g = Generator::new(p, opts).unwrap();
        let mut v = Vec::new();
        while let Some(e) = g.next_packet().unwrap() {
            v.push((e.unix_ns, e.frame.to_vec()));
        }
        v
    }

    #[test]
    fn constant_rate_and_count() {
        let o = GenOptions { duration_ns: Some(100_000_000), ..Default::default() };
        let v = run(&profile(""), o.clone());
        assert_eq!(v.len(), 100);
        let gaps: Vec<u64> = v.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps.iter().all(|g| *g == 1_000_000), "{gaps:?}");
        // --rate overrides, --count stops.
        let o2 = GenOptions { rate_pps: Some(10_000.0), count: Some(7), ..o };
        let v = run(&profile(""), o2);
        assert_eq!(v.len(), 7);
        assert_eq!(v[1].0 - v[0].0, 100_000);
    }

    #[test]
    fn poisson_mean_rate_and_seed() {
        let o = GenOptions { duration_ns: Some(1_000_000_000), seed: 3, ..Default::default() };
        let p = profile("pattern = 'poisson'");
        let v = run(&p, o.clone());
        assert!((900..1100).contains(&v.len()), "{}", v.len());
        assert_eq!(v, run(&p, o.clone()));
        assert_ne!(v, run(&p, GenOptions { seed: 4, ..o }));
    }

    #[test]
    fn on_off_is_silent_when_off() {
        let o = GenOptions { duration_ns: Some(1_000_000_000), ..Default::default() };
        let v = run(&profile("on_ms = 50\noff_ms = 150"), o.clone());
        assert!((240..=260).contains(&v.len()), "{}", v.len());
        for (t, _) in &v {
            assert!((t - o.start_unix_ns) % 200_000_000 < 50_000_000);
        }
    }

    #[test]
    fn regeneration_changes_flows() {
        let o = GenOptions { duration_ns: Some(20_000_000), ..Default::default() };
        let v = run(&profile("regenerate_ms = 10\nvary = 'src'"), o);
        // IPv4 source address at offset 14 + 12.
        let src = |f: &Vec<u8>| u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
        let first: std::collections::BTreeSet<u32> = v[..10].iter().map(|x| src(&x.1)).collect();
        let second: std::collections::BTreeSet<u32> = v[10..].iter().map(|x| src(&x.1)).collect();
        assert_eq!(first.len(), 4);
        assert!(first.is_disjoint(&second), "{first:?} {second:?}");
    }

    #[test]
    fn max_packets_stops_a_group() {
        let o = GenOptions { duration_ns: Some(100_000_000), ..Default::default() };
        assert_eq!(run(&profile("max_packets = 4"), o).len(), 4);
    }

    #[test]
    fn mix_selects_and_weights() {
        let p = Profile::parse(
            "[[traffic]]\nname='a'\nrate_pps=1\ntemplate='ipv4-udp'\n\
             [[traffic]]\nname='b'\nrate_pps=1\ntemplate='ipv4-udp'\n\
             [[traffic]]\nname='c'\nrate_pps=1\ntemplate='ipv4-udp'\n",
        )
        .unwrap();
        let o = GenOptions {
            rate_pps: Some(4000.0),
            mix: Some(parse_mix("c=3, a=1").unwrap()),
            duration_ns: Some(100_000_000),
            ..Default::default()
        };
        let mut g = Generator::new(&p, o).unwrap();
        let mut n = [0u32; 3];
        while let Some(e) = g.next_packet().unwrap() {
            n[usize::from(e.group)] += 1;
        }
        assert_eq!(n, [100, 0, 300]);
        assert!(parse_mix("a=0").is_err());
    }
}
