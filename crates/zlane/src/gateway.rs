//! The Z-Lane gateway of a source AS: per-host rates (a fixed-capacity
//! table of token buckets), the Q flag, and the HVF replacement V_i → Ṽ_i
//! for every on-path AS (whose keys it holds, mapped from the hop fields'
//! MACs).
//!
//! # Choices
//! * A packet within its host's rate gets Q and, for every hop field,
//!   Ṽ_i = CMAC_{K̃_i}(V_i ‖ 0¹²) under the key of the AS owning the hop.
//!   A packet over its rate is demoted (Q cleared, host HVFs kept) or
//!   dropped, per [`OverusePolicy`]; so is a
//!   packet of a new host that finds no room in the table (`table_full`).
//! * A packet with a hop the gateway cannot map to an AS key is sent as
//!   best effort (Q cleared, host HVFs kept) and counted as `unknown_hop`.
//! * The gateway does not verify host HVFs: a wrong V_i yields a wrong Ṽ_i,
//!   which every on-path router rejects.
//! * Rate accounting uses the SCION packet length (header + payload).
//! * Every change of bytes is reported as a [`Rewrite`], from which the
//!   [`ZlaneGateway`](crate::ZlaneGateway) stage patches the underlay UDP
//!   checksum ([`crate::rewrite`]).
//!
//! [`Gateway::reconfigure`] applies a new [`GatewayConfig`] in place: every
//! host keeps its bucket level (retuned to its new rate), keys and hop
//! fields are replaced only when the configured ones change; the table size
//! cannot change while running.

use mac::{Aes, Cmac, Key};
use packet::scion::epic::{EpicPath, FLAG_Q, HVF_LEN};
use packet::scion::path::{HOP_LEN, INFO_LEN, MAX_HOPS, META_LEN};
use packet::scion::{PathType, ScionHeader};
use packet::Ia;
use pipeline::{DropReason, Invalid, Now, Reconfigured, Refused, Validate};

use crate::as_keys::AsKeys;
use crate::config::{GatewayConfig, OverusePolicy};
use crate::host_table::HostTable;
use crate::hvf::Hvf;
use crate::rewrite::{clear_q, span_sum, FLAGS_OFF, HVFS_OFF};

pub use crate::rewrite::Rewrite;

/// Counters of the gateway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayCounters {
    /// Packets given Q and AS-level HVFs.
    pub authorized: u64,
    /// Packets over their host's rate sent as best effort.
    pub demoted: u64,
    /// Packets over their host's rate dropped.
    pub dropped: u64,
    /// Packets whose path has a hop with no known AS key (sent best effort).
    pub unknown_hop: u64,
    /// Packets of a new host that found no room in the table.
    pub table_full: u64,
    /// Non-EPIC-Z packets passed through untouched.
    pub passed: u64,
}

/// What the gateway did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayOutcome {
    /// Q set, HVFs replaced by AS-level HVFs.
    Authorized,
    /// Q cleared, host HVFs kept.
    Demoted,
    /// Not an EPIC-Z packet; untouched.
    Passed,
}

/// The gateway's decision before MAC work.
pub(crate) enum Admit {
    /// Finished (passed or demoted), with the bytes changed.
    Done(GatewayOutcome, Option<Rewrite>),
    /// Within the rate: HVFs to replace. `path_off`: the EPIC-Z path in the
    /// SCION packet; `n` hops whose hop fields start at `hops_off` in it.
    Authorize { path_off: usize, n: usize, hops_off: usize },
}

/// MAC lanes the cipher interleaves (`aesni::LANES`).
pub(crate) const CHUNK: usize = 8;

/// The input block of Ṽ_i = CMAC_K̃(V_i ‖ 0¹²) = AES_K̃((V_i ‖ 0¹²) ⊕ K1):
/// one complete block, K1 folded in before the cipher call.
#[inline]
pub(crate) fn as_hvf_block(key: &Cmac, v: Hvf) -> [u8; 16] {
    let k1 = u128::from_be_bytes(*key.subkeys().0);
    ((u128::from(u32::from_be_bytes(v)) << 96) ^ k1).to_be_bytes()
}

/// The gateway state (one per worker; shard hosts by source address).
pub struct Gateway {
    cfg: GatewayConfig,
    hosts: HostTable,
    keys: AsKeys,
    pub(crate) counters: GatewayCounters,
    /// Fills unused MAC lanes (never authenticates anything).
    placeholder: Cmac,
}

impl Gateway {
    /// A gateway for `cfg` (validated here), its pinned hosts, AS keys and
    /// hop fields installed.
    pub fn new(cfg: GatewayConfig) -> Result<Self, Invalid> {
        cfg.validate()?;
        Ok(Gateway {
            hosts: HostTable::new(&cfg)?,
            keys: AsKeys::of(&cfg.as_keys, &cfg.hops)?,
            counters: GatewayCounters::default(),
            placeholder: Cmac::new(&Key::from([0; 16])),
            cfg,
        })
    }

    /// The running configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> &GatewayCounters {
        &self.counters
    }

    /// Installs (or replaces, at an epoch change) K_{A_i,A_0} for on-path AS `ia`.
    pub fn set_as_key(&mut self, ia: Ia, key: &Key) {
        self.keys.set(ia, key);
    }

    /// Registers that the hop field with MAC `sigma` belongs to AS `ia`.
    /// Returns `false` if no key is installed for `ia` yet.
    pub fn register_hop(&mut self, sigma: [u8; 6], ia: Ia) -> bool {
        self.keys.register_hop(sigma, ia)
    }

    /// The token bucket of source host `host`, if it has an entry.
    pub fn host_bucket(&self, host: &packet::scion::RawHostAddr) -> Option<crate::TokenBucket> {
        self.hosts.bucket(host)
    }

    /// Applies `cfg` (validated) in place at `now`: host rates, burst,
    /// overuse policy and idle time change with every host keeping its
    /// bucket level; the configured AS keys and hop fields replace the
    /// installed ones when they differ from the running configuration's.
    /// `host_capacity` needs a restart. On `Err` nothing changed.
    pub fn reconfigure(&mut self, cfg: &GatewayConfig, now: Now) -> Result<Reconfigured, Refused> {
        if *cfg == self.cfg {
            return Ok(Reconfigured::Unchanged);
        }
        if cfg.host_capacity != self.cfg.host_capacity {
            return Err(Refused::NeedsRestart("host_capacity".into()));
        }
        let keys = if (&cfg.as_keys, &cfg.hops) != (&self.cfg.as_keys, &self.cfg.hops) {
            Some(AsKeys::of(&cfg.as_keys, &cfg.hops).map_err(Refused::Invalid)?)
        } else {
            None
        };
        self.hosts.retune(cfg, now).map_err(Refused::Invalid)?;
        if let Some(k) = keys {
            self.keys = k;
        }
        self.cfg.clone_from(cfg);
        Ok(Reconfigured::APPLIED)
    }

    /// Processes one SCION packet (starting at its common header) in place.
    pub fn process(&mut self, pkt: &mut [u8], now: Now) -> Result<GatewayOutcome, DropReason> {
        self.process_rewrite(pkt, now).map(|(o, _)| o)
    }

    /// [`process`](Self::process), also reporting the bytes it changed (for
    /// checksum updates); `None` when nothing changed.
    pub fn process_rewrite(
        &mut self,
        pkt: &mut [u8],
        now: Now,
    ) -> Result<(GatewayOutcome, Option<Rewrite>), DropReason> {
        match self.admit(pkt, now)? {
            Admit::Done(o, rw) => Ok((o, rw)),
            Admit::Authorize { path_off, n, hops_off } => {
                let path = &mut pkt[path_off..];
                let old_sum = span_sum(path, n);
                let outcome = self.authorize(path, n, hops_off);
                let new_sum = span_sum(path, n);
                let rw = Rewrite { offset: path_off + FLAGS_OFF, old_sum, new_sum };
                Ok((outcome, Some(rw)))
            }
        }
    }

    /// Parses, validates and polices one packet: everything but the MACs.
    /// Over-rate and non-EPIC-Z packets are finished here (no MAC work).
    #[inline]
    pub(crate) fn admit(&mut self, pkt: &mut [u8], now: Now) -> Result<Admit, DropReason> {
        let (path_range, host, len) = {
            let h = ScionHeader::new_checked(&*pkt)?;
            if h.path_type() != PathType::EPIC_Z {
                self.counters.passed += 1;
                return Ok(Admit::Done(GatewayOutcome::Passed, None));
            }
            (
                h.path_offset()..h.header_len(),
                h.src_host_raw(),
                h.header_len() + usize::from(h.payload_len()),
            )
        };
        let path_off = path_range.start;
        let path = &mut pkt[path_range];
        // Validates the whole path (HVF count vs. SCION meta header, lengths).
        let (n, hops_off) = {
            let e = EpicPath::new_checked(&*path)?;
            (e.num_hvf(), e.path_offset() + META_LEN + e.scion_path().num_inf() * INFO_LEN)
        };
        // Overuse is decided before any MAC work.
        let conform = self.hosts.take(&host, len, now).unwrap_or_else(|| {
            self.counters.table_full += 1;
            false
        });
        if conform {
            return Ok(Admit::Authorize { path_off, n, hops_off });
        }
        match self.cfg.overuse {
            OverusePolicy::Demote => {
                self.counters.demoted += 1;
                Ok(Admit::Done(GatewayOutcome::Demoted, Some(clear_q(path, path_off))))
            }
            OverusePolicy::Drop => {
                self.counters.dropped += 1;
                Err(DropReason::OverRate)
            }
        }
    }

    /// The key index of the AS owning the hop field whose MAC is `sigma`.
    #[inline]
    pub(crate) fn key_of(&self, sigma: &[u8]) -> Option<u32> {
        self.keys.key_of(sigma)
    }

    /// The key at index `i` (from [`key_of`](Self::key_of)), or the
    /// placeholder.
    #[inline]
    pub(crate) fn key_at(&self, i: u32) -> &Cmac {
        self.keys.cmac(i).unwrap_or(&self.placeholder)
    }

    /// Demotes a packet one of whose hops has no known AS key: Q cleared,
    /// host HVFs kept.
    #[inline]
    pub(crate) fn unknown_hop(&mut self, path: &mut [u8], path_off: usize) -> Rewrite {
        self.counters.unknown_hop += 1;
        clear_q(path, path_off)
    }

    /// Replaces every V_i by Ṽ_i and sets Q; demotes if a hop is unknown.
    /// `path` is a validated EPIC-Z path with `n` hops whose hop fields start
    /// at `hops_off`. The hops' MACs (one block each, under different AS
    /// keys) run interleaved, up to eight at a time.
    #[inline]
    fn authorize(&mut self, path: &mut [u8], n: usize, hops_off: usize) -> GatewayOutcome {
        if n <= CHUNK {
            self.authorize_up_to::<CHUNK>(path, n, hops_off)
        } else {
            self.authorize_up_to::<MAX_HOPS>(path, n, hops_off)
        }
    }

    /// [`authorize`](Self::authorize) for paths of at most `M` hops (sized
    /// so that common paths fill no 64-entry table per packet).
    #[inline]
    fn authorize_up_to<const M: usize>(
        &mut self,
        path: &mut [u8],
        n: usize,
        hops_off: usize,
    ) -> GatewayOutcome {
        let mut keys: [&Cmac; M] = [&self.placeholder; M];
        for (i, slot) in keys.iter_mut().enumerate().take(n) {
            let m = hops_off + i * HOP_LEN + 6;
            let Some(k) = self.keys.key_of(&path[m..m + 6]).and_then(|k| self.keys.cmac(k)) else {
                self.counters.unknown_hop += 1;
                path[FLAGS_OFF] &= !FLAG_Q;
                return GatewayOutcome::Demoted;
            };
            *slot = k;
        }
        for c in (0..n).step_by(CHUNK) {
            let len = CHUNK.min(n - c);
            let mut blocks = [[0u8; 16]; CHUNK];
            for (h, b) in blocks.iter_mut().enumerate().take(len) {
                let v = HVFS_OFF + (c + h) * HVF_LEN;
                *b = as_hvf_block(keys[c + h], [path[v], path[v + 1], path[v + 2], path[v + 3]]);
            }
            Aes::encrypt_each(|h| keys[c + h].aes(), &mut blocks[..len]);
            for (h, b) in blocks.iter().enumerate().take(len) {
                let o = HVFS_OFF + (c + h) * HVF_LEN;
                path[o..o + HVF_LEN].copy_from_slice(&b[..HVF_LEN]);
            }
        }
        path[FLAGS_OFF] |= FLAG_Q;
        self.counters.authorized += 1;
        GatewayOutcome::Authorized
    }
}
