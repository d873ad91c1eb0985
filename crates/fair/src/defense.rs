//! Active defense and deprioritization (spec §5.12, PROPOSED mechanism).
//!
//! A transit AS that acknowledged a protest may filter, deprioritize, rate
//! limit or flag (SB) the source AS's traffic. Rules live in a
//! [`DefenseTable`] that only accepts rules whose `evidence` names a protest
//! this AS signed an ACK for ([`DefenseTable::note_ack`]), so nobody can
//! exhaust the filter budget (`max_defense_rules`) without valid proofs.
//! [`FairDefense`] is the data-plane stage, placed before the FAIR stages:
//! longest-prefix match on the source address, optional ingress-port set.
//!
//! **Decisions.**
//! * `policy_id` in a match is bookkeeping for the control plane (which
//!   channel the rule was built for); packets carry no channel identifier,
//!   so the data plane matches prefixes and ports only.
//! * One rule per prefix: installing a rule for a prefix that already has one
//!   replaces it (the budget counts prefixes' rules, not installs).
//! * `RateLimit` keeps one token bucket per rule and worker (configure the
//!   per-worker share as for the source's shaper); default rate is the
//!   channel's own (CIR, CBS) ([`DefenseRule::from_ack`]).
//! * `SetSb` sets the suspicious bit of FAIR packets and leaves others alone.

use std::net::IpAddr;

use pipeline::{Batch, Class, DropReason, Element, Now, PacketBuf, Stage};

use crate::bucket::TokenBucket;
use crate::common::{l3_of, locate_meta, Codes, Framing};
use crate::crypto::Digest32;
use crate::lpm::{key_v4, key_v6, FastMap, PrefixTable};
use crate::policy::TrustStore;

/// Default `max_defense_rules`.
pub const MAX_DEFENSE_RULES: usize = 4096;

/// What a matching rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefenseAction {
    /// Drop (`Policy`).
    Drop,
    /// The low-priority traffic class.
    LowPriority,
    /// Police to (CIR bytes/s, CBS bytes); excess is dropped (`OverRate`).
    RateLimit {
        /// Rate, bytes per second.
        cir: u64,
        /// Burst, bytes.
        cbs: u64,
    },
    /// Set the suspicious bit of FAIR packets.
    SetSb,
}

/// Which packets a rule applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefenseMatch {
    /// Source prefixes (LPM).
    pub src_prefixes: Vec<(IpAddr, u8)>,
    /// Ingress ports (bit p = port p < 64); `None` = any port.
    pub ingress_ports: Option<u64>,
    /// The channel's policy (bookkeeping only, see the module docs).
    pub policy_id: Option<Digest32>,
}

/// One defense rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefenseRule {
    /// Identifier (assigned by [`DefenseTable::install`]; any value on input).
    pub id: u64,
    /// Match.
    pub matcher: DefenseMatch,
    /// Action.
    pub action: DefenseAction,
    /// Unix seconds after which the rule is gone.
    pub expires_at: u64,
    /// `protest_id` of the ACK verdict that justifies the rule.
    pub evidence: Digest32,
}

impl DefenseRule {
    /// A rule against the prefixes of `src_asn` (from the trust store) for the
    /// protest `evidence` this AS acknowledged, rate-limiting to the channel's
    /// own (CIR, CBS) unless another action is given, for `ttl` seconds.
    pub fn from_ack(
        trust: &TrustStore,
        src_asn: u32,
        evidence: Digest32,
        policy_id: Option<Digest32>,
        action: DefenseAction,
        now: u64,
        ttl: u64,
    ) -> Option<Self> {
        let e = trust.get(src_asn)?;
        Some(DefenseRule {
            id: 0,
            matcher: DefenseMatch {
                src_prefixes: e.prefixes.clone(),
                ingress_ports: None,
                policy_id,
            },
            action,
            expires_at: now.saturating_add(ttl),
            evidence,
        })
    }
}

/// Why a rule was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DefenseError {
    /// The evidence does not name a protest this AS acknowledged (or the ACK expired).
    #[error("evidence is not an acknowledged protest")]
    NoAckedEvidence,
    /// `max_defense_rules` reached.
    #[error("defense rule budget exhausted")]
    BudgetExhausted,
    /// The rule is already expired.
    #[error("rule already expired")]
    Expired,
    /// The rule matches no prefix.
    #[error("rule has no source prefix")]
    EmptyMatch,
}

#[derive(Clone, Debug)]
struct Installed {
    rule: DefenseRule,
    bucket: Option<TokenBucket>,
    hits: u64,
}

/// Counters of the defense stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefenseStats {
    /// Packets that matched a rule (`defense_hits`).
    pub hits: u64,
    /// Dropped by `Drop`.
    pub dropped: u64,
    /// Moved to the low-priority class.
    pub deprioritized: u64,
    /// Dropped by `RateLimit`.
    pub rate_limited: u64,
    /// SB set by `SetSb`.
    pub sb_set: u64,
}

/// The rule table (control plane installs, data plane looks up).
#[derive(Clone, Debug)]
pub struct DefenseTable {
    max_rules: usize,
    next_id: u64,
    rules: FastMap<u64, Installed>,
    by_prefix: PrefixTable<u64>,
    owner: FastMap<(IpAddr, u8), u64>,
    acked: FastMap<Digest32, u64>,
}

impl DefenseTable {
    /// A table holding at most `max_rules` rules.
    pub fn new(max_rules: usize) -> Self {
        DefenseTable {
            max_rules,
            next_id: 1,
            rules: FastMap::default(),
            by_prefix: PrefixTable::new(),
            owner: FastMap::default(),
            acked: FastMap::default(),
        }
    }

    /// Records that this AS signed an ACK for `protest_id`; rules may cite it until `until`.
    pub fn note_ack(&mut self, protest_id: Digest32, until: u64) {
        self.acked.insert(protest_id, until);
    }

    /// Installs `rule` (which must cite an acknowledged protest); returns its id.
    pub fn install(&mut self, mut rule: DefenseRule, now: u64) -> Result<u64, DefenseError> {
        if self.acked.get(&rule.evidence).is_none_or(|&u| u <= now) {
            return Err(DefenseError::NoAckedEvidence);
        }
        if rule.expires_at <= now {
            return Err(DefenseError::Expired);
        }
        if rule.matcher.src_prefixes.is_empty() {
            return Err(DefenseError::EmptyMatch);
        }
        self.expire(now);
        // Rules that already own one of the prefixes are replaced, not added.
        let mut replaced: Vec<u64> =
            rule.matcher.src_prefixes.iter().filter_map(|p| self.owner.get(p).copied()).collect();
        replaced.sort_unstable();
        replaced.dedup();
        if self.rules.len() - replaced.len() >= self.max_rules {
            return Err(DefenseError::BudgetExhausted);
        }
        for id in replaced {
            self.remove(id);
        }
        rule.id = self.next_id;
        self.next_id += 1;
        for (a, l) in &rule.matcher.src_prefixes {
            self.by_prefix.insert(*a, *l, rule.id);
            self.owner.insert((*a, *l), rule.id);
        }
        let bucket = match rule.action {
            DefenseAction::RateLimit { cir, cbs } => Some(TokenBucket::new(cir, cbs, 0)),
            _ => None,
        };
        let id = rule.id;
        self.rules.insert(id, Installed { rule, bucket, hits: 0 });
        Ok(id)
    }

    /// Removes rule `id`.
    pub fn remove(&mut self, id: u64) -> Option<DefenseRule> {
        let inst = self.rules.remove(&id)?;
        for p in &inst.rule.matcher.src_prefixes {
            if self.owner.get(p) == Some(&id) {
                self.owner.remove(p);
                self.by_prefix.remove(p.0, p.1);
            }
        }
        Some(inst.rule)
    }

    /// Removes expired rules and acknowledgements.
    pub fn expire(&mut self, now: u64) {
        let gone: Vec<u64> =
            self.rules.values().filter(|r| r.rule.expires_at <= now).map(|r| r.rule.id).collect();
        for id in gone {
            self.remove(id);
        }
        self.acked.retain(|_, u| *u > now);
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is installed.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The installed rules with their hit counts.
    pub fn rules(&self) -> impl Iterator<Item = (&DefenseRule, u64)> {
        self.rules.values().map(|r| (&r.rule, r.hits))
    }

    /// The live rule for source `key` arriving on `port` at `now`.
    #[inline]
    fn lookup(&mut self, key: u128, port: u16, now: u64) -> Option<&mut Installed> {
        let id = *self.by_prefix.lookup(key)?;
        let r = self.rules.get_mut(&id)?;
        if r.rule.expires_at <= now {
            return None;
        }
        if let Some(ports) = r.rule.matcher.ingress_ports {
            if port >= 64 || ports & (1u64 << port) == 0 {
                return None;
            }
        }
        Some(r)
    }
}

/// Defense-stage configuration.
#[derive(Clone, Copy, Debug)]
pub struct DefenseConfig {
    /// Protocol codes (for `SetSb`).
    pub codes: Codes,
    /// Frame layout when no parse stage ran.
    pub framing: Framing,
    /// Class used for `LowPriority`.
    pub low_class: Class,
}

impl Default for DefenseConfig {
    fn default() -> Self {
        DefenseConfig { codes: Codes::default(), framing: Framing::Ethernet, low_class: Class(1) }
    }
}

/// The defense stage: applies the table's rules to every packet.
#[derive(Debug)]
pub struct FairDefense {
    cfg: DefenseConfig,
    /// The rules (install and expire between bursts).
    pub table: DefenseTable,
    /// Counters.
    pub stats: DefenseStats,
}

impl FairDefense {
    /// A stage applying `table`.
    pub fn new(cfg: DefenseConfig, table: DefenseTable) -> Self {
        FairDefense { cfg, table, stats: DefenseStats::default() }
    }
}

impl Element for FairDefense {
    fn name(&self) -> &str {
        "fair-defense"
    }
}

impl<B: PacketBuf> Stage<B> for FairDefense {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        if self.table.is_empty() {
            return;
        }
        let now_s = now.unix_secs();
        for i in batch.live() {
            let (buf, meta) = batch.get_mut(i);
            let frame = buf.data();
            let Some((l3_off, l3)) = l3_of(frame, meta, self.cfg.framing) else { continue };
            let ip = &frame[l3_off..];
            let key = match l3 {
                pipeline::L3::Ipv6 if ip.len() >= 40 => {
                    key_v6(ip[8..24].try_into().unwrap_or([0; 16]))
                }
                pipeline::L3::Ipv4 if ip.len() >= 20 => key_v4([ip[12], ip[13], ip[14], ip[15]]),
                _ => continue,
            };
            let Some(r) = self.table.lookup(key, meta.port, now_s) else { continue };
            r.hits += 1;
            self.stats.hits += 1;
            match r.rule.action {
                DefenseAction::Drop => {
                    self.stats.dropped += 1;
                    batch.drop_packet(i, DropReason::Policy);
                }
                DefenseAction::LowPriority => {
                    self.stats.deprioritized += 1;
                    batch.set_class(i, self.cfg.low_class);
                }
                DefenseAction::RateLimit { .. } => {
                    let len = frame.len().saturating_sub(l3_off) as u64;
                    let ok = r.bucket.as_mut().is_none_or(|b| b.try_consume(len, now.mono_ns));
                    if !ok {
                        self.stats.rate_limited += 1;
                        batch.drop_packet(i, DropReason::OverRate);
                    }
                }
                DefenseAction::SetSb => {
                    if let Ok(Some(p)) =
                        locate_meta(buf.data(), meta, self.cfg.framing, self.cfg.codes)
                    {
                        p.view_mut(buf.data_mut()).set_sb(true);
                        self.stats.sb_set += 1;
                    }
                }
            }
        }
    }
}
