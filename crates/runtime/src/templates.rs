//! Packet templates for the synthetic backend: kind name → builder.
//!
//! A builder turns a `[[io.synthetic.traffic]]` entry's parameters into one
//! frame per flow (flows differ in the field named by `vary`). Builders place
//! the group's 4-byte tag in the last bytes of the payload when there is room
//! (before computing checksums), so that the TX sink can attribute delivered
//! packets to their group. Protocol templates register here the same way as
//! stages do (see [`crate::protocols`]).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

use crate::config::{typed, ConfigError};

/// Length of the tag the synthetic backend writes at the end of a payload.
pub const TAG_LEN: usize = 4;
/// First two bytes of a tag; the other two are the traffic group index.
pub const TAG_MAGIC: [u8; 2] = [0xd5, 0x5d];

/// What a template builder gets besides its parameters.
#[derive(Debug, Clone, Copy)]
pub struct TemplateCtx {
    /// Number of distinct flows to build.
    pub flows: u32,
    /// The group's tag, to be placed in the last [`TAG_LEN`] payload bytes.
    pub tag: [u8; TAG_LEN],
    /// Unix time (seconds) at which the backend's clock starts: protocol
    /// templates stamp their timestamps with it so packets are fresh when sent.
    pub unix_s: u64,
}

impl TemplateCtx {
    /// A context starting at the synthetic backend's virtual epoch.
    pub fn new(flows: u32, tag: [u8; TAG_LEN]) -> Self {
        TemplateCtx { flows, tag, unix_s: crate::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000 }
    }
}

/// The tag of traffic group `group`.
pub fn tag_for(group: u16) -> [u8; TAG_LEN] {
    let g = group.to_be_bytes();
    [TAG_MAGIC[0], TAG_MAGIC[1], g[0], g[1]]
}

/// The traffic group a frame's tag names, if it carries one.
#[inline]
pub fn group_of(frame: &[u8]) -> Option<u16> {
    let n = frame.len();
    if n < TAG_LEN || frame[n - 4..n - 2] != TAG_MAGIC {
        return None;
    }
    Some(u16::from_be_bytes([frame[n - 2], frame[n - 1]]))
}

/// Builds one frame per flow from the template's parameters.
pub type TemplateCtor = fn(&toml::Table, &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError>;

/// Template kinds known to the synthetic backend.
#[derive(Clone)]
pub struct Templates {
    ctors: BTreeMap<&'static str, TemplateCtor>,
}

impl Templates {
    /// The generic templates (`ipv4-udp`, `ipv6-udp`, `malformed`, `hex`)
    /// plus those of the protocols `P`.
    pub fn with<P: crate::Protocols>() -> Self {
        let mut t = Templates { ctors: BTreeMap::new() };
        t.add("ipv4-udp", ipv4_udp);
        t.add("ipv6-udp", ipv6_udp);
        t.add("malformed", malformed);
        t.add("icmp-echo", icmp_echo);
        t.add("hex", hex_frame);
        P::templates(&mut t);
        t
    }

    /// Registers (or replaces) a template kind.
    pub fn add(&mut self, kind: &'static str, ctor: TemplateCtor) -> &mut Self {
        self.ctors.insert(kind, ctor);
        self
    }

    /// Builds the frames of template `kind`.
    pub fn build(
        &self,
        kind: &str,
        params: &toml::Table,
        ctx: &TemplateCtx,
    ) -> Result<Vec<Vec<u8>>, ConfigError> {
        let ctor = self.ctors.get(kind).ok_or_else(|| {
            let known: Vec<_> = self.ctors.keys().copied().collect();
            ConfigError::at(
                "template",
                format!("unknown template `{kind}` (known: {})", known.join(", ")),
            )
        })?;
        let frames = ctor(params, ctx)?;
        if frames.is_empty() {
            return Err(ConfigError::at("template", "template produced no frames"));
        }
        if let Some(f) = frames
            .iter()
            .find(|f| f.len() > pipeline::buf::FRAME_CAPACITY - pipeline::buf::FRAME_HEADROOM)
        {
            return Err(ConfigError::at(
                "size",
                format!("frame of {} bytes is too large", f.len()),
            ));
        }
        Ok(frames)
    }
}

/// Which header field differs between the flows of a group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vary {
    /// The UDP source port (default).
    #[default]
    Sport,
    /// The source address (low bits).
    Src,
    /// The destination address (low bits).
    Dst,
}

fn default_v4_src() -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 1)
}
fn default_v4_dst() -> Ipv4Addr {
    Ipv4Addr::new(10, 2, 0, 1)
}
fn default_sport() -> u16 {
    1024
}
fn default_dport() -> u16 {
    5000
}
fn default_size() -> usize {
    128
}
fn default_ttl() -> u8 {
    64
}
fn default_src_mac() -> String {
    "02:00:00:00:00:01".into()
}
fn default_dst_mac() -> String {
    "02:00:00:00:00:02".into()
}

/// Parameters of `ipv4-udp` and `ipv6-udp`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UdpParams<A> {
    src: Option<A>,
    dst: Option<A>,
    #[serde(default = "default_sport")]
    sport: u16,
    #[serde(default = "default_dport")]
    dport: u16,
    /// Frame length including Ethernet.
    #[serde(default = "default_size")]
    size: usize,
    #[serde(default = "default_ttl")]
    ttl: u8,
    #[serde(default)]
    vary: Vary,
    #[serde(default = "default_src_mac")]
    src_mac: String,
    #[serde(default = "default_dst_mac")]
    dst_mac: String,
    #[serde(default)]
    dscp: u8,
}

impl<A> UdpParams<A> {
    /// DSCP is six bits.
    fn check_dscp(&self) -> Result<(), ConfigError> {
        if self.dscp > 63 {
            return Err(ConfigError::at("dscp", format!("{} is not in 0..=63", self.dscp)));
        }
        Ok(())
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn macs(src: &str, dst: &str) -> Result<([u8; 6], [u8; 6]), ConfigError> {
    let s = parse_mac(src).ok_or_else(|| ConfigError::at("src_mac", "not a MAC address"))?;
    let d = parse_mac(dst).ok_or_else(|| ConfigError::at("dst_mac", "not a MAC address"))?;
    Ok((s, d))
}

/// Internet checksum (RFC 1071) over `data`, starting from `sum`.
pub fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn sum16(data: &[u8]) -> u32 {
    data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum()
}

fn add_low(addr: &mut [u8], n: u32) {
    let len = addr.len();
    let mut v = u32::from_be_bytes([addr[len - 4], addr[len - 3], addr[len - 2], addr[len - 1]]);
    v = v.wrapping_add(n);
    addr[len - 4..].copy_from_slice(&v.to_be_bytes());
}

/// A zeroed `size`-byte frame with its Ethernet header and an IPv4 header
/// (20 bytes, total length from `size`, checksum left to the caller) for
/// protocol `proto`.
fn eth_ipv4(
    size: usize,
    (smac, dmac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    ttl: u8,
    proto: u8,
) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&dmac);
    f[6..12].copy_from_slice(&smac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((size - 14) as u16).to_be_bytes());
    f[22] = ttl;
    f[23] = proto;
    f[26..30].copy_from_slice(&src.octets());
    f[30..34].copy_from_slice(&dst.octets());
    f
}

fn ipv4_udp(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: UdpParams<Ipv4Addr> = typed(params)?;
    p.check_dscp()?;
    let (smac, dmac) = macs(&p.src_mac, &p.dst_mac)?;
    let min = 14 + 20 + 8 + TAG_LEN;
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let (src, dst) = (p.src.unwrap_or_else(default_v4_src), p.dst.unwrap_or_else(default_v4_dst));
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let mut f = eth_ipv4(p.size, (smac, dmac), (src, dst), p.ttl, 17);
        f[15] = p.dscp << 2;
        f[20] = 0x40; // don't fragment
        let ip_len = (p.size - 14) as u16;
        let mut sport = p.sport;
        match p.vary {
            Vary::Sport => sport = p.sport.wrapping_add(i as u16),
            Vary::Src => add_low(&mut f[26..30], i),
            Vary::Dst => add_low(&mut f[30..34], i),
        }
        let c = checksum(0, &f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let udp_len = ip_len - 20;
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&p.dport.to_be_bytes());
        f[38..40].copy_from_slice(&udp_len.to_be_bytes());
        let n = f.len();
        f[n - TAG_LEN..].copy_from_slice(&ctx.tag);
        let pseudo = sum16(&f[26..34]) + 17 + u32::from(udp_len);
        let mut c = checksum(pseudo, &f[34..]);
        if c == 0 {
            c = 0xffff;
        }
        f[40..42].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    Ok(out)
}

/// Wraps `payload` into Ethernet/IPv4/UDP with valid checksums (protocol
/// templates use it for SCION's UDP/IP underlay).
pub fn ipv4_udp_frame(
    payload: &[u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
) -> Vec<u8> {
    let size = 42 + payload.len();
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&parse_mac(&default_dst_mac()).unwrap_or_default());
    f[6..12].copy_from_slice(&parse_mac(&default_src_mac()).unwrap_or_default());
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (size - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[20] = 0x40;
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src.octets());
    f[30..34].copy_from_slice(&dst.octets());
    let c = checksum(0, &f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let udp_len = ip_len - 20;
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    f[42..].copy_from_slice(payload);
    let pseudo = sum16(&f[26..34]) + 17 + u32::from(udp_len);
    let mut c = checksum(pseudo, &f[34..]);
    if c == 0 {
        c = 0xffff;
    }
    f[40..42].copy_from_slice(&c.to_be_bytes());
    f
}

/// Parameters of `icmp-echo`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoParams {
    /// Source of flow 0; flow `i` comes from `src + i`.
    src: Option<Ipv4Addr>,
    /// The address pinged (e.g. the router's own).
    dst: Option<Ipv4Addr>,
    /// Frame length including Ethernet.
    #[serde(default = "default_size")]
    size: usize,
    #[serde(default = "default_ttl")]
    ttl: u8,
    #[serde(default = "default_src_mac")]
    src_mac: String,
    #[serde(default = "default_dst_mac")]
    dst_mac: String,
}

/// `icmp-echo`: ICMP echo requests (ping), one source address and
/// identifier per flow, the group tag in the payload (replies keep it).
fn icmp_echo(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: EchoParams = typed(params)?;
    let (smac, dmac) = macs(&p.src_mac, &p.dst_mac)?;
    let min = 14 + 20 + 8 + TAG_LEN;
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let (src, dst) = (p.src.unwrap_or_else(default_v4_src), p.dst.unwrap_or_else(default_v4_dst));
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let mut f = eth_ipv4(p.size, (smac, dmac), (src, dst), p.ttl, 1);
        add_low(&mut f[26..30], i);
        let c = checksum(0, &f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34] = 8;
        f[38..40].copy_from_slice(&(i as u16).to_be_bytes());
        let n = f.len();
        f[n - TAG_LEN..].copy_from_slice(&ctx.tag);
        let c = checksum(0, &f[34..]);
        f[36..38].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    Ok(out)
}

fn ipv6_udp(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: UdpParams<Ipv6Addr> = typed(params)?;
    p.check_dscp()?;
    let (smac, dmac) = macs(&p.src_mac, &p.dst_mac)?;
    let min = 14 + 40 + 8 + TAG_LEN;
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let src = p.src.unwrap_or(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1));
    let dst = p.dst.unwrap_or(Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1));
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let mut f = vec![0u8; p.size];
        f[0..6].copy_from_slice(&dmac);
        f[6..12].copy_from_slice(&smac);
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let pl = (p.size - 54) as u16;
        f[14] = 0x60 | (p.dscp >> 2);
        f[15] = (p.dscp & 3) << 6;
        f[18..20].copy_from_slice(&pl.to_be_bytes());
        f[20] = 17;
        f[21] = p.ttl;
        f[22..38].copy_from_slice(&src.octets());
        f[38..54].copy_from_slice(&dst.octets());
        let mut sport = p.sport;
        match p.vary {
            Vary::Sport => sport = p.sport.wrapping_add(i as u16),
            Vary::Src => add_low(&mut f[22..38], i),
            Vary::Dst => add_low(&mut f[38..54], i),
        }
        f[54..56].copy_from_slice(&sport.to_be_bytes());
        f[56..58].copy_from_slice(&p.dport.to_be_bytes());
        f[58..60].copy_from_slice(&pl.to_be_bytes());
        let n = f.len();
        f[n - TAG_LEN..].copy_from_slice(&ctx.tag);
        let pseudo = sum16(&f[22..54]) + 17 + u32::from(pl);
        let mut c = checksum(pseudo, &f[54..]);
        if c == 0 {
            c = 0xffff;
        }
        f[60..62].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    Ok(out)
}

/// How a `malformed` template breaks its frames.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Breakage {
    /// A frame shorter than an Ethernet header.
    Runt,
    /// An IPv4 header cut short.
    TruncatedIp,
    /// IPv4 IHL below 5.
    BadIhl,
    /// IPv4 total length beyond the frame.
    BadLength,
    /// Wrong IPv4 header checksum.
    BadChecksum,
    /// IP version 7.
    BadVersion,
    /// Each flow takes the next kind in the list above, in turn.
    Mix,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MalformedParams {
    #[serde(default = "mix")]
    breakage: Breakage,
    #[serde(default = "default_size")]
    size: usize,
}

fn mix() -> Breakage {
    Breakage::Mix
}

fn malformed(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: MalformedParams = typed(params)?;
    const KINDS: [Breakage; 6] = [
        Breakage::Runt,
        Breakage::TruncatedIp,
        Breakage::BadIhl,
        Breakage::BadLength,
        Breakage::BadChecksum,
        Breakage::BadVersion,
    ];
    let mut base_params = toml::Table::new();
    base_params.insert("size".into(), toml::Value::Integer(p.size.max(46) as i64));
    base_params.insert("src".into(), toml::Value::String("10.66.0.1".into()));
    let base = ipv4_udp(&base_params, ctx)?;
    let mut out = Vec::with_capacity(base.len());
    for (i, mut f) in base.into_iter().enumerate() {
        let kind = if p.breakage == Breakage::Mix { KINDS[i % KINDS.len()] } else { p.breakage };
        match kind {
            Breakage::Runt => f.truncate(10),
            Breakage::TruncatedIp => f.truncate(14 + 12),
            Breakage::BadIhl => f[14] = 0x43,
            Breakage::BadLength => f[16..18].copy_from_slice(&4000u16.to_be_bytes()),
            Breakage::BadChecksum => f[24] ^= 0x5a,
            Breakage::BadVersion => f[14] = 0x75,
            Breakage::Mix => unreachable!("Mix is resolved above"),
        }
        out.push(f);
    }
    Ok(out)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HexParams {
    /// The whole frame as hex (whitespace ignored).
    bytes: String,
}

fn hex_frame(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: HexParams = typed(params)?;
    let digits: Vec<u8> = p.bytes.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) || digits.is_empty() {
        return Err(ConfigError::at("bytes", "needs an even, non-zero number of hex digits"));
    }
    let mut f = Vec::with_capacity(digits.len() / 2);
    for pair in digits.chunks(2) {
        let s = std::str::from_utf8(pair).unwrap_or("zz");
        f.push(
            u8::from_str_radix(s, 16)
                .map_err(|_| ConfigError::at("bytes", format!("`{s}` is not a hex byte")))?,
        );
    }
    Ok(vec![f; ctx.flows as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> toml::Table {
        toml::from_str(s).unwrap()
    }

    #[test]
    fn ipv4_udp_exact_bytes_and_checksums() {
        let ctx = TemplateCtx::new(2, tag_for(3));
        let f = Templates::with::<()>()
            .build(
                "ipv4-udp",
                &table("size = 60\nsrc = \"192.0.2.1\"\ndst = \"198.51.100.7\""),
                &ctx,
            )
            .unwrap();
        assert_eq!(f.len(), 2);
        let a = &f[0];
        assert_eq!(a.len(), 60);
        assert_eq!(&a[12..14], &[0x08, 0x00]);
        assert_eq!(&a[14..24], &[0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17]);
        assert_eq!(&a[26..34], &[192, 0, 2, 1, 198, 51, 100, 7]);
        assert_eq!(checksum(0, &a[14..34]), 0, "IPv4 header checksum verifies");
        assert_eq!(&a[34..40], &[0x04, 0x00, 0x13, 0x88, 0, 26]);
        let pseudo = sum16(&a[26..34]) + 17 + 26;
        assert_eq!(checksum(pseudo, &a[34..]), 0, "UDP checksum verifies");
        assert_eq!(group_of(a), Some(3));
        assert_eq!(&f[1][34..36], &[0x04, 0x01], "second flow varies the source port");
    }

    #[test]
    fn ipv6_udp_checksum_verifies() {
        let ctx = TemplateCtx::new(1, tag_for(1));
        let f = Templates::with::<()>().build("ipv6-udp", &table("size = 100"), &ctx).unwrap();
        let a = &f[0];
        let pseudo = sum16(&a[22..54]) + 17 + 46;
        assert_eq!(checksum(pseudo, &a[54..]), 0);
        assert_eq!(group_of(a), Some(1));
    }

    #[test]
    fn malformed_and_errors() {
        let ctx = TemplateCtx::new(6, tag_for(0));
        let f = Templates::with::<()>().build("malformed", &toml::Table::new(), &ctx).unwrap();
        assert_eq!(f[0].len(), 10);
        assert_eq!(f[1].len(), 26);
        assert_eq!(f[5][14], 0x75);
        let e = Templates::with::<()>().build("ipv4-udp", &table("size = 20"), &ctx).unwrap_err();
        assert_eq!(e.key, "size");
        let e = Templates::with::<()>().build("ipv4-udp", &table("sizee = 20"), &ctx).unwrap_err();
        assert!(e.reason.contains("unknown field"), "{e}");
        let e = Templates::with::<()>().build("nope", &toml::Table::new(), &ctx).unwrap_err();
        assert_eq!(e.key, "template");
        let h = Templates::with::<()>().build("hex", &table("bytes = \"00 ff 10\""), &ctx).unwrap();
        assert_eq!(h[0], [0, 0xff, 0x10]);
    }
}
