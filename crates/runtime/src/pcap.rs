//! The pcap backend: replays captures into ports, writes one capture per egress port.
//!
//! Inputs (`[[io.pcap.inputs]]`, one capture per ingress port, Ethernet
//! frames) are pcap or pcapng files, told apart by their content
//! ([`crate::capture`]); they are read completely when the backend opens —
//! this is a replay and test tool, not a fast path — merged by timestamp,
//! and dealt to workers by the software RSS hash, as a NIC would. Packets
//! are copied into pooled frames on receive, so no allocation happens per
//! packet while running.
//!
//! Time (`pacing`): `capture` (default) runs the pipeline at the capture's
//! timestamps, so a replay is deterministic; `wall` uses the wall clock.
//! Outputs (`[[io.pcap.outputs]]`) are written with the burst's Unix time,
//! as pcapng if the file name ends in `.pcapng` or the entry says
//! `format = "pcapng"`, as pcap otherwise. Workers share an output file
//! behind a mutex taken once per TX burst.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use pipeline::{Batch, Frame, Now, PacketBuf, BURST};

use crate::capture::{self, CaptureWriter, Format};
use crate::config::{ConfigError, RouterConfig};
use crate::io::{FramePool, WallClock, WorkerIo};
use crate::rss::{hash_by, shard, RssKey};
use crate::stats::LocalCounters;
use crate::RuntimeError;

/// Time source of the pcap backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PcapPacing {
    /// The capture's timestamps.
    #[default]
    Capture,
    /// The wall clock.
    Wall,
}

/// `[io.pcap]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapConfig {
    /// Captures to replay.
    #[serde(default)]
    pub inputs: Vec<PcapFile>,
    /// Captures to write.
    #[serde(default)]
    pub outputs: Vec<PcapFile>,
    /// Time source.
    #[serde(default)]
    pub pacing: PcapPacing,
    /// Frames per worker pool.
    #[serde(default = "default_pool")]
    pub pool: usize,
}

fn default_pool() -> usize {
    4096
}

/// A capture file bound to a port (relative paths: against the config file's directory).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapFile {
    /// The port.
    pub port: u16,
    /// The capture.
    pub file: PathBuf,
    /// For an output: `pcap` or `pcapng` (default: what the name implies,
    /// [`Format::for_path`]). Inputs are recognized by their content, so an
    /// input entry with a format is refused.
    #[serde(default)]
    pub format: Option<Format>,
}

impl PcapFile {
    /// `file` on `port`, in the format its name implies.
    pub fn new(port: u16, file: impl Into<PathBuf>) -> Self {
        PcapFile { port, file: file.into(), format: None }
    }

    /// The format to write this output in.
    pub fn output_format(&self) -> Format {
        Format::chosen(self.format, &self.file)
    }
}

/// One packet read from a capture.
struct Recorded {
    port: u16,
    ts_ns: u64,
    hash: u32,
    data: Vec<u8>,
}

type Writer = CaptureWriter<BufWriter<File>>;
type Output = Option<Arc<Mutex<Option<Writer>>>>;

/// One worker's share of the capture and its handles to the outputs.
pub struct PcapIo {
    packets: std::vec::IntoIter<Recorded>,
    peeked: Option<Recorded>,
    outputs: Arc<Vec<(u16, Output)>>,
    /// Workers still running; the last one to finish flushes the outputs.
    running: Arc<std::sync::atomic::AtomicUsize>,
    rx_ports: Vec<u16>,
    pool: FramePool,
    pacing: PcapPacing,
    clock: WallClock,
    last: Now,
    /// Port id → slot in `[[ports]]`.
    slots: Vec<(u16, usize)>,
    /// Per slot: frames too long for a buffer since the last publication.
    too_long: Vec<u64>,
}

fn check_ports(cfg: &RouterConfig, pc: &PcapConfig) -> Result<(), ConfigError> {
    for (name, list) in [("inputs", &pc.inputs), ("outputs", &pc.outputs)] {
        for (i, f) in list.iter().enumerate() {
            if cfg.port_index(f.port).is_none() {
                return Err(ConfigError::at(
                    format!("io.pcap.{name}[{i}].port"),
                    format!("port {} is not in [[ports]]", f.port),
                ));
            }
            if list[..i].iter().any(|g| g.port == f.port) {
                return Err(ConfigError::at(
                    format!("io.pcap.{name}[{i}].port"),
                    "one capture per port",
                ));
            }
            if name == "inputs" && f.format.is_some() {
                return Err(ConfigError::at(
                    format!("io.pcap.{name}[{i}].format"),
                    "inputs are recognized by their content; `format` is for outputs",
                ));
            }
        }
    }
    Ok(())
}

/// Validates the pcap section: ports exist, the pool is within bounds,
/// every input is a readable pcap or pcapng capture of Ethernet frames
/// (every record walked), every output can be created. Returns warnings (a
/// capture whose last record or block is cut off replays its intact
/// records).
pub fn check(cfg: &RouterConfig) -> Result<Vec<String>, ConfigError> {
    let pc = cfg.io.pcap.as_ref().ok_or_else(|| ConfigError::at("io.pcap", "missing"))?;
    check_ports(cfg, pc)?;
    crate::limits::count("io.pcap.pool", pc.pool, crate::limits::MAX_POOL_FRAMES)?;
    let mut warnings = Vec::new();
    for (i, f) in pc.inputs.iter().enumerate() {
        let path = cfg.resolve(&f.file);
        let key = format!("io.pcap.inputs[{i}].file");
        let read = capture::for_each_packet(&path, |_| {})
            .map_err(|e| ConfigError::at(&key, format!("{}: {e}", path.display())))?;
        if let Some(w) = read.cut_off_warning(&path) {
            warnings.push(format!("{key}: {w}"));
        }
    }
    for (i, f) in pc.outputs.iter().enumerate() {
        let path = cfg.resolve(&f.file);
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let key = format!("io.pcap.outputs[{i}].file");
        if path.is_dir() {
            return Err(ConfigError::at(key, format!("{} is a directory", path.display())));
        }
        let probe = dir.join(format!(".router-check-{}", std::process::id()));
        File::create(&probe).map_err(|e| {
            ConfigError::at(&key, format!("cannot write in {}: {e}", dir.display()))
        })?;
        let _ = std::fs::remove_file(&probe);
    }
    Ok(warnings)
}

fn read_capture(
    path: &std::path::Path,
    port: u16,
    rss: RssKey,
    out: &mut Vec<Recorded>,
) -> Result<(), RuntimeError> {
    // `check` warned about a cut-off last record; the intact ones replay.
    capture::for_each_packet(path, |p| {
        let data = p.data.to_vec();
        out.push(Recorded { port, ts_ns: p.ts_ns, hash: hash_by(&data, rss), data });
    })
    .map_err(|e| RuntimeError::Io(format!("{}: {e}", path.display())))?;
    Ok(())
}

impl PcapIo {
    /// Reads the inputs, creates the outputs and deals packets to workers.
    pub fn open(cfg: &RouterConfig) -> Result<Vec<PcapIo>, RuntimeError> {
        let pc = cfg.io.pcap.as_ref().ok_or(ConfigError::at("io.pcap", "missing"))?;
        check_ports(cfg, pc)?;
        let mut all = Vec::new();
        for f in &pc.inputs {
            read_capture(&cfg.resolve(&f.file), f.port, cfg.workers.rss, &mut all)?;
        }
        // Stable sort keeps each capture's order among equal timestamps.
        all.sort_by_key(|r| r.ts_ns);
        let mut outputs = Vec::new();
        for p in &cfg.ports {
            let out = match pc.outputs.iter().find(|o| o.port == p.id) {
                Some(o) => {
                    let path = cfg.resolve(&o.file);
                    let w = CaptureWriter::create(&path, o.output_format())
                        .map_err(|e| RuntimeError::Io(format!("{}: {e}", path.display())))?;
                    Some(Arc::new(Mutex::new(Some(w))))
                }
                None => None,
            };
            outputs.push((p.id, out));
        }
        let outputs = Arc::new(outputs);
        let workers = cfg.workers.count;
        let mut shares: Vec<Vec<Recorded>> = (0..workers).map(|_| Vec::new()).collect();
        for r in all {
            shares[shard(r.hash, workers)].push(r);
        }
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(workers));
        let mut rx_ports: Vec<u16> = pc.inputs.iter().map(|f| f.port).collect();
        rx_ports.sort_unstable();
        Ok(shares
            .into_iter()
            .map(|packets| PcapIo {
                packets: packets.into_iter(),
                peeked: None,
                outputs: outputs.clone(),
                running: running.clone(),
                rx_ports: rx_ports.clone(),
                pool: FramePool::new(pc.pool),
                pacing: pc.pacing,
                clock: WallClock::new(),
                last: Now::default(),
                slots: cfg.ports.iter().enumerate().map(|(s, p)| (p.id, s)).collect(),
                too_long: vec![0; cfg.ports.len()],
            })
            .collect())
    }

    fn peek(&mut self) -> Option<&Recorded> {
        if self.peeked.is_none() {
            self.peeked = self.packets.next();
        }
        self.peeked.as_ref()
    }
}

impl WorkerIo for PcapIo {
    type Buf = Frame;

    fn rx_ports(&self) -> &[u16] {
        &self.rx_ports
    }

    fn rx_burst(&mut self, port: u16, batch: &mut Batch<Frame>) -> usize {
        let start = batch.len();
        // Consecutive packets of this port only, so that capture order is kept.
        while batch.len() < BURST {
            match self.peek() {
                Some(r) if r.port == port => {}
                _ => break,
            }
            let Some(r) = self.peeked.take() else { break };
            let mut f = self.pool.get();
            if f.set(&r.data).is_err() {
                // Larger than a frame: cannot be received (a NIC would drop
                // it too); counted as a drop of its port.
                self.pool.put(f);
                if let Some(&(_, s)) = self.slots.iter().find(|(id, _)| *id == port) {
                    self.too_long[s] += 1;
                }
                continue;
            }
            if let Ok(i) = batch.push(f, port) {
                batch.set_hash(i, r.hash);
            }
        }
        batch.len() - start
    }

    fn tx_burst(&mut self, port: u16, pkts: &mut Vec<Frame>, now: Now) -> usize {
        let n = pkts.len();
        let out = self.outputs.iter().find(|(id, _)| *id == port).and_then(|(_, o)| o.as_ref());
        if let Some(out) = out {
            // A poisoned lock only means another worker panicked mid-write;
            // keep writing our packets.
            let mut w = out.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = w.as_mut() {
                for f in pkts.iter() {
                    let _ = w.write(now.unix_ns, f.data());
                }
            }
        }
        for f in pkts.drain(..) {
            self.pool.put(f);
        }
        n
    }

    fn free(&mut self, buf: Frame) {
        self.pool.put(buf);
    }

    fn now(&mut self) -> Now {
        match self.pacing {
            PcapPacing::Wall => self.clock.now(),
            PcapPacing::Capture => {
                if let Some(ts) = self.peek().map(|r| r.ts_ns) {
                    // Never let time run backwards, even in a badly ordered capture.
                    let t = ts.max(self.last.unix_ns);
                    let mono = if self.last == Now::default() {
                        0
                    } else {
                        self.last.mono_ns + (t - self.last.unix_ns)
                    };
                    self.last = Now { mono_ns: mono, unix_ns: t };
                }
                self.last
            }
        }
    }

    fn exhausted(&self) -> bool {
        self.peeked.is_none() && self.packets.len() == 0
    }

    fn io_counters(&mut self, local: &mut LocalCounters) {
        for (s, n) in self.too_long.iter_mut().enumerate() {
            if *n > 0 {
                local.ports[s].rx += *n;
                local.ports[s].drops.add(pipeline::DropReason::TooLong, *n);
                *n = 0;
            }
        }
    }

    fn idle(&mut self) {
        std::thread::yield_now();
    }

    fn finish(&mut self) -> Result<(), RuntimeError> {
        if self.running.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) != 1 {
            return Ok(());
        }
        for (_, out) in self.outputs.iter() {
            if let Some(out) = out {
                let w = out.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(w) = w {
                    w.finish().map_err(|e| RuntimeError::Io(e.to_string()))?;
                }
            }
        }
        Ok(())
    }
}

/// Writes `frames` to a new Ethernet capture at `path`, all stamped with
/// `unix_ns` (the input of a replay: `router gen`, benchmarks, tests);
/// pcapng if the name ends in `.pcapng`, pcap otherwise (another format:
/// [`capture::write_frames`]).
pub fn write_capture<'a>(
    path: &Path,
    frames: impl IntoIterator<Item = &'a [u8]>,
    unix_ns: u64,
) -> Result<usize, RuntimeError> {
    capture::write_frames(path, Format::for_path(path), frames, unix_ns)
        .map_err(|e| RuntimeError::Io(format!("{}: {e}", path.display())))
}
