//! Whatever an operator types, `trafgen` answers with a result or a message
//! that names the offending flag or key (exit code 2): no panic, no
//! arithmetic overflow (these tests run with overflow checks), no hang, no
//! timestamps that wrap to 1970. Output into pipes that close early ends
//! quietly, progress counters stay out of log files, and `check` finds the
//! router configuration a profile names from any directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use trafgen::check::{read_pcap, write_pcap};
use trafgen::gen::{duration_ns_from_secs, parse_mix, GenError, END_UNIX_NS};
use trafgen::profile::{self, Origin};
use trafgen::{GenOptions, Generator, Profile};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory of one test's own, removed when the test passes.
struct Tmp(PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

fn tmp(test: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("trafgen-input-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

/// `trafgen`, run from `dir` (not the repository root, unless asked).
fn trafgen(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trafgen"));
    c.current_dir(dir).stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts a refusal: exit code 2, a message naming `what`, no panic.
fn refused(out: &Output, what: &str, args: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args}: {err}");
    assert!(!err.contains("panicked"), "{args}: {err}");
    assert!(err.contains(what), "{args}: expected {what:?} in {err:?}");
}

const UDP: &str = "[[traffic]]\nname = 'a'\nrate_pps = 1000\ntemplate = 'ipv4-udp'\n\
                   src = '10.1.0.1'\nflows = 4\n";

fn udp_profile() -> Profile {
    Profile::parse(UDP).unwrap()
}

/// `trafgen gen --profile fair --start-unix-ns 18446744073709551615` used to
/// overflow in debug builds and write 1970 timestamps in release ones.
#[test]
fn start_beyond_2106_is_refused() {
    let dir = tmp("start");
    let pcap = dir.join("x.pcap");
    for start in ["18446744073709551615", "4294967296000000000", "4294967295500000000"] {
        let out = trafgen(&dir)
            .args(["gen", "--profile", "fair", "--start-unix-ns", start, "-o"])
            .arg(&pcap)
            .output()
            .unwrap();
        refused(&out, "--start-unix-ns", start);
        assert!(text(&out.stderr).contains("2106"), "{}", text(&out.stderr));
    }
    // The library refuses it too, before generating anything.
    let o = GenOptions { start_unix_ns: u64::MAX, ..Default::default() };
    let e = Generator::new(&udp_profile(), o.clone()).err().expect("refused");
    assert!(e.to_string().contains("2106"), "{e}");
    let o = GenOptions { start_unix_ns: END_UNIX_NS - 1, duration_ns: Some(2), ..o };
    assert!(Generator::new(&udp_profile(), o).is_err());
}

/// A capture that ends just before 2106 keeps its real timestamps.
#[test]
fn a_capture_up_to_2106_keeps_its_timestamps() {
    let start = END_UNIX_NS - 1_000_000_000;
    let o =
        GenOptions { start_unix_ns: start, duration_ns: Some(1_000_000_000), ..Default::default() };
    let mut g = Generator::new(&udp_profile(), o.clone()).unwrap();
    let dir = tmp("end");
    let path = dir.join("end.pcap");
    let n = write_pcap(&mut g, &path, |_| {}).unwrap();
    assert_eq!(n, 1000);
    let frames = read_pcap(&path).unwrap();
    assert!(frames.iter().all(|f| (start..END_UNIX_NS).contains(&f.0)), "wrapped timestamps");
    // With a count and no duration the end is not known in advance: the
    // generator stops with an error at the limit instead of wrapping.
    let o = GenOptions { start_unix_ns: start, duration_ns: None, count: Some(5000), ..o };
    let mut g = Generator::new(&udp_profile(), o).unwrap();
    let mut last = 0;
    let e = loop {
        match g.next_packet() {
            Ok(Some(p)) => last = p.unix_ns,
            Ok(None) => panic!("ran past 2106"),
            Err(e) => break e,
        }
    };
    assert!(matches!(e, GenError::PastEnd { emitted: 1000 }), "{e}");
    assert!(last < END_UNIX_NS && e.to_string().contains("2106"), "{e}");
}

/// Every flag is checked, with a message that names it.
#[test]
fn every_flag_is_validated() {
    let dir = tmp("flags");
    let pcap = dir.join("x.pcap");
    for (args, what) in [
        ("--rate -1", "--rate"),
        ("--rate NaN", "--rate"),
        ("--rate inf", "--rate"),
        ("--rate 0", "--rate"),
        ("--rate 1e10", "--rate"),
        ("--rate 1e-9", "rate"),
        ("--count 0", "--count"),
        ("--count 18446744073709551615", "--count"),
        ("--count -1", "--count"),
        ("--duration 0", "--duration"),
        ("--duration -1", "--duration"),
        ("--duration nan", "--duration"),
        ("--duration inf", "--duration"),
        ("--duration 1e-12", "--duration"),
        ("--duration 1e12", "--duration"),
        ("--mix fair=0", "--mix"),
        ("--mix fair=-1", "--mix"),
        ("--mix fair=inf", "--mix"),
        ("--mix fair=1e300", "--mix"),
        ("--mix fair=x", "--mix"),
        ("--mix fair=1,fair=2", "--mix"),
        ("--mix =2", "--mix"),
        ("--mix ,", "--mix"),
        ("--mix nope", "nope"),
        ("--mix fair=1e-9,plain-udp=1e9", "rate"),
        ("--start-unix-ns -1", "--start-unix-ns"),
        ("--seed -1", "--seed"),
    ] {
        let out = trafgen(&dir)
            .args(["gen", "--profile", "fair"])
            .args(args.split(' '))
            .arg("-o")
            .arg(&pcap)
            .output()
            .unwrap();
        refused(&out, what, args);
    }
    assert!(duration_ns_from_secs(0.5).unwrap() == 500_000_000);
    assert!(parse_mix("a=2, b").unwrap() == vec![("a".into(), 2.0), ("b".into(), 1.0)]);
}

/// Profile keys are checked too: each of these once panicked (division by
/// a zero period, overflowing sums) or allocated without bound.
#[test]
fn profile_keys_are_validated() {
    for (extra, key) in [
        ("flows = 0", "flows"),
        ("flows = 4294967295", "flows"),
        ("rate_pps = 1e300", "rate_pps"),
        ("rate_pps = nan", "rate_pps"),
        ("on_ms = 1e-9\noff_ms = 1", "on_ms"),
        ("on_ms = 1\noff_ms = 1e300", "off_ms"),
        ("regenerate_ms = 1e-9\nvary = 'src'", "regenerate_ms"),
        ("start_ms = 1e300", "start_ms"),
        ("start_ms = -1", "start_ms"),
        ("max_packets = 0", "max_packets"),
    ] {
        let t = UDP.replace("rate_pps = 1000\n", "").replace("flows = 4\n", "");
        let t = format!("{t}{extra}\n");
        let t = if extra.starts_with("rate_pps") { t } else { format!("{t}rate_pps = 1000\n") };
        let t = if extra.starts_with("flows") { t } else { format!("{t}flows = 4\n") };
        let e = Profile::parse(&t).unwrap().groups().unwrap_err().to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
    let e = Profile::parse(&format!("refresh_ms = inf\n{UDP}")).unwrap().groups().unwrap_err();
    assert!(e.to_string().contains("refresh_ms"), "{e}");
    let e = Profile::parse(&format!("{UDP}{}", UDP)).unwrap().groups().unwrap_err();
    assert!(e.to_string().contains("second group"), "{e}");
    let replay = format!("{UDP}[[traffic]]\nname = 'r'\nrate_pps = 1\nreplay_of = 'a'\n");
    let e = Profile::parse(&format!("{replay}replay_delay_ms = inf\n")).unwrap().groups();
    assert!(e.unwrap_err().to_string().contains("replay_delay_ms"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any options and profile numbers: a generator or an error, never a
    /// panic or overflow, and every timestamp inside the capture and
    /// before 2106.
    #[test]
    fn no_input_overflows(
        rate in prop_oneof![Just(None), any::<f64>().prop_map(Some), (1e-4f64..2e9).prop_map(Some)],
        weight in prop_oneof![any::<f64>(), 1e-6f64..1e10],
        count in prop_oneof![Just(None), any::<u64>().prop_map(Some), (1u64..200).prop_map(Some)],
        duration in prop_oneof![Just(None), any::<u64>().prop_map(Some), (1u64..1_000_000_000).prop_map(Some)],
        start in prop_oneof![any::<u64>(), (END_UNIX_NS - 2_000_000_000)..END_UNIX_NS, 0u64..1000],
        group_rate in prop_oneof![any::<f64>(), 1e-4f64..2e9],
        on_ms in prop_oneof![any::<f64>(), 1e-7f64..1e3],
        start_ms in prop_oneof![any::<f64>(), 0f64..1e3],
        poisson in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let p = format!(
            "[[traffic]]\nname = 'a'\nrate_pps = {group_rate:?}\ntemplate = 'ipv4-udp'\n\
             src = '10.1.0.1'\nflows = 2\non_ms = {on_ms:?}\noff_ms = {on_ms:?}\n\
             start_ms = {start_ms:?}\npattern = '{}'\n\
             [[traffic]]\nname = 'b'\nrate_pps = 10\ntemplate = 'ipv4-udp'\n",
            if poisson { "poisson" } else { "constant" }
        )
        .replace("NaN", "nan");
        let Ok(prof) = Profile::parse(&p) else { return Ok(()) };
        let opts = GenOptions {
            rate_pps: rate,
            mix: Some(vec![("a".into(), weight), ("b".into(), 1.0)]),
            count,
            duration_ns: duration,
            seed,
            start_unix_ns: start,
        };
        let Ok(mut g) = Generator::new(&prof, opts) else { return Ok(()) };
        for _ in 0..200 {
            match g.next_packet() {
                Ok(Some(e)) => {
                    prop_assert!(e.unix_ns >= start && e.unix_ns < END_UNIX_NS);
                    if let Some(d) = duration {
                        prop_assert!(e.unix_ns - start < d);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
}

/// A pipe whose reader has already gone (as after `| head -1`).
fn closed_pipe() -> std::io::PipeWriter {
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    w
}

/// A small fair capture in `dir`.
fn fair_capture(dir: &Path) -> PathBuf {
    let pcap = dir.join("fair.pcap");
    let out = trafgen(&root())
        .args(["gen", "--profile", "fair", "--rate", "20000", "--duration", "0.05", "-o"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    pcap
}

/// `trafgen list | head -1` and `trafgen check ... | head -1` exit quietly.
#[test]
fn closed_pipes_end_quietly() {
    let dir = tmp("pipe");
    let out = trafgen(&dir).arg("list").stdout(closed_pipe()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "no panic, no message");
    let pcap = fair_capture(&dir);
    let out = trafgen(&dir)
        .args(["check", "--profile", "fair"])
        .arg(&pcap)
        .stdout(closed_pipe())
        .output()
        .unwrap();
    assert!(out.status.success(), "the check's own verdict: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    // A failing check still says so in its exit code.
    let out = trafgen(&root())
        .args(["check", "--profile", "fair", "--router", "config/sibra-transit.toml"])
        .arg(&pcap)
        .stdout(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    // `gen` with both outputs gone still writes its capture.
    let pcap2 = dir.join("gone.pcap");
    let out = trafgen(&dir)
        .args(["gen", "--profile", "fair", "--count", "20000", "-o"])
        .arg(&pcap2)
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert!(out.success());
    assert_eq!(read_pcap(&pcap2).unwrap().len(), 20_000);
}

/// Into a log file (not a terminal) `gen` writes no `\r` progress counter
/// (only whole `progress:` lines, if it runs long enough), and the total
/// appears once.
#[test]
fn no_progress_counter_in_logs() {
    let dir = tmp("progress");
    let pcap = dir.join("x.pcap");
    let out = trafgen(&dir)
        .args(["gen", "--profile", "fair", "--count", "20000", "-o"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (err, stdout) = (text(&out.stderr), text(&out.stdout));
    assert!(!err.contains('\r'), "{err:?}");
    for l in err.lines().filter(|l| l.contains(" packets")) {
        assert!(l.starts_with("progress: ") && l.matches("packets").count() == 1, "{err:?}");
    }
    assert_eq!(stdout.matches("20000 packets").count(), 1, "{stdout:?}");
}

/// `check --profile <built-in>` from any directory: the router
/// configuration is found in the repository's `config/`.
#[test]
fn check_works_from_any_directory() {
    let dir = tmp("anywhere");
    let pcap = fair_capture(&dir);
    let out = trafgen(&dir).args(["check", "--profile", "fair"]).arg(&pcap).output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("stale-replay") && !stdout.contains("UNEXPECTED"), "{stdout}");
    let roots = profile::repository_roots();
    assert!(roots.iter().any(|r| r.join("config/fair-transit.toml").is_file()), "{roots:?}");
}

/// A profile file names its router relative to itself; an error names
/// every place tried.
#[test]
fn a_profile_file_names_its_router_relative_to_itself() {
    let dir = tmp("relative");
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::copy(root().join("config/fair-transit.toml"), profiles.join("router.toml")).unwrap();
    let fair = profile::BUILTIN.iter().find(|(n, _)| *n == "fair").unwrap().1;
    let mine = fair.replace("router = \"config/fair-transit.toml\"", "router = \"router.toml\"");
    assert_ne!(mine, fair);
    std::fs::write(profiles.join("mine.toml"), &mine).unwrap();
    let pcap = fair_capture(&dir);
    // From the directory above the profile's.
    let out = trafgen(&dir)
        .args(["check", "--profile", "profiles/mine.toml"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    // A router that is nowhere: the message lists where it looked.
    std::fs::write(profiles.join("lost.toml"), mine.replace("router.toml", "lost-router.toml"))
        .unwrap();
    let out = trafgen(&dir)
        .args(["check", "--profile", "profiles/lost.toml"])
        .arg(&pcap)
        .output()
        .unwrap();
    refused(&out, "lost-router.toml", "lost");
    let err = text(&out.stderr);
    assert!(err.contains("tried") && err.contains("profiles/lost-router.toml"), "{err}");
    // The candidates of a built-in profile: repository roots, then `.`.
    let c = profile::router_candidates(&Origin::Builtin("fair".into()), "config/x.toml");
    assert_eq!(c.last().unwrap(), Path::new("config/x.toml"));
    assert!(c.len() >= 2, "{c:?}");
    let e = profile::resolve_router(&Origin::Builtin("fair".into()), "config/x.toml").unwrap_err();
    assert!(e.contains("built-in profile `fair`") && e.contains("--router"), "{e}");
}
