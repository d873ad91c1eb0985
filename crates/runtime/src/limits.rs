//! Upper bounds of every size, count and rate the runtime takes from outside
//! (configuration file, command line, control API), and the memory estimate
//! checked before anything is allocated.
//!
//! Each bound is far above what a deployment needs and far below what would
//! exhaust the machine or overflow arithmetic; a value beyond it is a typo.
//! A value within the bounds can still ask for more memory than the machine
//! has: [`estimate`] adds up what the configuration will allocate, and
//! [`check_memory`] refuses it, naming the biggest consumers.

use crate::config::{BackendKind, ConfigError, RouterConfig};

/// Most workers (one per core).
pub const MAX_WORKERS: usize = 256;
/// Most ports.
pub const MAX_PORTS: usize = 1024;
/// Longest worker command queue.
pub const MAX_COMMAND_QUEUE: usize = 1 << 16;
/// Most bursts between two counter publications.
pub const MAX_PUBLISH_EVERY: u32 = 1 << 20;
/// Longest egress queue, in packets (per queue, per worker).
pub const MAX_QUEUE_PACKETS: usize = 1 << 22;
/// Largest shaper burst, in packets.
pub const MAX_SHAPER_BURST: u32 = 1 << 20;
/// Highest packet rate of a generator group or a port shaper: 1 Gpps.
pub const MAX_RATE_PPS: f64 = 1e9;
/// Highest line rate of a port shaper or byte cap: 10 Tbit/s.
pub const MAX_RATE_MBPS: f64 = 1e7;
/// Most frames in a synthetic backend's pool (per worker).
pub const MAX_POOL_FRAMES: usize = 1 << 22;
/// Longest run (`run.duration_ms`, `--duration`): one year.
pub const MAX_DURATION_MS: u64 = 366 * 24 * 3600 * 1000;

/// Checks that `value` (at `key`) is in `1..=max`.
pub fn count(key: &str, value: usize, max: usize) -> Result<(), ConfigError> {
    if (1..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::at(key, format!("{value} is not in 1..={max}")))
    }
}

/// Checks that a rate (at `key`) is a finite number in `(0, max]`.
pub fn rate(key: &str, value: f64, max: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 && value <= max {
        Ok(())
    } else {
        Err(ConfigError::at(key, format!("{value} is not a number in (0, {max:e}]")))
    }
}

/// One consumer of memory in an [`estimate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// Its key in the configuration (e.g. `io.synthetic.pool`, `pipeline[2]`).
    pub what: String,
    /// Bytes, over all workers.
    pub bytes: u64,
}

/// What the configuration will allocate before the first packet, largest
/// first: buffer pools and egress queues of every worker, plus what each
/// stage and egress discipline reports for itself (`stages`: key and bytes
/// per worker, from the kinds' parsers).
pub fn estimate(cfg: &RouterConfig, stages: &[(String, u64)]) -> Vec<Consumer> {
    let workers = cfg.workers.count as u64;
    let mut v = Vec::new();
    match cfg.io.backend {
        BackendKind::Synthetic => {
            if let Some(s) = &cfg.io.synthetic {
                let frame = pipeline::buf::FRAME_CAPACITY as u64 + 64;
                v.push(Consumer {
                    what: "io.synthetic.pool".into(),
                    bytes: (s.pool as u64).saturating_mul(frame).saturating_mul(workers),
                });
            }
        }
        BackendKind::Dpdk => {
            if let Some(d) = &cfg.io.dpdk {
                // An mbuf of the default data room plus its header.
                v.push(Consumer {
                    what: "io.dpdk.mbufs".into(),
                    bytes: u64::from(d.mbufs).saturating_mul(2304).saturating_mul(workers),
                });
            }
        }
        BackendKind::Pcap => {}
    }
    for (what, bytes) in stages {
        // The slow path's stages exist once; everything else once per worker.
        let n = if what.starts_with("slow_path.") { 1 } else { workers };
        v.push(Consumer { what: what.clone(), bytes: bytes.saturating_mul(n) });
    }
    v.retain(|c| c.bytes > 0);
    v.sort_by_key(|c| std::cmp::Reverse(c.bytes));
    v
}

/// Memory the kernel reports as available (`MemAvailable`), if it does.
pub fn available_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses `consumers` if they need more than `available` bytes (or than
/// the machine's available memory when `None`), naming the biggest ones.
pub fn check_memory(consumers: &[Consumer], available: Option<u64>) -> Result<(), ConfigError> {
    let Some(avail) = available.or_else(available_memory) else { return Ok(()) };
    let total: u64 = consumers.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
    if total <= avail {
        return Ok(());
    }
    let top: Vec<String> =
        consumers.iter().take(3).map(|c| format!("{} {}", c.what, human(c.bytes))).collect();
    Err(ConfigError::at(
        consumers.first().map_or("", |c| c.what.as_str()),
        format!(
            "the configuration needs about {} of memory, {} is available (biggest: {})",
            human(total),
            human(avail),
            top.join(", ")
        ),
    ))
}

/// Bytes for people: `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_memory_messages() {
        assert!(count("k", 0, 4).is_err());
        assert!(count("k", 5, 4).is_err());
        assert!(count("k", 4, 4).is_ok());
        assert!(rate("r", f64::NAN, 1.0).is_err());
        assert!(rate("r", 1e300, MAX_RATE_PPS).is_err());
        assert!(rate("r", 0.0, 1.0).is_err());
        let c = vec![
            Consumer { what: "a".into(), bytes: 3 << 30 },
            Consumer { what: "b".into(), bytes: 1 << 30 },
        ];
        let e = check_memory(&c, Some(2 << 30)).unwrap_err();
        assert_eq!(e.key, "a");
        assert!(e.reason.contains("4.0 GiB") && e.reason.contains("a 3.0 GiB"), "{}", e.reason);
        assert!(check_memory(&c, Some(8 << 30)).is_ok());
        assert_eq!(human(1536), "1.5 KiB");
    }
}
