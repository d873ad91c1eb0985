//! What a misbehaving client cannot do: hold the router's exit, hold a
//! connection without speaking, take more than its share of connections,
//! or change things faster than its rate.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tonic::Code;

#[test]
fn a_stalled_client_does_not_delay_shutdown() {
    for tls in [false, true] {
        let dir = common::scratch(if tls { "stall-tls" } else { "stall" });
        let tls_cfg = tls.then(|| {
            let ca = common::pki::Ca::new("CA");
            let (cert_chain, key) = ca.server().write(&dir, "server");
            control::config::TlsConfig { cert_chain, key, client_ca: None }
        });
        let mut env = common::start(dir, |c| {
            c.tls = tls_cfg;
            c.shutdown_timeout_ms = 1000;
            // Longer than the test: only the shutdown deadline may end it.
            c.handshake_timeout_ms = 60_000;
        });
        // Connected, never a byte: no preface, no TLS hello.
        let stalled: Vec<TcpStream> =
            (0..3).map(|_| TcpStream::connect(&env.addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        env.server.take().unwrap().shutdown();
        let took = t.elapsed();
        eprintln!("tls {tls}: shutdown with stalled clients took {took:?}");
        assert!(took < Duration::from_millis(2000), "tls {tls}: shutdown took {took:?}");
        drop(stalled);
    }
}

#[test]
fn silent_connections_are_closed_and_connections_are_capped() {
    let env = common::start(common::scratch("silent"), |c| {
        c.handshake_timeout_ms = 300;
        c.max_connections = 2;
    });
    // Two silent connections take both places ...
    let mut a = TcpStream::connect(&env.addr).unwrap();
    let b = TcpStream::connect(&env.addr).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // ... and are closed after the handshake deadline (after the server's
    // HTTP/2 settings, nothing comes but the end).
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    let r = a.read_to_end(&mut got);
    assert!(
        r.is_ok() || r.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{r:?}"
    );
    assert!(got.len() < 100, "a silent connection got {} bytes", got.len());
    assert!(t.elapsed() < Duration::from_secs(3), "closed after {:?}", t.elapsed());
    drop(b);
    // A real client gets in afterwards.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = common::client(&env, Some(common::READ)).await;
        assert_eq!(common::generation(&c).await, 0);
    });
}

#[test]
fn connections_over_the_cap_wait() {
    let env = common::start(common::scratch("cap"), |c| {
        c.max_connections = 1;
    });
    let hog = TcpStream::connect(&env.addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = control::client::Options {
        token: Some(common::READ.into()),
        timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let r = rt.block_on(control::client::Client::connect_with(&env.addr, &opts));
    assert!(r.is_err(), "a connection over the cap was served");
    drop(hog);
    let opts = control::client::Options { timeout: Duration::from_secs(5), ..opts };
    let r = rt.block_on(control::client::Client::connect_with(&env.addr, &opts));
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_rate_limited_per_caller() {
    let env = common::start(common::scratch("rate"), |c| {
        c.mutations_per_second = 1;
        c.mutation_burst = 3;
    });
    let admin = common::client(&env, Some(common::ADMIN)).await;
    let mut codes = Vec::new();
    for cap in 0..5 {
        codes.push(common::set_capacity(&admin, 100 + cap).await.map_err(|e| e.code()).err());
    }
    assert_eq!(codes[..3], [None, None, None], "{codes:?}");
    assert_eq!(codes[3..], [Some(Code::ResourceExhausted), Some(Code::ResourceExhausted)]);
    // Reads are not limited.
    for _ in 0..20 {
        common::generation(&admin).await;
    }
    assert_eq!(common::generation(&admin).await, 3);
    let lines = common::audit_lines(&env);
    assert_eq!(lines.iter().filter(|l| l["result"] == "RESOURCE_EXHAUSTED").count(), 2);
    // The bucket refills.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    common::set_capacity(&admin, 200).await.unwrap();
}
