//! The suspicious-bit application (spec §5.11, Procedure 4), run on FAIR packets
//! received on external ports, before marking.
//!
//! `sus_sources` holds the prefixes of source ASes this AS has acknowledged a
//! violation for (with a TTL); `sus_ports` is an atomic bitmap of ports that
//! deliver suspicious traffic, shared by the workers. "forward/drop/delay" of
//! the paper is [`SbAction`]; "delay" means the low-priority traffic class.
//! Not implemented: `DropIfCongested` and the `Timer` port-clear mode.
//!
//! Building the stage from a `suspicious-bit` configuration and changing it
//! live is [`crate::stage`]'s.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::{Batch, Class, DropReason, Now, PacketBuf, Stage};

use crate::common::{locate_meta, Codes, Framing};
use crate::config::SuspiciousBitConfig;
use crate::lpm::{key_v4, key_v6, PrefixTable};

/// What "forward/drop/delay traffic" does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum SbAction {
    /// Forward normally.
    Forward,
    /// Drop.
    Drop,
    /// Low-priority class (default).
    #[default]
    LowPriority,
}

/// When an SB packet on a suspicious port clears the port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum PortClear {
    /// Any SB packet clears (paper, default).
    #[default]
    Paper,
    /// Only an SB packet from a suspicious source clears (A25).
    #[cfg_attr(feature = "serde", serde(rename = "require-flagged-source"))]
    RequireFlaggedSuspiciousSource,
}

/// Configuration.
#[derive(Clone, Copy, Debug)]
pub struct SbConfig {
    /// Protocol codes.
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Action for suspicious traffic.
    pub action: SbAction,
    /// Port clearing rule.
    pub port_clear: PortClear,
    /// Apply `action` on the clearing branch too (paper: forward).
    pub action_on_clearing_branch: bool,
    /// Class used for `LowPriority`.
    pub low_class: Class,
    /// Bitmap of external ports (bit p = port p < 64); others are skipped.
    pub external_ports: u64,
    /// Lifetime of a `sus_sources` entry (seconds).
    pub sus_ttl: u64,
}

impl Default for SbConfig {
    fn default() -> Self {
        SbConfig {
            codes: Codes::default(),
            framing: Framing::Ethernet,
            action: SbAction::LowPriority,
            port_clear: PortClear::Paper,
            action_on_clearing_branch: false,
            low_class: Class(1),
            external_ports: u64::MAX,
            sus_ttl: 86_400,
        }
    }
}

/// The decision of Procedure 4 for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SbDecision {
    /// Apply the configured action (otherwise forward normally).
    pub suspicious: bool,
    /// Set SB in the packet.
    pub set_sb: bool,
    /// Port change: `Some(true)` add to `sus_ports`, `Some(false)` remove.
    pub port: Option<bool>,
}

/// Procedure 4 as a pure function of the packet's SB, the port's and the source's state.
pub fn procedure4(
    sb: bool,
    port_suspicious: bool,
    src_suspicious: bool,
    cfg: &SbConfig,
) -> SbDecision {
    let d = |suspicious, set_sb, port| SbDecision { suspicious, set_sb, port };
    match (port_suspicious, sb) {
        (false, true) => d(true, false, None),
        (false, false) if src_suspicious => d(true, true, Some(true)),
        (false, false) => d(false, false, None),
        (true, true) => {
            let clear = match cfg.port_clear {
                PortClear::Paper => true,
                PortClear::RequireFlaggedSuspiciousSource => src_suspicious,
            };
            d(cfg.action_on_clearing_branch, false, clear.then_some(false))
        }
        (true, false) => d(true, true, None),
    }
}

/// `sus_ports`: an atomic bitmap for ports < 64, shared by workers.
#[derive(Debug, Default)]
pub struct SusPorts(AtomicU64);

impl SusPorts {
    /// Whether `port` is suspicious.
    pub fn contains(&self, port: u16) -> bool {
        port < 64 && self.0.load(Ordering::Relaxed) & (1 << port) != 0
    }
    /// Marks `port` suspicious.
    pub fn insert(&self, port: u16) {
        if port < 64 {
            self.0.fetch_or(1 << port, Ordering::Relaxed);
        }
    }
    /// Clears `port`.
    pub fn remove(&self, port: u16) {
        if port < 64 {
            self.0.fetch_and(!(1 << port), Ordering::Relaxed);
        }
    }
}

/// Stage counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SbStats {
    /// SB bits set by this AS.
    pub sb_set: u64,
    /// Packets treated as suspicious.
    pub suspicious: u64,
    /// Ports flagged.
    pub ports_flagged: u64,
    /// Ports cleared.
    pub ports_cleared: u64,
}

/// The SB stage.
#[derive(Debug)]
pub struct SuspiciousBit {
    pub(crate) cfg: SbConfig,
    ports: Arc<SusPorts>,
    pub(crate) sources: PrefixTable<u64>,
    now_s: u64,
    /// Counters.
    pub stats: SbStats,
    /// The `suspicious-bit` configuration it was built from (live changes
    /// compare against it); `None` for a stage built in code.
    pub(crate) configured: Option<Box<SuspiciousBitConfig>>,
}

impl SuspiciousBit {
    /// A stage sharing `ports` with the other workers.
    pub fn new(cfg: SbConfig, ports: Arc<SusPorts>) -> Self {
        SuspiciousBit {
            cfg,
            ports,
            sources: PrefixTable::new(),
            now_s: 0,
            stats: SbStats::default(),
            configured: None,
        }
    }

    /// Adds a suspicious source prefix (on signing an ACK verdict) until `now + sus_ttl`.
    pub fn add_suspicious(&mut self, addr: IpAddr, len: u8, now: u64) {
        self.sources.insert(addr, len, now + self.cfg.sus_ttl);
    }

    /// Removes expired entries.
    pub fn expire(&mut self, now: u64) {
        self.sources.retain(|exp| *exp > now);
    }

    fn src_suspicious(&self, frame: &[u8], p: &crate::wire::FairPkt) -> bool {
        let ip = &frame[p.l3_off..];
        let key = match p.carrier() {
            packet::fair::Carrier::Ipv6 => key_v6(ip[8..24].try_into().unwrap_or([0; 16])),
            packet::fair::Carrier::Ipv4 => key_v4([ip[12], ip[13], ip[14], ip[15]]),
        };
        self.sources.lookup(key).is_some_and(|exp| *exp > self.now_s)
    }
}

impl<B: PacketBuf> Stage<B> for SuspiciousBit {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.now_s = now.unix_secs();
        for i in batch.live() {
            let port = batch.meta(i).port;
            if port >= 64 || self.cfg.external_ports & (1 << port) == 0 {
                continue;
            }
            let (buf, meta) = batch.get_mut(i);
            let Ok(Some(p)) = locate_meta(buf.data(), meta, self.cfg.framing, self.cfg.codes)
            else {
                continue;
            };
            let sb = p.view(buf.data()).sb();
            let d = procedure4(
                sb,
                self.ports.contains(port),
                self.src_suspicious(buf.data(), &p),
                &self.cfg,
            );
            if d.set_sb {
                p.view_mut(buf.data_mut()).set_sb(true);
                self.stats.sb_set += 1;
            }
            match d.port {
                Some(true) => {
                    self.ports.insert(port);
                    self.stats.ports_flagged += 1;
                }
                Some(false) => {
                    self.ports.remove(port);
                    self.stats.ports_cleared += 1;
                }
                None => {}
            }
            if d.suspicious {
                self.stats.suspicious += 1;
                match self.cfg.action {
                    SbAction::Forward => {}
                    SbAction::Drop => batch.drop_packet(i, DropReason::Policy),
                    SbAction::LowPriority => batch.set_class(i, self.cfg.low_class),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_s1_five_leaves() {
        let c = SbConfig::default();
        // Port not suspicious, SB set → action.
        assert_eq!(
            procedure4(true, false, false, &c),
            SbDecision { suspicious: true, set_sb: false, port: None }
        );
        // Port not suspicious, no SB, suspicious source → flag port, set SB, action.
        assert_eq!(
            procedure4(false, false, true, &c),
            SbDecision { suspicious: true, set_sb: true, port: Some(true) }
        );
        // Port not suspicious, no SB, clean source → forward.
        assert_eq!(
            procedure4(false, false, false, &c),
            SbDecision { suspicious: false, set_sb: false, port: None }
        );
        // Suspicious port, SB set → clear port, forward (paper).
        assert_eq!(
            procedure4(true, true, false, &c),
            SbDecision { suspicious: false, set_sb: false, port: Some(false) }
        );
        // Suspicious port, no SB → set SB, action.
        assert_eq!(
            procedure4(false, true, false, &c),
            SbDecision { suspicious: true, set_sb: true, port: None }
        );
        // PROPOSED switches (SEC-22b).
        let strict = SbConfig {
            port_clear: PortClear::RequireFlaggedSuspiciousSource,
            action_on_clearing_branch: true,
            ..c
        };
        assert_eq!(
            procedure4(true, true, false, &strict),
            SbDecision { suspicious: true, set_sb: false, port: None }
        );
        assert_eq!(procedure4(true, true, true, &strict).port, Some(false));
    }

    #[test]
    fn stage_flags_port_and_sets_bit() {
        let ports = Arc::new(SusPorts::default());
        let mut st = SuspiciousBit::new(
            SbConfig { framing: Framing::Ip, ..Default::default() },
            ports.clone(),
        );
        st.add_suspicious("192.0.2.0".parse().unwrap(), 24, 100);
        let pkt = hex::decode(
            "4500002d123440004 0fd3b64c0000201c633640 7110d0001ffffffc00000000000".replace(' ', ""),
        )
        .unwrap();
        let mut pkt = pkt;
        pkt.resize(45, 0);
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(pkt, 3).unwrap();
        st.process(&mut b, Now::from_unix_ns(200 * 1_000_000_000));
        assert_eq!(b.data(0)[28], 0x80);
        assert!(ports.contains(3));
        assert_eq!(b.meta(0).class(), Some(Class(1)));
        st.expire(100 + 86_400);
        assert!(st.sources.is_empty());
    }
}
