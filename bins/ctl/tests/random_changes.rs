//! Random live changes never crash a running router: every stage and egress
//! parameter of the combined SCION border configuration is set to random
//! values (huge, negative, non-finite, of the wrong type, unknown keys)
//! through the control API; each request is applied or refused with
//! `INVALID_ARGUMENT`/`FAILED_PRECONDITION`, and the router keeps forwarding
//! and answering.

mod common;

use std::time::Duration;

use adapters::pb;
use control::client::Client;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tonic::Code;

/// Values an operator (or an attacker with the token) might send.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1e300".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("100_000_000_000_000".to_string()),
        Just("18446744073709551615".to_string()),
        Just("\"x\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("true".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u16>().prop_map(|v| v.to_string()),
        (0.0f64..2.0).prop_map(|v| format!("{v:?}")),
    ]
}

/// A key of one of the parameter tables with a hostile value, the same key
/// with a plausible value near its current one, or an unknown key.
fn change(known: Vec<(String, toml::Value)>) -> impl Strategy<Value = (String, String)> {
    let near = known.clone();
    prop_oneof![
        (
            proptest::sample::select(known.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()),
            value()
        ),
        (proptest::sample::select(near), 0.25f64..4.0).prop_map(|((k, v), f)| {
            let v = match v {
                toml::Value::Integer(i) => toml::Value::Integer(((i as f64) * f).round() as i64),
                toml::Value::Float(x) => toml::Value::Float(x * f),
                other => other,
            };
            (k, v.to_string())
        }),
        value().prop_map(|v| ("no_such_key".to_string(), v)),
    ]
}

#[test]
fn random_parameter_changes_never_take_the_router_down() {
    let cfg = common::example("scion-border.toml");
    let env = common::start_in(common::scratch_dir("random-changes"), cfg.clone(), |_| {});
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(Client::connect(&env.addr, Some(common::TOKEN))).unwrap();

    // Every key the configuration sets, with its value, per stage and port.
    let pairs = |t: &toml::Table, extra: (&str, toml::Value)| -> Vec<(String, toml::Value)> {
        t.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain([(extra.0.to_string(), extra.1)])
            .collect()
    };
    let stages: Vec<(u32, Vec<(String, toml::Value)>)> = cfg
        .pipeline
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u32, pairs(&s.params, ("kind", "x".into()))))
        .collect();
    let ports: Vec<(u32, Vec<(String, toml::Value)>)> = cfg
        .ports
        .iter()
        .map(|p| (u32::from(p.id), pairs(&p.egress.params, ("capacity", 1024.into()))))
        .collect();

    let outcomes = std::cell::RefCell::new((0u32, 0u32));
    let mut runner =
        TestRunner::new(Config { cases: 200, failure_persistence: None, ..Config::default() });
    let strategy = (any::<bool>(), any::<prop::sample::Index>(), any::<prop::sample::Index>())
        .prop_flat_map(move |(stage, i, _)| {
            let (target, keys) = if stage {
                let (ix, k) = &stages[i.index(stages.len())];
                (*ix, k.clone())
            } else {
                let (id, k) = &ports[i.index(ports.len())];
                (*id, k.clone())
            };
            (Just(stage), Just(target), change(keys))
        });
    runner
        .run(&strategy, |(stage, target, (key, value))| {
            let toml = format!("{key} = {value}");
            let r = rt.block_on(async {
                if stage {
                    client
                        .router()
                        .set_stage_params(pb::SetStageParamsRequest {
                            index: target,
                            params_toml: toml,
                            slow_path: false,
                        })
                        .await
                } else {
                    client
                        .router()
                        .set_egress_params(pb::SetEgressParamsRequest {
                            port: target,
                            params_toml: toml,
                        })
                        .await
                }
            });
            match &r {
                Ok(_) => outcomes.borrow_mut().0 += 1,
                Err(_) => outcomes.borrow_mut().1 += 1,
            }
            if let Err(s) = &r {
                prop_assert!(
                    matches!(s.code(), Code::InvalidArgument | Code::FailedPrecondition),
                    "{key} = {value}: {:?} {}",
                    s.code(),
                    s.message()
                );
            }
            // Still answering, still running.
            let c = rt
                .block_on(client.router().get_counters(pb::GetCountersRequest {}))
                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert!(!c.into_inner().all_done, "the router stopped after {key} = {value}");
            Ok(())
        })
        .unwrap();
    let (applied, refused) = outcomes.into_inner();
    eprintln!("{applied} changes applied, {refused} refused");
    assert!(applied > 0 && refused > 0, "{applied} applied, {refused} refused");

    // The router still forwards after all of it.
    let before = rt.block_on(client.router().get_counters(pb::GetCountersRequest {})).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let after = rt.block_on(client.router().get_counters(pb::GetCountersRequest {})).unwrap();
    assert!(after.into_inner().rx > before.into_inner().rx);
    env.plane.stop();
}

#[test]
fn a_closed_pipe_ends_ctl_quietly() {
    let env =
        common::start_in(common::scratch_dir("pipe"), common::example("default.toml"), |_| {});
    let ctl = env!("CARGO_BIN_EXE_ctl");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{ctl}' --addr {} --token-file '{}' status | head -1",
            env.addr,
            env.token_file.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("router"), "{out:?}");
    env.plane.stop();
}

#[test]
fn a_huge_queue_asked_for_live_is_refused_and_the_router_runs_on() {
    let env =
        common::start_in(common::scratch_dir("huge"), common::example("default.toml"), |_| {});
    let (ok, _, err) = common::ctl(&env, &["egress-params", "1", "capacity = 100000000000000"]);
    assert!(!ok && err.contains("InvalidArgument") && err.contains("capacity"), "{err}");
    let (ok, _, err) = common::ctl(&env, &["egress-params", "1", "rate_pps = 1e300"]);
    assert!(!ok && err.contains("rate_pps"), "{err}");
    let (ok, out, err) = common::ctl(&env, &["status"]);
    assert!(ok && out.contains("generation 0"), "{out}{err}");
    env.plane.stop();
}
