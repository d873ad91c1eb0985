//! `trafgen`: generates legitimate and attack traffic into a pcap file, or
//! checks a capture against a router configuration's stages.
//!
//! ```text
//! trafgen gen --profile flowpolice --duration 2 --rate 50000 -o fp.pcap
//! trafgen gen --profile my.toml --mix legit=9,forged=1 --count 100000 -o mix.pcap
//! trafgen gen --router-config config/zlane-border.toml --duration 0.5 -o z.pcap
//! trafgen check --profile flowpolice fp.pcap      # verdicts per group vs `expect`
//! trafgen list
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use trafgen::check::{read_pcap, replay_through, write_pcap};
use trafgen::gen::parse_mix;
use trafgen::profile::{self, Expect};
use trafgen::{GenOptions, Generator, Profile};

#[derive(Parser, Debug)]
#[command(version, about = "Legitimate and attack traffic for the DDoS data planes, to pcap")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Debug)]
struct Source {
    /// A built-in profile (see `list`) or a profile TOML file.
    #[arg(long, conflicts_with = "router_config")]
    profile: Option<String>,
    /// Use the `[[io.synthetic.traffic]]` groups of a router configuration.
    #[arg(long)]
    router_config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Generate a capture.
    Gen {
        #[command(flatten)]
        source: Source,
        /// Output pcap file.
        #[arg(short, long)]
        out: PathBuf,
        /// Total packets per second over the selected groups (default: the profile's rates).
        #[arg(long)]
        rate: Option<f64>,
        /// Groups and weights, `name=weight,...` (default: all, weighted by their rates).
        #[arg(long)]
        mix: Option<String>,
        /// Stop after this many packets.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds of capture time (default 1 unless --count).
        #[arg(long)]
        duration: Option<f64>,
        /// Seed for Poisson gaps and sender phases.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Unix time (ns) of the first instant (default: the runtime's virtual epoch,
        /// which the example router configurations' keys and puzzle seeds cover).
        #[arg(long)]
        start_unix_ns: Option<u64>,
    },
    /// Replay a capture through a router configuration's stages and compare
    /// each group's verdicts with its `expect`.
    Check {
        #[command(flatten)]
        source: Source,
        /// Router configuration (default: the profile's `router`).
        #[arg(long)]
        router: Option<PathBuf>,
        /// The capture.
        pcap: PathBuf,
    },
    /// List the built-in profiles.
    List,
}

fn load(source: &Source) -> Result<Profile> {
    if let Some(p) = &source.router_config {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let mut prof = Profile::from_router_config(&text)
            .with_context(|| format!("reading traffic groups of {}", p.display()))?;
        prof.router = Some(p.display().to_string());
        return Ok(prof);
    }
    let name =
        source.profile.as_deref().ok_or_else(|| anyhow!("give --profile or --router-config"))?;
    if let Some(p) = profile::builtin(name) {
        return p.with_context(|| format!("built-in profile {name}"));
    }
    let text = std::fs::read_to_string(name).with_context(|| format!("reading {name}"))?;
    Profile::parse(&text).with_context(|| format!("parsing {name}"))
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("trafgen: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args = Args::parse();
    match args.cmd {
        Cmd::List => {
            for (n, t) in profile::BUILTIN {
                let p = Profile::parse(t)?;
                println!("{n:12} {}", p.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Gen { source, out, rate, mix, count, duration, seed, start_unix_ns } => {
            let prof = load(&source)?;
            let mut opts = GenOptions {
                rate_pps: rate,
                mix: mix
                    .as_deref()
                    .map(parse_mix)
                    .transpose()
                    .map_err(|e| anyhow!("--mix: {e}"))?,
                count,
                duration_ns: None,
                seed,
                ..Default::default()
            };
            if let Some(s) = start_unix_ns {
                opts.start_unix_ns = s;
            }
            opts.duration_ns = match (duration, count) {
                (Some(d), _) if d > 0.0 => Some((d * 1e9) as u64),
                (Some(_), _) => bail!("--duration must be > 0"),
                (None, Some(_)) => None,
                (None, None) => Some(1_000_000_000),
            };
            let mut gen = Generator::new(&prof, opts)?;
            for g in gen.groups() {
                eprintln!(
                    "  {:24} {:>12.1} pps  {} flows  {}",
                    g.name, g.rate_pps, g.flows, g.template
                );
            }
            let n = write_pcap(&mut gen, &out, |n| eprint!("\r{n} packets"))
                .map_err(|e| anyhow!("{e}"))?;
            eprintln!();
            println!("wrote {n} packets to {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Check { source, router, pcap } => {
            let prof = load(&source)?;
            let groups = prof.groups()?;
            let router = router
                .or_else(|| prof.router.as_ref().map(PathBuf::from))
                .ok_or_else(|| anyhow!("give --router (the profile names none)"))?;
            let cfg = runtime::config::load_file(Path::new(&router)).map_err(|e| anyhow!("{e}"))?;
            let frames = read_pcap(&pcap).map_err(|e| anyhow!("{e}"))?;
            let tallies = replay_through(&cfg, &frames).map_err(|e| anyhow!("{e}"))?;
            let mut ok = true;
            for (key, t) in &tallies {
                let (name, expect) = match key.and_then(|k| groups.get(usize::from(k))) {
                    Some(g) => (g.name.as_str(), g.expect),
                    None => ("(untagged)", Expect::Any),
                };
                let pass = t.meets(expect);
                ok &= pass;
                println!(
                    "{:24} {:>8} pkts  {:40} {}",
                    name,
                    t.packets,
                    t.summary(),
                    if pass { "ok" } else { "UNEXPECTED" }
                );
            }
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}
