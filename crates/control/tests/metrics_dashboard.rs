//! The example Grafana dashboard (`deploy/grafana/router.json`) asks only
//! for what `/metrics` serves: every metric a panel's or a variable's query
//! names is a family that `control::metrics::render` declares, and every
//! label a query selects on or groups by is one of that family's labels (or
//! one Prometheus adds when it scrapes: `instance`, `job`). Renaming a
//! metric or a label without updating the dashboard fails here; so does a
//! new family that no panel shows (chart it, or list it in `UNCHARTED`).
//!
//! `scripts/test-metrics.sh` evaluates the same queries on a real
//! Prometheus server; this test needs no tools and runs with the others.

use std::collections::{BTreeMap, BTreeSet};

use pipeline::{DropReason, StageCounters};
use runtime::stats::{GroupSnapshot, Kind, Named, PortSnapshot, Scope};
use serde_json::Value;

const DASHBOARD: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/router.json"));

/// Labels Prometheus attaches to every series it scrapes.
const TARGET_LABELS: &[&str] = &["instance", "job"];

/// Families the dashboard deliberately does not show.
const UNCHARTED: &[&str] = &[];

/// Grafana's own variables.
const GRAFANA_VARIABLES: &[&str] =
    &["__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms"];

/// A declared family: its type and the labels its samples carry.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
    samples: usize,
}

/// A snapshot with a sample in every family: a stage with a drop, a port
/// with a drop, a traffic group, and named counters and levels of a stage
/// and of an egress discipline.
fn full_snapshot() -> runtime::Snapshot {
    let mut s = runtime::Snapshot { bursts: 3, elapsed_ns: 1_000_000, ..Default::default() };
    let mut c = StageCounters { packets: 5, ..Default::default() };
    c.drops.add(DropReason::BadMac, 1);
    s.stages.push(("flowpolice".into(), c));
    let mut p = PortSnapshot { id: 1, ..Default::default() };
    p.counters.rx = 4;
    p.counters.drops.add(DropReason::ALL[0], 1);
    s.ports.push(p);
    s.groups.push(GroupSnapshot { name: "legit".into(), offered: 2, delivered: 1 });
    let named = |scope, name, kind| Named { scope, name, kind, value: 1 };
    s.named = vec![
        named(Scope::Stage(0), "requests", Kind::Counter),
        named(Scope::Stage(0), "table_entries", Kind::Gauge),
        named(Scope::Egress(0), "queue_g_sent", Kind::Counter),
        named(Scope::Egress(0), "backlog", Kind::Gauge),
    ];
    let mut slow = StageCounters { packets: 2, ..Default::default() };
    slow.drops.add(DropReason::Denied, 1);
    s.slow_path = Some(runtime::slowpath::SlowPathSnapshot {
        received: 2,
        forwarded: 1,
        dropped: 1,
        latency_mean_ns: 1000,
        latency_p99_ns: 2048,
        latency_max_ns: 3000,
        stages: vec![("sibra-control".into(), slow)],
        named: vec![
            named(Scope::Stage(0), "granted", Kind::Counter),
            named(Scope::Stage(0), "steady_reservations", Kind::Gauge),
        ],
        ..Default::default()
    });
    s
}

/// The families of a rendered exposition, with the labels of their samples.
fn families_of(text: &str) -> BTreeMap<String, Family> {
    let mut f: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            f.entry(name.to_string()).or_default().kind = kind.to_string();
        } else if !line.starts_with('#') && !line.is_empty() {
            let name_end = line.find(['{', ' ']).unwrap();
            let fam = f
                .get_mut(&line[..name_end])
                .unwrap_or_else(|| panic!("sample of an undeclared family: {line}"));
            fam.samples += 1;
            if let Some(open) = line.strip_prefix(&line[..name_end]).unwrap().strip_prefix('{') {
                let close = open.rfind('}').unwrap();
                for pair in split_label_pairs(&open[..close]) {
                    fam.labels.insert(pair.split('=').next().unwrap().to_string());
                }
            }
        }
    }
    f
}

/// `a="x",b="y\"z"` → [`a="x"`, `b="y\"z"`] (commas inside values kept).
fn split_label_pairs(s: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// What a PromQL expression asks of the exposition.
#[derive(Debug, Default, PartialEq)]
struct Uses {
    /// Metric name → labels its selectors match on.
    metrics: BTreeMap<String, BTreeSet<String>>,
    /// Labels of `by`, `without`, `on`, `ignoring`, `group_left/right` lists.
    grouping: BTreeSet<String>,
    /// Template variables (`$x`, `${x}`, `[[x]]` is not used).
    variables: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal, with the template variables in it.
    Str(Vec<String>),
    Num,
    Var(String),
    Punct(String),
}

/// The template variables (`$x`, `${x}`, `${x:format}`) in a string.
fn vars_in(s: &str) -> Vec<String> {
    s.split('$')
        .skip(1)
        .map(|rest| {
            let rest = rest.strip_prefix('{').unwrap_or(rest);
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
        })
        .filter(|v: &String| !v.is_empty())
        .collect()
}

/// Splits PromQL (with Grafana variables) into tokens.
fn lex(q: &str) -> Vec<Tok> {
    let c: Vec<char> = q.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch.is_ascii_alphabetic() || ch == '_' || ch == ':';
    let ident_char = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':';
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '#' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '"' || ch == '\'' || ch == '`' {
            i += 1;
            let s = i;
            while i < c.len() && c[i] != ch {
                i += if c[i] == '\\' && ch != '`' { 2 } else { 1 };
            }
            assert!(i < c.len(), "unterminated string in `{q}`");
            let inner: String = c[s..i].iter().collect();
            i += 1;
            out.push(Tok::Str(vars_in(&inner)));
        } else if ch == '$' {
            i += 1;
            let braced = c.get(i) == Some(&'{');
            if braced {
                i += 1;
            }
            let s = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let name: String = c[s..i].iter().collect();
            if braced {
                // `${x}`, `${x:regex}`: the name ends at `}` or `:`.
                while i < c.len() && c[i] != '}' {
                    i += 1;
                }
                i += 1;
            }
            assert!(!name.is_empty(), "a `$` without a variable name in `{q}`");
            out.push(Tok::Var(name.split(':').next().unwrap().to_string()));
        } else if ch.is_ascii_digit()
            || (ch == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            // Numbers and durations (`5m`, `1h30m`, `1e-3`, `0x1f`).
            i += 1;
            while i < c.len()
                && (c[i].is_ascii_alphanumeric()
                    || c[i] == '.'
                    || ((c[i] == '-' || c[i] == '+') && matches!(c[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            out.push(Tok::Num);
        } else if ident_start(ch) {
            let s = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[s..i].iter().collect()));
        } else {
            let two: String = c[i..(i + 2).min(c.len())].iter().collect();
            let p = if ["=~", "!~", "!=", "==", "<=", ">="].contains(&two.as_str()) {
                two
            } else {
                ch.to_string()
            };
            i += p.chars().count();
            out.push(Tok::Punct(p));
        }
    }
    out
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "atan2", "start", "end"];

/// The metrics, labels and variables a PromQL expression uses.
fn uses(q: &str) -> Uses {
    let t = lex(q);
    let mut u = Uses::default();
    let punct = |i: usize, p: &str| matches!(t.get(i), Some(Tok::Punct(x)) if x == p);
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Var(v) => {
                u.variables.insert(v.clone());
                i += 1;
            }
            Tok::Str(vars) => {
                u.variables.extend(vars.iter().cloned());
                i += 1;
            }
            Tok::Ident(w) if GROUPING.contains(&w.as_str()) => {
                i += 1;
                if punct(i, "(") {
                    i += 1;
                    while i < t.len() && !punct(i, ")") {
                        if let Tok::Ident(l) = &t[i] {
                            u.grouping.insert(l.clone());
                        }
                        i += 1;
                    }
                    i += 1;
                }
            }
            Tok::Ident(w)
                if KEYWORDS.contains(&w.as_str())
                    || punct(i + 1, "(")
                    || AGGREGATIONS.contains(&w.as_str()) =>
            {
                i += 1;
            }
            Tok::Ident(metric) => {
                let labels = u.metrics.entry(metric.clone()).or_default();
                i += 1;
                if punct(i, "{") {
                    i += 1;
                    while i < t.len() && !punct(i, "}") {
                        match &t[i] {
                            Tok::Ident(l) => {
                                assert_ne!(l, "__name__", "`{q}`: select metrics by name");
                                labels.insert(l.clone());
                            }
                            Tok::Str(vars) => u.variables.extend(vars.iter().cloned()),
                            _ => {}
                        }
                        i += 1;
                    }
                    i += 1;
                }
            }
            Tok::Punct(p) if p == "{" => {
                panic!("`{q}`: a selector without a metric name cannot be checked")
            }
            Tok::Punct(p) if p == "[" => {
                // A range or subquery: durations and variables only.
                while i < t.len() && !punct(i, "]") {
                    if let Tok::Var(v) = &t[i] {
                        u.variables.insert(v.clone());
                    }
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    u
}

/// `label_values(<selector>, <label>)`, the variable query the dashboard uses.
fn variable_uses(def: &str) -> Uses {
    let inner =
        def.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).unwrap_or_else(|| {
            panic!("variable query `{def}`: only label_values(<selector>, <label>)")
        });
    let (sel, label) = inner.rsplit_once(',').unwrap_or_else(|| {
        panic!("variable query `{def}`: name a metric, label_values(<selector>, <label>)")
    });
    let mut u = uses(sel);
    assert_eq!(u.metrics.len(), 1, "variable query `{def}`: one metric");
    let label = label.trim().to_string();
    u.metrics.values_mut().next().unwrap().insert(label);
    u
}

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD).expect("deploy/grafana/router.json is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("`panels` is a list") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

/// (where, query, is a variable query)
fn queries(d: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?");
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel `{title}`: no expr"));
            out.push((format!("panel `{title}`"), expr.to_string(), false));
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" {
            let name = v["name"].as_str().unwrap();
            let def = v["query"]["query"].as_str().or(v["query"].as_str()).unwrap();
            assert_eq!(v["definition"].as_str(), Some(def), "variable `{name}`");
            out.push((format!("variable `{name}`"), def.to_string(), true));
        }
    }
    out
}

#[test]
fn every_family_is_declared_without_samples_and_has_samples_here() {
    let empty = families_of(&control::metrics::render(&runtime::Snapshot::default(), 0));
    let full = families_of(&control::metrics::render(&full_snapshot(), 1));
    assert_eq!(
        empty.keys().collect::<Vec<_>>(),
        full.keys().collect::<Vec<_>>(),
        "render declares every family whether or not it has samples"
    );
    for (name, f) in &full {
        // Labels come from samples: a family without one here would be
        // checked against no labels at all. Extend `full_snapshot`.
        assert!(f.samples > 0, "{name}: no sample in the test snapshot");
        assert!(["counter", "gauge"].contains(&f.kind.as_str()), "{name}: {}", f.kind);
    }
}

#[test]
fn dashboard_queries_name_declared_families_and_labels() {
    let families = families_of(&control::metrics::render(&full_snapshot(), 1));
    let d = dashboard();
    let defined: BTreeSet<String> = d["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    let qs = queries(&d);
    assert!(qs.len() >= 10, "{} queries", qs.len());
    for (at, q, variable) in &qs {
        let u = if *variable { variable_uses(q) } else { uses(q) };
        assert!(!u.metrics.is_empty(), "{at}: no metric in `{q}`");
        for (metric, labels) in &u.metrics {
            let Some(f) = families.get(metric) else {
                problems.push(format!("{at}: `{metric}` is not a family /metrics declares"));
                continue;
            };
            used.insert(metric.clone());
            for l in labels.iter().chain(&u.grouping) {
                if !f.labels.contains(l) && !TARGET_LABELS.contains(&l.as_str()) {
                    problems.push(format!(
                        "{at}: `{metric}` has no label `{l}` (it has {:?})",
                        f.labels
                    ));
                }
            }
        }
        for v in &u.variables {
            if !defined.contains(v) && !GRAFANA_VARIABLES.contains(&v.as_str()) {
                problems.push(format!("{at}: variable `${v}` is not defined"));
            }
        }
    }
    for name in families.keys() {
        if !used.contains(name) && !UNCHARTED.contains(&name.as_str()) {
            problems
                .push(format!("family `{name}` is on no panel (chart it or list it in UNCHARTED)"));
        }
    }
    assert!(problems.is_empty(), "deploy/grafana/router.json:\n{}", problems.join("\n"));
}

/// What the brief promises operators: the panels for ports, drops, stages,
/// protocol events and levels, and the configuration generation.
#[test]
fn dashboard_has_the_essential_panels() {
    let d = dashboard();
    let all: Vec<String> = queries(&d).into_iter().map(|(_, q, _)| q).collect();
    for family in [
        "router_port_rx_packets_total",
        "router_port_tx_packets_total",
        "router_stage_drops_total",
        "router_port_drops_total",
        "router_stage_packets_total",
        "router_stage_events_total",
        "router_stage_level",
        "router_config_generation",
    ] {
        assert!(
            all.iter().any(|q| uses(q).metrics.contains_key(family)),
            "no panel shows {family}"
        );
    }
    // Counters are shown as rates.
    let panel_queries = queries(&d).into_iter().filter(|(_, _, variable)| !variable);
    for (_, q, _) in panel_queries {
        for m in uses(&q).metrics.keys().filter(|m| m.ends_with("_total")) {
            assert!(q.contains(&format!("rate({m}")), "`{q}`: {m} is a counter, show its rate");
        }
    }
}

/// Importable: the data source is an input, every panel and query uses it,
/// ids are unique and panels fit the 24-column grid.
#[test]
fn dashboard_is_import_ready() {
    let d = dashboard();
    let inputs = d["__inputs"].as_array().expect("__inputs");
    assert!(
        inputs.iter().any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus"),
        "{inputs:?}"
    );
    assert!(d["title"].is_string() && d["uid"].is_string() && d["schemaVersion"].is_u64());
    let mut ids = BTreeSet::new();
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("?");
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "panel `{title}`: id reused");
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
        assert!(w >= 1 && x + w <= 24 && g["h"].as_u64().unwrap() >= 1, "panel `{title}`: {g}");
        if p["type"] == "row" {
            continue;
        }
        let ds = |v: &Value| v["uid"] == "${DS_PROMETHEUS}" && v["type"] == "prometheus";
        assert!(ds(&p["datasource"]), "panel `{title}`: {}", p["datasource"]);
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel `{title}`: no query");
        for t in targets {
            assert!(ds(&t["datasource"]), "panel `{title}`: {}", t["datasource"]);
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        assert_eq!(v["datasource"]["uid"], "${DS_PROMETHEUS}", "{v}");
    }
}

/// The extraction itself, on the forms it must understand.
#[test]
fn promql_uses_are_extracted() {
    let u = uses(
        "sum by (instance, port) (rate(a_total{port=~\"$port\", x!=\"}\"}[$__rate_interval])) \
         / on (port) group_left (name) b offset 5m > bool 0.5e-3 or vector(0) # c_total",
    );
    assert_eq!(u.metrics.keys().collect::<Vec<_>>(), ["a_total", "b"]);
    assert_eq!(u.metrics["a_total"].iter().collect::<Vec<_>>(), ["port", "x"]);
    assert!(u.metrics["b"].is_empty());
    assert_eq!(u.grouping.iter().collect::<Vec<_>>(), ["instance", "name", "port"]);
    assert_eq!(u.variables.iter().collect::<Vec<_>>(), ["__rate_interval", "port"]);
    let u = uses("sum(rate(m[1h30m])) without (stage)");
    assert_eq!(u.metrics.keys().collect::<Vec<_>>(), ["m"]);
    assert_eq!(u.grouping.iter().collect::<Vec<_>>(), ["stage"]);
    let v =
        variable_uses("label_values(router_stage_packets_total{instance=~\"${instance}\"}, stage)");
    assert_eq!(v.metrics["router_stage_packets_total"].len(), 2);
    assert!(v.variables.contains("instance"));
    // A renamed family is caught.
    let families = families_of(&control::metrics::render(&full_snapshot(), 1));
    assert!(families.contains_key("router_stage_level"));
    assert!(!families.contains_key("router_stage_counter"));
}
