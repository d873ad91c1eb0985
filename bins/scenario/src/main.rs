//! `scenario`: runs the papers' attack scenarios in the simulator
//! (`crates/sim`), driving the real data-plane stages.
//!
//! ```text
//! scenario zlane_fig4                       # reads config/scenarios/zlane_fig4.toml
//! scenario zlane_table4 --config my.toml --out results/
//! scenario all --out report/                # every scenario, report/index.html + index.md
//! scenario all --quick --out report/        # short runs (seconds, debug builds)
//! ```
//! One scenario: prints the result table and the paper-vs-ours headline
//! rows, writes `<out>/<name>.csv` and one SVG per plot. `all` runs every
//! scenario at its default TOML and writes `index.html` and `index.md` with
//! every plot beside the paper's numbers and a `paper | ours | relative
//! error` table per headline number. Every parameter must be present in the
//! TOML file (nothing is defaulted silently). Build with `--release` for
//! the full-scale defaults.

mod index;
mod plot;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::de::DeserializeOwned;
use sim::report::{Fig8bCurve, Headlines, Report};
use sim::scenarios::fair::{self as fair_sc, FairParams};
use sim::scenarios::flowpolice::{self as fp, Fig53Params};
use sim::scenarios::flowpolice_fct::{self as fp_fct, FctParams};
use sim::scenarios::sibra::{self as sibra_sc, Fig7Params, Fig8bParams, Isd};
use sim::scenarios::zlane::{self, Fig4Params, Table4Params};
use sim::scenarios::RunOpts;

/// Scenarios this binary knows, with what they reproduce.
const SCENARIOS: &[(&str, &str)] = &[
    (
        "zlane_table4",
        "Z-Lane Table 4: AS X keeps its guarantee while every other class is overused",
    ),
    (
        "zlane_fig4",
        "Z-Lane Fig. 4: guaranteed source over 8 attacked routers vs FIFO, fairness, isolation",
    ),
    (
        "flowpolice_fig53",
        "FlowPolice Figs. 5.3/5.4: attackers' share (exact/probing/non-complying), legit throughput",
    ),
    (
        "flowpolice_fct",
        "FlowPolice §5.2.3: FCT of 2 MB transfers without attack, with and without FlowPolice",
    ),
    (
        "sibra_fig7",
        "SIBRA Figs. 7(a) and 8(a): intra-ISD DoC, legit request success (SIBRA, TVA, Portcullis, STRIDE) and reservable bandwidth vs attackers",
    ),
    (
        "sibra_fig7b",
        "SIBRA Fig. 7(b): inter-ISD DoC, legit request success of SIBRA, TVA, Portcullis, STRIDE vs attackers",
    ),
    ("sibra_fig8b", "SIBRA Fig. 8(b): reserved-bandwidth waste vs request/reply loss"),
    (
        "fair_protest",
        "FAIR: violation proven to every honest AS, misbehaving transit ASes localized, header overhead",
    ),
];

#[derive(Parser, Debug)]
#[command(version, about = "Run a DDoS-defense attack scenario in the packet-level simulator")]
struct Args {
    /// Scenario name (see --list), or `all` for every scenario and an index.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Parameter file (default: <config-dir>/<name>.toml; not with `all`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory of the scenarios' parameter files.
    #[arg(long, default_value = "config/scenarios")]
    config_dir: PathBuf,
    /// Output directory for CSV and SVG files (and the index with `all`).
    #[arg(long, default_value = "scenario-out")]
    out: PathBuf,
    /// Short runs: reduced scale and duration (for tests and debug builds;
    /// the numbers are noisier).
    #[arg(long)]
    quick: bool,
    /// No progress output on stderr.
    #[arg(long)]
    quiet: bool,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
}

fn load<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Runs scenario `name` with the parameters in `config`, shortened with
/// `quick`; the report carries the headline rows.
fn run(name: &str, config: &Path, quick: bool, opts: &RunOpts) -> Result<Report> {
    let report = match name {
        "zlane_table4" => {
            let mut p: Table4Params = load(config)?;
            if quick {
                // 500 Mbit/s egress; AS X at 2.9 Mbit/s = 29 bucket units.
                p.scale = 320.0;
                p.intra_isd_ases = p.intra_isd_ases.min(20);
                p.isds = p.isds.min(20);
                p.duration_s = 0.35;
                p.warmup_s = 0.05;
            }
            zlane::table4(&p, opts)?.report
        }
        "zlane_fig4" => {
            let mut p: Fig4Params = load(config)?;
            if quick {
                // C = 80 Mbit/s; r_S = 2 Mbit/s, r_I = 8 Mbit/s (whole units).
                p.scale = 500.0;
                p.source_rates_gbps = vec![0.5, 2.0];
                p.duration_s = 0.5;
                p.warmup_s = 0.15;
            }
            zlane::fig4(&p, opts)?.0
        }
        "flowpolice_fig53" => {
            let mut p: Fig53Params = load(config)?;
            if quick {
                // A few detection periods after the attack starts.
                let periods = 4.0 * f64::from(p.period_ms) / 1e3;
                p.duration_s = p.duration_s.min(p.attack_start_s + periods);
            }
            let (mut rep, runs) = fp::fig53(&p, opts)?;
            add_headlines(&mut rep, runs.as_slice());
            rep
        }
        "flowpolice_fct" => {
            let mut p: FctParams = load(config)?;
            if quick {
                p.trials = p.trials.min(1);
                p.max_duration_s = p.max_duration_s.min(p.first_trial_s + 30.0);
            }
            let (mut rep, runs) = fp_fct::fct(&p, opts)?;
            add_headlines(&mut rep, runs.as_slice());
            rep
        }
        "sibra_fig7" => {
            let mut p: Fig7Params = load(config)?;
            if quick {
                p = Fig7Params { seed: p.seed, ..Fig7Params::short() };
            }
            let (mut rep, pts) = sibra_sc::fig7(&p, opts)?;
            add_headlines(&mut rep, pts.as_slice());
            rep
        }
        "sibra_fig7b" => {
            let mut p: Fig7Params = load(config)?;
            if p.isd != Isd::Inter {
                bail!(
                    "sibra_fig7b is the inter-ISD attack: {} needs isd = \"inter\"",
                    config.display()
                );
            }
            if quick {
                p = Fig7Params { seed: p.seed, ..Fig7Params::short_inter_isd() };
            }
            sibra_sc::fig7(&p, opts)?.0
        }
        "sibra_fig8b" => {
            let mut p: Fig8bParams = load(config)?;
            if quick {
                p.duration_s = p.duration_s.min(12.0);
                p.warmup_s = p.warmup_s.min(4.0);
                p.loss_rates = vec![0.0, 0.05, 0.1];
            }
            let (mut rep, pts) = sibra_sc::fig8b(&p, opts)?;
            add_headlines(&mut rep, &Fig8bCurve(&pts));
            rep
        }
        "fair_protest" => {
            let mut p: FairParams = load(config)?;
            if quick {
                p.duration_s = 4.0;
                p.tick_us = 1000.0;
                p.cir_bytes_per_s = 40_000;
                p.cbs_bytes = 10_000;
                p.overhead_packets = 4000;
                p.overhead_sweep = vec![2, 4];
            }
            fair_sc::fair(&p, opts)?.report
        }
        other => bail!(
            "unknown scenario {other:?}; known: all, {}",
            SCENARIOS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
        ),
    };
    Ok(report)
}

/// Adds `src`'s headline rows and paper points unless the scenario already
/// reports its own.
fn add_headlines<H: Headlines + ?Sized>(rep: &mut Report, src: &H) {
    if rep.headlines.is_empty() {
        rep.headlines = src.headlines();
    }
    if rep.references.is_empty() {
        rep.references = src.references();
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.list {
        println!("{:18} every scenario below, with an index (HTML and Markdown)", "all");
        for (n, d) in SCENARIOS {
            println!("{n:18} {d}");
        }
        return Ok(());
    }
    let name = args.name.clone().unwrap_or_default();
    let opts = RunOpts { progress: !args.quiet };
    if name == "all" {
        if args.config.is_some() {
            bail!("--config names one scenario's file; `all` reads <config-dir>/<name>.toml");
        }
        return run_all(&args, &opts);
    }
    let config =
        args.config.clone().unwrap_or_else(|| args.config_dir.join(format!("{name}.toml")));
    let report = run(&name, &config, args.quick, &opts)?;
    println!("{}", report.table());
    if !report.headlines.is_empty() {
        println!("\npaper vs ours:\n{}", report.headline_table());
    }
    write_outputs(&report, &args.out)?;
    Ok(())
}

/// Writes the CSV and one SVG per plot and bar chart; returns the SVG file
/// names.
fn write_outputs(report: &Report, out: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let csv = out.join(format!("{}.csv", report.name));
    std::fs::write(&csv, report.csv()).with_context(|| format!("writing {}", csv.display()))?;
    println!("wrote {}", csv.display());
    let mut files = Vec::new();
    for p in &report.plots {
        let file = format!("{}.svg", p.name);
        let svg = out.join(&file);
        let refs: Vec<_> = report.references_for(&p.name).cloned().collect();
        plot::draw_plot(p, &refs, &svg).with_context(|| format!("drawing {}", svg.display()))?;
        println!("wrote {}", svg.display());
        files.push(file);
    }
    for b in &report.bars {
        let file = format!("{}.svg", b.name);
        let svg = out.join(&file);
        let refs: Vec<_> = report.references_for(&b.name).cloned().collect();
        plot::draw_bars(b, &refs, &svg).with_context(|| format!("drawing {}", svg.display()))?;
        println!("wrote {}", svg.display());
        files.push(file);
    }
    Ok(files)
}

/// Runs every scenario and writes the index.
fn run_all(args: &Args, opts: &RunOpts) -> Result<()> {
    let mut sections = Vec::new();
    for (name, what) in SCENARIOS {
        let config = args.config_dir.join(format!("{name}.toml"));
        let t = Instant::now();
        if !args.quiet {
            eprintln!("== {name}");
        }
        let outcome = run(name, &config, args.quick, opts).and_then(|rep| {
            let files = write_outputs(&rep, &args.out)?;
            Ok((rep, files))
        });
        let secs = t.elapsed().as_secs_f64();
        sections.push(match outcome {
            Ok((report, files)) => index::Section {
                name: name.to_string(),
                what: what.to_string(),
                config: config.display().to_string(),
                secs,
                result: Ok((report, files)),
            },
            Err(e) => {
                eprintln!("{name}: {e:#}");
                index::Section {
                    name: name.to_string(),
                    what: what.to_string(),
                    config: config.display().to_string(),
                    secs,
                    result: Err(format!("{e:#}")),
                }
            }
        });
    }
    let md = index::markdown(&sections, args.quick);
    let html = index::html(&sections, args.quick);
    let md_path = args.out.join("index.md");
    let html_path = args.out.join("index.html");
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    std::fs::write(&html_path, html).with_context(|| format!("writing {}", html_path.display()))?;
    println!("wrote {} and {}", md_path.display(), html_path.display());
    let failed: Vec<&str> =
        sections.iter().filter(|s| s.result.is_err()).map(|s| s.name.as_str()).collect();
    if !failed.is_empty() {
        bail!("scenarios failed: {}", failed.join(", "));
    }
    Ok(())
}
