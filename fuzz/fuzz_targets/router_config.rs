//! Router configurations: the example configurations of `config/`, mutated,
//! through `runtime::config::parse` and `runtime::check::<adapters::All>`:
//! neither panics, and a configuration that `check` accepts builds every
//! stage and egress discipline (for the first and the last worker) and runs
//! two bursts of its own traffic through them without panicking. `check`
//! agrees with the build: what it accepts builds.
//!
//! Input: byte 0 picks the configuration, byte 1 the mode (edits of the
//! parsed TOML, byte edits of the text, or both); the rest drives up to
//! [`MAX_EDITS`] edits. TOML edits act on any key or value of the tree:
//! numbers set to huge, negative, zero, NaN or infinite values or nudged,
//! values of the wrong type, strings from every configuration (and odd
//! ones), keys removed, renamed or added (names from every configuration),
//! array entries duplicated, reordered or cut, values copied across the
//! tree (a stage into another's place, a port table into a stage...). Text
//! edits overwrite, insert or delete bytes and duplicate or transplant lines.
//!
//! Memory: `check` refuses a configuration that needs more memory than the
//! machine has, before allocating it. Fuzzing runs under a far smaller
//! `-rss_limit_mb`, so the target first adds up what the stages report they
//! will allocate (the same per-stage footprints `check` uses) and skips a
//! configuration above [`BUDGET`] per worker; everything below is built.
//! A stage that allocates much more than it reports shows up as an
//! out-of-memory crash.
//!
//! Left out, so that fuzzing has no side effects and stays fast: `store_dir`
//! (the FAIR destination's header store on disk) is removed, pcap inputs and
//! outputs point at files under the temporary directory, and synthetic
//! traffic groups build at most [`MAX_FLOWS`] flows (template building is
//! fuzzed by the protocol targets).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pipeline::{Batch, Egress, Now, Pipeline, Verdict, BURST};
use runtime::config::RouterConfig;
use runtime::registry::{BuildContext, Catalog, Registry};
use runtime::templates::{tag_for, TemplateCtx, Templates};
use toml::Value;

/// The example configurations (`scripts/fuzz-smoke.sh` checks that every
/// `config/*.toml` is listed).
const CONFIGS: &[(&str, &str)] = &[
    ("default.toml", include_str!("../../config/default.toml")),
    ("fair-destination.toml", include_str!("../../config/fair-destination.toml")),
    ("fair-transit.toml", include_str!("../../config/fair-transit.toml")),
    ("flowpolice-edge.toml", include_str!("../../config/flowpolice-edge.toml")),
    ("scion-border.toml", include_str!("../../config/scion-border.toml")),
    ("sibra-transit.toml", include_str!("../../config/sibra-transit.toml")),
    ("zlane-border.toml", include_str!("../../config/zlane-border.toml")),
    ("zlane-gateway.toml", include_str!("../../config/zlane-gateway.toml")),
    ("zlane-scheduler.toml", include_str!("../../config/zlane-scheduler.toml")),
];

/// Most edits per input.
const MAX_EDITS: usize = 16;
/// Most bytes per worker a configuration may ask for to be built here.
const BUDGET: u64 = 192 << 20;
/// Most flows a synthetic traffic group builds here.
const MAX_FLOWS: u32 = 16;
/// Frames per group in the bursts run through a built pipeline.
const RUN_FLOWS: u32 = 4;

/// The parsed examples, every key name, every string value.
struct Corpus {
    trees: Vec<toml::Table>,
    keys: Vec<String>,
    strings: Vec<String>,
    /// A one-frame Ethernet capture for pcap inputs.
    pcap_in: PathBuf,
    /// Where pcap outputs go.
    pcap_out: PathBuf,
}

fn corpus() -> &'static Corpus {
    static C: OnceLock<Corpus> = OnceLock::new();
    C.get_or_init(|| {
        let trees: Vec<toml::Table> = CONFIGS
            .iter()
            .map(|(n, t)| toml::from_str(t).unwrap_or_else(|e| panic!("{n}: {e}")))
            .collect();
        let mut keys = Vec::new();
        let mut strings = vec![
            String::new(),
            "0".into(),
            "-1".into(),
            "x".repeat(300),
            "00".into(),
            "0011223344556677889900aabbccddeeff".into(),
            "zz112233445566778899aabbccddeeff".into(),
            "1-0".into(),
            "0-0".into(),
            "65535-ffff:ffff:ffff".into(),
            "1-ff00:0:110:1".into(),
            "10.0.0.0/33".into(),
            "10.0.0.0/0".into(),
            "0.0.0.0/32".into(),
            "::/0".into(),
            "255.255.255.255".into(),
            "é\u{0}\u{202e}".into(),
            "dpdk".into(),
            "pcap".into(),
            "wall".into(),
        ];
        for t in &trees {
            collect(&Value::Table(t.clone()), &mut keys, &mut strings);
        }
        keys.sort();
        keys.dedup();
        strings.sort();
        strings.dedup();
        // One directory for every run (and every parallel job): the
        // capture is written under a name of its own, then renamed.
        let dir = std::env::temp_dir().join("router-config-fuzz");
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let pcap_in = dir.join("in.pcap");
        let part = dir.join(format!("in.pcap.{}", std::process::id()));
        std::fs::write(&part, one_frame_pcap()).expect("writing the input capture");
        std::fs::rename(&part, &pcap_in).expect("writing the input capture");
        Corpus { trees, keys, strings, pcap_in, pcap_out: dir.join("out.pcap") }
    })
}

fn collect(v: &Value, keys: &mut Vec<String>, strings: &mut Vec<String>) {
    match v {
        Value::Table(t) => {
            for (k, v) in t {
                keys.push(k.clone());
                collect(v, keys, strings);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect(v, keys, strings)),
        Value::String(s) => strings.push(s.clone()),
        _ => {}
    }
}

/// A pcap (microseconds, Ethernet) with one 60-byte IPv4/UDP frame.
fn one_frame_pcap() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12] = 0x08; // EtherType IPv4
    f[14] = 0x45;
    f[17] = 46; // total length
    f[22] = 64; // TTL
    f[23] = 17; // UDP
    f[26..30].copy_from_slice(&[10, 1, 0, 1]);
    f[30..34].copy_from_slice(&[10, 2, 0, 1]);
    let mut p = Vec::new();
    for x in [0xa1b2_c3d4u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4]] {
        p.extend_from_slice(&x);
    }
    p.extend_from_slice(&65535u32.to_le_bytes());
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&1_767_225_600u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&60u32.to_le_bytes());
    p.extend_from_slice(&60u32.to_le_bytes());
    p.extend_from_slice(&f);
    p
}

/// The fuzzer's bytes, read as needed (zeros once they run out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        b.iter_mut().for_each(|x| *x = self.u8());
        u64::from_le_bytes(b)
    }
    fn pick<'t, T>(&mut self, items: &'t [T]) -> Option<&'t T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[usize::from(self.u16()) % items.len()])
        }
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One step of a path into a TOML tree.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every node of `v` (not the root), as paths, depth first.
fn paths(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Table(t) => {
            for (k, v) in t {
                at.push(Step::Key(k.clone()));
                out.push(at.clone());
                paths(v, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                at.push(Step::Index(i));
                out.push(at.clone());
                paths(v, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'v>(v: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, s| match (s, v) {
        (Step::Key(k), Value::Table(t)) => t.get_mut(k),
        (Step::Index(i), Value::Array(a)) => a.get_mut(*i),
        _ => None,
    })
}

fn get<'v>(v: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, s| match (s, v) {
        (Step::Key(k), Value::Table(t)) => t.get(k),
        (Step::Index(i), Value::Array(a)) => a.get(*i),
        _ => None,
    })
}

const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    7,
    255,
    256,
    65_535,
    65_536,
    1 << 20,
    (1 << 22) + 1,
    u32::MAX as i64,
    1 << 32,
    1 << 53,
    i64::MAX,
    i64::MIN,
    i64::MIN + 1,
    1_000_000_000,
    4_000_000_000,
    1_767_225_600,
];

const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    -1.0,
    0.5,
    1.0,
    1e-300,
    5e-324,
    1e9,
    1e10,
    1e300,
    f64::MAX,
    f64::MIN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// A value of some other type than usual.
fn odd_value(b: &mut Bytes<'_>) -> Value {
    match b.u8() % 9 {
        0 => Value::String(String::new()),
        1 => Value::Boolean(b.u8() & 1 == 1),
        2 => Value::Array(Vec::new()),
        3 => Value::Table(toml::Table::new()),
        4 => Value::Integer(*b.pick(INTS).unwrap_or(&0)),
        5 => Value::Float(*b.pick(FLOATS).unwrap_or(&0.0)),
        6 => Value::Array(vec![Value::Integer(1), Value::String("a".into())]),
        7 => "1979-05-27T07:32:00Z"
            .parse::<toml::value::Datetime>()
            .map_or(Value::Boolean(false), Value::Datetime),
        _ => Value::String(b.pick(&corpus().strings).cloned().unwrap_or_default()),
    }
}

/// Applies one fuzzer-chosen edit to `root`.
fn edit(root: &mut Value, b: &mut Bytes<'_>) {
    let c = corpus();
    let mut all = Vec::new();
    paths(root, &mut Vec::new(), &mut all);
    let op = b.u8() % 12;
    let Some(path) = b.pick(&all).cloned() else { return };
    match op {
        // A number, huge, negative, zero or of the fuzzer's choosing.
        0 => {
            let v = if b.u8() & 1 == 0 { *b.pick(INTS).unwrap_or(&0) } else { b.u64() as i64 };
            set(root, &path, Value::Integer(v));
        }
        1 => {
            let v = if b.u8() & 1 == 0 {
                *b.pick(FLOATS).unwrap_or(&0.0)
            } else {
                f64::from_bits(b.u64())
            };
            set(root, &path, Value::Float(v));
        }
        // A value of the wrong type.
        2 => set(root, &path, odd_value(b)),
        // A key or an array entry removed.
        3 => {
            remove(root, &path);
        }
        // An array entry duplicated (a stage, a port, a traffic group...).
        4 => {
            let (Some(Step::Index(i)), parent) = (path.last(), &path[..path.len() - 1]) else {
                return;
            };
            let times = 1 + usize::from(b.u8() % 3);
            if let Some(Value::Array(a)) = get_mut(root, parent) {
                let dup = a[*i].clone();
                for _ in 0..times {
                    a.insert(*i, dup.clone());
                }
            }
        }
        // A string from any configuration, or an odd one.
        5 => {
            let s = b.pick(&c.strings).cloned().unwrap_or_default();
            set(root, &path, Value::String(s));
        }
        // A value copied from elsewhere: this tree or another example.
        6 => {
            let from = c.trees[usize::from(b.u8()) % c.trees.len()].clone();
            let from = if b.u8() & 1 == 0 { root.clone() } else { Value::Table(from) };
            let mut src = Vec::new();
            paths(&from, &mut Vec::new(), &mut src);
            if let Some(v) = b.pick(&src).and_then(|p| get(&from, p)).cloned() {
                set(root, &path, v);
            }
        }
        // A key added to a table (the node's own, or its parent).
        7 => {
            let key = b.pick(&c.keys).cloned().unwrap_or_default();
            let value = odd_value(b);
            let own = matches!(get(root, &path), Some(Value::Table(_)));
            let at = if own { &path[..] } else { &path[..path.len() - 1] };
            if let Some(Value::Table(t)) = get_mut(root, at) {
                t.insert(key, value);
            }
        }
        // A number nudged.
        8 => {
            let how = b.u8();
            if let Some(v) = get_mut(root, &path) {
                match v {
                    Value::Integer(x) => {
                        *x = match how % 7 {
                            0 => x.wrapping_add(1),
                            1 => x.wrapping_sub(1),
                            2 => x.wrapping_neg(),
                            3 => x.wrapping_mul(2),
                            4 => x.wrapping_mul(1000),
                            5 => *x / 2,
                            _ => *x ^ (1 << (how % 63)),
                        }
                    }
                    Value::Float(x) => {
                        *x = match how % 5 {
                            0 => *x * 2.0,
                            1 => -*x,
                            2 => *x * 1e6,
                            3 => *x + 0.5,
                            _ => *x / 1e6,
                        }
                    }
                    _ => {}
                }
            }
        }
        // An array reordered.
        9 => {
            let k = usize::from(b.u8());
            if let Some(Value::Array(a)) = get_mut(root, &path) {
                if !a.is_empty() {
                    let n = a.len();
                    a.rotate_left(k % n);
                }
            }
        }
        // An array cut short.
        10 => {
            let k = usize::from(b.u8());
            if let Some(Value::Array(a)) = get_mut(root, &path) {
                a.truncate(k % (a.len() + 1));
            }
        }
        // A key renamed.
        _ => {
            let new = b.pick(&c.keys).cloned().unwrap_or_default();
            if let Some(v) = remove(root, &path) {
                if let Some(Value::Table(t)) = get_mut(root, &path[..path.len() - 1]) {
                    t.insert(new, v);
                }
            }
        }
    }
}

fn set(root: &mut Value, path: &[Step], v: Value) {
    if let Some(slot) = get_mut(root, path) {
        *slot = v;
    }
}

fn remove(root: &mut Value, path: &[Step]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    match (last, get_mut(root, parent)?) {
        (Step::Key(k), Value::Table(t)) => t.remove(k),
        (Step::Index(i), Value::Array(a)) if *i < a.len() => Some(a.remove(*i)),
        _ => None,
    }
}

/// Byte-level edits of the text: overwrite, insert, delete, duplicate or
/// transplant lines.
fn splice(text: &str, b: &mut Bytes<'_>) -> String {
    let mut t = text.as_bytes().to_vec();
    for _ in 0..MAX_EDITS {
        if b.is_empty() {
            break;
        }
        let op = b.u8() % 5;
        let at = if t.is_empty() { 0 } else { usize::from(b.u16()) % t.len() };
        match op {
            0 if !t.is_empty() => t[at] = b.u8(),
            1 => t.insert(at, b.u8()),
            2 => {
                let n = usize::from(b.u8() % 16);
                t.drain(at..(at + n).min(t.len()));
            }
            3 | 4 => {
                let src =
                    if op == 3 { text } else { CONFIGS[usize::from(b.u8()) % CONFIGS.len()].1 };
                let lines: Vec<&str> = src.lines().collect();
                if let Some(l) = b.pick(&lines) {
                    // At a line start, so the line stays whole.
                    let at = t[..at].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
                    t.splice(at..at, format!("{l}\n").into_bytes());
                }
            }
            _ => {}
        }
    }
    String::from_utf8_lossy(&t).into_owned()
}

/// Points everything that touches the file system at the temporary
/// directory, and bounds template building (see the module docs).
fn tame(cfg: &mut RouterConfig) {
    let c = corpus();
    for s in &mut cfg.pipeline {
        s.params.remove("store_dir");
    }
    if let Some(p) = &mut cfg.io.pcap {
        p.inputs.iter_mut().for_each(|f| f.file = c.pcap_in.clone());
        p.outputs.iter_mut().for_each(|f| f.file = c.pcap_out.clone());
    }
    if let Some(s) = &mut cfg.io.synthetic {
        for t in &mut s.traffic {
            if t.flows > MAX_FLOWS && t.flows <= runtime::synthetic::MAX_FLOWS {
                t.flows = MAX_FLOWS;
            }
        }
    }
}

fn ctx(cfg: &RouterConfig, worker: usize) -> BuildContext {
    BuildContext {
        worker,
        workers: cfg.workers.count,
        ports: cfg.ports.iter().map(|p| p.id).collect(),
    }
}

/// What the stages and egress disciplines report they allocate per worker,
/// or `None` if a parameter is refused (then `check` refuses before
/// allocating anything).
fn footprint(cfg: &RouterConfig, reg: &dyn Catalog) -> Option<u64> {
    cfg.validate().ok()?;
    let ctx = ctx(cfg, 0);
    let mut sum = 0u64;
    for s in &cfg.pipeline {
        let parsed = reg.parse_stage(&s.kind, &ctx, &s.params).ok()?;
        sum = sum.saturating_add(reg.stage_footprint(&s.kind, &parsed));
    }
    for p in &cfg.ports {
        let parsed = reg.parse_egress(&p.egress.kind, &ctx, &p.egress.params).ok()?;
        sum = sum.saturating_add(reg.egress_footprint(&p.egress.kind, &parsed));
    }
    Some(sum)
}

/// Builds worker `w`'s stages and egress disciplines (which `check` has
/// accepted: every build must succeed) and runs two bursts through them.
fn build_and_run(cfg: &RouterConfig, reg: &Registry<Vec<u8>>, w: usize, frames: &[(u16, Vec<u8>)]) {
    let ctx = ctx(cfg, w);
    let mut p = Pipeline::new();
    for (i, s) in cfg.pipeline.iter().enumerate() {
        match reg.build_stage(&s.kind, &ctx, &s.params) {
            Ok(st) => p.push(st),
            Err(e) => panic!(
                "check accepted pipeline[{i}] ({}) but worker {w} cannot build it: {e}",
                s.kind
            ),
        }
    }
    let mut egress: Vec<Box<dyn Egress<Vec<u8>>>> = Vec::new();
    for (i, port) in cfg.ports.iter().enumerate() {
        match reg.build_egress(&port.egress.kind, &ctx, &port.egress.params) {
            Ok(e) => egress.push(e),
            Err(e) => {
                panic!("check accepted ports[{i}].egress but worker {w} cannot build it: {e}")
            }
        }
    }
    let start = runtime::synthetic::VIRTUAL_UNIX_START_NS;
    for round in 0..2u64 {
        let now = Now { mono_ns: round * 1_000_000, unix_ns: start + round * 1_000_000 };
        let mut batch = Batch::new();
        for (port, f) in frames.iter().take(BURST) {
            let _ = batch.push(f.clone(), *port);
        }
        p.run(&mut batch, now);
        batch.drain(|buf, meta| {
            if let Verdict::Forward { port, class } = meta.verdict {
                if let Some(e) = cfg.port_index(port).and_then(|s| egress.get_mut(s)) {
                    let _ = e.enqueue(buf, class, now);
                }
            }
        });
        let mut out = Vec::new();
        for e in &mut egress {
            e.dequeue(now, BURST, &mut out);
            out.clear();
        }
    }
}

/// A few frames of each synthetic traffic group (built as `check` does).
fn traffic(cfg: &RouterConfig, templates: &Templates) -> Vec<(u16, Vec<u8>)> {
    let mut v = Vec::new();
    let Some(s) = &cfg.io.synthetic else { return v };
    let unix_s = runtime::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000;
    for (g, t) in s.traffic.iter().enumerate() {
        let ctx = TemplateCtx { flows: t.flows.min(RUN_FLOWS), tag: tag_for(g as u16), unix_s };
        if let Ok(frames) = templates.build(&t.template, &t.params, &ctx) {
            v.extend(frames.into_iter().map(|f| (t.port, f)));
        }
    }
    v
}

/// The frames a pcap backend's input holds (the one of [`one_frame_pcap`]).
fn pcap_frames(cfg: &RouterConfig) -> Vec<(u16, Vec<u8>)> {
    let Some(p) = &cfg.io.pcap else { return Vec::new() };
    let frame = one_frame_pcap()[40..].to_vec();
    p.inputs.iter().map(|i| (i.port, frame.clone())).collect()
}

fuzz_target!(|data: &[u8]| {
    let c = corpus();
    let mut b = Bytes(data);
    let pick = usize::from(b.u8()) % CONFIGS.len();
    let mode = b.u8() % 3;
    let mut text = CONFIGS[pick].1.to_string();
    if mode != 1 {
        let mut root = Value::Table(c.trees[pick].clone());
        for _ in 0..MAX_EDITS {
            if b.is_empty() {
                break;
            }
            edit(&mut root, &mut b);
        }
        // A tree TOML cannot write (none expected) is no configuration.
        let Ok(t) = toml::to_string(&root) else { return };
        text = t;
    }
    if mode != 0 {
        text = splice(&text, &mut b);
    }
    let file = Path::new("fuzz.toml");
    let mut cfg = match runtime::config::parse(&text, file) {
        Ok(cfg) => cfg,
        Err(e) => {
            // The message (with its line lookup) must not panic either.
            let _ = e.to_string();
            return;
        }
    };
    tame(&mut cfg);
    let reg = Registry::<Vec<u8>>::with::<adapters::All>();
    if footprint(&cfg, &reg).is_some_and(|bytes| bytes > BUDGET) {
        return;
    }
    if let Err(e) = runtime::check::<adapters::All>(&cfg) {
        let _ = e.to_string();
        return;
    }
    let mut frames = traffic(&cfg, &Templates::with::<adapters::All>());
    frames.extend(pcap_frames(&cfg));
    let workers = cfg.workers.count;
    build_and_run(&cfg, &reg, 0, &frames);
    if workers > 1 {
        build_and_run(&cfg, &reg, workers - 1, &frames);
    }
});
