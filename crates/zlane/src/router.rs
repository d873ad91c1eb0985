//! Border-router side: EPIC-Z verification, classification into R/N/G/A/U,
//! per-AS/per-ISD token buckets, and the `ZlaneClassify` stage.

use packet::scion::{epic::EpicPath, next_hdr, PathType, ScionHeader};
use packet::Ia;
use pipeline::{Batch, Class, DropReason, Now, PacketBuf, Stage};

use crate::bucket::{rate_units, FixedMap, TokenBucket};
use crate::class::{A, G, N, R, U};
use crate::config::{ConfigError, Origin, RouterConfig};
use crate::hvf::{as_hvf, host_hvf, host_input, packet_time_ns, Freshness};
use crate::keys::RouterKeys;
use crate::replay::ReplayFilter;

/// Counters of the classifier (per class chosen and per reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifyCounters {
    /// Packets classified into R, N, G, A, U.
    pub classes: [u64; 5],
    /// Q-flagged packets that went to A because their bucket was empty (or absent).
    pub over_bucket: u64,
}

/// What the classifier decided for one packet.
pub type Decision = Result<Class, DropReason>;

/// The per-interface classifier: keys, buckets, freshness, optional replay filter.
pub struct Classifier<K> {
    keys: K,
    local_isd: u16,
    burst: u16,
    buckets: FixedMap<TokenBucket>,
    freshness: Freshness,
    protocol: u16,
    replay: Option<ReplayFilter>,
    counters: ClassifyCounters,
}

impl<K: RouterKeys> Classifier<K> {
    /// Builds a classifier from a validated configuration; `now_ns` starts the buckets.
    pub fn new(cfg: &RouterConfig, keys: K, now_ns: u64) -> Result<Self, ConfigError> {
        let rates = cfg.resolve()?;
        let mut buckets = FixedMap::with_capacity(rates.len().max(16), cfg.local_ia.to_u64());
        for (o, bps) in &rates {
            let o = match *o {
                // An AS of another ISD is policed with its ISD; keep the key honest.
                Origin::As(ia) if ia.isd() != cfg.local_ia.isd() => Origin::Isd(ia.isd()),
                o => o,
            };
            let units = rate_units(*bps).unwrap_or(u16::MAX);
            if !buckets.insert(o.key(), TokenBucket::new(units, cfg.burst, now_ns)) {
                return Err(ConfigError::TableFull { what: "AS/ISD buckets" });
            }
        }
        Ok(Classifier {
            keys,
            local_isd: cfg.local_ia.isd(),
            burst: cfg.burst,
            buckets,
            freshness: cfg.freshness,
            protocol: cfg.protocol_id,
            replay: None,
            counters: ClassifyCounters::default(),
        })
    }

    /// Enables duplicate suppression.
    pub fn with_replay_filter(mut self, f: ReplayFilter) -> Self {
        self.replay = Some(f);
        self
    }

    /// Counters.
    pub fn counters(&self) -> &ClassifyCounters {
        &self.counters
    }

    /// The key source, mutable (epoch changes between bursts).
    pub fn keys_mut(&mut self) -> &mut K {
        &mut self.keys
    }

    /// Bucket key of a source: its AS inside the local ISD, its ISD otherwise.
    #[inline]
    fn origin_of(&self, src: Ia) -> Origin {
        if src.isd() == self.local_isd {
            Origin::As(src)
        } else {
            Origin::Isd(src.isd())
        }
    }

    /// The token bucket of `origin` (for inspection and tests).
    pub fn bucket(&mut self, origin: Origin) -> Option<TokenBucket> {
        self.buckets.get_mut(origin.key()).copied()
    }

    /// Classifies the SCION packet `pkt` (starting at its common header).
    pub fn classify(&mut self, pkt: &[u8], now: Now) -> Decision {
        let h = ScionHeader::new_checked(pkt)?;
        let ty = h.path_type();
        let class = match ty {
            PathType::SIBRA => R,
            PathType::ONE_HOP => N,
            _ if h.next_hdr() == next_hdr::BFD => N,
            PathType::SCION | PathType::EMPTY => U,
            PathType::EPIC_Z => self.epic(&h, now)?,
            _ => return Err(DropReason::Unsupported),
        };
        self.counters.classes[crate::class::queue_of(class)] += 1;
        Ok(class)
    }

    fn epic(&mut self, h: &ScionHeader<&[u8]>, now: Now) -> Decision {
        let e = EpicPath::new_checked(h.path())?;
        let sp = e.scion_path();
        let info0 = sp.info_field(0).ok_or(DropReason::Malformed)?;
        self.freshness.check(packet_time_ns(info0.timestamp(), e.ts_rel()), now.unix_ns)?;
        let hvf = e.current_hvf().ok_or(DropReason::Malformed)?;
        let src = h.src_ia();
        let host = h.src_host_raw();
        let sigma = sp.current_hop().mac();
        let pkt_id = e.pkt_id();
        let len = h.header_len() + usize::from(h.payload_len());
        let protocol = self.protocol;
        let l1 = self.keys.level1(src, now.unix_secs()).ok_or(DropReason::UnknownKey)?;
        let k = l1.host_cmac(protocol, host.type_len(), host.as_bytes());
        let v = host_hvf(&k, &host_input(&pkt_id, src, &host.padded(), &sigma, h.payload_len()));
        let q = e.q();
        let expect = if q { as_hvf(l1.cmac(), &v) } else { v };
        if !mac::ct_eq(&expect, &hvf) {
            return Err(DropReason::BadMac);
        }
        if let Some(f) = self.replay.as_mut() {
            if !f.check_and_insert(src, &host.padded(), &pkt_id, now.mono_ns) {
                return Err(DropReason::Replay);
            }
        }
        if !q {
            return Ok(A);
        }
        let key = self.origin_of(src).key();
        let burst = self.burst;
        let conform = self.buckets.get_mut(key).is_some_and(|b| b.take(len, burst, now.mono_ns));
        match conform {
            true => Ok(G),
            false => {
                self.counters.over_bucket += 1;
                Ok(A)
            }
        }
    }
}

/// The Z-Lane border-router stage: verifies EPIC-Z HVFs (host- or AS-level
/// per the Q flag), checks freshness (and replays if enabled), polices
/// Q-flagged traffic with the per-AS/per-ISD buckets, and sets the class
/// R/N/G/A/U. Drops carry their reason (`BadMac`, `Expired`, `FromFuture`,
/// `Replay`, `UnknownKey`, parse errors).
///
/// Run it **before** `scion::ScionForward`: it checks the HVF of the current
/// hop field, which forwarding then verifies (σ_i) and advances past.
pub struct ZlaneClassify<K> {
    inner: Classifier<K>,
}

impl<K: RouterKeys> ZlaneClassify<K> {
    /// Wraps a classifier.
    pub fn new(inner: Classifier<K>) -> Self {
        ZlaneClassify { inner }
    }

    /// The classifier.
    pub fn classifier(&self) -> &Classifier<K> {
        &self.inner
    }

    /// The classifier, mutable.
    pub fn classifier_mut(&mut self) -> &mut Classifier<K> {
        &mut self.inner
    }
}

impl<B: PacketBuf, K: RouterKeys> Stage<B> for ZlaneClassify<K> {
    fn name(&self) -> &str {
        "zlane-classify"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        for i in batch.live() {
            let Some(off) = scion::scion_offset(batch.meta(i)) else {
                batch.set_class(i, U);
                continue;
            };
            let d = match batch.data(i).get(off..) {
                Some(pkt) => self.inner.classify(pkt, now),
                None => Err(DropReason::Truncated),
            };
            match d {
                Ok(c) => batch.set_class(i, c),
                Err(r) => batch.drop_packet(i, r),
            }
        }
    }
}
