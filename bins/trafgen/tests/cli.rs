//! The command line: `gen` writes a capture at the requested rate, `check`
//! replays it through the profile's router and fails on unexpected verdicts.

use std::path::Path;
use std::process::Command;

fn trafgen() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trafgen"));
    // Profiles name router configurations relative to the workspace root.
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    c
}

#[test]
fn gen_then_check() {
    let dir = std::env::temp_dir().join(format!("trafgen-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _clean = Clean(dir.clone());
    let pcap = dir.join("fair.pcap");
    let out = trafgen()
        .args(["gen", "--profile", "fair", "--rate", "20000", "--duration", "0.05", "-o"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("wrote 1000 packets"));
    let out = trafgen().args(["check", "--profile", "fair"]).arg(&pcap).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("stale-replay") && !text.contains("UNEXPECTED"), "{text}");
    // Against another router the expectations do not hold: exit code 1.
    let out = trafgen()
        .args(["check", "--profile", "fair", "--router", "config/sibra-transit.toml"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    // Bad options are reported, not panicked on.
    let out = trafgen().args(["gen", "--profile", "nope.toml", "-o"]).arg(&pcap).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.toml"));
}

/// Removes a test's directory when the test passes.
struct Clean(std::path::PathBuf);

impl Drop for Clean {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `gen -o x.pcapng` writes pcapng (or `--format pcapng` under any name),
/// and `check` reads it with the same verdicts as the same traffic in pcap;
/// a pcapng cut off mid-block is checked on its intact packets, with a
/// warning.
#[test]
fn pcapng_gen_then_check_round_trips() {
    let dir = std::env::temp_dir().join(format!("trafgen-cli-ng-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _clean = Clean(dir.clone());
    let gen = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let out = trafgen()
            .args(["gen", "--profile", "fair", "--rate", "20000", "--duration", "0.05", "-o"])
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        path
    };
    let check = |path: &std::path::Path| {
        let out = trafgen().args(["check", "--profile", "fair"]).arg(path).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        (text, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let pcap = gen("fair.pcap", &[]);
    let ng = gen("fair.pcapng", &[]);
    let flagged = gen("fair.cap", &["--format", "pcapng"]);
    let forced = gen("forced.pcapng", &["--format", "pcap"]);
    let magic = |p: &std::path::Path| std::fs::read(p).unwrap()[..4].to_vec();
    let shb = [0x0a, 0x0d, 0x0d, 0x0a];
    assert_eq!(magic(&ng), shb);
    assert_eq!(magic(&flagged), shb);
    assert_ne!(magic(&forced), shb);
    assert_ne!(magic(&pcap), shb);
    // The same packets; pcap keeps microseconds, pcapng nanoseconds.
    let frames = |p: &std::path::Path| trafgen::check::read_pcap(p).unwrap();
    let (a, b) = (frames(&pcap), frames(&ng));
    assert_eq!(a.len(), 1000);
    assert_eq!(b, frames(&flagged));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.0, &x.1), (y.0 / 1000 * 1000, &y.1));
    }
    let (want, _) = check(&pcap);
    assert!(want.contains("stale-replay") && !want.contains("UNEXPECTED"), "{want}");
    assert_eq!(check(&ng).0, want);
    assert_eq!(check(&flagged).0, want);
    // Cut off in its last block: the 999 intact packets, and a warning.
    let bytes = std::fs::read(&ng).unwrap();
    let cut = dir.join("cut.pcapng");
    std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
    let (text, err) = check(&cut);
    assert!(err.contains("warning") && err.contains("cut off") && err.contains("999"), "{err}");
    let counted: u64 =
        text.lines().map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(counted, 999, "{text}");
    // tshark, if installed, reads what trafgen writes.
    let have = Command::new("sh").args(["-c", "command -v tshark"]).output();
    if have.is_ok_and(|o| o.status.success()) {
        for p in [&ng, &flagged] {
            let o = Command::new("tshark")
                .arg("-r")
                .arg(p)
                .args(["-T", "fields", "-e", "frame.len"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1000);
        }
    }
    // A format that does not exist is refused before any work.
    let out = trafgen()
        .args(["gen", "--profile", "fair", "--format", "ng", "-o"])
        .arg(dir.join("x.pcap"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
}

/// `trafgen` run from `dir`, with no terminal anywhere (standard input
/// closed, output captured).
fn trafgen_in(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trafgen"));
    c.current_dir(dir).stdin(std::process::Stdio::null());
    c
}

/// A fresh directory outside the repository for one test.
fn scratch(test: &str) -> (std::path::PathBuf, Clean) {
    let dir = std::env::temp_dir().join(format!("trafgen-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.clone(), Clean(dir))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Into a log (standard error not a terminal): whole `progress: N packets`
/// lines, never a `\r`, never two counts run together; the total once, on
/// standard output.
#[test]
fn progress_in_logs_is_plain_lines() {
    let (dir, _clean) = scratch("log-progress");
    let out = trafgen_in(&dir)
        .args(["gen", "--profile", "fair", "--count", "30000", "--progress-every", "0.000001"])
        .args(["-o", "x.pcap"])
        .output()
        .unwrap();
    let (err, stdout) = (text(&out.stderr), text(&out.stdout));
    assert!(out.status.success(), "{err}");
    assert!(!err.contains('\r') && !stdout.contains('\r'), "{err:?}");
    let progress: Vec<&str> = err.lines().filter(|l| l.contains("packets")).collect();
    assert_eq!(
        progress,
        ["progress: 10000 packets", "progress: 20000 packets", "progress: 30000 packets"],
        "{err:?}"
    );
    assert_eq!(stdout, "wrote 30000 packets to x.pcap\n");
    // `-o x.pcap` is relative to the working directory.
    assert!(dir.join("x.pcap").is_file());

    // By default a line at most every 5 s; `--progress-every 0`: none.
    for extra in [&[][..], &["--progress-every", "0"][..]] {
        let out = trafgen_in(&dir)
            .args(["gen", "--profile", "fair", "--count", "10000", "-o", "y.pcap"])
            .args(extra)
            .output()
            .unwrap();
        let (err, stdout) = (text(&out.stderr), text(&out.stdout));
        assert!(out.status.success(), "{err}");
        assert!(!err.contains('\r'), "{err:?}");
        assert!(!format!("{err}{stdout}").contains("packets10000"), "{err:?} {stdout:?}");
        for l in err.lines().filter(|l| l.contains("packets")) {
            assert!(extra.is_empty() && l.starts_with("progress: "), "{extra:?}: {l:?}");
        }
        assert_eq!(stdout.matches("10000 packets").count(), 1, "{stdout:?}");
    }
    for bad in ["-1", "nan", "1e9"] {
        let out = trafgen_in(&dir)
            .args(["gen", "--profile", "fair", "--progress-every", bad, "-o", "z.pcap"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains("--progress-every"), "{bad}: {}", text(&out.stderr));
        assert!(!dir.join("z.pcap").exists(), "{bad}: refused before any work");
    }
}

/// On a terminal the count is one live line, ended once: never
/// "10000 packets10000 packets". Runs under `script` (a pseudo-terminal)
/// where util-linux provides it.
#[test]
fn live_progress_on_a_terminal_is_one_line() {
    let have = Command::new("sh").args(["-c", "command -v script"]).output();
    if !have.is_ok_and(|o| o.status.success()) {
        eprintln!("no `script`: the terminal case is covered by the unit tests only");
        return;
    }
    let (dir, _clean) = scratch("live-progress");
    let cmd =
        format!("{} gen --profile fair --count 20000 -o x.pcap", env!("CARGO_BIN_EXE_trafgen"));
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let all = text(&out.stdout);
    assert!(out.status.success(), "{all:?} {}", text(&out.stderr));
    assert!(all.contains("\r10000 packets\r20000 packets\r\n"), "{all:?}");
    assert!(!all.contains("packets2") && !all.contains("packets1"), "{all:?}");
    assert_eq!(all.matches("wrote 20000 packets").count(), 1, "{all:?}");
    assert!(!all.contains("progress:"), "{all:?}");
}

/// `check --profile NAME` is the built-in profile from any directory (even
/// beside a file of that name); a profile path is relative to the working
/// directory; the router configuration a profile file names is relative to
/// the profile's folder, not to the working directory.
#[test]
fn check_resolves_profiles_and_their_files_from_any_directory() {
    let (dir, _clean) = scratch("resolve");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = trafgen_in(&dir)
        .args(["gen", "--profile", "fair", "--rate", "20000", "--duration", "0.05"])
        .args(["-o", "fair.pcap"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let passes = |cwd: &Path, profile: &str| {
        let out = trafgen_in(cwd)
            .args(["check", "--profile", profile])
            .arg(dir.join("fair.pcap"))
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{profile} from {}: {stdout}{}",
            cwd.display(),
            text(&out.stderr)
        );
        assert!(stdout.contains("stale-replay") && !stdout.contains("UNEXPECTED"), "{stdout}");
    };
    // A built-in profile, from a directory without `config/`, and beside a
    // file named like it.
    std::fs::write(dir.join("fair"), "not a profile").unwrap();
    passes(&dir, "fair");

    // A profile file in a folder with its router configuration.
    let mine = dir.join("profiles");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::copy(root.join("config/fair-transit.toml"), mine.join("transit.toml")).unwrap();
    let builtin = std::fs::read_to_string(root.join("bins/trafgen/profiles/fair.toml")).unwrap();
    let profile = builtin.replace("\"config/fair-transit.toml\"", "\"transit.toml\"");
    assert_ne!(profile, builtin);
    std::fs::write(mine.join("mine.toml"), &profile).unwrap();
    passes(&dir, "profiles/mine.toml");
    passes(&mine, "mine.toml");
    passes(&root, mine.join("mine.toml").to_str().unwrap());

    // The working directory is not searched for a profile file's router:
    // from a directory that has `transit.toml`, a profile elsewhere that
    // names it (but has none beside it) is refused, naming where it looked.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("mine.toml"), &profile).unwrap();
    let out = trafgen_in(&mine)
        .args(["check", "--profile", "../other/mine.toml"])
        .arg(dir.join("fair.pcap"))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("../other/transit.toml") && err.contains("--router"), "{err}");

    // A path that is no file and no built-in name says both.
    let out = trafgen_in(&dir)
        .args(["check", "--profile", "nope.toml"])
        .arg(dir.join("fair.pcap"))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nope.toml") && err.contains("fair") && err.contains("sibra"), "{err}");
}
