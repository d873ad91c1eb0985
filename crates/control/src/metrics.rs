//! The Prometheus text endpoint: `GET /metrics` over HTTP/1.1 (over TLS
//! with `[control.tls]`; with `metrics_auth`, for a read or admin credential).
//!
//! Every family is typed and has a `# HELP` line; counters end in
//! `_total`; what varies (port, stage, drop reason, a named value's name)
//! is a label, so that each family is one series set (`promtool check
//! metrics` finds nothing to say). Every family is declared even when it has
//! no sample in this configuration, so dashboards and alerts find their
//! names.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `router_bursts_total` | counter | |
//! | `router_elapsed_seconds` | gauge | |
//! | `router_to_control_total` | counter | |
//! | `router_config_generation` | gauge | |
//! | `router_port_{rx,tx}_packets_total`, `router_port_tx_bytes_total` | counter | `port` |
//! | `router_port_queued_packets` | gauge | `port` |
//! | `router_port_drops_total` | counter | `port`, `reason` |
//! | `router_stage_packets_total`, `router_stage_to_control_total` | counter | `index`, `stage` |
//! | `router_stage_drops_total` | counter | `index`, `stage`, `reason` |
//! | `router_group_{offered,delivered}_packets_total` | counter | `group` (synthetic backend) |
//! | `router_stage_events_total` | counter | `index`, `stage`, `name` ([`pipeline::Element::named_counters`]) |
//! | `router_stage_level` | gauge | `index`, `stage`, `name` ([`pipeline::Element::named_gauges`]) |
//! | `router_egress_events_total` | counter | `port`, `name` |
//! | `router_egress_level` | gauge | `port`, `name` |
//! | `router_slow_path_packets_total` | counter | `outcome` (`received`, `forwarded`, `delivered`, `dropped`) |
//! | `router_slow_path_latency_seconds` | gauge | `stat` (`mean`, `p99`, `max`; punt to verdict) |
//! | `router_slow_path_stage_drops_total` | counter | `index`, `stage`, `reason` |
//! | `router_slow_path_stage_events_total` / `_level` | counter / gauge | `index`, `stage`, `name` |
//!
//! Packets a full slow-path ring refused are port drops with reason
//! `slow_path_full`.

use std::convert::Infallible;
use std::fmt::Write;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use runtime::stats::{Kind, Scope};

use crate::plane::Plane;

/// The family of stages' named counters ([`pipeline::Element::named_counters`]).
pub const STAGE_EVENTS: &str = "router_stage_events_total";
/// The family of stages' named levels ([`pipeline::Element::named_gauges`]).
pub const STAGE_LEVEL: &str = "router_stage_level";
/// The family of egress disciplines' named counters.
pub const EGRESS_EVENTS: &str = "router_egress_events_total";
/// The family of egress disciplines' named levels.
pub const EGRESS_LEVEL: &str = "router_egress_level";

/// The Prometheus type of a named value's family.
fn type_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    }
}

/// Escapes a label value (backslash, quote, newline).
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Renders a snapshot (and the configuration generation) in the text format.
pub fn render(s: &runtime::Snapshot, generation: u64) -> String {
    let mut o = String::with_capacity(4096);
    family(&mut o, "router_bursts_total", "counter", "Bursts processed by all workers.");
    let _ = writeln!(o, "router_bursts_total {}", s.bursts);
    family(&mut o, "router_elapsed_seconds", "gauge", "Longest time any worker has run.");
    let _ = writeln!(o, "router_elapsed_seconds {}", s.elapsed_ns as f64 / 1e9);
    family(&mut o, "router_to_control_total", "counter", "Packets handed to control.");
    let _ = writeln!(o, "router_to_control_total {}", s.to_control);
    family(&mut o, "router_config_generation", "gauge", "Live configuration changes applied.");
    let _ = writeln!(o, "router_config_generation {generation}");

    family(&mut o, "router_port_rx_packets_total", "counter", "Packets received per port.");
    for p in &s.ports {
        let _ = writeln!(o, "router_port_rx_packets_total{{port=\"{}\"}} {}", p.id, p.counters.rx);
    }
    family(&mut o, "router_port_tx_packets_total", "counter", "Packets transmitted per port.");
    for p in &s.ports {
        let _ = writeln!(o, "router_port_tx_packets_total{{port=\"{}\"}} {}", p.id, p.counters.tx);
    }
    family(&mut o, "router_port_tx_bytes_total", "counter", "Bytes transmitted per port.");
    for p in &s.ports {
        let _ =
            writeln!(o, "router_port_tx_bytes_total{{port=\"{}\"}} {}", p.id, p.counters.tx_bytes);
    }
    family(&mut o, "router_port_queued_packets", "gauge", "Packets in the port's egress queues.");
    for p in &s.ports {
        let _ =
            writeln!(o, "router_port_queued_packets{{port=\"{}\"}} {}", p.id, p.counters.queued);
    }
    family(
        &mut o,
        "router_port_drops_total",
        "counter",
        "Packets dropped by the runtime per port and reason.",
    );
    for p in &s.ports {
        for (r, n) in p.counters.drops.nonzero() {
            let _ = writeln!(
                o,
                "router_port_drops_total{{port=\"{}\",reason=\"{}\"}} {n}",
                p.id,
                esc(&r.to_string())
            );
        }
    }
    family(&mut o, "router_stage_packets_total", "counter", "Packets that entered each stage.");
    for (i, (n, c)) in s.stages.iter().enumerate() {
        let _ = writeln!(
            o,
            "router_stage_packets_total{{index=\"{i}\",stage=\"{}\"}} {}",
            esc(n),
            c.packets
        );
    }
    family(
        &mut o,
        "router_stage_to_control_total",
        "counter",
        "Packets each stage handed to control.",
    );
    for (i, (n, c)) in s.stages.iter().enumerate() {
        let _ = writeln!(
            o,
            "router_stage_to_control_total{{index=\"{i}\",stage=\"{}\"}} {}",
            esc(n),
            c.to_control
        );
    }
    family(&mut o, "router_stage_drops_total", "counter", "Packets dropped per stage and reason.");
    for (i, (n, c)) in s.stages.iter().enumerate() {
        for (r, v) in c.drops.nonzero() {
            let _ = writeln!(
                o,
                "router_stage_drops_total{{index=\"{i}\",stage=\"{}\",reason=\"{}\"}} {v}",
                esc(n),
                esc(&r.to_string())
            );
        }
    }
    family(
        &mut o,
        "router_group_offered_packets_total",
        "counter",
        "Synthetic packets generated per group.",
    );
    for g in &s.groups {
        let _ = writeln!(
            o,
            "router_group_offered_packets_total{{group=\"{}\"}} {}",
            esc(&g.name),
            g.offered
        );
    }
    family(
        &mut o,
        "router_group_delivered_packets_total",
        "counter",
        "Synthetic packets transmitted per group.",
    );
    for g in &s.groups {
        let _ = writeln!(
            o,
            "router_group_delivered_packets_total{{group=\"{}\"}} {}",
            esc(&g.name),
            g.delivered
        );
    }
    for (metric, kind, help) in [
        (
            STAGE_EVENTS,
            Kind::Counter,
            "Events a stage counts by name (packets per traffic class, requests, \
             packets forwarded...), summed over workers.",
        ),
        (
            STAGE_LEVEL,
            Kind::Gauge,
            "Levels a stage reports by name (table entries, reservations held), \
             summed over workers.",
        ),
    ] {
        family(&mut o, metric, type_name(kind), help);
        for n in s.named.iter().filter(|n| n.kind == kind) {
            let Scope::Stage(i) = n.scope else { continue };
            let stage = s.stages.get(i).map_or("?", |(n, _)| n.as_str());
            let _ = writeln!(
                o,
                "{metric}{{index=\"{i}\",stage=\"{}\",name=\"{}\"}} {}",
                esc(stage),
                esc(n.name),
                n.value
            );
        }
    }
    for (metric, kind, help) in [
        (
            EGRESS_EVENTS,
            Kind::Counter,
            "Events an egress discipline counts by name (packets sent or dropped \
             per queue...), summed over workers.",
        ),
        (
            EGRESS_LEVEL,
            Kind::Gauge,
            "Levels an egress discipline reports by name, summed over workers.",
        ),
    ] {
        family(&mut o, metric, type_name(kind), help);
        for n in s.named.iter().filter(|n| n.kind == kind) {
            let Scope::Egress(i) = n.scope else { continue };
            let port = s.ports.get(i).map_or(0, |p| p.id);
            let _ = writeln!(o, "{metric}{{port=\"{port}\",name=\"{}\"}} {}", esc(n.name), n.value);
        }
    }
    slow_path(&mut o, s.slow_path.as_ref());
    o
}

/// The slow path's families (declared, without samples, when there is none).
fn slow_path(o: &mut String, sp: Option<&runtime::slowpath::SlowPathSnapshot>) {
    family(o, "router_slow_path_packets_total", "counter", "Packets on the slow path by outcome.");
    if let Some(sp) = sp {
        for (outcome, v) in [
            ("received", sp.received),
            ("forwarded", sp.forwarded),
            ("delivered", sp.consumed),
            ("dropped", sp.dropped),
        ] {
            let _ = writeln!(o, "router_slow_path_packets_total{{outcome=\"{outcome}\"}} {v}");
        }
    }
    let m = "router_slow_path_latency_seconds";
    family(o, m, "gauge", "Slow-path latency from punt to verdict (wall clock), by statistic.");
    if let Some(sp) = sp {
        for (stat, ns) in
            [("mean", sp.latency_mean_ns), ("p99", sp.latency_p99_ns), ("max", sp.latency_max_ns)]
        {
            let _ = writeln!(o, "{m}{{stat=\"{stat}\"}} {}", ns as f64 / 1e9);
        }
    }
    let m = "router_slow_path_stage_drops_total";
    family(o, m, "counter", "Packets dropped by each slow-path stage, by reason.");
    for (i, (n, c)) in sp.map_or(&[][..], |sp| &sp.stages).iter().enumerate() {
        for (r, v) in c.drops.nonzero() {
            let (n, r) = (esc(n), esc(&r.to_string()));
            let _ = writeln!(o, "{m}{{index=\"{i}\",stage=\"{n}\",reason=\"{r}\"}} {v}");
        }
    }
    for (m, kind, help) in [
        ("router_slow_path_stage_events_total", Kind::Counter, "Events a slow-path stage counts."),
        ("router_slow_path_stage_level", Kind::Gauge, "Levels a slow-path stage reports."),
    ] {
        family(o, m, type_name(kind), help);
        let Some(sp) = sp else { continue };
        for v in sp.named.iter().filter(|v| v.kind == kind) {
            let Scope::Stage(i) = v.scope else { continue };
            let stage = esc(sp.stages.get(i).map_or("?", |(n, _)| n.as_str()));
            let name = esc(v.name);
            let _ =
                writeln!(o, "{m}{{index=\"{i}\",stage=\"{stage}\",name=\"{name}\"}} {}", v.value);
        }
    }
}

fn respond(plane: &Plane, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let mk = |code: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = code;
        r.headers_mut()
            .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
        r
    };
    match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/metrics") => {
            let (_, generation) = plane.config();
            mk(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                render(&plane.snapshot(), generation),
            )
        }
        (&hyper::Method::GET, _) => {
            mk(StatusCode::NOT_FOUND, "text/plain", "only /metrics here\n".into())
        }
        _ => mk(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n".into()),
    }
}

/// Who may read `/metrics`: anyone (the listener's TLS may still ask for a
/// client certificate), or only callers with a read or admin credential.
#[derive(Debug, Clone)]
pub(crate) struct MetricsAccess {
    pub(crate) auth: crate::auth::Auth,
    pub(crate) require: bool,
}

fn unauthorized() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(
        b"a read or admin credential is needed (Authorization: Bearer <token>, or a client \
          certificate listed in control.clients)\n",
    )));
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut()
        .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
    r
}

/// Serves `/metrics` on `listener` until `stop` turns true (plaintext,
/// unauthenticated, default connection limits).
pub async fn serve(listener: TcpListener, plane: Arc<Plane>, stop: watch::Receiver<bool>) {
    let d = crate::ControlConfig::default();
    let limits = crate::net::Limits {
        max_connections: d.max_connections,
        handshake_timeout: std::time::Duration::from_millis(d.handshake_timeout_ms),
        idle_timeout: std::time::Duration::from_millis(d.idle_timeout_ms),
    };
    let rx = crate::net::spawn_accept(listener, None, limits, "metrics_listen");
    let access = MetricsAccess { auth: crate::auth::Auth::disabled(), require: false };
    serve_conns(rx, plane, access, limits.idle_timeout, stop).await;
}

/// Serves `/metrics` on the connections of `rx` until `stop` turns true;
/// each connection lives at most `lifetime` (a client that stops reading
/// cannot hold its place).
pub(crate) async fn serve_conns(
    mut rx: tokio::sync::mpsc::Receiver<crate::net::Conn>,
    plane: Arc<Plane>,
    access: MetricsAccess,
    lifetime: std::time::Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let conn = tokio::select! {
            c = rx.recv() => match c {
                Some(c) => c,
                None => return,
            },
            _ = stop.changed() => return,
        };
        let plane = plane.clone();
        let access = access.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let peer = conn.peer().clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let _busy = peer.activity.begin();
                let header = req.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes());
                let allowed = !access.require
                    || access.auth.authenticate(header, peer.subject.as_deref(), peer.addr).is_ok();
                let r = if allowed { respond(&plane, &req) } else { unauthorized() };
                async move { Ok::<_, Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(conn), svc);
            tokio::pin!(conn);
            let deadline = tokio::time::sleep(lifetime);
            tokio::pin!(deadline);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = &mut deadline => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = &mut deadline => {}
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_and_escapes_labels() {
        let mut s = runtime::Snapshot { bursts: 7, ..Default::default() };
        s.stages.push(("we\"ird".into(), pipeline::StageCounters::default()));
        s.stages[0].1.packets = 3;
        s.stages[0].1.drops.add(pipeline::DropReason::BadMac, 2);
        s.ports.push(runtime::stats::PortSnapshot { id: 1, counters: Default::default() });
        s.ports[0].counters.tx = 9;
        let t = render(&s, 4);
        assert!(t.contains("router_bursts_total 7\n"));
        assert!(t.contains("router_config_generation 4\n"));
        assert!(t.contains("router_port_tx_packets_total{port=\"1\"} 9\n"));
        assert!(t.contains("router_stage_packets_total{index=\"0\",stage=\"we\\\"ird\"} 3\n"));
        assert!(t.contains(&format!("reason=\"{}\"}} 2\n", pipeline::DropReason::BadMac)));
        assert!(t.contains("# TYPE router_port_queued_packets gauge\n"));
        // Families without samples are still declared.
        assert!(t.contains("# TYPE router_stage_level gauge\n"), "{t}");
        assert!(t.contains("# TYPE router_egress_events_total counter\n"), "{t}");
    }

    #[test]
    fn named_counters_and_levels_go_to_their_typed_families() {
        use runtime::stats::Named;
        let mut s = runtime::Snapshot::default();
        s.stages.push(("flowpolice".into(), pipeline::StageCounters::default()));
        s.ports.push(runtime::stats::PortSnapshot { id: 3, counters: Default::default() });
        let named = |scope, name, kind, value| Named { scope, name, kind, value };
        s.named = vec![
            named(Scope::Stage(0), "requests", Kind::Counter, 5),
            named(Scope::Stage(0), "table_entries", Kind::Gauge, 2),
            named(Scope::Egress(0), "queue_g_sent", Kind::Counter, 7),
            named(Scope::Egress(0), "backlog", Kind::Gauge, 1),
        ];
        let t = render(&s, 0);
        for line in [
            "# TYPE router_stage_events_total counter",
            "router_stage_events_total{index=\"0\",stage=\"flowpolice\",name=\"requests\"} 5",
            "# TYPE router_stage_level gauge",
            "router_stage_level{index=\"0\",stage=\"flowpolice\",name=\"table_entries\"} 2",
            "# TYPE router_egress_events_total counter",
            "router_egress_events_total{port=\"3\",name=\"queue_g_sent\"} 7",
            "# TYPE router_egress_level gauge",
            "router_egress_level{port=\"3\",name=\"backlog\"} 1",
        ] {
            assert!(t.lines().any(|l| l == line), "missing `{line}` in\n{t}");
        }
        assert!(!t.contains("untyped"), "{t}");
        // Each family is declared once, with HELP before TYPE.
        let types: Vec<&str> = t.lines().filter(|l| l.starts_with("# TYPE ")).collect();
        let helps = t.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(types.len(), helps);
        let mut names: Vec<&str> = types.iter().map(|l| l.split(' ').nth(2).unwrap()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), types.len(), "{t}");
        for n in names.iter().filter(|n| n.ends_with("_total")) {
            assert!(t.contains(&format!("# TYPE {n} counter\n")), "{n} is not a counter");
        }
    }
}
