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
