//! `scenario`: runs one of the papers' attack scenarios in the simulator
//! (`crates/sim`), driving the real data-plane stages.
//!
//! ```text
//! scenario zlane_fig4                       # reads config/scenarios/zlane_fig4.toml
//! scenario zlane_table4 --config my.toml --out results/
//! ```
//! Prints the result table, writes `<out>/<name>.csv` and one SVG per plot.
//! Every parameter must be present in the TOML file (nothing is defaulted
//! silently). Build with `--release` for the full-scale defaults.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use plotters::prelude::*;
use serde::de::DeserializeOwned;
use sim::report::{Plot, Report};
use sim::scenarios::fair::{self as fair_sc, FairParams};
use sim::scenarios::flowpolice::{self as fp, Fig53Params};
use sim::scenarios::flowpolice_fct::{self as fp_fct, FctParams};
use sim::scenarios::sibra::{self as sibra_sc, Fig7Params, Fig8bParams};
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
        "SIBRA Figs. 7 and 8(a): legit request success and reservable bandwidth vs attackers",
    ),
    ("sibra_fig8b", "SIBRA Fig. 8(b): reserved-bandwidth waste vs request/reply loss"),
    (
        "fair_protest",
        "FAIR: violation proven to every honest AS, replayer localized, header overhead",
    ),
];

#[derive(Parser, Debug)]
#[command(version, about = "Run a DDoS-defense attack scenario in the packet-level simulator")]
struct Args {
    /// Scenario name (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Parameter file (default: config/scenarios/<name>.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output directory for CSV and SVG files.
    #[arg(long, default_value = "scenario-out")]
    out: PathBuf,
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

fn main() -> Result<()> {
    let args = Args::parse();
    if args.list {
        for (n, d) in SCENARIOS {
            println!("{n:18} {d}");
        }
        return Ok(());
    }
    let name = args.name.clone().unwrap_or_default();
    let config = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("config/scenarios/{name}.toml")));
    let opts = RunOpts { progress: !args.quiet };
    let report = match name.as_str() {
        "zlane_table4" => {
            let p: Table4Params = load(&config)?;
            zlane::table4(&p, &opts)?.report
        }
        "zlane_fig4" => {
            let p: Fig4Params = load(&config)?;
            zlane::fig4(&p, &opts)?.0
        }
        "flowpolice_fig53" => {
            let p: Fig53Params = load(&config)?;
            fp::fig53(&p, &opts)?.0
        }
        "flowpolice_fct" => {
            let p: FctParams = load(&config)?;
            fp_fct::fct(&p, &opts)?.0
        }
        "sibra_fig7" => {
            let p: Fig7Params = load(&config)?;
            sibra_sc::fig7(&p, &opts)?.0
        }
        "sibra_fig8b" => {
            let p: Fig8bParams = load(&config)?;
            sibra_sc::fig8b(&p, &opts)?.0
        }
        "fair_protest" => {
            let p: FairParams = load(&config)?;
            fair_sc::fair(&p, &opts)?.report
        }
        other => bail!(
            "unknown scenario {other:?}; known: {}",
            SCENARIOS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
        ),
    };
    write_outputs(&report, &args.out)
}

fn write_outputs(report: &Report, out: &Path) -> Result<()> {
    println!("{}", report.table());
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let csv = out.join(format!("{}.csv", report.name));
    std::fs::write(&csv, report.csv()).with_context(|| format!("writing {}", csv.display()))?;
    println!("wrote {}", csv.display());
    for plot in &report.plots {
        let svg = out.join(format!("{}.svg", plot.name));
        draw(plot, &svg).with_context(|| format!("drawing {}", svg.display()))?;
        println!("wrote {}", svg.display());
    }
    Ok(())
}

fn bounds(plot: &Plot) -> (f64, f64, f64, f64) {
    let pts = plot.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0, 1.0, 0.0, 1.0);
    }
    if plot.log_y {
        y0 = y0.max(1e-6) / 1.5;
        y1 = y1.max(y0 * 10.0) * 1.5;
    } else {
        y0 = y0.min(0.0);
        y1 = if y1 > y0 { y1 * 1.05 } else { y0 + 1.0 };
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    (x0, x1, y0, y1)
}

fn draw(plot: &Plot, path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (x0, x1, y0, y1) = bounds(plot);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&plot.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(plot.x_label.as_str())
                .y_desc(plot.y_label.as_str())
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (i, s) in plot.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }};
    }
    if plot.log_y {
        body!(builder
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(|e| anyhow::anyhow!("{e}"))?);
    } else {
        body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
