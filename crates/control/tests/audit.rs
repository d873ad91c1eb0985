//! The audit log: one JSON line per mutating call, applied, failed or
//! refused, with who, what, the outcome and the generation, and no secret.

mod common;

use control::pb;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_and_refusal_is_audited_without_secrets() {
    let env = common::start(common::scratch("audit"), |_| {});
    let admin = common::client(&env, Some(common::ADMIN)).await;
    let read = common::client(&env, Some(common::READ)).await;
    let none = common::client(&env, None).await;
    let wrong = common::client(&env, Some("wrong-token-0123456789abcdef")).await;

    // Reads are not audited.
    common::generation(&admin).await;
    common::generation(&read).await;
    // 1: applied; 2: failed (invalid value); 3: refused (read-only);
    // 4: refused (no token); 5: refused (wrong token); 6: applied, unchanged.
    common::set_capacity(&admin, 100).await.unwrap();
    let e = admin
        .router()
        .set_stage_params(pb::SetStageParamsRequest {
            index: 0,
            params_toml: "port = \"secret-value-0123\"".into(),
            slow_path: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(common::set_capacity(&read, 50).await.unwrap_err().code(), Code::PermissionDenied);
    assert_eq!(common::set_capacity(&none, 50).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(common::set_capacity(&wrong, 50).await.unwrap_err().code(), Code::Unauthenticated);
    common::set_capacity(&admin, 100).await.unwrap();

    let lines = common::audit_lines(&env);
    let results: Vec<&str> = lines.iter().map(|l| l["result"].as_str().unwrap()).collect();
    assert_eq!(
        results,
        ["OK", "INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED", "UNAUTHENTICATED", "OK"],
        "{lines:#?}"
    );
    let egress = "ddos.control.v1.RouterControl/SetEgressParams";
    let stage = "ddos.control.v1.RouterControl/SetStageParams";
    let rpcs: Vec<&str> = lines.iter().map(|l| l["rpc"].as_str().unwrap()).collect();
    assert_eq!(rpcs, [egress, stage, egress, egress, egress, egress]);
    let callers: Vec<&str> = lines.iter().map(|l| l["caller"].as_str().unwrap()).collect();
    assert_eq!(
        callers,
        ["admin-token", "admin-token", "read-token", "none", "none", "admin-token"]
    );
    assert_eq!(lines[0]["role"], "admin");
    assert_eq!(lines[2]["role"], "read");
    assert!(lines[3]["role"].is_null());
    for l in &lines {
        let peer = l["peer"].as_str().unwrap();
        assert!(peer.starts_with("127.0.0.1:"), "{l}");
        assert!(l["time"].as_str().unwrap().ends_with('Z'), "{l}");
    }
    // What each applied or failed change acted on.
    assert_eq!(lines[0]["target"], "port 1 egress keys capacity");
    assert_eq!(lines[0]["generation"], 1);
    assert!(lines[1]["target"].as_str().unwrap().starts_with("pipeline[0]"), "{}", lines[1]);
    assert_eq!(lines[1]["generation"], 1);
    assert!(lines[5]["target"].as_str().unwrap().contains("unchanged"), "{}", lines[5]);
    assert_eq!(lines[5]["generation"], 1);
    // Refusals did not read the request.
    assert!(lines[2]["target"].is_null());

    // No token, and no value from a request, is in the file.
    let text = std::fs::read_to_string(env.dir.join("audit.jsonl")).unwrap();
    for secret in [common::ADMIN, common::READ, "wrong-token-0123456789abcdef", "secret-value-0123"]
    {
        assert!(!text.contains(secret), "`{secret}` in the audit log:\n{text}");
    }
}
