//! The Prometheus text endpoint: `GET /metrics` over plain HTTP/1.1.

use std::convert::Infallible;
use std::fmt::Write;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::plane::Plane;

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
    if !s.groups.is_empty() {
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
    }
    let stages = s.named.iter().filter(|n| matches!(n.scope, runtime::stats::Scope::Stage(_)));
    if stages.clone().next().is_some() {
        family(
            &mut o,
            "router_stage_counter",
            "untyped",
            "A stage's own counters (per traffic class, table entries...).",
        );
        for n in stages {
            let runtime::stats::Scope::Stage(i) = n.scope else { continue };
            let stage = s.stages.get(i).map_or("?", |(n, _)| n.as_str());
            let _ = writeln!(
                o,
                "router_stage_counter{{index=\"{i}\",stage=\"{}\",name=\"{}\"}} {}",
                esc(stage),
                esc(n.name),
                n.value
            );
        }
    }
    let egress = s.named.iter().filter(|n| matches!(n.scope, runtime::stats::Scope::Egress(_)));
    if egress.clone().next().is_some() {
        family(
            &mut o,
            "router_egress_counter",
            "untyped",
            "An egress discipline's own counters (per queue).",
        );
        for n in egress {
            let runtime::stats::Scope::Egress(i) = n.scope else { continue };
            let port = s.ports.get(i).map_or(0, |p| p.id);
            let _ = writeln!(
                o,
                "router_egress_counter{{port=\"{port}\",name=\"{}\"}} {}",
                esc(n.name),
                n.value
            );
        }
    }
    o
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

/// Serves `/metrics` on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, plane: Arc<Plane>, mut stop: watch::Receiver<bool>) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.changed() => return,
        };
        let Ok((stream, _)) = conn else { continue };
        let plane = plane.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let r = respond(&plane, &req);
                async move { Ok::<_, Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => conn.as_mut().graceful_shutdown(),
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
    }
}
