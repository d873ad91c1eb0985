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
fn control_files_are_found_next_to_the_configuration() {
    // `token_file = "rel.token"` names the file beside the configuration,
    // whatever the working directory.
    std::fs::write(tmp("rel.token"), "a-long-enough-secret-token-for-tests").unwrap();
    let cfg = edited("rel-token.toml", |t| format!("{t}\n[control]\ntoken_file = \"rel.token\"\n"));
    let o = Command::new(env!("CARGO_BIN_EXE_router"))
        .args(["check", cfg.to_str().unwrap()])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
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
    // A pcapng cut off in its header, not a capture at all, an output
    // where nothing can be written.
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
fn sighup_reloads_what_can_change_live_and_names_the_rest() {
    let text =
        std::fs::read_to_string(config("default.toml")).unwrap().replace("duration_ms = 1000", "");
    let path = tmp("reload.toml");
    std::fs::write(&path, &text).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_router"))
        .args(["run", "--quiet"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let hup = |edited: String| {
        std::fs::write(&path, edited).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(Command::new("kill")
            .arg("-HUP")
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success());
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    // A live parameter (the egress rate), a section that needs a restart,
    // then a value the egress refuses.
    hup(text.replace("rate_pps = 1_000_000", "rate_pps = 2_000_000"));
    hup(text
        .replace("rate_pps = 1_000_000", "rate_pps = 2_000_000")
        .replace("count = 1", "count = 2"));
    hup(text.replace("rate_pps = 1_000_000", "rate_pps = -5"));
    assert!(Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("reload: configuration reloaded (generation 1)"), "{err}");
    assert!(err.contains("reload: not applied, needs a restart: workers"), "{err}");
    assert!(err.contains("reload refused, nothing changed") && err.contains("rate_pps"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("by a signal"));
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

/// A pcapng block (little-endian).
fn ng_block(kind: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len().next_multiple_of(4)) as u32;
    let mut b = [kind.to_le_bytes(), len.to_le_bytes()].concat();
    b.extend_from_slice(body);
    b.resize(len as usize - 4, 0);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// A pcapng section header and one interface per (link type, `if_tsresol`).
fn ng_header(interfaces: &[(u16, Option<u8>)]) -> Vec<u8> {
    let mut f = ng_block(
        0x0a0d_0d0a,
        &[0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    );
    for (link, tsresol) in interfaces {
        let mut body = [link.to_le_bytes(), [0, 0]].concat();
        body.extend_from_slice(&0u32.to_le_bytes());
        if let Some(r) = tsresol {
            body.extend_from_slice(&[9, 0, 1, 0, *r, 0, 0, 0]);
        }
        body.extend_from_slice(&[0; 4]);
        f.extend(ng_block(1, &body));
    }
    f
}

/// An Enhanced Packet Block: interface, timestamp in the interface's units, frame.
fn ng_packet(interface: u32, units: u64, frame: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for v in [interface, (units >> 32) as u32, units as u32, frame.len() as u32, frame.len() as u32]
    {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(frame);
    ng_block(6, &body)
}

/// Eight distinct frames, 10 µs apart from 2026-01-01 (two flows, two ports' worth).
fn frames() -> Vec<(u64, Vec<u8>)> {
    (0..8u8)
        .map(|i| {
            let mut f = vec![0u8; 60 + usize::from(i)];
            f[12] = 0x08; // IPv4 ethertype, arbitrary bytes after it
            f[30] = i;
            (runtime::synthetic::VIRTUAL_UNIX_START_NS + u64::from(i) * 10_000, f)
        })
        .collect()
}

fn write_as(path: &Path, format: runtime::capture::Format, frames: &[(u64, Vec<u8>)]) {
    let mut w = runtime::capture::CaptureWriter::create(path, format).unwrap();
    for (ts, f) in frames {
        w.write(*ts, f).unwrap();
    }
    w.finish().unwrap();
}

/// A pcap-backend configuration replaying `input` on port 0 to port 1,
/// written to `output` (with `format = "..."` if given).
fn replay_config(name: &str, input: &Path, output: &Path, format: Option<&str>) -> PathBuf {
    let p = tmp(name);
    let format = format.map_or(String::new(), |f| format!(", format = \"{f}\""));
    std::fs::write(
        &p,
        format!(
            "[io]\nbackend = \"pcap\"\n[io.pcap]\ninputs = [{{ port = 0, file = \"{}\" }}]\n\
             outputs = [{{ port = 1, file = \"{}\"{format} }}]\n[workers]\npin = false\n\
             [[ports]]\nid = 0\n[[ports]]\nid = 1\n[[pipeline]]\nkind = \"port-forward\"\nport = 1\n",
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    p
}

/// `router run` on `cfg`: (the summary's packet line, stderr).
fn replay(cfg: &Path) -> (String, String) {
    let o = router(&["run", cfg.to_str().unwrap(), "--quiet"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    let line = out.lines().find(|l| l.starts_with("packets:")).unwrap_or_else(|| panic!("{out}"));
    // Without the wall-clock rate at the end.
    (line.split("  (").next().unwrap().to_string(), err.into_owned())
}

/// Whether tshark reads `path` completely, `n` packets (true without tshark).
fn tshark_reads(path: &Path, n: usize) -> bool {
    let have = Command::new("sh").args(["-c", "command -v tshark"]).output();
    if !have.is_ok_and(|o| o.status.success()) {
        return true;
    }
    let o = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.len"])
        .output()
        .unwrap();
    o.status.success() && String::from_utf8_lossy(&o.stdout).lines().count() == n
}

#[test]
fn pcapng_replays_exactly_like_pcap() {
    use runtime::capture::Format;
    let frames = frames();
    let pcap = tmp("same.pcap");
    write_as(&pcap, Format::Pcap, &frames);
    // Written by the project's writer, under a name that says nothing.
    let written = tmp("same-written.cap");
    write_as(&written, Format::Pcapng, &frames);
    // Built by hand: interface 0 in microseconds (the default), interface 1
    // in nanoseconds, packets alternating, a name resolution block between.
    let mut by_hand = ng_header(&[(1, None), (1, Some(9))]);
    for (i, (ts, f)) in frames.iter().enumerate() {
        if i == 3 {
            by_hand.extend(ng_block(4, &[0; 4]));
        }
        by_hand.extend(if i % 2 == 0 { ng_packet(0, ts / 1000, f) } else { ng_packet(1, *ts, f) });
    }
    let hand = tmp("same-by-hand.pcapng");
    std::fs::write(&hand, by_hand).unwrap();

    // The same packets at the same times, whatever the interface's units.
    for input in [&written, &hand] {
        assert_eq!(runtime::capture::read(input).unwrap().0, frames, "{}", input.display());
    }

    let out = |name: &str| tmp(&format!("same-out-{name}.pcap"));
    let (want, _) = replay(&replay_config("same-pcap.toml", &pcap, &out("pcap"), None));
    assert!(want.contains("rx 8 tx 8"), "{want}");
    let expected = std::fs::read(out("pcap")).unwrap();
    // Outputs are stamped with their burst's time.
    let forwarded = runtime::capture::read(&out("pcap")).unwrap().0;
    let data = |v: &[(u64, Vec<u8>)]| v.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>();
    assert_eq!(data(&forwarded), data(&frames));
    for (name, input) in [("written", &written), ("hand", &hand)] {
        let cfg = replay_config(&format!("same-{name}.toml"), input, &out(name), None);
        let (code, err) = run(&["check", cfg.to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(!err.contains("warning"), "{name}: {err}");
        let (got, _) = replay(&cfg);
        assert_eq!(got, want, "{name}");
        assert_eq!(std::fs::read(out(name)).unwrap(), expected, "{name}: another output");
    }

    // Outputs in pcapng, by name or by `format`, hold the same packets at the
    // same times; tshark, if installed, reads them.
    for (name, output, format) in [
        ("ng-name", tmp("same-out.pcapng"), None),
        ("ng-key", tmp("same-out-key.cap"), Some("pcapng")),
    ] {
        let cfg = replay_config(&format!("same-{name}.toml"), &hand, &output, format);
        assert_eq!(replay(&cfg).0, want, "{name}");
        assert_eq!(&std::fs::read(&output).unwrap()[..4], &[0x0a, 0x0d, 0x0d, 0x0a], "{name}");
        let (read, summary) = runtime::capture::read(&output).unwrap();
        assert_eq!((read, summary.format), (forwarded.clone(), Format::Pcapng), "{name}");
        assert!(tshark_reads(&output, frames.len()), "tshark cannot read {}", output.display());
    }
    assert!(tshark_reads(&written, frames.len()));
    assert!(tshark_reads(&hand, frames.len()));
    // `format` says pcap or pcapng, nothing else; inputs are read by content.
    let bad = replay_config("same-bad.toml", &pcap, &out("bad"), Some("pcap-ng"));
    refused(&["check", bad.to_str().unwrap()], "io.pcap.outputs");
    let text = std::fs::read_to_string(&bad).unwrap().replace(", format = \"pcap-ng\"", "");
    let typed = text.replace(
        &format!("file = \"{}\" }}]", pcap.display()),
        &format!("file = \"{}\", format = \"pcap\" }}]", pcap.display()),
    );
    assert_ne!(typed, text, "the input entry is where the test expects it");
    std::fs::write(&bad, typed).unwrap();
    refused(&["check", bad.to_str().unwrap()], "io.pcap.inputs[0].format");
}

#[test]
fn a_pcapng_cut_off_mid_block_replays_its_intact_packets() {
    let frames = frames();
    let path = tmp("cut.pcapng");
    write_as(&path, runtime::capture::Format::Pcapng, &frames);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let cfg = replay_config("cut-ng.toml", &path, &tmp("cut-out.pcap"), None);
    let (code, err) = run(&["check", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning") && err.contains("cut off") && err.contains("7 intact"),
        "{err}"
    );
    let (line, err) = replay(&cfg);
    assert!(line.contains("rx 7 tx 7"), "{line}");
    assert!(err.contains("cut off"), "{err}");
}

#[test]
fn a_non_ethernet_interface_is_refused_with_the_file_and_link_type() {
    // Linux cooked capture (113) on interface 1; interface 0 is Ethernet.
    let mut f = ng_header(&[(1, None), (113, None)]);
    f.extend(ng_packet(0, 1, &[0; 60]));
    f.extend(ng_packet(1, 2, &[0; 60]));
    let path = tmp("sll.pcapng");
    std::fs::write(&path, f).unwrap();
    let cfg = replay_config("sll.toml", &path, &tmp("sll-out.pcap"), None);
    for cmd in ["check", "run"] {
        let (code, err) = run(&[cmd, cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "{cmd}");
        assert!(
            err.contains(path.to_str().unwrap()) && err.contains("link type 113 (LINUX_SLL)"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn gen_writes_pcapng_by_name_or_flag() {
    let d = config("default.toml");
    let d = d.to_str().unwrap();
    let magic = |p: &Path| std::fs::read(p).unwrap()[..4].to_vec();
    for (name, flag, ng) in [
        ("gen.pcapng", None, true),
        ("gen-flag.cap", Some("pcapng"), true),
        ("gen-plain.pcap", None, false),
        ("gen-forced.pcapng", Some("pcap"), false),
    ] {
        let out = tmp(name);
        let mut args = vec!["gen", d, "--out", out.to_str().unwrap()];
        if let Some(f) = flag {
            args.extend(["--format", f]);
        }
        let (code, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let (frames, summary) = runtime::capture::read(&out).unwrap();
        assert!(!frames.is_empty());
        let format =
            if ng { runtime::capture::Format::Pcapng } else { runtime::capture::Format::Pcap };
        assert_eq!(summary.format, format, "{name}");
        assert_eq!(magic(&out) == [0x0a, 0x0d, 0x0d, 0x0a], ng, "{name}");
        assert!(tshark_reads(&out, frames.len()), "tshark cannot read {}", out.display());
    }
    let out = tmp("gen-bad.pcap");
    let (code, err) = run(&["gen", d, "--out", out.to_str().unwrap(), "--format", "ng"]);
    assert_ne!(code, 0);
    assert!(err.contains("--format") && err.contains("pcap or pcapng"), "{err}");
}
