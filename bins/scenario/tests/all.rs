//! `scenario all --quick` runs every scenario and writes an index whose
//! plots all exist, with the paper-vs-ours rows of every scenario.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn all_quick_writes_an_index_with_every_plot_and_headline() {
    let out = std::env::temp_dir().join(format!("scenario-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let t = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_scenario"))
        .arg("all")
        .arg("--quick")
        .arg("--quiet")
        .arg("--config-dir")
        .arg(repo().join("config/scenarios"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("runs");
    let secs = t.elapsed().as_secs_f64();
    let md = std::fs::read_to_string(out.join("index.md")).expect("index.md written");
    let html = std::fs::read_to_string(out.join("index.html")).expect("index.html written");
    assert!(status.success(), "scenario all failed after {secs:.0} s:\n{md}");
    for name in [
        "zlane_table4",
        "zlane_fig4",
        "flowpolice_fig53",
        "flowpolice_fct",
        "sibra_fig7",
        "sibra_fig7b",
        "sibra_fig8b",
        "fair_protest",
    ] {
        assert!(md.contains(&format!("## {name}")), "{name} section");
        assert!(md.contains(&format!("| {name} | ")), "{name} has headline rows");
        assert!(html.contains(&format!("id=\"{name}\"")), "{name} in the HTML");
    }
    // Every image the index names exists and is an SVG.
    let mut images = 0;
    for line in md.lines().filter(|l| l.starts_with("![")) {
        let file = line.rsplit('(').next().unwrap().trim_end_matches(')');
        let svg = std::fs::read_to_string(out.join(file)).unwrap_or_default();
        assert!(svg.contains("<svg"), "{file} missing or not an SVG");
        assert!(html.contains(&format!("<img src=\"{file}\"")), "{file} not in the HTML");
        images += 1;
    }
    assert!(images >= 10, "{images} plots");
    // The table the reviewer reads: paper | ours | relative error.
    assert!(md.contains("| scenario | metric | paper | ours | rel. error | tolerance |"));
    assert!(md.contains("Table 4: AS X out [Gbps]") && md.contains("Fig. 5 trace 1"));
    assert!(out.join("zlane_table4.svg").exists(), "Table 4 drawn as a figure");
    let _ = std::fs::remove_dir_all(&out);
}
