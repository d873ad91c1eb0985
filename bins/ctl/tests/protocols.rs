//! End to end, per protocol: a router on the synthetic backend with the
//! control server in-process; changes made through the `ctl` binary (or the
//! client library) reach the running stages in place and show up in the
//! next read RPC and in the counters.

mod common;

use std::time::Duration;

use adapters::pb;
use adapters::ProtocolClients;
use common::{counters, counters_over, ctl, epic_z_traffic, forwarding, named, start, status};
use common::{unix_now, zlane_classify, EPIC_SV};
use control::client::Client;
use tonic::Code;

/// EPIC-Z packets of 200-byte frames: 158 bytes of SCION packet each, which
/// is what the AS bucket charges.
const SCION_BYTES: f64 = 158.0;

/// The issue's acceptance test: an AS's guaranteed rate changed through
/// `ctl` takes effect in the per-class counters of the classifier: the
/// AS's Q-flagged traffic that still makes class G drops to ≈ the new rate,
/// the rest is demoted to A (not dropped: forwarding is undisturbed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zlane_as_rate_change_shows_in_class_counters() {
    // Wall pacing: the template's EPIC timestamps stay fresh for ~2 s, so
    // the whole measurement runs within that window.
    let classify = zlane_classify(
        EPIC_SV,
        r#"capacity_bps = 1000000000
        rates = [{ as = "1-ff00:0:111", bps = 20000000 }]"#,
    );
    let env = start(
        "zlane-rate",
        &forwarding(
            &epic_z_traffic(
                r#"name = "as111"
                flows = 16
                via_gateway = true"#,
            ),
            1,
            r#"egress = { kind = "zlane", capacity_bps = 1000000000 }"#,
            &classify,
        ),
    );
    let c = env.client().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let win = Duration::from_millis(400);
    let rate = |a: &pb::Counters, b: &pb::Counters, n: &str, t: f64| {
        (named(b, "stage 1", n) - named(a, "stage 1", n)) as f64 / t
    };
    // Before: 5000 pps × 158 B = 6.3 Mbit/s, all within the 20 Mbit/s guarantee.
    let (a, b, dt) = counters_over(&c, win).await;
    let g0 = rate(&a, &b, "class_g", dt);
    assert!(g0 > 3500.0, "class G before: {g0} pps ({b:?})");
    assert!(rate(&a, &b, "class_a", dt) < 100.0);

    let (ok, out, err) =
        ctl(&env, &["zlane", "set-rate", "--ia", "1-ff00:0:111", "--bps", "1000000"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("applied on 1 workers"), "{out}");
    // The bucket keeps its level (at most its burst): let that drain, then measure.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (a, b, dt) = counters_over(&c, win).await;
    let g1 = rate(&a, &b, "class_g", dt);
    let a1 = rate(&a, &b, "class_a", dt);
    let expect = 1_000_000.0 / (8.0 * SCION_BYTES);
    eprintln!("class G {g0:.0} pps at 20 Mbit/s, {g1:.0} pps at 1 Mbit/s (expected {expect:.0}); A {a1:.0} pps");
    assert!((g1 - expect).abs() < expect * 0.35, "class G after: {g1} pps, expected ~{expect}");
    assert!(a1 > 3000.0, "the excess is demoted to A: {a1} pps");
    // Nothing was dropped by the change, and forwarding went on.
    assert!(b.ports.iter().all(|p| p.drops.is_empty()), "{b:?}");
    assert!(b.stages[1].drops.is_empty(), "{:?}", b.stages[1]);
    assert!(b.tx > a.tx);
    // The scheduler's per-queue counters are there too.
    assert!(named(&b, "egress port 1", "queue_g_sent") > 0, "{:?}", b.named);
    let (ok, out, _) = ctl(&env, &["counters"]);
    assert!(ok && out.contains("class_g=") && out.contains("queue_a_sent="), "{out}");
}

/// DRKey: the secret value of a future epoch is installed into every
/// worker's live key state and listed afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drkey_secret_install_is_listed() {
    let env = start(
        "drkey",
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 2000, template = "ipv4-udp" }]"#,
            2,
            "",
            &zlane_classify("000102030405060708090a0b0c0d0e0f", ""),
        ),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (ok, out, err) = ctl(&env, &["--json", "drkey", "epochs"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let epochs = v["epochs"].as_array().unwrap();
    let cur = epochs
        .iter()
        .find(|e| e["current"] == true)
        .unwrap_or_else(|| panic!("no current epoch: {out}"));
    let end = cur["not_after_unix"].as_u64().unwrap();
    let (nb, na) = ((end + 7200).to_string(), (end + 7200 + 3600).to_string());
    let (ok, out, err) = ctl(
        &env,
        &[
            "drkey",
            "install-secret",
            "--not-before",
            &nb,
            "--not-after",
            &na,
            "--secret-hex",
            "00112233445566778899aabbccddeeff",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("applied on 2 workers (generation 1)"), "{out}");
    let (ok, out, _) = ctl(&env, &["drkey", "epochs"]);
    assert!(ok && out.contains(&format!("[{nb}, {na})")), "{out}");
    // Bad input: precise INVALID_ARGUMENT, nothing installed.
    let (ok, _, err) = ctl(
        &env,
        &[
            "drkey",
            "install-secret",
            "--not-before",
            "100",
            "--not-after",
            "200",
            "--secret-hex",
            "00",
        ],
    );
    assert!(!ok && err.contains("InvalidArgument") && err.contains("secret_hex"), "{err}");
    // An unauthenticated install is refused.
    let u = Client::connect(&env.addr, None).await.unwrap();
    let e = u
        .drkey()
        .install_secret(pb::InstallSecretRequest {
            not_before_unix: end + 20_000,
            not_after_unix: end + 23_600,
            secret_hex: "00112233445566778899aabbccddeeff".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
}

/// Z-Lane gateway: a host prefix's rate changed through `ctl` edits the
/// stage's `prefixes` and applies in place: a host dropped over its 1 Mbit/s
/// is (all but) no longer dropped at 50 Mbit/s (its bucket carried over,
/// retuned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zlane_gateway_host_rate_changes_in_place() {
    let env = start(
        "zlane-gateway",
        &forwarding(
            &epic_z_traffic(
                r#"name = "host"
                flows = 1
                src_host = "10.66.0.1""#,
            ),
            1,
            "",
            r#"
            [[pipeline]]
            kind = "zlane-gateway"
            overuse = "drop"
            burst = 30000               # wall pacing emits in bursts
            prefixes = [{ prefix = "10.66.0.0/16", bps = 1000000 }]
            "#,
        ),
    );
    let c = env.client().await;
    let dropped = |c: &pb::Counters| c.stages[1].drops.iter().map(|d| d.packets).sum::<u64>();
    let win = Duration::from_millis(300);
    tokio::time::sleep(Duration::from_millis(150)).await;
    // 5000 pps × 158 B = 6.3 Mbit/s against 1 Mbit/s: most are dropped.
    let (a, b, _) = counters_over(&c, win).await;
    let before = dropped(&b) - dropped(&a);
    assert!(before > 500, "{b:?}");

    let (ok, out, err) = ctl(&env, &["zlane", "gateway-host-rate", "10.66.0.0/16", "50000000"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("applied on 1 workers (generation 1)"), "{out}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (a, b, _) = counters_over(&c, win).await;
    let after = dropped(&b) - dropped(&a);
    assert!(after * 20 < before, "within 50 Mbit/s: {after} dropped, before {before}: {b:?}");
    assert!(b.stages[1].packets > a.stages[1].packets);
    let st = status(&c).await;
    let params = &st.stages[1].params_toml;
    assert!(params.contains("bps = 50000000") && !params.contains("bps = 1000000"), "{params}");
    let (ok, _, err) = ctl(&env, &["zlane", "gateway-host-rate", "10.66.0.1/16", "1"]);
    assert!(!ok && err.contains("InvalidArgument") && err.contains("host bits"), "{err}");
}

/// FlowPolice: Algorithm-1 parameters changed in place; the flow table is
/// the same one (its statistics carry on) and the new values are read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flowpolice_params_change_in_place() {
    let env = start(
        "flowpolice",
        &forwarding(
            r#"traffic = [{ name = "legacy", port = 0, rate_pps = 2000, flows = 8, template = "ipv4-udp" }]"#,
            2,
            "",
            r#"
            [[pipeline]]
            kind = "flowpolice"
            capability_key = "c0ffee00c0ffee00c0ffee00c0ffee00"
            table_key = "0123456789abcdef0123456789abcdef"
            slots = 4096
            seeds = { root = "5eed000000000000000000000000000000000000000000000000000000000001", first_epoch = 29_453_760, epochs = 1440 }
            "#,
        ),
    );
    let c = env.client().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (ok, out, err) = ctl(&env, &["--json", "flowpolice", "params"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["delta"], 3);
    let (ok, out, err) = ctl(&env, &["flowpolice", "table"]);
    assert!(ok && out.contains("of 8192 lines"), "{out}{err}");
    let c0 = counters(&c).await;
    let (ok, out, err) = ctl(&env, &["flowpolice", "set-params", "--delta", "9", "--s-th", "50"]);
    assert!(ok, "{err}");
    assert!(out.contains("generation 1") && out.contains("flow tables kept"), "{out}");
    let p =
        c.flowpolice().get_params(pb::GetFlowPoliceParamsRequest {}).await.unwrap().into_inner();
    assert_eq!((p.delta, p.s_th, p.period_ms), (Some(9), Some(50), Some(3000)));
    // Out of range: the crate's own validation answers, nothing changes.
    let e = c
        .flowpolice()
        .set_params(pb::FlowPoliceParams { beta: Some(1.5), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("params.beta`"), "{}", e.message());
    let st = status(&c).await;
    assert_eq!(st.generation, 1);
    // The stored configuration shows the change.
    let params = &st.stages[1].params_toml;
    assert!(params.contains("delta = 9") && params.contains("s_th = 50"), "{params}");
    // Values already in effect (set, or the default period): nothing changes.
    let (ok, out, err) =
        ctl(&env, &["flowpolice", "set-params", "--delta", "9", "--period-ms", "3000"]);
    assert!(ok, "{err}");
    assert!(out.contains("unchanged") && out.contains("generation 1"), "{out}");
    // The stage was not rebuilt: its own counters kept counting from before.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c1 = counters(&c).await;
    assert!(named(&c1, "stage 1", "legacy") > named(&c0, "stage 1", "legacy"));
    assert!(c1.tx > c0.tx);
}

/// FAIR: a transit data key installed for the next epoch, and a source
/// channel's sending policy changed in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_key_rotation_and_policy() {
    let now = unix_now();
    let from = now - now % 60 - 120;
    let until = from + 600;
    let stages = format!(
        r#"
        [[pipeline]]
        kind = "fair-source"
        channels = [{{ prefix = "10.2.0.0/16", dst_asn = 65002, k_sd = "000102030405060708090a0b0c0d0e0f", m = 2, cir_bps = 8000000, cbs_bytes = 15000 }}]
        [[pipeline]]
        kind = "fair-transit"
        data_key = "000102030405060708090a0b0c0d0e0f"
        keys_from = {from}
        keys_until = {until}
        "#
    );
    let env = start(
        "fair",
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 1000, template = "ipv4-udp" }]"#,
            1,
            "",
            &stages,
        ),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (ok, out, err) = ctl(&env, &["--json", "fair", "keys"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys = v["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 10, "{out}");
    assert_eq!(keys.iter().filter(|k| k["active"] == true).count(), 1, "{out}");
    let newest = keys.last().unwrap()["epoch"].as_u64().unwrap();
    let next = (newest + 1).to_string();
    let (ok, out, err) = ctl(
        &env,
        &["fair", "rotate-key", "--epoch", &next, "--key-hex", "ffeeddccbbaa99887766554433221100"],
    );
    assert!(ok, "{err}");
    assert!(out.contains("generation 1"), "{out}");
    let (ok, out, _) = ctl(&env, &["fair", "keys"]);
    assert!(ok && out.contains(&format!("epoch {next} ")), "{out}");
    // Not consecutive: refused with the key ring's reason.
    let (ok, _, err) = ctl(
        &env,
        &[
            "fair",
            "rotate-key",
            "--epoch",
            &(newest + 5).to_string(),
            "--key-hex",
            "ffeeddccbbaa99887766554433221100",
        ],
    );
    assert!(!ok && err.contains("InvalidArgument") && err.contains("does not follow"), "{err}");

    let c = env.client().await;
    let stamped = |c: &pb::Counters| named(c, "stage 1", "stamped");
    let c0 = counters(&c).await;
    assert!(stamped(&c0) > 0, "the plain traffic goes to the channel's prefix");
    let set = |cir: &str, cbs: &str| {
        let args = ["fair", "set-policy", "--prefix", "10.2.0.0/16", "--cir-bps", cir];
        ctl(&env, &[&args[..], &["--cbs-bytes", cbs]].concat())
    };
    let (ok, out, err) = set("2000000", "3000");
    assert!(ok, "{err}");
    assert!(out.contains("generation 2"), "{out}");
    let (ok, out, _) = ctl(&env, &["fair", "channels"]);
    assert!(ok && out.contains("CIR 2000000 bit/s CBS 3000 bytes"), "{out}");
    // The stored configuration shows the policy; the same policy again is a no-op.
    let st = status(&c).await;
    let params = &st.stages[1].params_toml;
    assert!(
        params.contains("cir_bps = 2000000") && params.contains("cbs_bytes = 3000"),
        "{params}"
    );
    let (ok, out, err) = set("2000000", "3000");
    assert!(ok, "{err}");
    assert!(out.contains("unchanged") && out.contains("generation 2"), "{out}");
    // Refused like the configuration file, with the key; nothing changes.
    let (ok, _, err) = set("2000000", "1000");
    assert!(
        !ok && err.contains("InvalidArgument") && err.contains("channels[0].cbs_bytes"),
        "{err}"
    );
    // Changed in place: the stage's counters went on counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(stamped(&counters(&c).await) > stamped(&c0));
    let (ok, _, err) = ctl(
        &env,
        &[
            "fair",
            "set-policy",
            "--prefix",
            "10.3.0.0/16",
            "--cir-bps",
            "2000000",
            "--cbs-bytes",
            "3000",
        ],
    );
    assert!(!ok && err.contains("NotFound"), "{err}");
}

/// SIBRA admission on the slow path: the control API reaches its one
/// `sibra-control` (the workers hold none), admitting, listing and revoking
/// a reservation once for the router.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibra_admission_on_the_slow_path_is_reached_by_the_control_api() {
    let env = start(
        "sibra-slow",
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 2000, flows = 8, template = "ipv4-udp" }]"#,
            2,
            "",
            r#"
            [[pipeline]]
            kind = "sibra-transit"
            key = "000102030405060708090a0b0c0d0e0f"
            interfaces = [{ ifid = 1, port = 0 }, { ifid = 2, port = 1 }]
            requests = "to-control"
            [slow_path]
            [[slow_path.pipeline]]
            kind = "sibra-control"
            key = "000102030405060708090a0b0c0d0e0f"
            interfaces = [{ ifid = 1, port = 0, capacity_bps = 1000000000 }, { ifid = 2, port = 1, capacity_bps = 1000000000 }]
            "#,
        ),
    );
    let admit = [
        "sibra",
        "admit-steady",
        "--src-ia",
        "1-ff00:0:111",
        "--suffix",
        "7",
        "--bw-class",
        "8",
        "--ingress",
        "1",
        "--egress",
        "2",
    ];
    let (ok, out, err) = ctl(&env, &admit);
    assert!(ok, "{err}");
    assert!(out.starts_with("admitted on 1 workers"), "one admission state: {out}");
    let (ok, out, _) = ctl(&env, &["--json", "sibra", "list"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reservations"].as_array().unwrap().len(), 1, "{out}");
    let (ok, out, err) =
        ctl(&env, &["sibra", "revoke", "--src-ia", "1-ff00:0:111", "--suffix", "7"]);
    assert!(ok, "{out}{err}");
    let (ok, out, _) = ctl(&env, &["--json", "sibra", "list"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["reservations"].as_array().is_none_or(|l| l.is_empty()), "{out}");
    // A live parameter change reaches the slow path's stage too.
    let split = ["sibra", "set-link-split", "--steady", "10", "--ephemeral", "80"];
    let (ok, out, err) = ctl(&env, &[&split[..], &["--best-effort", "10"]].concat());
    assert!(ok, "{out}{err}");
    let (ok, out, _) = ctl(&env, &["sibra", "link-split"]);
    assert!(ok && out.contains("80"), "{out}");
    // Generic stage parameters address the slow path's pipeline by its own index.
    let limit = "request_limit = { share_pct = 10, burst_ms = 500 }";
    let (ok, out, err) = ctl(&env, &["stage-params", "--slow-path", "0", limit]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = ctl(&env, &["stage-params", "--slow-path", "1", limit]);
    assert!(!ok && err.contains("slow_path.pipeline has 1 stages, no index 1"), "{err}");
    let (ok, _, err) =
        ctl(&env, &["stage-params", "--slow-path", "0", "request_limit = { share_pct = 0 }"]);
    assert!(!ok && err.contains("share_pct"), "{err}");
    // Without the flag the index is the workers' pipeline's.
    let (ok, _, err) = ctl(&env, &["stage-params", "0", limit]);
    assert!(!ok && err.contains("request_limit"), "sibra-transit has no request_limit: {err}");
}

/// SIBRA: steady and core reservations admitted into, listed from and
/// revoked out of the live admission tables of every worker; the link split
/// changes without dropping what was granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibra_admit_list_revoke_and_split() {
    let env = start(
        "sibra",
        &forwarding(
            r#"traffic = [{ name = "plain", port = 0, rate_pps = 2000, flows = 8, template = "ipv4-udp" }]"#,
            2,
            "",
            r#"
            [[pipeline]]
            kind = "sibra-control"
            key = "000102030405060708090a0b0c0d0e0f"
            interfaces = [{ ifid = 1, port = 0, capacity_bps = 1000000000 }, { ifid = 2, port = 1, capacity_bps = 1000000000 }]
            [[pipeline]]
            kind = "sibra-transit"
            key = "000102030405060708090a0b0c0d0e0f"
            interfaces = [{ ifid = 1, port = 0 }, { ifid = 2, port = 1 }]
            "#,
        ),
    );
    let c = env.client().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let args = |cmd: &'static str, suffix: &'static str, class: &'static str| {
        vec![
            "sibra",
            cmd,
            "--src-ia",
            "1-ff00:0:111",
            "--suffix",
            suffix,
            "--bw-class",
            class,
            "--ingress",
            "1",
            "--egress",
            "2",
        ]
    };
    let (ok, out, err) = ctl(&env, &args("admit-steady", "7", "8"));
    assert!(ok, "{err}");
    assert!(out.starts_with("admitted on 2 workers (generation 1)"), "{out}");
    // The audit log names the reservation the call acted on.
    let audit = std::fs::read_to_string(env.dir.join("audit.jsonl")).unwrap();
    let line = audit.lines().find(|l| l.contains("/AdmitSteady")).expect("an audit line");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["target"], "sibra steady reservation ff00:0:111/7 (1 -> 2)", "{line}");
    let (ok, out, err) = ctl(&env, &{
        let mut a = args("admit-core", "9", "20");
        a.extend(["--index", "2"]);
        a
    });
    assert!(ok && out.starts_with("admitted on 2 workers"), "{out}{err}");
    let (ok, out, _) = ctl(&env, &["--json", "sibra", "list"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = v["reservations"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{out}");
    assert_eq!(list[0]["id"], "ff00:0:111/7");
    assert_eq!(list[0]["kind"], "steady");
    assert_eq!(list[0]["bw_class"], 8);
    assert_eq!(list[0]["pending"], false);
    assert_eq!(list[1]["id"], "ff00:0:111/9");
    assert_eq!(list[1]["kind"], "core");
    assert_eq!(list[1]["index"], 2);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let cn = counters(&c).await;
    assert_eq!(named(&cn, "stage 1", "steady_reservations"), 4, "two reservations on two workers");

    // No steady share left: a new request is denied with the offer, the
    // granted ones stay.
    let (ok, out, err) = ctl(
        &env,
        &["sibra", "set-link-split", "--steady", "0", "--ephemeral", "90", "--best-effort", "10"],
    );
    assert!(ok && out.contains("reservations kept"), "{out}{err}");
    let (ok, out, _) = ctl(&env, &["sibra", "link-split"]);
    assert!(ok && out.contains("steady 0% ephemeral 90% best effort 10%"), "{out}");
    // The split is a stage parameter: stored (shown by status), and setting
    // it again changes nothing.
    let st = status(&c).await;
    let params = &st.stages[1].params_toml;
    assert!(params.contains("steady = 0") && params.contains("ephemeral = 90"), "{params}");
    let split =
        pb::LinkSplit { steady_percent: 0.0, ephemeral_percent: 90.0, best_effort_percent: 10.0 };
    let again = c.sibra().set_link_split(split).await.unwrap().into_inner();
    assert!(again.detail.contains("unchanged"), "{again:?}");
    assert_eq!(again.generation, st.generation, "{again:?}");
    let (ok, out, _) = ctl(&env, &args("admit-steady", "8", "8"));
    assert!(ok && out.starts_with("denied on 0 workers"), "{out}");
    let (ok, out, _) = ctl(&env, &["sibra", "list"]);
    assert!(ok && out.lines().count() == 2, "{out}");

    // Revocation empties the table entry on every worker.
    let (ok, out, err) =
        ctl(&env, &["sibra", "revoke", "--src-ia", "1-ff00:0:111", "--suffix", "7"]);
    assert!(ok && out.contains("revoked (1 indices, held by 2 workers)"), "{out}{err}");
    let (ok, out, _) = ctl(&env, &["sibra", "list"]);
    assert!(ok && !out.contains("/7 ") && out.contains("ff00:0:111/9"), "{out}");
    let (ok, _, err) = ctl(&env, &["sibra", "revoke", "--src-ia", "1-ff00:0:111", "--suffix", "7"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
    // Bad input: precise INVALID_ARGUMENT.
    let e = c
        .sibra()
        .set_link_split(pb::LinkSplit {
            steady_percent: 50.0,
            ephemeral_percent: 50.0,
            best_effort_percent: 10.0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "key `pipeline[1].split`: the shares sum to 110%, more than 100%");
    // Forwarding went on throughout.
    let c1 = counters(&c).await;
    assert!(c1.tx > cn.tx && c1.ports.iter().all(|p| p.drops.is_empty()), "{c1:?}");
}
