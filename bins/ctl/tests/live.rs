//! End to end: a router on the synthetic backend (wall-clock pacing), the
//! control server in-process, and changes made through the `ctl` binary and
//! the client library.

mod common;

use std::time::Duration;

use adapters::pb;
use adapters::ProtocolClients;
use common::{config, counters, counters_over, ctl, ctl_with_token, forwarding, scratch_dir};
use common::{start_in, status, total_drops, wall_clock, zlane_classify, Env};
use control::client::Client;
use tonic::Code;

/// 128-byte frames: 1024 bit each.
const FRAME_BITS: u64 = 1024;

/// 20 000 packets/s into port 0, forwarded to port 1 whose Z-Lane egress
/// runs at 5.12 Mbit/s; no other stage.
fn router_config() -> runtime::RouterConfig {
    let router = wall_clock(
        r#"traffic = [{ name = "load", port = 0, rate_pps = 20000, flows = 8, template = "ipv4-udp" }]"#,
        1,
        r#"egress = { kind = "zlane", capacity_bps = 5120000, queue_packets = [64, 64, 64, 64, 256] }"#,
    );
    let text = format!(
        r#"
        [router]
        name = "ctl-test"
        {router}
        [[pipeline]]
        kind = "port-forward"
        port = 1
        "#
    );
    config("ctl-test", &text)
}

fn start() -> Env {
    start_in(scratch_dir("live"), router_config(), |c| {
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
}

/// Transmitted packets per second on port 1 over `window`.
async fn tx_rate(c: &Client, window: Duration) -> f64 {
    let tx = |c: pb::Counters| c.ports.iter().find(|p| p.id == 1).map_or(0, |p| p.tx);
    let (a, b, dt) = counters_over(c, window).await;
    (tx(b) - tx(a)) as f64 / dt
}

/// A `SetRate` request: `rate` for `who`.
fn set_rate(who: pb::origin::Who, rate: pb::set_rate_request::Rate) -> pb::SetRateRequest {
    pb::SetRateRequest { origin: Some(pb::Origin { who: Some(who) }), rate: Some(rate) }
}

/// `e` is INVALID_ARGUMENT with a message that starts with `prefix`.
fn invalid(e: &tonic::Status, prefix: &str) {
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().starts_with(prefix), "{}", e.message());
}

fn metrics_text(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reconfiguration_auth_validation_and_flood() {
    let env = start();
    let c = env.client().await;

    // 1. The Z-Lane egress runs at 5.12 Mbit/s = 5000 frames/s; doubling its
    //    capacity through `ctl` doubles what leaves port 1.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = tx_rate(&c, Duration::from_millis(1500)).await;
    let expect = 5_120_000.0 / FRAME_BITS as f64;
    assert!((before - expect).abs() < expect * 0.25, "before: {before} pps, expected ~{expect}");
    let (ok, out, err) = ctl(
        &env,
        &[
            "--json",
            "zlane",
            "set-bounds",
            "1",
            "--r",
            "0.5",
            "--n",
            "0.1",
            "--g",
            "0.2",
            "--a",
            "0.15",
            "--u",
            "0.05",
            "--capacity-bps",
            "10240000",
        ],
    );
    assert!(ok, "ctl failed: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workers"], 1);
    assert_eq!(v["generation"], 1);
    let (ok, out, _) = ctl(&env, &["zlane", "bounds", "1"]);
    assert!(ok);
    assert!(out.contains("capacity 10240000 bit/s"), "{out}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = tx_rate(&c, Duration::from_millis(1500)).await;
    eprintln!("port 1: {before:.0} pps at 5.12 Mbit/s, {after:.0} pps at 10.24 Mbit/s");
    assert!(
        (after - 2.0 * expect).abs() < expect * 0.5,
        "after: {after} pps, expected ~{}",
        2.0 * expect
    );

    // 2. Bad requests: INVALID_ARGUMENT with a precise message, nothing applied.
    let bad = c
        .zlane()
        .set_bounds(pb::SetBoundsRequest {
            port: 1,
            bounds: Some(pb::Bounds { r: 0.5, n: 0.5, g: 0.2, a: 0.15, u: 0.05, capacity_bps: 0 }),
        })
        .await
        .unwrap_err();
    invalid(&bad, "bounds: ");
    let bad = c
        .zlane()
        .set_rate(set_rate(
            pb::origin::Who::Ia("1-ff00:0:1:0".into()),
            pb::set_rate_request::Rate::Bps(1_000_000),
        ))
        .await
        .unwrap_err();
    invalid(&bad, "origin.ia: ");
    let bad = c
        .router()
        .set_stage_params(pb::SetStageParamsRequest {
            index: 0,
            params_toml: "port = 7".into(),
            slow_path: false,
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message().contains("pipeline[0]") && bad.message().contains("port 7"),
        "{}",
        bad.message()
    );
    let bad = c
        .router()
        .set_egress_params(pb::SetEgressParamsRequest {
            port: 1,
            params_toml: "capacity_bpz = 1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("capacity_bpz"), "{}", bad.message());
    let (ok, _, err) = ctl(
        &env,
        &[
            "sibra",
            "admit-steady",
            "--src-ia",
            "1-ff00:0:110",
            "--suffix",
            "1",
            "--bw-class",
            "99",
            "--ingress",
            "1",
            "--egress",
            "2",
            "--expiry-tick",
            "1",
        ],
    );
    assert!(!ok && err.contains("InvalidArgument") && err.contains("bw_class"), "{err}");
    // Valid input for a protocol whose stage is absent: FAILED_PRECONDITION.
    let e = c
        .zlane()
        .set_rate(set_rate(pb::origin::Who::Isd(2), pb::set_rate_request::Rate::PercentOfG(10.0)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(e.message(), "stage `zlane-classify` not in this pipeline");
    let st = status(&c).await;
    assert_eq!(st.generation, 1, "rejected requests must not change anything");

    // 3. Unauthenticated and wrongly authenticated calls are refused.
    for token in [None, Some("wrong-token-0123456789abcdef")] {
        let u = Client::connect(&env.addr, token).await.unwrap();
        let e = u.router().get_counters(pb::GetCountersRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        let e =
            u.zlane().set_bounds(pb::SetBoundsRequest { port: 1, bounds: None }).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
    }
    let (ok, _, err) = ctl_with_token(&env.addr, None, &["counters"]);
    assert!(!ok && err.contains("Unauthenticated"), "{err}");

    // Health stays open to unauthenticated probes (load balancers, systemd).
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", env.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut h = tonic_health::pb::health_client::HealthClient::new(ch);
    let r = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: "ddos.control.v1.RouterControl".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        r.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    // 4. A bounded flood of reads does not disturb forwarding: with capacity
    //    well above the offered load nothing is dropped and packets keep flowing.
    c.zlane()
        .set_bounds(pb::SetBoundsRequest {
            port: 1,
            bounds: Some(pb::Bounds {
                r: 0.5,
                n: 0.1,
                g: 0.2,
                a: 0.15,
                u: 0.05,
                capacity_bps: 200_000_000,
            }),
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c0 = counters(&c).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..150 {
                if i % 2 == 0 {
                    c.router().get_counters(pb::GetCountersRequest {}).await.unwrap();
                } else {
                    c.router().get_status(pb::GetStatusRequest {}).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for _ in 0..50 {
        assert!(
            metrics_text(env.metrics.unwrap()).contains("router_port_tx_packets_total{port=\"1\"}")
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c1 = counters(&c).await;
    assert!(c1.tx > c0.tx && c1.rx > c0.rx, "forwarding stalled during the flood");
    assert_eq!(total_drops(&c1), total_drops(&c0), "drops during the flood: {c1:?}");
    let g0 = &c0.groups[0];
    let g1 = &c1.groups[0];
    let offered = g1.offered - g0.offered;
    let delivered = g1.delivered - g0.delivered;
    assert!(delivered + 256 >= offered, "offered {offered}, delivered {delivered}");

    // 5. The metrics endpoint serves the same counters.
    let m = metrics_text(env.metrics.unwrap());
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(m.contains("# TYPE router_port_tx_packets_total counter"));
    assert!(m.contains("router_config_generation 2"));
    // The Z-Lane scheduler's per-queue counters.
    assert!(m.contains("router_egress_events_total{port=\"1\",name=\"queue_"), "{m}");

    env.plane.stop();
}

/// A Z-Lane border-router pipeline: per-AS rates changed through `ctl`,
/// validated by the stage's own configuration checks, applied in place
/// between bursts while the stage keeps processing (its counters carry on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zlane_as_rates_are_changed_live() {
    let classify = zlane_classify(
        "000102030405060708090a0b0c0d0e0f",
        r#"capacity_bps = 100000000
        rates = [{ as = "1-ff00:0:111", bps = 1000000 }]"#,
    );
    let env = common::start(
        "zlane-live",
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 5000, template = "ipv4-udp" }]"#,
            2,
            r#"egress = { kind = "zlane", capacity_bps = 100000000 }"#,
            &classify,
        ),
    );
    let c = env.client().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stage_packets = |c: &pb::Counters| c.stages[1].packets;
    let c0 = counters(&c).await;

    let (ok, out, err) =
        ctl(&env, &["zlane", "set-rate", "--ia", "1-ff00:0:111", "--bps", "5000000"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("applied on 2 workers (generation 1)"), "{out}");
    let (ok, out, err) = ctl(&env, &["zlane", "set-rate", "--isd", "2", "--percent-of-g", "10"]);
    assert!(ok, "{err}");
    assert!(out.contains("generation 2"), "{out}");
    let (ok, out, _) = ctl(&env, &["--json", "zlane", "rates"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rates = v["rates"].as_array().unwrap();
    assert_eq!(rates.len(), 2, "{out}");
    assert_eq!(rates[0]["origin"]["who"]["Ia"], "1-ff00:0:111");
    assert_eq!(rates[0]["bps"], 5_000_000);
    assert_eq!(rates[1]["origin"]["who"]["Isd"], 2);
    assert_eq!(rates[1]["percent_of_g"], 10.0);

    // More than μ_G × capacity (20 Mbit/s here): the stage's own validation
    // answers, nothing is applied.
    let e = c
        .zlane()
        .set_rate(set_rate(
            pb::origin::Who::Ia("1-ff00:0:112".into()),
            pb::set_rate_request::Rate::Bps(50_000_000),
        ))
        .await
        .unwrap_err();
    invalid(&e, "key `pipeline[1].rates`");
    let (ok, _, err) = ctl(&env, &["zlane", "remove-rate", "--isd", "3"]);
    assert!(!ok && err.contains("NotFound") && err.contains("ISD 3"), "{err}");
    let (ok, out, _) = ctl(&env, &["zlane", "remove-rate", "--isd", "2"]);
    assert!(ok && out.contains("generation 3"), "{out}");

    // The stage kept processing through the changes; its counters carried on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c1 = counters(&c).await;
    assert!(stage_packets(&c1) > stage_packets(&c0), "{c0:?} -> {c1:?}");
    assert_eq!(c1.stages[1].name, "zlane-classify");
    // No runtime (egress) drops; what the classifier itself drops is its business.
    assert!(c1.ports.iter().all(|p| p.drops.is_empty()), "{c1:?}");
    let st = status(&c).await;
    assert_eq!(st.generation, 3);
    assert!(st.stages[1].params_toml.contains("bps = 5000000"), "{}", st.stages[1].params_toml);
    env.plane.stop();
}
