//! The `ctl` binary against a secured router: TLS with the router verified,
//! mutual TLS with client certificates (missing, foreign, expired ones
//! refused), a read-only token that reads and cannot change, audit lines
//! without key material, and a deadline on every call.

mod common;
#[path = "../../../crates/control/tests/common/pki.rs"]
mod pki;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{ctl_raw, forwarding, scratch_dir, start_in, zlane_classify, Env};
use control::config::{ClientRule, Role, TlsConfig};
use pki::Ca;

/// The read-only token of these tests.
const READ: &str = "ctl-read-token-0123456789abcdef";

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A router forwarding plain UDP through a `zlane-classify` stage, with TLS
/// (client certificates from `client_ca`, if given), the admin token, a read
/// token and an audit log in its scratch directory. Returns the router and
/// the CA file to verify it with.
fn start_tls(name: &str, client_ca: Option<&Ca>, clients: Vec<ClientRule>) -> (Env, PathBuf) {
    let dir = scratch_dir(name);
    std::fs::write(dir.join("read.token"), format!("{READ}\n")).unwrap();
    let ca = Ca::new("router CA");
    let (cert_chain, key) = ca.server().write(&dir, "server");
    let ca_file = ca.write(&dir, "ca");
    let tls = TlsConfig { cert_chain, key, client_ca: client_ca.map(|c| c.write(&dir, "clients")) };
    let cfg = common::config(
        name,
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 2000, template = "ipv4-udp" }]"#,
            1,
            "",
            &zlane_classify("000102030405060708090a0b0c0d0e0f", ""),
        ),
    );
    let audit = dir.join("audit.jsonl");
    let read = dir.join("read.token");
    let env = start_in(dir, cfg, move |c| {
        c.tls = Some(tls);
        c.clients = clients;
        c.read_token_file = Some(read);
        c.audit_log = Some(audit);
    });
    (env, ca_file)
}

#[test]
fn ctl_speaks_tls_and_verifies_the_router() {
    let (env, ca) = start_tls("tls", None, vec![]);
    let token = path(&env.token_file).to_string();
    let args = |extra: &[&str]| {
        let mut v = vec!["--addr", &env.addr, "--token-file", &token];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>, envs: &[(&str, &str)]| {
        ctl_raw(&a.iter().map(String::as_str).collect::<Vec<_>>(), envs)
    };

    // --ca: https, the router verified.
    let (code, out, err) = run(args(&["--ca", path(&ca), "status"]), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("router"), "{out}");
    // The same from the environment alone.
    let (code, out, err) = ctl_raw(
        &["status"],
        &[("CTL_ADDR", &env.addr), ("CTL_CA", path(&ca)), ("CTL_TOKEN_FILE", &token)],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("router"), "{out}");

    // Plaintext to the TLS port: a clean failure that says to pass --ca.
    let (code, _, err) = run(args(&["status"]), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot reach") && err.contains("--ca"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A CA that did not sign the router's certificate: not trusted.
    let other = Ca::new("other CA").write(&env.dir, "other");
    let (code, _, err) = run(args(&["--ca", path(&other), "status"]), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("TLS failed") && err.contains("--ca"), "{err}");

    // A name the certificate does not carry.
    let (code, _, err) =
        run(args(&["--ca", path(&ca), "--server-name", "elsewhere.example", "status"]), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("TLS failed"), "{err}");

    // Files that are not what the option needs are named.
    let (code, _, err) = run(args(&["--ca", &token, "status"]), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--ca") && err.contains(&token), "{err}");
    let (code, _, err) = run(args(&["--ca", "/nonexistent/ca.pem", "status"]), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
}

#[test]
fn mutual_tls_with_ctl() {
    let client_ca = Ca::new("client CA");
    let (env, ca) = start_tls(
        "mtls",
        Some(&client_ca),
        vec![
            ClientRule { subject: "CN=ops".into(), role: Role::Admin },
            ClientRule { subject: "CN=viewer".into(), role: Role::Read },
        ],
    );
    let ops = client_ca.client("ops", false).write(&env.dir, "ops");
    let viewer = client_ca.client("viewer", false).write(&env.dir, "viewer");
    let expired = client_ca.client("ops", true).write(&env.dir, "expired");
    let foreign = Ca::new("foreign CA").client("ops", false).write(&env.dir, "foreign");
    let run = |cert: Option<&(PathBuf, PathBuf)>, cmd: &[&str]| {
        let mut a = vec!["--addr", &env.addr, "--ca", path(&ca)];
        if let Some((c, k)) = cert {
            a.extend(["--cert", path(c), "--key", path(k)]);
        }
        a.extend_from_slice(cmd);
        ctl_raw(&a, &[])
    };
    let change = ["egress-params", "1", "rate_pps = 900000"];

    // The admin certificate alone (no token) changes things.
    let (code, out, err) = run(Some(&ops), &change);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("generation 1"), "{out}");
    // The read certificate reads, and may not change.
    let (code, out, err) = run(Some(&viewer), &["status"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("generation 1"), "{out}");
    let (code, _, err) = run(Some(&viewer), &["egress-params", "1", "rate_pps = 1000"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("PermissionDenied") && err.contains("read-only"), "{err}");
    // With CTL_CERT and CTL_KEY.
    let (code, _, err) = ctl_raw(
        &["status"],
        &[
            ("CTL_ADDR", &env.addr),
            ("CTL_CA", path(&ca)),
            ("CTL_CERT", path(&viewer.0)),
            ("CTL_KEY", path(&viewer.1)),
        ],
    );
    assert_eq!(code, Some(0), "{err}");

    // Without a certificate, with another CA's, with an expired one: refused.
    for (what, cert) in [("none", None), ("foreign", Some(&foreign)), ("expired", Some(&expired))] {
        let (code, _, err) = run(cert, &["status"]);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(err.contains("TLS") && err.contains("--cert"), "{what}: {err}");
    }
    let (code, out, _) = run(Some(&ops), &["status"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("generation 1"), "{out}");
}

/// The tokens' and keys' text never reaches the audit log.
fn assert_not_in(text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!text.contains(s), "`{s}` in the audit log:\n{text}");
    }
}

#[test]
fn read_only_token_through_ctl_and_an_audit_log_without_keys() {
    let (env, ca) = start_tls("roles", None, vec![]);
    let admin = path(&env.token_file).to_string();
    let read = path(&env.dir.join("read.token")).to_string();
    let run = |token: &str, cmd: &[&str]| {
        let mut a = vec!["--addr", &env.addr, "--ca", path(&ca), "--token-file", token];
        a.extend_from_slice(cmd);
        ctl_raw(&a, &[])
    };
    let rate = ["zlane", "set-rate", "--ia", "1-ff00:0:111", "--bps", "1000000"];
    let secret = "00112233445566778899aabbccddeeff";
    let (_, epochs, _) = run(&read, &["--json", "drkey", "epochs"]);
    let v: serde_json::Value = serde_json::from_str(&epochs).unwrap();
    let end = v["epochs"].as_array().unwrap()[0]["not_after_unix"].as_u64().unwrap();
    let (nb, na) = ((end + 7200).to_string(), (end + 10_800).to_string());
    let install = [
        "drkey",
        "install-secret",
        "--not-before",
        &nb,
        "--not-after",
        &na,
        "--secret-hex",
        secret,
    ];

    // The read token reads ...
    let (code, before, err) = run(&read, &["zlane", "rates"]);
    assert_eq!(code, Some(0), "{err}");
    // ... and every change it asks for is refused, changing nothing.
    for cmd in [&rate[..], &install[..]] {
        let (code, _, err) = run(&read, cmd);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("PermissionDenied") && err.contains("check: "), "{err}");
    }
    let (_, after, _) = run(&read, &["zlane", "rates"]);
    assert_eq!(before, after);
    let (_, status, _) = run(&read, &["status"]);
    assert!(status.contains("generation 0"), "{status}");

    // The admin token changes both.
    for cmd in [&rate[..], &install[..]] {
        let (code, _, err) = run(&admin, cmd);
        assert_eq!(code, Some(0), "{err}");
    }
    let (_, status, _) = run(&read, &["status"]);
    assert!(status.contains("generation 2"), "{status}");

    let text = std::fs::read_to_string(env.dir.join("audit.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or("").to_string();
            (s("rpc"), s("result"), s("caller"))
        })
        .collect();
    let rpc = |s: &str| s.to_string();
    assert_eq!(
        summary,
        [
            (
                rpc("ddos.control.v1.ZlaneControl/SetRate"),
                rpc("PERMISSION_DENIED"),
                rpc("read-token")
            ),
            (
                rpc("ddos.control.v1.DrkeyControl/InstallSecret"),
                rpc("PERMISSION_DENIED"),
                rpc("read-token")
            ),
            (rpc("ddos.control.v1.ZlaneControl/SetRate"), rpc("OK"), rpc("admin-token")),
            (rpc("ddos.control.v1.DrkeyControl/InstallSecret"), rpc("OK"), rpc("admin-token")),
        ],
        "{text}"
    );
    assert!(lines[2]["target"].as_str().unwrap().contains("1-ff00:0:111"), "{text}");
    assert!(lines[3]["target"].as_str().unwrap().contains("DRKey secret value"), "{text}");
    assert_eq!(lines[3]["generation"], 2);
    let token = std::fs::read_to_string(&env.token_file).unwrap();
    assert_not_in(
        &text,
        &[secret, "000102030405060708090a0b0c0d0e0f", token.trim(), READ, common::TOKEN],
    );
}

#[test]
fn ctl_gives_up_at_its_timeout() {
    // Accepts, then never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let holder = std::thread::spawn(move || {
        let c = silent.accept();
        std::thread::sleep(Duration::from_secs(4));
        drop(c);
    });
    let t = Instant::now();
    let (code, _, err) = ctl_raw(&["--addr", &addr, "--timeout", "700ms", "status"], &[]);
    let took = t.elapsed();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert!(took < Duration::from_secs(3), "ctl took {took:?}");
    holder.join().unwrap();
}
