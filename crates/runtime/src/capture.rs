//! Capture files, read and written in one place: pcap and pcapng.
//!
//! Every tool of the project that reads or writes a capture goes through
//! this module: the pcap backend's inputs and outputs, `router check`,
//! `router gen`, `trafgen gen` and `trafgen check`.
//!
//! **Reading** ([`for_each_packet`], [`read`]) picks the format from the
//! file's first four bytes, never from its name: the pcap magic in either
//! byte order, with microsecond or nanosecond timestamps (`a1b2c3d4`,
//! `a1b23c4d` and their byte swaps), or the pcapng Section Header Block
//! type (`0a0d0d0a`). A pcapng file may hold several sections (each with
//! its own byte order) and several interfaces per section: every packet is
//! read with the link type, the timestamp resolution (`if_tsresol`, decimal
//! or binary) and the offset (`if_tsoffset`) of its own interface. Only
//! Ethernet frames are read; a packet of another link type is refused with
//! that link type. A capture whose last record (pcap) or block (pcapng) is
//! cut off yields its intact packets and says why in
//! [`ReadSummary::cut_off`]; anything else malformed is an error.
//!
//! **Writing** ([`CaptureWriter`], [`write_frames`]): pcap (microsecond
//! timestamps, as before) or pcapng (one Ethernet interface with
//! nanosecond timestamps), chosen by the caller, by default from the file
//! name ([`Format::for_path`]: `.pcapng` means pcapng).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, PcapError};
use serde::Deserialize;

/// A capture file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The classic libpcap format.
    Pcap,
    /// pcapng, Wireshark's default.
    Pcapng,
}

impl Format {
    /// The format a file name implies for writing: pcapng if it ends in
    /// `.pcapng` (any case), pcap otherwise.
    pub fn for_path(path: &Path) -> Format {
        match path.extension() {
            Some(e) if e.eq_ignore_ascii_case("pcapng") => Format::Pcapng,
            _ => Format::Pcap,
        }
    }

    /// `explicit` if given, else what the name implies ([`Format::for_path`]).
    pub fn chosen(explicit: Option<Format>, path: &Path) -> Format {
        explicit.unwrap_or_else(|| Format::for_path(path))
    }

    /// `pcap` or `pcapng`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::Pcapng => "pcapng",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pcap" => Ok(Format::Pcap),
            "pcapng" => Ok(Format::Pcapng),
            _ => Err(format!("`{s}` is not a capture format (pcap or pcapng)")),
        }
    }
}

/// Why a capture cannot be read or written. The messages do not repeat
/// the file's path: callers name it.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Opening, reading or writing the file failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The file starts with neither a pcap nor a pcapng magic.
    #[error("not a pcap or pcapng capture ({0})")]
    Unknown(String),
    /// The file is of `format` but malformed (not merely cut off at the end).
    #[error("not a valid {format} capture ({why})")]
    Malformed {
        /// The format its first bytes announce.
        format: Format,
        /// What is wrong, and where.
        why: String,
    },
    /// A packet of a link type other than Ethernet.
    #[error(
        "{at}link type {link} ({}) is not Ethernet (1); only Ethernet frames are read",
        link_name(*.link)
    )]
    NotEthernet {
        /// The link type (tcpdump.org `LINKTYPE_*` number).
        link: u32,
        /// Where it was declared: empty for a pcap file, the interface and
        /// section in a pcapng file.
        at: String,
    },
    /// The pcap-file crate refused a packet or header (writing).
    #[error("{0}")]
    Pcap(#[from] PcapError),
}

fn link_name(link: u32) -> String {
    match DataLink::from(link) {
        DataLink::Unknown(_) => "unregistered".into(),
        d => format!("{d:?}"),
    }
}

/// `LINKTYPE_ETHERNET`.
const ETHERNET: u32 = 1;

/// One packet read from a capture.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Unix time in nanoseconds.
    pub ts_ns: u64,
    /// The Ethernet frame, as captured.
    pub data: &'a [u8],
}

/// What a read found besides the packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSummary {
    /// The file's format, from its content.
    pub format: Format,
    /// Packets read.
    pub packets: u64,
    /// Why the last record (pcap) or block (pcapng) is incomplete, if it
    /// is: the packets before it were read.
    pub cut_off: Option<String>,
}

impl ReadSummary {
    /// What to tell an operator about a capture at `path` cut off at the
    /// end (the same for every tool and format), if it is.
    pub fn cut_off_warning(&self, path: &Path) -> Option<String> {
        self.cut_off.as_ref().map(|why| {
            format!(
                "{}: the last record is cut off ({why}); its {} intact records replay",
                path.display(),
                self.packets
            )
        })
    }
}

/// The first four bytes of a pcapng file (the Section Header Block type).
const PCAPNG_SHB: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// pcap magics, as the bytes appear in the file: microsecond and
/// nanosecond timestamps, big- and little-endian.
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x4d, 0x3c, 0xb2, 0xa1],
];

/// The format announced by a file's first bytes.
pub fn sniff(first: &[u8]) -> Result<Format, CaptureError> {
    match first.get(..4) {
        Some(m) if m == PCAPNG_SHB => Ok(Format::Pcapng),
        Some(m) if PCAP_MAGICS.iter().any(|p| p == m) => Ok(Format::Pcap),
        _ if first.is_empty() => Err(CaptureError::Unknown("the file is empty".into())),
        _ => Err(CaptureError::Unknown(format!("it starts with {}", hex::encode(first)))),
    }
}

/// Calls `f` on every packet of the capture at `path`, pcap or pcapng.
pub fn for_each_packet(
    path: &Path,
    f: impl FnMut(Packet<'_>),
) -> Result<ReadSummary, CaptureError> {
    let mut r = BufReader::new(File::open(path)?);
    let mut first = [0u8; 4];
    let n = fill(&mut r, &mut first)?;
    let format = sniff(&first[..n])?;
    let r = io::Cursor::new(first).chain(r);
    match format {
        Format::Pcap => read_pcap(r, f),
        Format::Pcapng => read_pcapng(r, f),
    }
}

/// A captured frame: (Unix ns, bytes).
pub type Captured = (u64, Vec<u8>);

/// Every packet of the capture at `path`.
pub fn read(path: &Path) -> Result<(Vec<Captured>, ReadSummary), CaptureError> {
    let mut v = Vec::new();
    let s = for_each_packet(path, |p| v.push((p.ts_ns, p.data.to_vec())))?;
    Ok((v, s))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn read_pcap(r: impl Read, mut f: impl FnMut(Packet<'_>)) -> Result<ReadSummary, CaptureError> {
    let mut reader = PcapReader::new(r)
        .map_err(|e| CaptureError::Malformed { format: Format::Pcap, why: e.to_string() })?;
    let link = u32::from(reader.header().datalink);
    if link != ETHERNET {
        return Err(CaptureError::NotEthernet { link, at: String::new() });
    }
    let mut s = ReadSummary { format: Format::Pcap, packets: 0, cut_off: None };
    while let Some(p) = reader.next_packet() {
        match p {
            Ok(p) => {
                let ts_ns = u64::try_from(p.timestamp.as_nanos()).unwrap_or(u64::MAX);
                f(Packet { ts_ns, data: &p.data });
                s.packets += 1;
            }
            Err(e) => {
                s.cut_off = Some(e.to_string());
                break;
            }
        }
    }
    Ok(s)
}

/// pcapng block types read here (others are skipped).
const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const OBSOLETE_PB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;

/// The byte-order magic of a Section Header Block.
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

/// An Interface Description Block, as far as packets need it.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: u32,
    snaplen: u32,
    /// `if_tsresol`: the unit of timestamps.
    unit: TsUnit,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset_s: i64,
}

/// A timestamp unit: 10^-n or 2^-n seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsUnit {
    Decimal(u32),
    Binary(u32),
}

impl TsUnit {
    /// From the `if_tsresol` byte (microseconds when absent).
    fn from_tsresol(v: u8) -> TsUnit {
        if v & 0x80 == 0 {
            TsUnit::Decimal(u32::from(v))
        } else {
            TsUnit::Binary(u32::from(v & 0x7f))
        }
    }

    /// `raw` units in nanoseconds.
    fn to_ns(self, raw: u64) -> i128 {
        let raw = u128::from(raw);
        let ns = match self {
            TsUnit::Decimal(n) if n <= 9 => raw * 10u128.pow(9 - n),
            TsUnit::Decimal(n) => 10u128.checked_pow(n - 9).map_or(0, |d| raw / d),
            TsUnit::Binary(n) => (raw * 1_000_000_000) >> n,
        };
        ns as i128
    }
}

impl Interface {
    fn ts_ns(&self, raw: u64) -> u64 {
        let ns = i128::from(self.offset_s) * 1_000_000_000 + self.unit.to_ns(raw);
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// The state of a pcapng read: the current section and its interfaces.
struct Section {
    big_endian: bool,
    /// 1 for the file's first section.
    number: u32,
    interfaces: Vec<Interface>,
    /// The last packet's time (Simple Packet Blocks carry none).
    last_ts: u64,
}

impl Section {
    fn u16(&self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    fn u32(&self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn ts(&self, b: &[u8]) -> u64 {
        (u64::from(self.u32(&b[..4])) << 32) | u64::from(self.u32(&b[4..8]))
    }

    /// Walks the options of a block body; `f` gets (code, value).
    fn options(&self, mut o: &[u8], mut f: impl FnMut(u16, &[u8])) -> Result<(), String> {
        while o.len() >= 4 {
            let (code, len) = (self.u16(o), usize::from(self.u16(&o[2..])));
            if code == 0 {
                break;
            }
            let value = o.get(4..4 + len).ok_or(format!("option {code} runs past its block"))?;
            f(code, value);
            o = o.get(4 + len.next_multiple_of(4)..).unwrap_or_default();
        }
        Ok(())
    }

    fn interface(&self, body: &[u8]) -> Result<Interface, String> {
        if body.len() < 8 {
            return Err("an interface description shorter than 8 bytes".into());
        }
        let mut i = Interface {
            link: u32::from(self.u16(body)),
            snaplen: self.u32(&body[4..]),
            unit: TsUnit::Decimal(6),
            offset_s: 0,
        };
        self.options(&body[8..], |code, v| match (code, v.len()) {
            (9, 1) => i.unit = TsUnit::from_tsresol(v[0]),
            (14, 8) => {
                let b = [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
                i.offset_s =
                    if self.big_endian { i64::from_be_bytes(b) } else { i64::from_le_bytes(b) };
            }
            _ => {}
        })?;
        Ok(i)
    }

    /// The packet of a packet block, checked against its interface.
    fn packet<'a>(
        &mut self,
        interface: u32,
        raw_ts: Option<u64>,
        data: &'a [u8],
    ) -> Result<Packet<'a>, CaptureError> {
        let Some(i) = self.interfaces.get(interface as usize) else {
            return Err(CaptureError::Malformed {
                format: Format::Pcapng,
                why: format!(
                    "a packet of interface {interface}, but section {} describes {} interface(s)",
                    self.number,
                    self.interfaces.len()
                ),
            });
        };
        if i.link != ETHERNET {
            return Err(CaptureError::NotEthernet {
                link: i.link,
                at: format!("interface {interface} of section {}: ", self.number),
            });
        }
        if let Some(raw) = raw_ts {
            self.last_ts = i.ts_ns(raw);
        }
        Ok(Packet { ts_ns: self.last_ts, data })
    }
}

fn read_pcapng(
    mut r: impl Read,
    mut f: impl FnMut(Packet<'_>),
) -> Result<ReadSummary, CaptureError> {
    let malformed = |why: String| CaptureError::Malformed { format: Format::Pcapng, why };
    let mut s = ReadSummary { format: Format::Pcapng, packets: 0, cut_off: None };
    let mut sec = Section { big_endian: false, number: 0, interfaces: Vec::new(), last_ts: 0 };
    let mut pos = 0u64;
    let mut body = Vec::new();
    loop {
        // Type and total length; a section header also has its byte-order
        // magic read here, as the length is in the section's byte order.
        let mut head = [0u8; 12];
        let mut n = fill(&mut r, &mut head[..8])?;
        if n == 0 {
            break;
        }
        let is_shb = head[..4] == PCAPNG_SHB;
        let head_len = if is_shb { 12 } else { 8 };
        if n == 8 && is_shb {
            n += fill(&mut r, &mut head[8..])?;
        }
        let cut = |got: u64, len: Option<u32>| {
            let of = len.map_or(String::new(), |l| format!(" of {l}"));
            format!("block at offset {pos}: {got}{of} bytes in the file")
        };
        if n < head_len {
            if pos == 0 {
                return Err(malformed(format!("its section header is cut off ({n} bytes)")));
            }
            s.cut_off = Some(cut(n as u64, None));
            break;
        }
        if is_shb {
            let magic = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
            sec.big_endian = match magic {
                BYTE_ORDER_MAGIC => true,
                m if m == BYTE_ORDER_MAGIC.swap_bytes() => false,
                _ => {
                    return Err(malformed(format!(
                        "the section header at offset {pos} has no byte-order magic"
                    )))
                }
            };
            sec.number += 1;
            sec.interfaces.clear();
        }
        let (kind, len) = (sec.u32(&head[..4]), sec.u32(&head[4..8]));
        let min = if is_shb { 28 } else { 12 };
        if len % 4 != 0 || len < min {
            return Err(malformed(format!("the block at offset {pos} has a length of {len}")));
        }
        // The rest of the body and the trailing length.
        let rest = u64::from(len) - head_len as u64;
        body.clear();
        let got = (&mut r).take(rest).read_to_end(&mut body)? as u64;
        if got < rest {
            if pos == 0 {
                return Err(malformed(format!(
                    "its section header is cut off ({} of {len} bytes)",
                    head_len as u64 + got
                )));
            }
            s.cut_off = Some(cut(head_len as u64 + got, Some(len)));
            break;
        }
        let trailer = sec.u32(&body[body.len() - 4..]);
        if trailer != len {
            return Err(malformed(format!(
                "the block at offset {pos} says {len} bytes at its start, {trailer} at its end"
            )));
        }
        let b = &body[..body.len() - 4];
        let at = |why: String| malformed(format!("block at offset {pos}: {why}"));
        let packet = match kind {
            SHB => {
                let (major, minor) = (sec.u16(b), sec.u16(&b[2..]));
                if major != 1 {
                    return Err(at(format!("pcapng version {major}.{minor} (only 1.x is read)")));
                }
                None
            }
            IDB => {
                let i = sec.interface(b).map_err(at)?;
                sec.interfaces.push(i);
                None
            }
            EPB | OBSOLETE_PB => {
                if b.len() < 20 {
                    return Err(at("a packet block shorter than 20 bytes".into()));
                }
                let interface = if kind == EPB { sec.u32(b) } else { u32::from(sec.u16(b)) };
                let caplen = sec.u32(&b[12..]) as usize;
                let data = b.get(20..20 + caplen).ok_or_else(|| {
                    at(format!("{caplen} captured bytes in a block of {len} bytes"))
                })?;
                Some(sec.packet(interface, Some(sec.ts(&b[4..])), data)?)
            }
            SPB => {
                if b.len() < 4 {
                    return Err(at("a simple packet block shorter than 4 bytes".into()));
                }
                // Captured length: the original one, cut to the snap length
                // of interface 0 and to the block.
                let orig = sec.u32(b) as usize;
                let snap = sec.interfaces.first().map_or(0, |i| i.snaplen) as usize;
                let caplen = orig.min(b.len() - 4).min(if snap == 0 { usize::MAX } else { snap });
                Some(sec.packet(0, None, &b[4..4 + caplen])?)
            }
            _ => None,
        };
        if let Some(p) = packet {
            f(p);
            s.packets += 1;
        }
        pos += u64::from(len);
    }
    Ok(s)
}

enum Inner<W: Write> {
    Pcap(PcapWriter<W>),
    Pcapng(PcapNgWriter<W>),
}

/// Writes Ethernet frames to a capture, pcap or pcapng.
pub struct CaptureWriter<W: Write> {
    inner: Inner<W>,
}

impl CaptureWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the header.
    pub fn create(path: &Path, format: Format) -> Result<Self, CaptureError> {
        CaptureWriter::new(BufWriter::new(File::create(path)?), format)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the header of `format` to `w`: for pcapng a section header and
    /// one Ethernet interface with nanosecond timestamps.
    pub fn new(w: W, format: Format) -> Result<Self, CaptureError> {
        let inner = match format {
            Format::Pcap => Inner::Pcap(PcapWriter::new(w)?),
            Format::Pcapng => {
                let mut ng = PcapNgWriter::new(w)?;
                ng.write_pcapng_block(InterfaceDescriptionBlock {
                    linktype: DataLink::ETHERNET,
                    snaplen: 0,
                    // Nanoseconds: what `EnhancedPacketBlock::timestamp` writes.
                    options: vec![InterfaceDescriptionOption::IfTsResol(9)],
                })?;
                Inner::Pcapng(ng)
            }
        };
        Ok(CaptureWriter { inner })
    }

    /// The format being written.
    pub fn format(&self) -> Format {
        match self.inner {
            Inner::Pcap(_) => Format::Pcap,
            Inner::Pcapng(_) => Format::Pcapng,
        }
    }

    /// Appends one frame stamped `ts_ns` (Unix ns; pcap keeps microseconds).
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<(), CaptureError> {
        let ts = Duration::from_nanos(ts_ns);
        let len = u32::try_from(frame.len())
            .map_err(|_| CaptureError::Pcap(PcapError::InvalidField("a frame of 4 GiB or more")))?;
        match &mut self.inner {
            Inner::Pcap(w) => w.write_packet(&PcapPacket::new(ts, len, frame))?,
            Inner::Pcapng(w) => w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: ts,
                original_len: len,
                data: Cow::Borrowed(frame),
                options: Vec::new(),
            })?,
        };
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = match self.inner {
            Inner::Pcap(w) => w.into_writer(),
            Inner::Pcapng(w) => w.into_inner(),
        };
        w.flush()?;
        Ok(w)
    }
}

/// Writes `frames` to a new Ethernet capture at `path` in `format`, all
/// stamped `unix_ns`; returns the frame count.
pub fn write_frames<'a>(
    path: &Path,
    format: Format,
    frames: impl IntoIterator<Item = &'a [u8]>,
    unix_ns: u64,
) -> Result<usize, CaptureError> {
    let mut w = CaptureWriter::create(path, format)?;
    let mut n = 0;
    for f in frames {
        w.write(unix_ns, f)?;
        n += 1;
    }
    w.finish()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcapng block in the given byte order.
    fn block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
        let u32b = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let padded = body.len().next_multiple_of(4);
        let len = (12 + padded) as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&u32b(kind));
        b.extend_from_slice(&u32b(len));
        b.extend_from_slice(body);
        b.resize(8 + padded, 0);
        b.extend_from_slice(&u32b(len));
        b
    }

    fn shb(big: bool) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&if big {
            0x1a2b3c4du32.to_be_bytes()
        } else {
            0x1a2b3c4du32.to_le_bytes()
        });
        let u16b = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        body.extend_from_slice(&u16b(1));
        body.extend_from_slice(&u16b(0));
        body.extend_from_slice(&[0xff; 8]);
        block(big, SHB, &body)
    }

    /// An IDB with optional `if_tsresol` and `if_tsoffset`.
    fn idb(big: bool, link: u16, tsresol: Option<u8>, offset: Option<i64>) -> Vec<u8> {
        let u16b = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut body = Vec::new();
        body.extend_from_slice(&u16b(link));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&if big { 0u32.to_be_bytes() } else { 0u32.to_le_bytes() });
        // An option this reader ignores first (if_name "eth0").
        body.extend_from_slice(&u16b(2));
        body.extend_from_slice(&u16b(4));
        body.extend_from_slice(b"eth0");
        if let Some(r) = tsresol {
            body.extend_from_slice(&u16b(9));
            body.extend_from_slice(&u16b(1));
            body.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = offset {
            body.extend_from_slice(&u16b(14));
            body.extend_from_slice(&u16b(8));
            body.extend_from_slice(&if big { o.to_be_bytes() } else { o.to_le_bytes() });
        }
        body.extend_from_slice(&[0, 0, 0, 0]);
        block(big, IDB, &body)
    }

    fn epb(big: bool, interface: u32, raw_ts: u64, data: &[u8]) -> Vec<u8> {
        let u32b = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut body = Vec::new();
        body.extend_from_slice(&u32b(interface));
        body.extend_from_slice(&u32b((raw_ts >> 32) as u32));
        body.extend_from_slice(&u32b(raw_ts as u32));
        body.extend_from_slice(&u32b(data.len() as u32));
        body.extend_from_slice(&u32b(data.len() as u32));
        body.extend_from_slice(data);
        block(big, EPB, &body)
    }

    fn parse(bytes: &[u8]) -> Result<(Vec<Captured>, ReadSummary), CaptureError> {
        let format = sniff(bytes)?;
        let mut v = Vec::new();
        let f = |p: Packet<'_>| v.push((p.ts_ns, p.data.to_vec()));
        let s = match format {
            Format::Pcap => read_pcap(bytes, f)?,
            Format::Pcapng => read_pcapng(bytes, f)?,
        };
        Ok((v, s))
    }

    const T: u64 = 1_767_225_600; // 2026-01-01, in seconds

    #[test]
    fn interfaces_sections_resolutions_and_offsets() {
        let mut f = shb(false);
        f.extend(idb(false, 1, None, None)); // microseconds
        f.extend(idb(false, 1, Some(9), None)); // nanoseconds
        f.extend(epb(false, 0, T * 1_000_000 + 5, b"a"));
        f.extend(epb(false, 1, T * 1_000_000_000 + 7, b"bb"));
        f.extend(block(false, 5, &[0; 12])); // interface statistics: skipped
                                             // A big-endian second section: 2^-10 s, and an offset of 100 s.
        f.extend(shb(true));
        f.extend(idb(true, 1, Some(0x80 | 10), Some(100)));
        f.extend(epb(true, 0, 1024 * 3 + 512, b"ccc"));
        let (pkts, s) = parse(&f).unwrap();
        assert_eq!(s, ReadSummary { format: Format::Pcapng, packets: 3, cut_off: None });
        assert_eq!(pkts[0], (T * 1_000_000_000 + 5_000, b"a".to_vec()));
        assert_eq!(pkts[1], (T * 1_000_000_000 + 7, b"bb".to_vec()));
        assert_eq!(pkts[2], (103_500_000_000, b"ccc".to_vec()));
    }

    #[test]
    fn a_cut_off_last_block_keeps_the_packets_before_it() {
        let mut f = shb(false);
        f.extend(idb(false, 1, Some(9), None));
        f.extend(epb(false, 0, 1, &[1; 60]));
        let whole = f.len();
        f.extend(epb(false, 0, 2, &[2; 60]));
        for cut in [whole + 3, whole + 8, whole + 40, f.len() - 1] {
            let (pkts, s) = parse(&f[..cut]).unwrap();
            assert_eq!(pkts.len(), 1, "cut at {cut}");
            let why = s.cut_off.unwrap();
            assert!(why.contains(&format!("offset {whole}")), "{why}");
        }
        // A section header cut off is no capture.
        let e = parse(&f[..20]).unwrap_err().to_string();
        assert!(e.contains("pcapng") && e.contains("cut off"), "{e}");
    }

    #[test]
    fn other_link_types_and_malformed_blocks_are_refused() {
        let mut f = shb(false);
        f.extend(idb(false, 1, None, None));
        f.extend(idb(false, 101, None, None));
        // A non-Ethernet interface without packets is harmless.
        f.extend(epb(false, 0, 1, b"x"));
        assert_eq!(parse(&f).unwrap().1.packets, 1);
        let mut g = f.clone();
        g.extend(epb(false, 1, 1, b"x"));
        let e = parse(&g).unwrap_err().to_string();
        assert!(e.contains("interface 1 of section 1") && e.contains("link type 101 (RAW)"), "{e}");
        let mut g = f.clone();
        g.extend(epb(false, 2, 1, b"x"));
        assert!(parse(&g).unwrap_err().to_string().contains("interface 2"));
        // Lengths at start and end disagree.
        let mut g = f.clone();
        let mut b = epb(false, 0, 1, b"x");
        let n = b.len();
        b[n - 4] ^= 4;
        g.extend(b);
        assert!(parse(&g).unwrap_err().to_string().contains("at its end"));
        assert!(parse(b"hello").unwrap_err().to_string().contains("not a pcap or pcapng"));
        assert!(parse(b"").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn writers_round_trip_in_both_formats() {
        for format in [Format::Pcap, Format::Pcapng] {
            let mut w = CaptureWriter::new(Vec::new(), format).unwrap();
            assert_eq!(w.format(), format);
            w.write(T * 1_000_000_000 + 1_234_567, &[7; 60]).unwrap();
            w.write(T * 1_000_000_000 + 2_000_000, &[8; 1500]).unwrap();
            let bytes = w.finish().unwrap();
            let (pkts, s) = parse(&bytes).unwrap();
            assert_eq!((s.format, s.packets, s.cut_off), (format, 2, None));
            // pcap keeps microseconds, pcapng nanoseconds.
            let first = if format == Format::Pcap { 1_234_000 } else { 1_234_567 };
            assert_eq!(pkts[0], (T * 1_000_000_000 + first, vec![7; 60]));
            assert_eq!(pkts[1], (T * 1_000_000_000 + 2_000_000, vec![8; 1500]));
        }
    }

    #[test]
    fn pcap_in_every_byte_order_and_resolution() {
        for (magic, big, nanos) in [
            (0xa1b2c3d4u32, true, false),
            (0xa1b2c3d4, false, false),
            (0xa1b23c4d, true, true),
            (0xa1b23c4d, false, true),
        ] {
            let u32b = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
            let u16b = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
            let mut f = Vec::new();
            f.extend_from_slice(&u32b(magic));
            f.extend_from_slice(&u16b(2));
            f.extend_from_slice(&u16b(4));
            f.extend_from_slice(&[0; 8]);
            f.extend_from_slice(&u32b(65535));
            f.extend_from_slice(&u32b(1));
            f.extend_from_slice(&u32b(T as u32));
            f.extend_from_slice(&u32b(if nanos { 123_456_789 } else { 123_456 }));
            f.extend_from_slice(&u32b(3));
            f.extend_from_slice(&u32b(3));
            f.extend_from_slice(b"abc");
            let (pkts, s) = parse(&f).unwrap();
            assert_eq!(s.format, Format::Pcap);
            let frac = if nanos { 123_456_789 } else { 123_456_000 };
            assert_eq!(pkts, vec![(T * 1_000_000_000 + frac, b"abc".to_vec())]);
        }
    }

    #[test]
    fn format_from_names_and_flags() {
        assert_eq!(Format::for_path(Path::new("a/x.pcapng")), Format::Pcapng);
        assert_eq!(Format::for_path(Path::new("x.PCAPNG")), Format::Pcapng);
        assert_eq!(Format::for_path(Path::new("x.pcap")), Format::Pcap);
        assert_eq!(Format::for_path(Path::new("pcapng")), Format::Pcap);
        assert_eq!(Format::chosen(Some(Format::Pcapng), Path::new("x.cap")), Format::Pcapng);
        assert_eq!("pcapng".parse::<Format>(), Ok(Format::Pcapng));
        assert!("ng".parse::<Format>().unwrap_err().contains("pcap or pcapng"));
    }
}
