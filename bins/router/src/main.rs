//! `router`: runs a data-plane pipeline from a TOML configuration.
//!
//! ```text
//! router check config/default.toml
//! router gen config/fair-transit.toml --out fair.pcap [--group fair] [--unix-time S]
//!            [--flows N] [--param 'dst="10.1.0.1"'] [--frame-len 124] [--format pcapng]
//! router run config/default.toml [--duration 2s] [--packets 1000000] [--quiet]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use runtime::{config, Snapshot};

#[derive(Parser)]
#[command(name = "router", version, about = "DDoS-resilient data-plane router")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs the router until Ctrl-C or SIGTERM, the end of its input, or a limit.
    Run {
        /// The router's TOML configuration.
        config: PathBuf,
        /// Stop after this long (e.g. `500ms`, `2s`; virtual time on virtual pacing).
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        /// Stop after receiving this many packets.
        #[arg(long)]
        packets: Option<u64>,
        /// Override the number of workers.
        #[arg(long)]
        workers: Option<usize>,
        /// No live status line.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Validates a configuration (every stage, egress and backend) and exits.
    Check {
        /// The router's TOML configuration.
        config: PathBuf,
    },
    /// Writes the frames of a configuration's synthetic traffic groups to a
    /// capture (one frame per flow, groups interleaved), e.g. as the input of
    /// a `net_pcap` replay benchmark.
    Gen {
        /// A configuration with an `[io.synthetic]` section.
        config: PathBuf,
        /// The capture to write.
        #[arg(long, short)]
        out: PathBuf,
        /// Capture format, `pcap` or `pcapng` (default: pcapng if the
        /// output name ends in `.pcapng`, pcap otherwise).
        #[arg(long)]
        format: Option<runtime::capture::Format>,
        /// Only this traffic group (repeatable; default: all groups).
        #[arg(long)]
        group: Vec<String>,
        /// Unix second for protocol timestamps (default: the synthetic
        /// backend's virtual epoch, 2026-01-01, as with `pacing = "virtual"`).
        #[arg(long)]
        unix_time: Option<u64>,
        /// Override the number of flows (frames) of the selected groups.
        #[arg(long)]
        flows: Option<u32>,
        /// Override a template parameter of the selected groups,
        /// `KEY=VALUE` with a TOML value (a bare word is taken as a string);
        /// repeatable, e.g. `--param 'dst="10.1.0.1"' --param m=3`.
        #[arg(long, value_parser = parse_param)]
        param: Vec<(String, toml::Value)>,
        /// Make every frame exactly this long (Ethernet header to payload,
        /// without the 4-byte FCS) by adjusting the groups' template `size`,
        /// whatever the protocol headers the template inserts (FAIR, SCION
        /// paths): a frame-size sweep for benchmarks.
        #[arg(long)]
        frame_len: Option<usize>,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| c.is_ascii_alphabetic()).map_or((s, "s"), |i| s.split_at(i));
    let v: f64 =
        num.trim().parse().map_err(|_| format!("`{s}` is not a duration like 500ms or 2s"))?;
    let secs = match unit {
        "ns" => v * 1e-9,
        "us" => v * 1e-6,
        "ms" => v * 1e-3,
        "s" => v,
        "m" | "min" => v * 60.0,
        _ => return Err(format!("unknown unit `{unit}` (ns, us, ms, s, min)")),
    };
    let max = runtime::limits::MAX_DURATION_MS as f64 / 1e3;
    if !(secs.is_finite() && (0.0..=max).contains(&secs)) {
        return Err(format!("`{s}` is not a duration between 0 and a year"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { config } => check(&config),
        Cmd::Gen { config, out, format, group, unix_time, flows, param, frame_len } => {
            let o = GenOverrides { flows, params: param, frame_len };
            let format = runtime::capture::Format::chosen(format, &out);
            gen(&config, &out, format, &group, unix_time, &o)
        }
        Cmd::Run { config, duration, packets, workers, quiet } => {
            run(&config, duration, packets, workers, quiet)
        }
    }
}

fn check(path: &std::path::Path) -> ExitCode {
    let cfg = match config::load_file(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = control_config(&cfg) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    match runtime::check::<adapters::All>(&cfg) {
        Ok(r) => {
            println!(
                "{}: ok ({:?} backend, {} worker(s); pipeline: {}; egress: {})",
                path.display(),
                r.backend,
                r.workers,
                if r.stages.is_empty() { "-".into() } else { r.stages.join(" -> ") },
                r.egress
                    .iter()
                    .map(|(p, k)| format!("port {p} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Parses `KEY=VALUE` (VALUE as TOML, else as a string).
fn parse_param(s: &str) -> Result<(String, toml::Value), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}` is not KEY=VALUE"))?;
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() {
        return Err(format!("`{s}` has an empty key"));
    }
    let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()));
    Ok((k.to_string(), value))
}

/// `router gen` options that change the configured traffic groups.
struct GenOverrides {
    flows: Option<u32>,
    params: Vec<(String, toml::Value)>,
    frame_len: Option<usize>,
}

/// Builds the capture's frames with the overrides applied.
fn gen_frames(
    mut cfg: runtime::RouterConfig,
    groups: &[String],
    unix_s: u64,
    o: &GenOverrides,
) -> Result<Vec<(u16, Vec<u8>)>, config::ConfigError> {
    let Some(sc) = cfg.io.synthetic.as_mut() else {
        return runtime::synthetic::capture_frames(&cfg, &templates(), groups, unix_s);
    };
    let selected = |name: &str| groups.is_empty() || groups.iter().any(|g| g == name);
    for t in sc.traffic.iter_mut().filter(|t| selected(&t.name)) {
        if let Some(n) = o.flows {
            t.flows = n;
        }
        for (k, v) in &o.params {
            t.params.insert(k.clone(), v.clone());
        }
    }
    let Some(want) = o.frame_len else {
        return runtime::synthetic::capture_frames(&cfg, &templates(), groups, unix_s);
    };
    // Each template's `size` counts different bytes (before or after the
    // protocol headers it inserts): build once, measure, correct, rebuild.
    let names: Vec<String> =
        sc.traffic.iter().filter(|t| selected(&t.name)).map(|t| t.name.clone()).collect();
    for name in &names {
        let one = std::slice::from_ref(name);
        let mut tries = 0;
        loop {
            let frames = runtime::synthetic::capture_frames(&cfg, &templates(), one, unix_s)?;
            let lens: std::collections::BTreeSet<usize> =
                frames.iter().map(|(_, f)| f.len()).collect();
            let got = lens.first().copied().unwrap_or(want);
            if lens.len() == 1 && got == want {
                break;
            }
            tries += 1;
            let sc = cfg.io.synthetic.as_mut().expect("checked above");
            let t = sc.traffic.iter_mut().find(|t| &t.name == name).expect("selected group");
            let size = t.params.get("size").and_then(toml::Value::as_integer).unwrap_or(200);
            let next = size + want as i64 - got as i64;
            if tries > 3 || lens.len() != 1 || next < 1 {
                return Err(config::ConfigError::at(
                    format!("io.synthetic.traffic `{name}`"),
                    format!("cannot make its frames {want} bytes long (got {lens:?})"),
                ));
            }
            t.params.insert("size".into(), toml::Value::Integer(next));
        }
    }
    runtime::synthetic::capture_frames(&cfg, &templates(), groups, unix_s)
}

fn gen(
    path: &std::path::Path,
    out: &std::path::Path,
    format: runtime::capture::Format,
    groups: &[String],
    unix: Option<u64>,
    o: &GenOverrides,
) -> ExitCode {
    let unix_s = unix.unwrap_or(runtime::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000);
    let frames = match config::load_file(path)
        .and_then(|cfg| gen_frames(cfg, groups, unix_s, o).map_err(|e| e.in_file(path)))
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ports: std::collections::BTreeSet<u16> = frames.iter().map(|(p, _)| *p).collect();
    match runtime::capture::write_frames(
        out,
        format,
        frames.iter().map(|(_, f)| f.as_slice()),
        unix_s.saturating_mul(1_000_000_000),
    ) {
        Ok(n) => {
            eprintln!(
                "{}: {n} frames, {format} (ingress ports {ports:?}, Unix time {unix_s})",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn run(
    path: &std::path::Path,
    duration: Option<Duration>,
    packets: Option<u64>,
    workers: Option<usize>,
    quiet: bool,
) -> ExitCode {
    let mut cfg = match config::load_file(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(d) = duration {
        cfg.run.duration_ms = Some(d.as_millis() as u64);
    }
    if let Some(p) = packets {
        cfg.run.packets = Some(p);
    }
    if let Some(w) = workers {
        cfg.workers.count = w;
    }
    let name = if cfg.router.name.is_empty() {
        path.display().to_string()
    } else {
        cfg.router.name.clone()
    };
    let control_cfg = match control_config(&cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let router = match runtime::start::<adapters::All>(cfg.clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The control plane owns the router while it runs; without `[control]` no
    // server is started and the plane is only a handle.
    let apply_timeout = control_cfg.as_ref().map(|c| c.apply_timeout());
    let plane = match apply_timeout {
        Some(t) => control::Plane::with_timeout(router, cfg, t),
        None => control::Plane::new(router, cfg),
    };
    let server = match &control_cfg {
        Some(c) => match control::serve::<adapters::All>(plane.clone(), c) {
            Ok(s) => {
                // The bound addresses (a configured port 0 is resolved here).
                let tls = if c.tls.is_some() { "https" } else { "http" };
                match s.metrics_addr {
                    Some(m) => {
                        eprintln!("control API on {}, metrics on {tls}://{m}/metrics", s.grpc_addr)
                    }
                    None => eprintln!("control API on {}", s.grpc_addr),
                }
                Some(s)
            }
            Err(e) => {
                eprintln!("error: control API: {e}");
                plane.stop();
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // SIGINT and SIGTERM stop the workers after their burst; the summary is
    // printed, captures flushed and ports closed. A second signal while
    // stopping exits at once (a stuck shutdown).
    let stop = plane.stop_flag();
    let mut interrupted = false;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let handlers = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()));
        if let Err(e) = handlers {
            eprintln!("warning: no handler for signal {sig}: {e}");
        }
    }
    // SIGHUP re-reads the configuration file and applies what can change live.
    let hup = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone()) {
        eprintln!("warning: no handler for SIGHUP (no reload): {e}");
    }
    for w in plane.warnings() {
        eprintln!("warning: {w}");
    }
    let workers = plane.config().0.workers.count;
    if workers > 1 {
        eprintln!(
            "{workers} workers: every configured rate is the link's, AS's or host's total; \
             each worker applies 1/{workers} of it (docs/multicore.md)"
        );
    }
    eprintln!("router `{name}` running (Ctrl-C or SIGTERM to stop, SIGHUP to reload)");
    let started = Instant::now();
    let mut prev = plane.snapshot();
    let mut prev_t = started;
    while !plane.is_finished() {
        // Short polls: the end of a run (and its wall time) is seen within 10 ms.
        std::thread::sleep(Duration::from_millis(10));
        if prev_t.elapsed() >= Duration::from_secs(1) {
            let now = plane.snapshot();
            if !quiet {
                eprintln!("{}", status_line(&prev, &now, prev_t.elapsed()));
            }
            prev = now;
            prev_t = Instant::now();
        }
        if plane.stop_flag().load(std::sync::atomic::Ordering::Relaxed) {
            interrupted = true;
        }
        if hup.swap(false, std::sync::atomic::Ordering::Relaxed) {
            reload(&plane, path);
        }
    }
    let wall = started.elapsed();
    plane.stop();
    if let Some(s) = server {
        s.shutdown();
    }
    let Ok(plane) = std::sync::Arc::try_unwrap(plane) else {
        eprintln!("error: control plane still referenced at shutdown");
        return ExitCode::FAILURE;
    };
    match plane.into_router().wait() {
        Ok(s) => {
            // A closed standard output (`| head`) is not an error here.
            let _ = std::io::Write::write_all(
                &mut std::io::stdout().lock(),
                summary(&name, &s, wall, interrupted).as_bytes(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads `path` again and applies what can change live (`SIGHUP`); says
/// what happened, and what needs a restart, on standard error.
fn reload(plane: &control::Plane, path: &std::path::Path) {
    let checked = config::load_file(path)
        .map_err(|e| e.to_string())
        .and_then(|c| runtime::check::<adapters::All>(&c).map(|_| c).map_err(|e| e.to_string()));
    let new = match checked {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reload refused, nothing changed: {e}");
            return;
        }
    };
    match plane.reload(&new) {
        Ok(r) => {
            eprintln!("reload: {} (generation {})", r.applied.detail, r.applied.generation);
            if !r.needs_restart.is_empty() {
                eprintln!("reload: not applied, needs a restart: {}", r.needs_restart.join(", "));
            }
        }
        Err(e) => eprintln!("reload refused, nothing changed: {e}"),
    }
}

/// The `[control]` section, validated, if the configuration has one.
fn control_config(
    cfg: &runtime::config::RouterConfig,
) -> Result<Option<control::ControlConfig>, String> {
    cfg.control
        .as_ref()
        .map(|t| {
            control::ControlConfig::from_toml(t)
                .and_then(|mut c| {
                    // Paths are relative to the configuration file, as elsewhere.
                    c.resolve_paths(|p| cfg.resolve(p));
                    <adapters::All as control::Services>::check(&c)?;
                    c.check_resources()?;
                    Ok(c)
                })
                .map_err(|e| format!("{}: key `control`: {e}", cfg.source.display()))
        })
        .transpose()
}

/// The packet templates of this build (synthetic traffic, `router gen`).
fn templates() -> runtime::Templates {
    runtime::Templates::with::<adapters::All>()
}

fn rate(n: u64, d: Duration) -> String {
    let r = n as f64 / d.as_secs_f64().max(1e-9);
    if r >= 1e6 {
        format!("{:.2} Mpps", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} kpps", r / 1e3)
    } else {
        format!("{r:.0} pps")
    }
}

fn status_line(prev: &Snapshot, now: &Snapshot, dt: Duration) -> String {
    let drops_now = now.drops();
    let drops_prev = prev.drops();
    let mut drops: Vec<String> = drops_now
        .nonzero()
        .map(|(r, n)| (r, n - drops_prev.get(r)))
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{r} {}", rate(n, dt)))
        .collect();
    if drops.is_empty() {
        drops.push("none".into());
    }
    let queues: Vec<String> = now
        .ports
        .iter()
        .zip(&prev.ports)
        .map(|(p, q)| {
            format!(
                "p{} tx {} q{}",
                p.id,
                rate(p.counters.tx - q.counters.tx, dt),
                p.counters.queued
            )
        })
        .collect();
    format!(
        "rx {} | tx {} | drops: {} | {}",
        rate(now.rx() - prev.rx(), dt),
        rate(now.tx() - prev.tx(), dt),
        drops.join(", "),
        queues.join(" | ")
    )
}

/// The end-of-run summary (rates over the run's own clock: virtual or wall).
fn summary(name: &str, s: &Snapshot, wall: Duration, interrupted: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let run = Duration::from_nanos(s.elapsed_ns.max(1));
    let _ = writeln!(
        o,
        "== {name}: {} after {:.3} s router time ({:.3} s wall){}",
        if interrupted { "stopped" } else { "finished" },
        run.as_secs_f64(),
        wall.as_secs_f64(),
        if interrupted { " by a signal" } else { "" }
    );
    let _ = writeln!(
        o,
        "packets: rx {} tx {} dropped {} queued {} to-control {}  (processing {} wall)",
        s.rx(),
        s.tx(),
        s.drops().total(),
        s.queued(),
        s.to_control,
        rate(s.rx(), wall)
    );
    if !s.groups.is_empty() {
        let _ = writeln!(o, "traffic groups (rates in router time):");
        for g in &s.groups {
            let pct =
                if g.offered > 0 { 100.0 * g.delivered as f64 / g.offered as f64 } else { 0.0 };
            let _ = writeln!(
                o,
                "  {:<20} offered {:>12} ({:>11})  delivered {:>12} ({:>11})  {:6.2}%",
                g.name,
                g.offered,
                rate(g.offered, run),
                g.delivered,
                rate(g.delivered, run),
                pct
            );
        }
    }
    let _ = writeln!(o, "ports:");
    for p in &s.ports {
        let c = &p.counters;
        let _ = write!(
            o,
            "  port {:<3} rx {:>12} tx {:>12} ({}) queued {}",
            p.id,
            c.rx,
            c.tx,
            rate(c.tx, run),
            c.queued
        );
        for (r, n) in c.drops.nonzero() {
            let _ = write!(o, " {r}={n}");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "stages:");
    for (n, c) in &s.stages {
        let _ = write!(o, "  {:<20} in {:>12}", n, c.packets);
        if c.to_control > 0 {
            let _ = write!(o, " to-control={}", c.to_control);
        }
        for (r, k) in c.drops.nonzero() {
            let _ = write!(o, " {r}={k}");
        }
        let _ = writeln!(o);
    }
    if let Some(sp) = &s.slow_path {
        slow_path_summary(&mut o, s, sp);
    }
    o
}

/// The slow path's part of the summary: what it took, what became of it,
/// its latency (punt to verdict, wall clock) and its stages.
fn slow_path_summary(o: &mut String, s: &Snapshot, sp: &runtime::slowpath::SlowPathSnapshot) {
    use std::fmt::Write;
    let full: u64 =
        s.ports.iter().map(|p| p.counters.drops.get(pipeline::DropReason::SlowPathFull)).sum();
    let _ = writeln!(
        o,
        "slow path: received {} ({:.0} pps wall) forwarded {} delivered {} dropped {} ring-full {}",
        sp.received, sp.rate_pps, sp.forwarded, sp.consumed, sp.dropped, full
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    let _ = writeln!(
        o,
        "  latency: mean {:.1} µs, p99 < {:.1} µs, max {:.1} µs",
        us(sp.latency_mean_ns),
        us(sp.latency_p99_ns),
        us(sp.latency_max_ns)
    );
    for (i, (n, c)) in sp.stages.iter().enumerate() {
        let _ = write!(o, "  {:<20} in {:>12}", n, c.packets);
        for (r, k) in c.drops.nonzero() {
            let _ = write!(o, " {r}={k}");
        }
        let own = |v: &&runtime::stats::Named| v.scope == runtime::stats::Scope::Stage(i);
        for v in sp.named.iter().filter(own).filter(|v| v.value > 0) {
            let _ = write!(o, " {}={}", v.name, v.value);
        }
        let _ = writeln!(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("2 weeks").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
