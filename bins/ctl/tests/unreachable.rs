//! `ctl` against an address where no router listens says so, with the
//! address, the cause and what to check, and exits with status 1.

mod common;

#[test]
fn a_stopped_router_is_reported_with_what_to_check() {
    // A port that was just free: nothing listens on it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let addr = addr.to_string();
    let (code, _, err) = common::ctl_raw(&["--addr", &addr, "status"], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot reach") && err.contains(&addr), "{err}");
    assert!(err.to_lowercase().contains("refused"), "the cause is named: {err}");
    assert!(err.contains("check:"), "what to check is said: {err}");
    let (code, _, err) = common::ctl_raw(&["--json", "--addr", &addr, "status"], &[]);
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(err.trim()).expect("one JSON object");
    assert_eq!(v["error"]["code"], "Unreachable", "{v}");
}
