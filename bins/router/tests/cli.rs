//! What an operator types that is wrong gets a clear error from `router`,
//! never a panic, an abort or a hang; `router check` refuses what `router
//! run` would fail on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("router-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(name)
}

fn router(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_router")).args(args).output().unwrap()
}

/// Runs `router` and returns (exit code, stderr); panics and aborts fail the test.
fn run(args: &[&str]) -> (i32, String) {
    let o = router(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "router {args:?} panicked: {err}");
    let code = o.status.code().unwrap_or_else(|| panic!("router {args:?} was killed: {err}"));
    (code, err)
}

/// A copy of `config/default.toml` with `edit` applied, written to a file.
fn edited(name: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(config("default.toml")).unwrap();
    let p = tmp(name);
    std::fs::write(&p, edit(text)).unwrap();
    p
}

fn refused(args: &[&str], key: &str) {
    let (code, err) = run(args);
    assert_ne!(code, 0, "router {args:?} accepted it");
    assert!(err.contains("error:") && err.contains(key), "router {args:?}: {err}");
}

#[test]
fn command_line_values_are_validated() {
    let d = config("default.toml");
    let d = d.to_str().unwrap();
    refused(&["run", d, "--workers", "0", "--quiet"], "workers.count");
    refused(&["run", d, "--workers", "100000", "--quiet"], "workers.count");
    refused(&["run", d, "--duration", "20000000000000000000s"], "between 0 and a year");
    refused(&["run", d, "--duration=-1s"], "between 0 and a year");
    refused(&["run", d, "--duration", "nan"], "duration");
}

#[test]
fn sizes_from_the_file_are_bounded_before_anything_is_allocated() {
    let p = edited("capacity.toml", |t| {
        t.replacen("capacity = ", "capacity = 100_000_000_000_000 #", 1)
    });
    refused(&["check", p.to_str().unwrap()], "capacity");
    let p = edited("pool.toml", |t| {
        t.replace("[io.synthetic]", "[io.synthetic]\npool = 1_000_000_000_000")
    });
    refused(&["check", p.to_str().unwrap()], "io.synthetic.pool");
    refused(&["run", p.to_str().unwrap(), "--quiet"], "io.synthetic.pool");
    let p = edited("workers.toml", |t| {
        t.replace("[workers]\ncount = 1", "[workers]\ncount = 100000\npin = false")
    });
    refused(&["check", p.to_str().unwrap()], "workers.count");
}

#[test]
fn surprising_values_are_refused_with_their_key_and_line() {
    let p = edited("rate.toml", |t| t.replacen("rate_pps = ", "rate_pps = 1e30 #", 1));
    let (code, err) = run(&["check", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("rate_pps") && err.contains(".toml:"), "{err}");
    let p = edited("cores.toml", |t| {
        t.replace("[workers]\ncount = 1", "[workers]\ncount = 1\ncores = [999]")
    });
    refused(&["check", p.to_str().unwrap()], "workers.cores[0]");
    let p = edited("nopipe.toml", |t| {
        let i = t.find("[[pipeline]]").unwrap();
        let j = t[i..]
            .find("\n[[ports]]")
            .or_else(|| t[i..].find("\n[run]"))
            .map_or(t.len(), |j| i + j);
        format!("{}{}", &t[..i], &t[j..])
    });
    refused(&["check", p.to_str().unwrap()], "pipeline");
}

#[test]
fn check_sees_what_run_would_fail_on() {
    // An empty token file, a missing one, metrics served to the world.
    let token = tmp("short.token");
    std::fs::write(&token, "").unwrap();
    let control = |extra: &str| {
        edited("control.toml", |t| {
            format!("{t}\n[control]\ntoken_file = \"{}\"\n{extra}", token.display())
        })
    };
    refused(&["check", control("").to_str().unwrap()], "token_file");
    std::fs::write(&token, "a-long-enough-secret-token-for-tests").unwrap();
    let (code, err) = run(&["check", control("").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    refused(
        &["check", control("metrics_listen = \"0.0.0.0:9464\"").to_str().unwrap()],
        "metrics_listen",
    );
    std::fs::remove_file(&token).unwrap();
    refused(&["check", control("").to_str().unwrap()], "token_file");
}

#[test]
fn captures_are_checked_before_a_run() {
    let frame = [0u8; 60];
    let good = tmp("good.pcap");
    runtime::pcap::write_capture(&good, [&frame[..]], 0).unwrap();
    let pcap = |input: &Path, output: &str| {
        let p = tmp("pcap.toml");
        std::fs::write(
            &p,
            format!(
                "[io]\nbackend = \"pcap\"\n[io.pcap]\ninputs = [{{ port = 0, file = \"{}\" }}]\n\
                 outputs = [{{ port = 1, file = \"{output}\" }}]\n[[ports]]\nid = 0\n[[ports]]\nid = 1\n\
                 [[pipeline]]\nkind = \"port-forward\"\nport = 1\n",
                input.display()
            ),
        )
        .unwrap();
        p
    };
    let out = tmp("out.pcap");
    let (code, err) = run(&["check", pcap(&good, out.to_str().unwrap()).to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // pcapng, not a capture at all, an output where nothing can be written.
    let ng = tmp("in.pcapng");
    std::fs::write(&ng, [0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 28]).unwrap();
    refused(&["check", pcap(&ng, out.to_str().unwrap()).to_str().unwrap()], "pcapng");
    let junk = tmp("junk.pcap");
    std::fs::write(&junk, b"hello").unwrap();
    refused(&["check", pcap(&junk, out.to_str().unwrap()).to_str().unwrap()], "not a pcap");
    refused(
        &["check", pcap(&good, "/nonexistent-dir/out.pcap").to_str().unwrap()],
        "io.pcap.outputs[0].file",
    );
    // A capture cut off in its last record: check warns, run replays the rest.
    let bytes = std::fs::read(&good).unwrap();
    let cut = tmp("cut.pcap");
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes[24..bytes.len() - 10]);
    std::fs::write(&cut, two).unwrap();
    let cfg = pcap(&cut, out.to_str().unwrap());
    let (code, err) = run(&["check", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("cut off"), "{err}");
    let o = router(&["run", cfg.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn sigterm_and_sigint_stop_cleanly_with_a_summary() {
    // Runs until stopped.
    let endless = edited("endless.toml", |t| t.replace("duration_ms = 1000", ""));
    for sig in ["-TERM", "-INT"] {
        let child = Command::new(env!("CARGO_BIN_EXE_router"))
            .args(["run", "--quiet"])
            .arg(&endless)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        let st = Command::new("kill").arg(sig).arg(child.id().to_string()).status().unwrap();
        assert!(st.success());
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{sig}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("stopped") && text.contains("by a signal"), "{sig}: {text}");
    }
}

#[test]
fn gen_refuses_flow_counts_it_cannot_hold() {
    let out = tmp("gen.pcap");
    let (code, err) = run(&[
        "gen",
        config("default.toml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--flows",
        "100000000",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("flows") && err.contains("1048576"), "{err}");
}

#[test]
fn surprising_but_legal_values_are_warned_about() {
    let p = edited("smallpool.toml", |t| t.replace("[io.synthetic]", "[io.synthetic]\npool = 64"));
    let (code, err) = run(&["check", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: io.synthetic.pool"), "{err}");
}
