//! Captures: writing generated traffic to pcap or pcapng, and replaying a
//! capture through the real stages of a router configuration to see what
//! the router does with each group's packets. The formats themselves are
//! the router runtime's ([`runtime::capture`]): what `trafgen` writes the
//! router reads, and the other way round.

use std::collections::BTreeMap;
use std::path::Path;

use pipeline::{Batch, DropReason, Now, Pipeline, Verdict, BURST};
use runtime::capture::{self, CaptureWriter, Format};
use runtime::config::RouterConfig;
use runtime::templates::group_of;
use runtime::{BuildContext, Registry};

use crate::gen::Generator;

/// Writes everything `gen` produces to an Ethernet capture at `path` in
/// `format`; returns the packet count. `progress` is called with the count
/// every [`PROGRESS_EVERY`] packets (not at the end: the caller has the
/// total).
pub fn write_capture(
    gen: &mut Generator,
    path: &Path,
    format: Format,
    mut progress: impl FnMut(u64),
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut w = CaptureWriter::create(path, format)
        .map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut n = 0u64;
    while let Some(e) = gen.next_packet()? {
        w.write(e.unix_ns, e.frame).map_err(|e| format!("writing {}: {e}", path.display()))?;
        n += 1;
        if n.is_multiple_of(PROGRESS_EVERY) {
            progress(n);
        }
    }
    w.finish().map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(n)
}

/// [`write_capture`] in the format the name implies: pcapng for
/// `*.pcapng`, pcap otherwise.
pub fn write_pcap(
    gen: &mut Generator,
    path: &Path,
    progress: impl FnMut(u64),
) -> Result<u64, Box<dyn std::error::Error>> {
    write_capture(gen, path, Format::for_path(path), progress)
}

/// Packets between two progress calls of [`write_capture`].
pub const PROGRESS_EVERY: u64 = 10_000;

pub use runtime::capture::Captured;

/// Reads an Ethernet capture, pcap or pcapng (told apart by content):
/// (Unix ns, frame). A capture whose last record is cut off yields its
/// intact records, with a warning on standard error.
pub fn read_pcap(path: &Path) -> Result<Vec<Captured>, Box<dyn std::error::Error>> {
    let (frames, read) = capture::read(path)?;
    if let Some(w) = read.cut_off_warning(path) {
        crate::progress::note(format_args!("warning: {w}"));
    }
    Ok(frames)
}

/// What the router did with one group's packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Packets seen.
    pub packets: u64,
    /// Forwarded, by class.
    pub forwarded: BTreeMap<u8, u64>,
    /// Dropped, by reason.
    pub dropped: BTreeMap<DropReason, u64>,
    /// Handed to the control plane.
    pub control: u64,
}

impl Tally {
    /// Records one verdict.
    pub fn record(&mut self, v: Verdict) {
        self.packets += 1;
        match v {
            Verdict::Forward { class, .. } => *self.forwarded.entry(class.0).or_default() += 1,
            Verdict::Drop(r) => *self.dropped.entry(r).or_default() += 1,
            Verdict::ToControl => self.control += 1,
        }
    }

    /// Packets forwarded in any class.
    pub fn forwarded_total(&self) -> u64 {
        self.forwarded.values().sum()
    }

    /// Whether there were packets and every one of them meets `e`.
    pub fn meets(&self, e: crate::profile::Expect) -> bool {
        use pipeline::Class;
        self.packets > 0
            && self
                .forwarded
                .keys()
                .all(|c| e.matches(Verdict::Forward { port: 0, class: Class(*c) }))
            && self.dropped.keys().all(|r| e.matches(Verdict::Drop(*r)))
            && (self.control == 0 || e.matches(Verdict::ToControl))
    }

    /// A one-line summary, e.g. `fwd[1]=10 drop[bad_mac]=3`.
    pub fn summary(&self) -> String {
        let mut s = Vec::new();
        for (c, n) in &self.forwarded {
            s.push(format!("fwd[{c}]={n}"));
        }
        for (r, n) in &self.dropped {
            s.push(format!("drop[{r}]={n}"));
        }
        if self.control > 0 {
            s.push(format!("control={}", self.control));
        }
        s.join(" ")
    }
}

/// Runs `frames` (Unix ns, frame) through the stages of `cfg`'s pipeline
/// (one worker, batches of up to [`BURST`] at the batch's first timestamp;
/// the monotonic clock starts at 0 at the first packet, as in the router's
/// pcap backend with capture pacing) and tallies the verdicts by the group tag each frame carries (key
/// `None`: untagged frames).
pub fn replay_through(
    cfg: &RouterConfig,
    frames: &[(u64, Vec<u8>)],
) -> Result<BTreeMap<Option<u16>, Tally>, runtime::ConfigError> {
    let reg = Registry::<Vec<u8>>::with::<adapters::All>();
    let ctx =
        BuildContext { worker: 0, workers: 1, ports: cfg.ports.iter().map(|p| p.id).collect() };
    let mut pipe = Pipeline::new();
    for (i, s) in cfg.pipeline.iter().enumerate() {
        pipe.push(
            reg.build_stage(&s.kind, &ctx, &s.params)
                .map_err(|e| e.under(&format!("pipeline[{i}]")))?,
        );
    }
    let mut out: BTreeMap<Option<u16>, Tally> = BTreeMap::new();
    let t0 = frames.first().map_or(0, |f| f.0);
    for chunk in frames.chunks(BURST) {
        let mut b: Batch<Vec<u8>> = Batch::new();
        for (_, f) in chunk {
            let _ = b.push(f.clone(), 0);
        }
        let unix_ns = chunk.first().map_or(t0, |c| c.0.max(t0));
        let now = Now { mono_ns: unix_ns - t0, unix_ns };
        pipe.run(&mut b, now);
        b.drain(|buf, meta| out.entry(group_of(&buf)).or_default().record(meta.verdict));
    }
    Ok(out)
}
