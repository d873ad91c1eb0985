//! TLS on the control servers, with certificates made here: the server is
//! verified, `/metrics` speaks TLS too, and under mutual TLS only clients
//! with a valid certificate from the configured CA get in, with the role
//! `[[control.clients]]` gives their subject.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use common::pki::Ca;
use control::client::{Cause, ConnectError};
use control::config::{ClientRule, Role, TlsConfig};
use tonic::Code;

fn tls_config(dir: &std::path::Path, ca: &Ca, client_ca: Option<&Ca>) -> TlsConfig {
    let (cert_chain, key) = ca.server().write(dir, "server");
    TlsConfig { cert_chain, key, client_ca: client_ca.map(|c| c.write(dir, "client-ca")) }
}

/// `GET /metrics` over TLS (trusting `ca`, presenting `client` if any): the
/// response, or the TLS error.
fn metrics_over_tls(
    addr: std::net::SocketAddr,
    ca: &Ca,
    client: Option<&common::pki::Pem>,
) -> Result<String, String> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.cert.as_bytes()).unwrap()).unwrap();
    let b = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let cfg = match client {
        Some(p) => b
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(p.cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(p.key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = ClientConnection::new(Arc::new(cfg), name).unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut s = StreamOwned::new(conn, tcp);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_tls_is_verified_on_grpc_and_metrics() {
    let dir = common::scratch("tls-server");
    let ca = Ca::new("router test CA");
    let tls = tls_config(&dir, &ca, None);
    let env = common::start(dir.clone(), |c| {
        c.tls = Some(tls);
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    });
    assert!(env.server.as_ref().unwrap().tls);
    let ca_file = ca.write(&dir, "ca");

    // Verified against the CA: reads and changes work as in plaintext.
    let c = common::tls_client(&env, &ca_file, None, Some(common::ADMIN)).await.unwrap();
    assert_eq!(common::generation(&c).await, 0);
    common::set_capacity(&c, 128).await.unwrap();
    assert_eq!(common::generation(&c).await, 1);

    // Another CA's view of the server: not trusted.
    let stranger = Ca::new("stranger CA").write(&dir, "stranger");
    match common::tls_client(&env, &stranger, None, Some(common::ADMIN)).await {
        Err(ConnectError::Unreachable { cause: Cause::Tls(m), .. }) => {
            assert!(m.to_lowercase().contains("certificate"), "{m}")
        }
        other => panic!("an untrusted server was accepted: {other:?}"),
    }

    // Plaintext gRPC to the TLS port fails cleanly, and says what to try.
    match control::client::Client::connect(&env.addr, Some(common::ADMIN)).await {
        Err(e @ ConnectError::Unreachable { .. }) => {
            assert!(e.check().contains("--ca"), "{e}: {}", e.check())
        }
        other => panic!("plaintext reached a TLS server: {other:?}"),
    }

    // /metrics over TLS.
    let m = env.server.as_ref().unwrap().metrics_addr.unwrap();
    let out = tokio::task::spawn_blocking(move || metrics_over_tls(m, &ca, None)).await.unwrap();
    let out = out.unwrap();
    assert!(out.starts_with("HTTP/1.1 200") && out.contains("router_config_generation 1"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_valid_client_certificates_only() {
    let dir = common::scratch("tls-mutual");
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let tls = tls_config(&dir, &server_ca, Some(&client_ca));
    let env = common::start(dir.clone(), |c| {
        c.tls = Some(tls);
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        c.clients = vec![
            ClientRule { subject: "CN=ops".into(), role: Role::Admin },
            ClientRule { subject: "CN=prometheus, O=Router Test".into(), role: Role::Read },
        ];
    });
    let ca_file = server_ca.write(&dir, "ca");
    let ops = client_ca.client("ops", false).write(&dir, "ops");
    let prom_pem = client_ca.client("prometheus", false);
    let prom = prom_pem.write(&dir, "prom");
    let nobody = client_ca.client("nobody", false).write(&dir, "nobody");
    let expired = client_ca.client("ops", true).write(&dir, "expired");
    let foreign = Ca::new("other CA").client("ops", false).write(&dir, "foreign");

    // The admin certificate changes things without any token.
    let c = common::tls_client(&env, &ca_file, Some(ops), None).await.unwrap();
    common::set_capacity(&c, 100).await.unwrap();
    assert_eq!(common::generation(&c).await, 1);

    // The read certificate reads, and may not change.
    let r = common::tls_client(&env, &ca_file, Some(prom), None).await.unwrap();
    assert_eq!(common::generation(&r).await, 1);
    let e = common::set_capacity(&r, 50).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(common::generation(&r).await, 1);

    // A certificate of the CA that no rule lists has no role: a token is needed.
    let n = common::tls_client(&env, &ca_file, Some(nobody.clone()), None).await.unwrap();
    let e = n.router().get_status(control::pb::GetStatusRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let n = common::tls_client(&env, &ca_file, Some(nobody), Some(common::READ)).await.unwrap();
    assert_eq!(common::generation(&n).await, 1);

    // No certificate, one from another CA, an expired one: refused at the handshake.
    for (what, cert) in [("none", None), ("foreign", Some(foreign)), ("expired", Some(expired))] {
        match common::tls_client(&env, &ca_file, cert, Some(common::ADMIN)).await {
            Err(e @ ConnectError::Unreachable { cause: Cause::TlsRefused(_), .. }) => {
                assert!(e.check().contains("--cert"), "{what}: {e}: {}", e.check());
            }
            Ok(c) => {
                let r = c.router().get_status(control::pb::GetStatusRequest {}).await;
                panic!("client certificate `{what}` was accepted: {r:?}");
            }
            Err(e) => panic!("{what}: unexpected error {e}"),
        }
    }
    assert_eq!(common::generation(&c).await, 1);

    // /metrics asks for a client certificate too.
    let m = env.server.as_ref().unwrap().metrics_addr.unwrap();
    let out = tokio::task::spawn_blocking(move || {
        (metrics_over_tls(m, &server_ca, Some(&prom_pem)), metrics_over_tls(m, &server_ca, None))
    })
    .await
    .unwrap();
    assert!(out.0.as_ref().is_ok_and(|o| o.starts_with("HTTP/1.1 200")), "{:?}", out.0);
    assert!(out.1.is_err(), "metrics served without a client certificate: {:?}", out.1);

    // The audit line names the certificate's subject.
    let lines = common::audit_lines(&env);
    let denied = lines.iter().find(|l| l["result"] == "PERMISSION_DENIED").unwrap();
    assert_eq!(denied["caller"], "certificate");
    assert_eq!(denied["subject"], "CN=prometheus,O=Router Test");
    let ok = lines.iter().find(|l| l["result"] == "OK").unwrap();
    assert_eq!(ok["subject"], "CN=ops,O=Router Test");
    assert_eq!(ok["role"], "admin");
}

#[test]
fn bad_tls_files_are_named() {
    let dir = common::scratch("tls-files");
    let ca = Ca::new("CA");
    let other = Ca::new("other");
    let (cert_chain, _) = ca.server().write(&dir, "a");
    let (_, wrong_key) = other.server().write(&dir, "b");
    std::fs::write(dir.join("empty.pem"), "").unwrap();
    let check = |t: TlsConfig| {
        let c = control::ControlConfig {
            token_file: Some(dir.join("admin.token")),
            tls: Some(t),
            ..Default::default()
        };
        c.check_resources().unwrap_err()
    };
    let e = check(TlsConfig {
        cert_chain: cert_chain.clone(),
        key: wrong_key.clone(),
        client_ca: None,
    });
    assert_eq!(e.key, "tls.key", "{e}");
    let e = check(TlsConfig { cert_chain: dir.join("empty.pem"), key: wrong_key, client_ca: None });
    assert_eq!(e.key, "tls.cert_chain", "{e}");
    let e = check(TlsConfig {
        cert_chain,
        key: dir.join("missing.key"),
        client_ca: Some(dir.join("empty.pem")),
    });
    assert_eq!(e.key, "tls.key", "{e}");
}
