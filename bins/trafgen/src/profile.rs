//! Traffic profiles: which groups of senders, at which rates, with which
//! attack behaviour, and what a router should do with their packets.
//!
//! A profile is a TOML file with `[[traffic]]` entries. Each entry names a
//! packet template of the router runtime (`runtime::templates`: `ipv4-udp`,
//! `scion`, `epic-z`, `sibra`, `flowpolice`, `fair`, ...) with the
//! template's own parameters, plus the generator's keys below. The
//! `[[io.synthetic.traffic]]` sections of a router configuration are valid
//! entries too ([`Profile::from_router_config`]).
//!
//! | key | meaning |
//! |---|---|
//! | `name` | group name (its index in the profile is the tag in every packet) |
//! | `rate_pps` | packets per second (during "on" periods); also the group's weight in a `--mix` |
//! | `flows` | distinct flows (hosts, reservations, channels...) |
//! | `template` | packet template (not for replays) |
//! | `pattern` | `constant` (default) or `poisson` inter-packet gaps |
//! | `on_ms`, `off_ms` | on-off sender (shrew attack): silent for `off_ms` after every `on_ms` |
//! | `regenerate_ms` | flow regeneration: a fresh set of flows (source address + `flows`·k) every period |
//! | `replay_of`, `replay_delay_ms` | replay attacker: re-sends the packets group `replay_of` sent `replay_delay_ms` earlier (the same headers, MACs and timestamps; only the group tag in the last payload bytes differs, so that replays are counted apart) |
//! | `max_packets` | the group stops after this many packets (e.g. one connection request per flow); such set-up groups keep their own `rate_pps` under `--rate` |
//! | `start_ms` | the group starts this late (e.g. after its connection requests) |
//! | `expect` | what the matching router does: `forward`, `forward:<class>`, `drop`, `drop:<reason>`, `control`, `any` |
//! | `port` | ignored (router configurations name the ingress port) |

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use pipeline::{DropReason, Verdict};
use serde::Deserialize;

/// A whole profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// What the profile exercises.
    #[serde(default)]
    pub description: String,
    /// The router configuration whose stages the `expect` keys refer to: a
    /// path relative to the profile file's folder (built-in profiles:
    /// relative to the repository root, the folder holding `config/`; see
    /// [`router_candidates`]).
    #[serde(default)]
    pub router: Option<String>,
    /// Templates are rebuilt this often (ms), stamped with the current
    /// second, as hosts stamp fresh timestamps and renew reservations.
    #[serde(default = "d_refresh")]
    pub refresh_ms: f64,
    /// The sender groups.
    pub traffic: Vec<GroupSpec>,
}

fn d_refresh() -> f64 {
    500.0
}

fn one() -> u32 {
    1
}

/// Inter-packet gaps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Equal gaps of `1 / rate`.
    #[default]
    Constant,
    /// Exponential gaps with mean `1 / rate`.
    Poisson,
}

/// One `[[traffic]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
pub struct GroupSpec {
    /// Group name.
    pub name: String,
    /// Packets per second while on.
    pub rate_pps: f64,
    /// Distinct flows.
    #[serde(default = "one")]
    pub flows: u32,
    /// Packet template (inherited from `replay_of` for replays).
    #[serde(default)]
    pub template: Option<String>,
    /// Inter-packet gaps.
    #[serde(default)]
    pub pattern: Pattern,
    /// On period of an on-off sender (ms).
    #[serde(default)]
    pub on_ms: Option<f64>,
    /// Off period of an on-off sender (ms).
    #[serde(default)]
    pub off_ms: Option<f64>,
    /// Fresh flows every this many ms.
    #[serde(default)]
    pub regenerate_ms: Option<f64>,
    /// Replays this group's packets.
    #[serde(default)]
    pub replay_of: Option<String>,
    /// How much later the replayed packets are re-sent (ms).
    #[serde(default)]
    pub replay_delay_ms: f64,
    /// The group stops after this many packets.
    #[serde(default)]
    pub max_packets: Option<u64>,
    /// The group starts this late (ms).
    #[serde(default)]
    pub start_ms: f64,
    /// Expected router verdict.
    #[serde(default)]
    pub expect: Option<String>,
    /// Ingress port (ignored).
    #[serde(default)]
    pub port: Option<u16>,
    /// Template parameters (every other key).
    #[serde(flatten)]
    pub params: toml::Table,
}

/// What a router should do with every packet of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Forwarded, in any class or in the given one.
    Forward(Option<u8>),
    /// Dropped, for any reason or for the given one.
    Drop(Option<DropReason>),
    /// Handed to the control plane.
    Control,
    /// No expectation.
    Any,
}

impl Expect {
    /// Parses `forward`, `forward:<class>`, `drop`, `drop:<reason label>`, `control`, `any`.
    pub fn parse(s: &str) -> Option<Self> {
        let (head, arg) = match s.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (s, None),
        };
        match (head, arg) {
            ("forward", None) => Some(Expect::Forward(None)),
            ("forward", Some(c)) => c.parse().ok().map(|c| Expect::Forward(Some(c))),
            ("drop", None) => Some(Expect::Drop(None)),
            ("drop", Some(r)) => {
                DropReason::ALL.iter().find(|d| d.label() == r).map(|d| Expect::Drop(Some(*d)))
            }
            ("control", None) => Some(Expect::Control),
            ("any", None) => Some(Expect::Any),
            _ => None,
        }
    }

    /// Whether `v` meets the expectation.
    pub fn matches(&self, v: Verdict) -> bool {
        match (*self, v) {
            (Expect::Any, _) => true,
            (Expect::Forward(None), Verdict::Forward { .. }) => true,
            (Expect::Forward(Some(c)), Verdict::Forward { class, .. }) => class.0 == c,
            (Expect::Drop(None), Verdict::Drop(_)) => true,
            (Expect::Drop(Some(r)), Verdict::Drop(d)) => r == d,
            (Expect::Control, Verdict::ToControl) => true,
            _ => false,
        }
    }
}

/// A group ready for generation.
#[derive(Debug, Clone)]
pub struct Group {
    /// Name.
    pub name: String,
    /// Tag index (position in the profile).
    pub index: u16,
    /// Nominal rate (pps while on).
    pub rate_pps: f64,
    /// Flows.
    pub flows: u32,
    /// Template kind.
    pub template: String,
    /// Template parameters.
    pub params: toml::Table,
    /// Gaps.
    pub pattern: Pattern,
    /// On-off periods (ns).
    pub on_off_ns: Option<(u64, u64)>,
    /// Regeneration period (ns).
    pub regenerate_ns: Option<u64>,
    /// Replay delay (ns), for replay groups.
    pub replay_delay_ns: Option<u64>,
    /// Packet limit.
    pub max_packets: Option<u64>,
    /// Start offset (ns).
    pub start_ns: u64,
    /// Expected verdict.
    pub expect: Expect,
}

/// Why a profile is unusable.
#[derive(Debug)]
pub enum ProfileError {
    /// TOML syntax or types.
    Parse(String),
    /// A group's keys are inconsistent.
    Group {
        /// The group.
        name: String,
        /// The problem.
        reason: String,
    },
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileError::Parse(s) => write!(f, "{s}"),
            ProfileError::Group { name, reason } => write!(f, "traffic group `{name}`: {reason}"),
        }
    }
}

impl std::error::Error for ProfileError {}

/// Longest period or offset of a profile key (`*_ms`): the longest capture.
const MAX_MS: f64 = runtime::limits::MAX_DURATION_MS as f64;

/// Most groups: the group index is a 16-bit tag in every packet.
pub const MAX_GROUPS: usize = 1 << 16;

/// A period (`on_ms`, `off_ms`, `regenerate_ms`) in ns: > 0, at least 1 ns
/// (the generator divides by it), at most a year.
fn ms_to_ns(name: &str, key: &str, ms: f64) -> Result<u64, ProfileError> {
    let ns = (ms * 1e6).round();
    if ms.is_finite() && ms > 0.0 && ms <= MAX_MS && ns >= 1.0 {
        Ok(ns as u64)
    } else {
        Err(ProfileError::Group {
            name: name.into(),
            reason: format!("`{key}` must be a number of ms in [1e-6, {MAX_MS:e}], not {ms:?}"),
        })
    }
}

/// An offset (`start_ms`, `replay_delay_ms`) in ns: 0 to a year.
fn offset_ms_to_ns(name: &str, key: &str, ms: f64) -> Result<u64, ProfileError> {
    if (0.0..=MAX_MS).contains(&ms) {
        Ok((ms * 1e6).round() as u64)
    } else {
        Err(ProfileError::Group {
            name: name.into(),
            reason: format!("`{key}` must be a number of ms in [0, {MAX_MS:e}], not {ms:?}"),
        })
    }
}

impl Profile {
    /// Parses a profile file.
    pub fn parse(text: &str) -> Result<Self, ProfileError> {
        toml::from_str(text).map_err(|e| ProfileError::Parse(e.to_string()))
    }

    /// A profile from the `[[io.synthetic.traffic]]` groups of a router
    /// configuration (`expect` is `any`: the configuration states none).
    pub fn from_router_config(text: &str) -> Result<Self, ProfileError> {
        let v: toml::Table =
            toml::from_str(text).map_err(|e| ProfileError::Parse(e.to_string()))?;
        let traffic = v
            .get("io")
            .and_then(|io| io.get("synthetic"))
            .and_then(|s| s.get("traffic"))
            .cloned()
            .ok_or_else(|| ProfileError::Parse("no [[io.synthetic.traffic]] groups".into()))?;
        let traffic: Vec<GroupSpec> =
            traffic.try_into().map_err(|e: toml::de::Error| ProfileError::Parse(e.to_string()))?;
        Ok(Profile { description: String::new(), router: None, refresh_ms: d_refresh(), traffic })
    }

    /// Checks the groups and resolves replays.
    pub fn groups(&self) -> Result<Vec<Group>, ProfileError> {
        let r = self.refresh_ms;
        if !(1e-6..=MAX_MS).contains(&r) {
            return Err(ProfileError::Parse(format!(
                "`refresh_ms` must be a number of ms in [1e-6, {MAX_MS:e}], not {r:?}"
            )));
        }
        if self.traffic.len() > MAX_GROUPS {
            return Err(ProfileError::Parse(format!(
                "{} traffic groups: at most {MAX_GROUPS} (16-bit group tags)",
                self.traffic.len()
            )));
        }
        let mut out = Vec::with_capacity(self.traffic.len());
        for (i, g) in self.traffic.iter().enumerate() {
            let err = |reason: String| ProfileError::Group { name: g.name.clone(), reason };
            if self.traffic[..i].iter().any(|o| o.name == g.name) {
                return Err(err("a second group of this name".into()));
            }
            let (min, max) = (crate::gen::MIN_RATE_PPS, crate::gen::MAX_RATE_PPS);
            if !(g.rate_pps.is_finite() && g.rate_pps >= min && g.rate_pps <= max) {
                return Err(err(format!(
                    "`rate_pps` must be a number in [{min:e}, {max:e}], not {:?}",
                    g.rate_pps
                )));
            }
            // Each flow is a frame built up front (and rebuilt every refresh).
            let max_flows = runtime::synthetic::MAX_FLOWS;
            if g.flows == 0 || g.flows > max_flows {
                return Err(err(format!("`flows` must be in 1..={max_flows}, not {}", g.flows)));
            }
            if g.max_packets == Some(0) {
                return Err(err("`max_packets` must be at least 1".into()));
            }
            let (template, params, flows, replay) = match &g.replay_of {
                Some(of) => {
                    let src = self
                        .traffic
                        .iter()
                        .find(|s| &s.name == of)
                        .ok_or_else(|| err(format!("`replay_of`: no group `{of}`")))?;
                    if src.replay_of.is_some() || g.template.is_some() || !g.params.is_empty() {
                        return Err(err(
                            "a replay takes template and parameters from `replay_of` (which must not be a replay)"
                                .into(),
                        ));
                    }
                    let t =
                        src.template.clone().ok_or_else(|| err("source has no template".into()))?;
                    let d = offset_ms_to_ns(&g.name, "replay_delay_ms", g.replay_delay_ms)?;
                    (t, src.params.clone(), src.flows, Some(d))
                }
                None => {
                    let t =
                        g.template.clone().ok_or_else(|| err("`template` is missing".into()))?;
                    (t, g.params.clone(), g.flows, None)
                }
            };
            let on_off_ns = match (g.on_ms, g.off_ms) {
                (None, None) => None,
                (Some(on), Some(off)) => {
                    Some((ms_to_ns(&g.name, "on_ms", on)?, ms_to_ns(&g.name, "off_ms", off)?))
                }
                _ => return Err(err("`on_ms` and `off_ms` go together".into())),
            };
            let regenerate_ns =
                g.regenerate_ms.map(|ms| ms_to_ns(&g.name, "regenerate_ms", ms)).transpose()?;
            if regenerate_ns.is_some()
                && !["src", "src_host"].iter().any(|k| params.contains_key(*k))
            {
                return Err(err("`regenerate_ms` needs the template's `src` or `src_host`".into()));
            }
            let expect = match &g.expect {
                None => Expect::Any,
                Some(s) => Expect::parse(s).ok_or_else(|| err(format!("bad `expect` {s:?}")))?,
            };
            out.push(Group {
                name: g.name.clone(),
                index: i as u16,
                rate_pps: g.rate_pps,
                flows,
                template,
                params,
                pattern: g.pattern,
                on_off_ns,
                regenerate_ns,
                replay_delay_ns: replay,
                max_packets: g.max_packets,
                start_ns: offset_ms_to_ns(&g.name, "start_ms", g.start_ms)?,
                expect,
            });
        }
        Ok(out)
    }
}

/// `params` with the source address (`src` or `src_host`) moved `shift`
/// addresses on: generation `k` of a regenerating group uses fresh flows.
pub fn shifted_params(params: &toml::Table, shift: u32) -> toml::Table {
    let mut p = params.clone();
    for key in ["src", "src_host"] {
        if let Some(toml::Value::String(s)) = p.get(key) {
            if let Ok(a) = s.parse::<Ipv4Addr>() {
                let moved = Ipv4Addr::from(u32::from(a).wrapping_add(shift));
                p.insert(key.into(), toml::Value::String(moved.to_string()));
            }
        }
    }
    p
}

/// Where a profile came from, which its `router` path is relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A built-in profile, by name: `router` is relative to the repository
    /// root (the folder holding `config/`).
    Builtin(String),
    /// A profile file: `router` is relative to the file's folder.
    File(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin(n) => write!(f, "built-in profile `{n}`"),
            Origin::File(p) => write!(f, "profile {}", p.display()),
        }
    }
}

/// The repository roots (folders holding `config/`) a built-in profile's
/// `router` may be relative to, most specific first: the first ancestor of
/// the running executable that holds `config/` (e.g. `<root>/target/debug/
/// trafgen`), then the checkout `trafgen` was built from.
pub fn repository_roots() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(a) = exe.ancestors().skip(1).find(|a| a.join("config").is_dir()) {
            v.push(a.to_path_buf());
        }
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some(root) = built.parent().and_then(Path::parent) {
        if !v.iter().any(|r| r == root) {
            v.push(root.to_path_buf());
        }
    }
    v
}

/// The places a profile's `router` path names, in the order they are
/// tried: an absolute path as is; for a profile file, its own folder only
/// (wherever `trafgen` runs, a file names what lies beside it); for a
/// built-in profile, each of [`repository_roots`], then the current
/// directory (a checkout, for a `trafgen` installed elsewhere).
pub fn router_candidates(origin: &Origin, router: &str) -> Vec<PathBuf> {
    let r = Path::new(router);
    if r.is_absolute() {
        return vec![r.to_path_buf()];
    }
    match origin {
        Origin::File(p) => vec![p.parent().unwrap_or(Path::new("")).join(r)],
        Origin::Builtin(_) => {
            let mut v: Vec<PathBuf> =
                repository_roots().into_iter().map(|root| root.join(r)).collect();
            if !v.iter().any(|c| c == r) {
                v.push(r.to_path_buf());
            }
            v
        }
    }
}

/// The router configuration a profile names: the first of
/// [`router_candidates`] that exists; the error names every place tried.
pub fn resolve_router(origin: &Origin, router: &str) -> Result<PathBuf, String> {
    let tried = router_candidates(origin, router);
    if let Some(p) = tried.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "the router configuration `{router}` of {origin} is not found (tried {}); give --router",
        list.join(", ")
    ))
}

/// The built-in profiles: name, text. Each names the example router
/// configuration in `config/` whose stages its `expect` keys describe.
pub const BUILTIN: &[(&str, &str)] = &[
    ("flowpolice", include_str!("../profiles/flowpolice.toml")),
    ("sibra", include_str!("../profiles/sibra.toml")),
    ("epic-z", include_str!("../profiles/epic-z.toml")),
    ("fair", include_str!("../profiles/fair.toml")),
];

/// A built-in profile by name.
pub fn builtin(name: &str) -> Option<Result<Profile, ProfileError>> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| Profile::parse(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_parses() {
        assert_eq!(Expect::parse("drop:bad_mac"), Some(Expect::Drop(Some(DropReason::BadMac))));
        assert_eq!(Expect::parse("forward:2"), Some(Expect::Forward(Some(2))));
        assert_eq!(Expect::parse("drop:nonsense"), None);
        assert!(Expect::Forward(Some(2))
            .matches(Verdict::Forward { port: 1, class: pipeline::Class(2) }));
        assert!(!Expect::Forward(Some(2))
            .matches(Verdict::Forward { port: 1, class: pipeline::Class(1) }));
    }

    #[test]
    fn groups_validate() {
        let bad = |t: &str| Profile::parse(t).unwrap().groups().unwrap_err().to_string();
        let e = bad("[[traffic]]\nname='a'\nrate_pps=1\n");
        assert!(e.contains("template"), "{e}");
        let e = bad("[[traffic]]\nname='a'\nrate_pps=1\ntemplate='ipv4-udp'\non_ms=1\n");
        assert!(e.contains("on_ms"), "{e}");
        let e = bad("[[traffic]]\nname='a'\nrate_pps=1\nreplay_of='b'\n");
        assert!(e.contains("no group"), "{e}");
        let e = bad("[[traffic]]\nname='a'\nrate_pps=1\ntemplate='ipv4-udp'\nregenerate_ms=5\n");
        assert!(e.contains("src"), "{e}");
        let p = shifted_params(&toml::from_str("src = '10.0.0.250'").unwrap(), 10);
        assert_eq!(p["src"].as_str(), Some("10.0.1.4"));
    }

    #[test]
    fn builtin_profiles_parse() {
        for (n, _) in BUILTIN {
            let p = builtin(n).unwrap().unwrap();
            let g = p.groups().unwrap();
            assert!(g.iter().all(|g| g.expect != Expect::Any), "{n}");
            assert!(p.router.is_some(), "{n}");
        }
    }
}
