//! The request channel of `sibra-control` (`request_limit`): ephemeral setup
//! requests from the `sibra` template, through `parse` and the stage the
//! registry builds from its parameters, and through a whole router with the
//! stage on its slow path. Two ASes hold one steady path each (set up in
//! band, equal classes) into interface 3; one floods setup requests over
//! its path, the other stays within its share. Also: the aggregate-only
//! channel, switching it off, live changes, and out-of-range values.

#![cfg(feature = "sibra")]

use std::path::Path;

use pipeline::{Batch, DropReason, Now, Reconfigured, Refused, Stage, Verdict};
use runtime::registry::BuildContext;
use runtime::templates::{tag_for, TemplateCtx, Templates};
use runtime::{Catalog, Registry};
use sibra::stage::{SibraControl, CLASS_R};

const KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";

/// Interfaces 1 and 2 (ports 0 and 1) in, 3 (port 2) out, 10 Mbit/s each:
/// at the default 5% the request channel of interface 3 is 500 kbit/s.
const CONTROL: &str = r#"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [
  { ifid = 1, port = 0, capacity_bps = 10000000 },
  { ifid = 2, port = 1, capacity_bps = 10000000 },
  { ifid = 3, port = 2, capacity_bps = 10000000 },
]
"#;

/// The channel of interface 3 at the default share, bit/s.
const CHANNEL_BPS: u64 = 10_000_000 / 100 * 5;
/// The burst used below.
const BURST_MS: u64 = 100;
/// How long the traffic runs, ms (one request slot per ms).
const RUN_MS: u64 = 1000;
/// Requests per slot of the flooding AS (2000/s).
const FLOOD_PER_SLOT: usize = 2;
/// One request of the well-behaved AS every this many slots (100/s).
const GOOD_EVERY: u64 = 10;
/// Frame length of the requests.
const SIZE: usize = 200;
/// Class of the steady paths (181 kbit/s: both fit the 500 kbit/s steady
/// share of 10 Mbit/s).
const STEADY_CLASS: u8 = 8;
/// Class of the ephemeral requests (16 kbit/s: everything a path's channel
/// share lets through over the run fits its 4 Mbit/s ephemeral share).
const EPHEMERAL_CLASS: u8 = 1;

/// The well-behaved AS and the flooding one: (source AS, the interface its
/// steady path enters on, that interface's port).
const GOOD: (&str, u16, u16) = ("1-ff00:0:111", 1, 0);
const BAD: (&str, u16, u16) = ("1-ff00:0:666", 2, 1);

fn ctx() -> BuildContext {
    BuildContext { worker: 0, workers: 1, ports: vec![0, 1, 2] }
}

fn registry() -> Registry<Vec<u8>> {
    Registry::with::<adapters::All>()
}

fn table(text: &str) -> toml::Table {
    toml::from_str(text).unwrap()
}

/// `flows` frames of `kind` from AS `src_ia` entering on `ingress`, leaving on 3.
fn frames(kind: &str, (src_ia, ingress, _): (&str, u16, u16), flows: u32) -> Vec<Vec<u8>> {
    let class = if kind == "steady-setup" { STEADY_CLASS } else { EPHEMERAL_CLASS };
    let t = table(&format!(
        "src_ia = \"{src_ia}\"\nsof_key = \"{KEY}\"\nfwd_key = \"{KEY}\"\nkind = \"{kind}\"\n\
         ingress = {ingress}\negress = 3\nbw_class = {class}\nsize = {SIZE}"
    ));
    Templates::with::<adapters::All>()
        .build("sibra", &t, &TemplateCtx::new(flows, tag_for(0)))
        .unwrap()
}

fn start() -> Now {
    Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS)
}

/// The pipeline `parse -> sibra-control` with `extra` parameters.
struct Router {
    parse: Box<dyn Stage<Vec<u8>>>,
    control: Box<dyn Stage<Vec<u8>>>,
}

impl Router {
    fn new(extra: &str) -> Self {
        let r = registry();
        Router {
            parse: r.build_stage("parse", &ctx(), &toml::Table::new()).unwrap(),
            control: r
                .build_stage("sibra-control", &ctx(), &table(&format!("{CONTROL}\n{extra}")))
                .unwrap(),
        }
    }

    /// Runs `frames` (each with its arrival port) as one burst at `now`;
    /// the verdicts and whether each request left accepted.
    fn run(&mut self, frames: Vec<(Vec<u8>, u16)>, now: Now) -> Vec<(Verdict, bool)> {
        let mut b = Batch::new();
        for (f, port) in frames {
            b.push(f, port).unwrap();
        }
        self.parse.process(&mut b, now);
        self.control.process(&mut b, now);
        (0..b.len())
            .map(|i| {
                let at = usize::from(b.meta(i).proto_off);
                let accepted = sibra::host::sibra_path(&b.data(i)[at..])
                    .map(|p| p.accepted())
                    .unwrap_or(false);
                (b.meta(i).verdict, accepted)
            })
            .collect()
    }

    /// Holds both ASes' steady paths (in-band setups, granted here).
    fn hold_steady_paths(&mut self) {
        let setups =
            [GOOD, BAD].iter().map(|as_| (frames("steady-setup", *as_, 1).remove(0), as_.2));
        let v = self.run(setups.collect(), start());
        assert_eq!(v, vec![(Verdict::Forward { port: 2, class: CLASS_R }, true); 2]);
    }

    fn named(&self, name: &str) -> u64 {
        let mut v = None;
        self.control.named_counters(&mut |n, c| {
            if n == name {
                v = Some(c);
            }
        });
        self.control.named_gauges(&mut |n, c| {
            if n == name {
                v = Some(c);
            }
        });
        v.unwrap_or_else(|| panic!("no counter {name}"))
    }

    fn stage(&mut self) -> &mut SibraControl {
        self.control.as_any_mut().unwrap().downcast_mut::<SibraControl>().unwrap()
    }
}

/// What happened to one AS's requests.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    sent: u64,
    /// Forwarded with this AS's SOF (admitted).
    granted: u64,
    /// Forwarded with an offer (denied by admission).
    denied: u64,
    /// Dropped by the request channel.
    capped: u64,
    other: Vec<(Verdict, bool)>,
}

impl Outcome {
    fn add(&mut self, v: (Verdict, bool)) {
        self.sent += 1;
        match v {
            (Verdict::Forward { port: 2, .. }, true) => self.granted += 1,
            (Verdict::Forward { port: 2, .. }, false) => self.denied += 1,
            (Verdict::Drop(DropReason::ChannelCap), _) => self.capped += 1,
            v => self.other.push(v),
        }
    }
}

/// [`RUN_MS`] slots of 1 ms from the start: the flood's requests first in
/// each burst, then (every [`GOOD_EVERY`] slots) the well-behaved AS's.
fn traffic(router: &mut Router) -> (Outcome, Outcome) {
    let slots = RUN_MS as usize;
    let mut flood = frames("ephemeral-setup", BAD, (slots * FLOOD_PER_SLOT) as u32).into_iter();
    let mut good = frames("ephemeral-setup", GOOD, (RUN_MS / GOOD_EVERY) as u32).into_iter();
    let (mut g, mut b) = (Outcome::default(), Outcome::default());
    for k in 0..RUN_MS {
        let mut burst: Vec<(Vec<u8>, u16)> =
            flood.by_ref().take(FLOOD_PER_SLOT).map(|f| (f, BAD.2)).collect();
        let good_here = k % GOOD_EVERY == 0;
        if good_here {
            burst.push((good.next().unwrap(), GOOD.2));
        }
        let v = router.run(burst, start().plus_ns(k * 1_000_000));
        for (j, v) in v.into_iter().enumerate() {
            if good_here && j == FLOOD_PER_SLOT {
                g.add(v);
            } else {
                b.add(v);
            }
        }
    }
    (g, b)
}

/// Requests of [`SIZE`] bytes a channel of `bps` lets through over the run
/// and its burst.
fn requests_at(bps: u64) -> u64 {
    bps * (RUN_MS + BURST_MS) / 1000 / (SIZE as u64 * 8)
}

#[test]
fn a_flooding_path_is_held_to_its_share_and_the_other_path_gets_all_its_requests() {
    let mut r = Router::new(&format!("request_limit = {{ burst_ms = {BURST_MS} }}"));
    r.hold_steady_paths();
    let (good, bad) = traffic(&mut r);
    // Two paths of equal steady bandwidth: half the channel each.
    let share = requests_at(CHANNEL_BPS / 2);
    assert_eq!((good.sent, good.granted, good.capped), (100, 100, 0), "{good:?}");
    assert!(good.other.is_empty(), "{good:?}");
    assert_eq!(bad.sent, 2000);
    assert!(bad.other.is_empty(), "{:?}", bad.other);
    let passed = bad.sent - bad.capped;
    assert!(passed.abs_diff(share) <= 2, "flood passed {passed}, its share is {share}");
    assert_eq!(bad.granted, passed, "what passes the channel is admitted");
    // The channel's counters, as the run summary and /metrics show them.
    assert_eq!(r.named("request_channel_passed"), good.sent + passed);
    assert_eq!(r.named("request_channel_dropped"), bad.capped);
    assert_eq!(r.named("request_buckets"), 2);
    assert_eq!(r.named("granted"), 2 + good.granted + bad.granted);
    let l = r.stage().request_limiter().unwrap().config();
    assert_eq!((l.share_pct, l.burst_ns, l.per_path), (5, BURST_MS * 1_000_000, true));
}

#[test]
fn the_aggregate_cap_alone_lets_the_flood_crowd_out_the_other_path() {
    let mut r =
        Router::new(&format!("request_limit = {{ burst_ms = {BURST_MS}, per_path = false }}"));
    r.hold_steady_paths();
    let (good, bad) = traffic(&mut r);
    assert!(good.other.is_empty() && bad.other.is_empty(), "{good:?} {:?}", bad.other);
    // First come, first served: the flood takes nearly all of the channel.
    let passed = good.sent + bad.sent - good.capped - bad.capped;
    assert!(passed.abs_diff(requests_at(CHANNEL_BPS)) <= 2, "{passed} passed");
    assert!(good.granted < good.sent / 4, "well-behaved path got {good:?}");
    assert_eq!(r.named("request_channel_dropped"), good.capped + bad.capped);
    assert_eq!(r.named("request_buckets"), 1, "one bucket for interface 3");
}

#[test]
fn without_the_channel_every_request_reaches_admission() {
    let mut r = Router::new("request_limit = { enabled = false }");
    r.hold_steady_paths();
    let (good, bad) = traffic(&mut r);
    assert_eq!((good.capped, bad.capped), (0, 0));
    assert!(good.other.is_empty() && bad.other.is_empty(), "{good:?} {:?}", bad.other);
    // Admission alone: the flood's grants stop at its ephemeral share.
    assert!(bad.granted < bad.sent / 4 && bad.denied > 0, "{:?}", (bad.granted, bad.denied));
    assert_eq!(r.named("request_channel_passed"), 0);
    assert!(r.stage().request_limiter().is_none());
}

#[test]
fn requests_over_a_path_not_held_here_get_no_channel() {
    let mut r = Router::new("");
    let v = r.run(vec![(frames("ephemeral-setup", GOOD, 1).remove(0), GOOD.2)], start());
    assert_eq!(v[0].0, Verdict::Drop(DropReason::ChannelCap));
    assert_eq!(r.named("request_buckets"), 0, "no bucket for it");
}

/// The channel's parameters change in place, keeping buckets and counters;
/// switching it off and on too.
#[test]
fn the_channel_changes_live() {
    let mut r = Router::new(&format!("request_limit = {{ burst_ms = {BURST_MS} }}"));
    r.hold_steady_paths();
    let (_, bad) = traffic(&mut r);
    let (passed, dropped) = (r.named("request_channel_passed"), r.named("request_channel_dropped"));
    assert_eq!(dropped, bad.capped);
    let reg = registry();
    let live = |extra: &str| {
        reg.parse_stage("sibra-control", &ctx(), &table(&format!("{CONTROL}\n{extra}"))).unwrap()
    };
    let now = start().plus_ns(RUN_MS * 1_000_000);
    let same = live(&format!("request_limit = {{ burst_ms = {BURST_MS} }}"));
    assert_eq!(r.control.reconfigure(&*same, now), Ok(Reconfigured::Unchanged));
    let wider = live("request_limit = { share_pct = 50, burst_ms = 2000 }");
    assert_eq!(r.control.reconfigure(&*wider, now), Ok(Reconfigured::APPLIED));
    let l = *r.stage().request_limiter().unwrap().config();
    assert_eq!((l.share_pct, l.burst_ns), (50, 2_000_000_000));
    assert_eq!(r.named("request_channel_passed"), passed, "counters are kept");
    assert_eq!(r.named("request_buckets"), 2, "so are the buckets");
    // Ten times the share: a burst of the flood that was capped before passes.
    let burst: Vec<(Vec<u8>, u16)> =
        frames("ephemeral-setup", BAD, 20).into_iter().map(|f| (f, BAD.2)).collect();
    let v = r.run(burst.clone(), now.plus_ns(100_000_000));
    assert!(v.iter().all(|(v, _)| *v != Verdict::Drop(DropReason::ChannelCap)), "{v:?}");
    // Off: nothing is policed; back on, the counters carry on.
    let off = live("request_limit = { enabled = false }");
    assert_eq!(r.control.reconfigure(&*off, now), Ok(Reconfigured::APPLIED));
    assert!(r.stage().request_limiter().is_none());
    let on = live("request_limit = { share_pct = 1 }");
    assert_eq!(r.control.reconfigure(&*on, now), Ok(Reconfigured::APPLIED));
    assert!(r.named("request_channel_passed") >= passed + 20);
    assert_eq!(r.named("request_channel_dropped"), dropped);
    // Table sizes still need a restart, and leave the channel as it was.
    let e = r.control.reconfigure(&*live("request_limit = { share_pct = 2 }\nmax_steady = 9"), now);
    assert_eq!(e, Err(Refused::NeedsRestart("max_steady".into())));
    assert_eq!(r.stage().request_limiter().unwrap().config().share_pct, 1);
}

/// Out-of-range values are refused by key, with the range, at parse time
/// and in a whole router file (which names the file and the stage).
#[test]
fn out_of_range_values_are_refused_with_their_key() {
    let bad = |extra: &str| {
        let t = table(&format!("{CONTROL}\nrequest_limit = {{ {extra} }}"));
        let e = registry().build_stage("sibra-control", &ctx(), &t).err().unwrap();
        (e.key, e.reason)
    };
    let k = |s: &str| format!("request_limit.{s}");
    assert_eq!(bad("share_pct = 0"), (k("share_pct"), "0% is not in 1..=100".into()));
    assert_eq!(bad("share_pct = 101"), (k("share_pct"), "101% is not in 1..=100".into()));
    assert_eq!(bad("burst_ms = 0"), (k("burst_ms"), "0 ms is not in 1..=60000 ms".into()));
    assert_eq!(bad("burst_ms = 60001"), (k("burst_ms"), "60001 ms is not in 1..=60000 ms".into()));
    assert_eq!(bad("max_paths = 0"), (k("max_paths"), "0 is not in 1..=1048576".into()));
    assert_eq!(
        bad("max_paths = 1048577"),
        (k("max_paths"), "1048577 is not in 1..=1048576".into())
    );
    let (key, reason) = bad("share = 5");
    assert!(
        key.starts_with("request_limit") && reason.contains("unknown field"),
        "{key}: {reason}"
    );
    let (key, reason) = bad("burst_ms = 18446744073709551");
    assert!(key.starts_with("request_limit") && reason.contains("does not fit"), "{key}: {reason}");
    // A live change is parsed the same way: refused before it reaches the stage.
    let t = table(&format!("{CONTROL}\nrequest_limit = {{ share_pct = 200 }}"));
    assert!(registry().parse_stage("sibra-control", &ctx(), &t).is_err());

    let router = format!(
        r#"
[io]
backend = "synthetic"
[io.synthetic]
pacing = "virtual"
[[io.synthetic.traffic]]
name = "setup"
port = 0
rate_pps = 1000
template = "sibra"
kind = "ephemeral-setup"
src_ia = "1-ff00:0:111"
ingress = 1
egress = 3
sof_key = "{KEY}"
fwd_key = "{KEY}"
[[ports]]
id = 0
[[ports]]
id = 1
[[ports]]
id = 2
[[pipeline]]
kind = "parse"
[[pipeline]]
kind = "sibra-transit"
key = "{KEY}"
interfaces = [{{ ifid = 1, port = 0 }}, {{ ifid = 2, port = 1 }}, {{ ifid = 3, port = 2 }}]
requests = "to-control"
[slow_path]
[[slow_path.pipeline]]
kind = "sibra-control"
{CONTROL}
request_limit = {{ share_pct = 0 }}
"#
    );
    let cfg = runtime::config::parse(&router, Path::new("limits.toml")).unwrap();
    let e = runtime::check::<adapters::All>(&cfg).unwrap_err();
    assert_eq!(e.key, "slow_path.pipeline[0].request_limit.share_pct", "{e}");
    assert_eq!(e.file, Path::new("limits.toml"));
    assert!(e.to_string().contains("0% is not in 1..=100"), "{e}");
}

/// A router of the example's shape (`sibra-transit` hands requests to one
/// `sibra-control` on the slow path) at 10 Mbit/s per interface, with the
/// channel at its defaults: both ASes set up their steady path in band and
/// send ephemeral setups over it, one at 50/s, the other flooding at 2000/s.
const SLOW: &str = r#"
[io]
backend = "synthetic"
[io.synthetic]
pacing = "virtual"
[[io.synthetic.traffic]]
name = "steady-good"
port = 0
rate_pps = 100
flows = 1
template = "sibra"
kind = "steady-setup"
src_ia = "1-ff00:0:111"
ingress = 1
egress = 3
bw_class = 8
size = 200
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "2b7e151628aed2a6abf7158809cf4f3c"
[[io.synthetic.traffic]]
name = "steady-flood"
port = 1
rate_pps = 100
flows = 1
template = "sibra"
kind = "steady-setup"
src_ia = "1-ff00:0:666"
ingress = 2
egress = 3
bw_class = 8
size = 200
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "2b7e151628aed2a6abf7158809cf4f3c"
[[io.synthetic.traffic]]
name = "good"
port = 0
rate_pps = 50
flows = 64
template = "sibra"
kind = "ephemeral-setup"
src_ia = "1-ff00:0:111"
ingress = 1
egress = 3
bw_class = 1
size = 200
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "2b7e151628aed2a6abf7158809cf4f3c"
[[io.synthetic.traffic]]
name = "flood"
port = 1
rate_pps = 2000
flows = 1024
template = "sibra"
kind = "ephemeral-setup"
src_ia = "1-ff00:0:666"
ingress = 2
egress = 3
bw_class = 1
size = 200
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "2b7e151628aed2a6abf7158809cf4f3c"
[workers]
count = 1
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
[[ports]]
id = 2
[[pipeline]]
kind = "parse"
[[pipeline]]
kind = "sibra-transit"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [{ ifid = 1, port = 0 }, { ifid = 2, port = 1 }, { ifid = 3, port = 2 }]
requests = "to-control"
[slow_path]
[[slow_path.pipeline]]
kind = "sibra-control"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [
  { ifid = 1, port = 0, capacity_bps = 10000000 },
  { ifid = 2, port = 1, capacity_bps = 10000000 },
  { ifid = 3, port = 2, capacity_bps = 10000000 },
]
[run]
duration_ms = 300
"#;

#[test]
fn on_the_slow_path_the_default_channel_holds_a_flood_to_its_share() {
    let cfg = runtime::config::parse(SLOW, Path::new("slow-limit.toml")).unwrap();
    runtime::check::<adapters::All>(&cfg).unwrap();
    let s = runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap();
    let sp = s.slow_path.clone().unwrap();
    let group = |n: &str| s.groups.iter().find(|g| g.name == n).unwrap().clone();
    let named = |n: &str| sp.named.iter().filter(|x| x.name == n).map(|x| x.value).sum::<u64>();
    let capped: u64 = sp.stages.iter().map(|(_, c)| c.drops.get(DropReason::ChannelCap)).sum();
    let (good, flood) = (group("good"), group("flood"));
    assert_eq!(good.delivered, good.offered, "the well-behaved AS's setups all go through");
    assert_eq!(flood.delivered + capped, flood.offered, "the rest of the flood is capped");
    // Half the 500 kbit/s channel per path, 200-byte requests: 156/s, with
    // a burst of one second's worth, over the 300 ms run.
    let per_s = CHANNEL_BPS / 2 / (200 * 8);
    assert!((per_s..=per_s * 13 / 10 + 1).contains(&flood.delivered), "{}", flood.delivered);
    assert_eq!(named("request_channel_dropped"), capped);
    assert_eq!(named("request_channel_passed"), good.offered + flood.delivered);
    assert_eq!(named("denied"), 0, "what passes the channel is admitted");
}
