//! Roles: the read-only token reads and cannot change anything; the admin
//! token changes; token files are re-read when they change; `/metrics`
//! with `metrics_auth` asks for either.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use control::access::Access;
use control::pb;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_token_reads_and_cannot_change() {
    let env = common::start(common::scratch("roles"), |_| {});
    let read = common::client(&env, Some(common::READ)).await;
    let admin = common::client(&env, Some(common::ADMIN)).await;

    // Reads work with either token.
    let status = read.router().get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(status.generation, 0);
    read.router().get_counters(pb::GetCountersRequest {}).await.unwrap();
    let before = status.ports.iter().find(|p| p.id == 1).unwrap().egress_params_toml.clone();

    // A change with the read token: PERMISSION_DENIED, nothing changed.
    for _ in 0..3 {
        let e = common::set_capacity(&read, 64).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("SetEgressParams") && e.message().contains("admin"), "{e:?}");
    }
    let e = read
        .router()
        .set_stage_params(pb::SetStageParamsRequest {
            index: 0,
            params_toml: "port = 0".into(),
            slow_path: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let after = read.router().get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(after.generation, 0);
    assert_eq!(after.ports.iter().find(|p| p.id == 1).unwrap().egress_params_toml, before);

    // The admin token changes it.
    let r = common::set_capacity(&admin, 64).await.unwrap();
    assert_eq!(r.generation, 1);

    // No token, or a wrong one: UNAUTHENTICATED, for reads and changes.
    let none = common::client(&env, None).await;
    let wrong = common::client(&env, Some("wrong-token-0123456789abcdef")).await;
    for c in [&none, &wrong] {
        let e = c.router().get_status(pb::GetStatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        let e = common::set_capacity(c, 32).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
    }
    assert_eq!(common::generation(&admin).await, 1);

    // One table says what each method needs.
    let methods = &env.server.as_ref().unwrap().methods;
    let need = |m: &str| {
        methods.iter().find(|(p, _)| p == &format!("/ddos.control.v1.RouterControl/{m}")).unwrap().1
    };
    assert_eq!(need("GetStatus"), Access::Read);
    assert_eq!(need("GetCounters"), Access::Read);
    assert_eq!(need("SetStageParams"), Access::Mutate);
    assert_eq!(need("SetEgressParams"), Access::Mutate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_files_are_reloaded_without_a_restart() {
    let env = common::start(common::scratch("reload"), |_| {});
    let old = common::client(&env, Some(common::READ)).await;
    assert_eq!(common::generation(&old).await, 0);
    // Rotate the read token: written aside, then renamed over (what
    // secret managers do).
    let new_token = "rotated-read-token-0123456789abcdef";
    let tmp = env.dir.join("read.token.new");
    std::fs::write(&tmp, format!("{new_token}\n")).unwrap();
    std::fs::rename(&tmp, env.dir.join("read.token")).unwrap();
    tokio::time::sleep(control::auth::RELOAD_CHECK + Duration::from_millis(100)).await;
    let e = old.router().get_status(pb::GetStatusRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let new = common::client(&env, Some(new_token)).await;
    assert_eq!(common::generation(&new).await, 0);
    assert_eq!(common::set_capacity(&new, 64).await.unwrap_err().code(), Code::PermissionDenied);
    // The admin token still works.
    let admin = common::client(&env, Some(common::ADMIN)).await;
    assert_eq!(common::set_capacity(&admin, 64).await.unwrap().generation, 1);
}

fn get_metrics(addr: std::net::SocketAddr, token: Option<&str>) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_ask_for_a_credential() {
    let env = common::start(common::scratch("metrics-auth"), |c| {
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        c.metrics_auth = true;
    });
    let m = env.server.as_ref().unwrap().metrics_addr.unwrap();
    let out = tokio::task::spawn_blocking(move || {
        [
            get_metrics(m, None),
            get_metrics(m, Some("wrong-token-0123456789abcdef")),
            get_metrics(m, Some(common::READ)),
            get_metrics(m, Some(common::ADMIN)),
        ]
    })
    .await
    .unwrap();
    assert!(out[0].starts_with("HTTP/1.1 401"), "{}", out[0]);
    assert!(out[1].starts_with("HTTP/1.1 401"), "{}", out[1]);
    assert!(out[2].starts_with("HTTP/1.1 200") && out[2].contains("router_bursts_total"));
    assert!(out[3].starts_with("HTTP/1.1 200"));
}
