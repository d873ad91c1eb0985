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
//!
//! Every option is checked before any work, with a message naming it
//! (exit code 2). Paths work from any directory: `--profile NAME` is a
//! built-in profile wherever `trafgen` runs, any other `--profile`, `-o`,
//! `--router` and capture path is relative to the working directory, and
//! the router configuration a profile file names is relative to the
//! profile's own folder (built-in profiles: the repository's `config/`).
//! Output into a pipe that closes early (`| head`) ends quietly. Progress
//! is a live counter on a terminal and a plain `progress: N packets` line
//! every few seconds in a log (`--progress-every`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use runtime::capture::Format;
use trafgen::check::{read_pcap, replay_through, write_capture};
use trafgen::gen::{duration_ns_from_secs, parse_mix};
use trafgen::profile::{self, Expect, Origin};
use trafgen::progress::{note, Lines, Progress, LOG_EVERY};
use trafgen::{GenOptions, Generator, Profile};

#[derive(Parser, Debug)]
#[command(version, about = "Legitimate and attack traffic for the DDoS data planes, to pcap")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Debug)]
struct Source {
    /// A built-in profile by name (see `list`), or the path of a profile
    /// TOML file (relative to the working directory; the router
    /// configuration it names is relative to the file's folder).
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
        /// Output capture file.
        #[arg(short, long)]
        out: PathBuf,
        /// Capture format, `pcap` or `pcapng` (default: pcapng if the output
        /// name ends in `.pcapng`, pcap otherwise).
        #[arg(long)]
        format: Option<Format>,
        /// Total packets per second over the selected groups (default: the profile's rates).
        #[arg(long, allow_negative_numbers = true)]
        rate: Option<f64>,
        /// Groups and weights, `name=weight,...` (default: all, weighted by their rates).
        #[arg(long)]
        mix: Option<String>,
        /// Stop after this many packets.
        #[arg(long, allow_negative_numbers = true)]
        count: Option<u64>,
        /// Stop after this many seconds of capture time (default 1 unless --count).
        #[arg(long, allow_negative_numbers = true)]
        duration: Option<f64>,
        /// Seed for Poisson gaps and sender phases.
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        seed: u64,
        /// Unix time (ns) of the first instant (default: the runtime's virtual epoch,
        /// which the example router configurations' keys and puzzle seeds cover).
        #[arg(long, allow_negative_numbers = true)]
        start_unix_ns: Option<u64>,
        /// Seconds between two `progress: N packets` lines when standard error
        /// is not a terminal (default 5; 0: none). On a terminal the count is
        /// one live line instead.
        #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
        progress_every: Option<f64>,
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

/// A profile and where its `router` path is relative to (`None`: the
/// profile is a router configuration's traffic, `router` as given).
fn load(source: &Source) -> Result<(Profile, Option<Origin>)> {
    if let Some(p) = &source.router_config {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let mut prof = Profile::from_router_config(&text)
            .with_context(|| format!("reading traffic groups of {}", p.display()))?;
        prof.router = Some(p.display().to_string());
        return Ok((prof, None));
    }
    let name =
        source.profile.as_deref().ok_or_else(|| anyhow!("give --profile or --router-config"))?;
    if let Some(p) = profile::builtin(name) {
        let p = p.with_context(|| format!("built-in profile {name}"))?;
        return Ok((p, Some(Origin::Builtin(name.to_string()))));
    }
    let text = std::fs::read_to_string(name).with_context(|| {
        let known: Vec<&str> = profile::BUILTIN.iter().map(|(n, _)| *n).collect();
        format!("reading {name} (not a built-in profile either: {})", known.join(", "))
    })?;
    let prof = Profile::parse(&text).with_context(|| format!("parsing {name}"))?;
    Ok((prof, Some(Origin::File(PathBuf::from(name)))))
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            note(format_args!("trafgen: {e:#}"));
            ExitCode::from(2)
        }
    }
}

/// `--start-unix-ns` and friends, checked before any work.
fn gen_options(
    rate: Option<f64>,
    mix: Option<&str>,
    count: Option<u64>,
    duration: Option<f64>,
    seed: u64,
    start_unix_ns: Option<u64>,
) -> Result<GenOptions> {
    let mix = mix.map(parse_mix).transpose().map_err(|e| anyhow!("--mix: {e}"))?;
    let duration_ns = match (duration, count) {
        (Some(d), _) => Some(duration_ns_from_secs(d).map_err(|e| anyhow!("--duration: {e}"))?),
        (None, Some(_)) => None,
        (None, None) => Some(1_000_000_000),
    };
    let mut opts =
        GenOptions { rate_pps: rate, mix, count, duration_ns, seed, ..Default::default() };
    if let Some(s) = start_unix_ns {
        opts.start_unix_ns = s;
    }
    opts.validate()?;
    Ok(opts)
}

/// `--progress-every`: the period of plain progress lines (`None`: none).
fn log_period(secs: Option<f64>) -> Result<Option<Duration>> {
    match secs {
        None => Ok(Some(LOG_EVERY)),
        Some(0.0) => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => bail!("--progress-every: {s} is not a number of seconds in [0, 86400]"),
    }
}

fn run() -> Result<ExitCode> {
    let args = Args::parse();
    let mut out = Lines::stdout();
    let code = match args.cmd {
        Cmd::List => {
            for (n, t) in profile::BUILTIN {
                let p = Profile::parse(t)?;
                out.line(format_args!("{n:12} {}", p.description))?;
            }
            ExitCode::SUCCESS
        }
        Cmd::Gen {
            source,
            out: path,
            format,
            rate,
            mix,
            count,
            duration,
            seed,
            start_unix_ns,
            progress_every,
        } => {
            let opts = gen_options(rate, mix.as_deref(), count, duration, seed, start_unix_ns)?;
            let log_every = log_period(progress_every)?;
            let (prof, _) = load(&source)?;
            let mut gen = Generator::new(&prof, opts)?;
            for g in gen.groups() {
                note(format_args!(
                    "  {:24} {:>12.1} pps  {} flows  {}",
                    g.name, g.rate_pps, g.flows, g.template
                ));
            }
            let mut progress = Progress::stderr(log_every);
            let format = Format::chosen(format, &path);
            let n =
                write_capture(&mut gen, &path, format, |n| progress.update(n)).map_err(|e| {
                    progress.interrupt();
                    anyhow!("{e}")
                })?;
            progress.finish(n);
            out.line(format_args!("wrote {n} packets to {}", path.display()))?;
            ExitCode::SUCCESS
        }
        Cmd::Check { source, router, pcap } => {
            let (prof, origin) = load(&source)?;
            let groups = prof.groups()?;
            let router = match (router, &prof.router, &origin) {
                (Some(r), _, _) => r,
                (None, Some(r), Some(origin)) => {
                    profile::resolve_router(origin, r).map_err(|e| anyhow!("{e}"))?
                }
                (None, Some(r), None) => PathBuf::from(r),
                (None, None, _) => bail!("give --router (the profile names none)"),
            };
            let cfg = runtime::config::load_file(Path::new(&router)).map_err(|e| anyhow!("{e}"))?;
            let frames =
                read_pcap(&pcap).map_err(|e| anyhow!("reading {}: {e}", pcap.display()))?;
            let tallies = replay_through(&cfg, &frames).map_err(|e| anyhow!("{e}"))?;
            let mut ok = true;
            for (key, t) in &tallies {
                let (name, expect) = match key.and_then(|k| groups.get(usize::from(k))) {
                    Some(g) => (g.name.as_str(), g.expect),
                    None => ("(untagged)", Expect::Any),
                };
                let pass = t.meets(expect);
                ok &= pass;
                out.line(format_args!(
                    "{:24} {:>8} pkts  {:40} {}",
                    name,
                    t.packets,
                    t.summary(),
                    if pass { "ok" } else { "UNEXPECTED" }
                ))?;
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    };
    out.flush()?;
    Ok(code)
}
