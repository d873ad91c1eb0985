//! The generator: merges the groups' emission schedules in time order and
//! builds each packet from the runtime's protocol templates (which run the
//! protocols' end-host logic: `flowpolice::host::Sender`, `sibra::host`,
//! `zlane::host` and the Z-Lane gateway, FAIR source stamping).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use runtime::templates::{tag_for, TemplateCtx, Templates};

use crate::profile::{shifted_params, Group, Pattern, Profile, ProfileError};

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

/// Parses `name=weight,name=weight` (a bare `name` has weight 1).
pub fn parse_mix(s: &str) -> Result<Vec<(String, f64)>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.split_once('=') {
            Some((n, w)) => match w.trim().parse::<f64>() {
                Ok(w) if w > 0.0 && w.is_finite() => Ok((n.trim().to_string(), w)),
                _ => Err(format!("bad weight in {p:?}")),
            },
            None => Ok((p.trim().to_string(), 1.0)),
        })
        .collect()
}

/// Why generation stopped early.
#[derive(Debug)]
pub enum GenError {
    /// The profile or options are inconsistent.
    Profile(ProfileError),
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
            GenError::Template { group, error } => write!(f, "traffic group `{group}`: {error}"),
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
        if !(total_rate > 0.0 && total_rate.is_finite()) && total_w > 0.0 {
            return Err(ProfileError::Parse("--rate must be > 0".into()).into());
        }
        let mut rng = Rng(opts.seed ^ 0x7472_6166_6765_6e00);
        let mut states = Vec::with_capacity(picked.len());
        let mut heap = BinaryHeap::new();
        for (g, w) in picked {
            let rate = if scaled(&g) { total_rate * w / total_w } else { g.rate_pps };
            let interval_ns = 1e9 / rate;
            // Random phase, so that constant senders do not emit in lockstep.
            let first = g.start_ns + (rng.unit() * interval_ns) as u64;
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
        let Some(Reverse((t, i))) = self.heap.pop() else { return Ok(None) };
        if self.opts.duration_ns.is_some_and(|d| t >= d) {
            return Ok(None);
        }
        // Schedule the group's next packet.
        let gap = match self.states[i].g.pattern {
            Pattern::Constant => self.states[i].interval_ns,
            Pattern::Poisson => -self.rng.unit().ln() * self.states[i].interval_ns,
        };
        let next = next_on(&self.states[i].g, t + gap.max(1.0) as u64);
        if self.states[i].g.max_packets.is_none_or(|m| self.states[i].seq + 1 < m) {
            self.heap.push(Reverse((next, i)));
        }
        self.emitted += 1;
        let unix_ns = self.opts.start_unix_ns + t;
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
            let cycle = on + off;
            let phase = t % cycle;
            if phase < on {
                t
            } else {
                t - phase + cycle
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
