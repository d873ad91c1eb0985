//! What the FlowPolice scenarios share: the protected server and the
//! statistics groups, the puzzles, the router on the bottleneck (the real
//! `flowpolice::FlowPolice` stage and its strict-priority egress,
//! `flowpolice::egress::build`), and the hosts' addresses and packets.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use ::flowpolice::config::{Config, LinkLayer};
use ::flowpolice::egress::{self as fp_egress, EgressConfig};
use ::flowpolice::host::ipv4_packet;
use ::flowpolice::puzzle::{PuzzlePolicy, SeedChain};
use ::flowpolice::{FlowPolice, Params};
use packet::flowpolice::{REGULAR_LEN, REQUEST_LEN};
use pipeline::{Frame, Pipeline};

use super::fp_client::{CapClient, HostPair, PuzzleLevels};
use super::{positive, ScenarioError};
use crate::net::{Endpoint, Link, Node, Shared, Sim, TAG_LEN};

/// Unix time of virtual time 0 (ns).
pub(crate) const EPOCH_UNIX_NS: u64 = 1_700_000_000_000_000_000;
/// Statistics group of the legitimate senders.
pub const GROUP_LEGIT: u16 = 0;
/// Statistics group of the attackers.
pub const GROUP_ATTACK: u16 = 1;
/// The attacked server (declared protected: flows are per source).
pub(crate) const VICTIM: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

/// Checks the load parameters both scenarios have: the bottleneck, the
/// host counts, the offered loads and the packet size.
pub(crate) fn check_load(
    capacity_mbps: f64,
    attackers: u32,
    legit: u32,
    attack_volume: f64,
    legit_demand: f64,
    packet_bytes: usize,
) -> Result<(), ScenarioError> {
    let bad = |m: &str| Err(ScenarioError::Param(m.into()));
    if !positive(capacity_mbps) || attackers == 0 || legit == 0 {
        return bad("capacity_mbps, attackers and legit must be positive");
    }
    if !positive(attack_volume) || !positive(legit_demand) {
        return bad("attack_volume and legit_demand must be positive");
    }
    if !(20 + REQUEST_LEN + TAG_LEN..=1500).contains(&packet_bytes) {
        return bad("packet_bytes must lie in [72, 1500]");
    }
    Ok(())
}

/// The puzzles and timing the router and every host of one run share.
pub(crate) struct World {
    /// Puzzle policy (the router's minimum level is the hosts' base level).
    pub policy: PuzzlePolicy,
    /// Published seeds covering the run.
    pub seeds: SeedChain,
    /// Round-trip time.
    pub rtt_ns: u64,
    /// The router's period D_p.
    pub period_ns: u64,
    /// No host sends at or after this time.
    pub stop_ns: u64,
    /// IP packet size.
    packet_bytes: usize,
    /// Puzzle levels of the legitimate hosts (attackers do not step up).
    legit_levels: PuzzleLevels,
    /// Legitimate hosts react to best-effort marks.
    legit_mark_aware: bool,
}

impl World {
    /// A run of `duration_s` (seeds cover it and three more epochs).
    pub fn new(
        duration_s: f64,
        rtt_ms: f64,
        period_ms: u32,
        packet_bytes: usize,
        legit_levels: PuzzleLevels,
        legit_mark_aware: bool,
    ) -> Self {
        let policy = PuzzlePolicy { min_level: legit_levels.base, ..PuzzlePolicy::default() };
        let first_epoch = policy.epoch_at(EPOCH_UNIX_NS / 1_000_000);
        let epochs = (duration_s * 1e3 / policy.epoch_ms as f64) as usize + 3;
        World {
            policy,
            seeds: SeedChain::generate([0x5e; 32], first_epoch, epochs),
            rtt_ns: (rtt_ms * 1e6) as u64,
            period_ns: u64::from(period_ms) * 1_000_000,
            stop_ns: (duration_s * 1e9) as u64,
            packet_bytes,
            legit_levels,
            legit_mark_aware,
        }
    }

    /// The bottleneck link of `cap_bps` towards the server (a quarter RTT of
    /// delay).
    pub fn bottleneck(&self, cap_bps: f64) -> Link {
        Link::new("bottleneck", cap_bps as u64, self.rtt_ns / 4, Endpoint::Sink)
    }

    /// Adds the FlowPolice router (4096 table lines: room for every host's
    /// flow) with the Algorithm 1 `params`, forwarding port 0 through its
    /// egress of `queue_packets` per queue onto the bottleneck; returns the
    /// node, the bottleneck link and the stage (for reading its state).
    pub fn add_router(
        &self,
        sim: &mut Sim,
        cap_bps: f64,
        queue_packets: usize,
        params: Params,
    ) -> Result<(usize, usize, Arc<Mutex<FlowPolice>>), ScenarioError> {
        let key = [0x9d3c_5a1b_77e2_4f01, 0x2f6b_8e4d_13a7_c959];
        let mut cfg = Config::new(mac::Key::from([0x42; 16]), key, 4096, self.seeds.clone());
        cfg.link = LinkLayer::Ip;
        // The victim is a protected server: its traffic is policed per
        // source (otherwise every sender would share one per-destination flow).
        cfg.protected_v4 = vec![VICTIM];
        cfg.puzzle = self.policy;
        cfg.params = params;
        let stage = FlowPolice::new(cfg)
            .map_err(|e| ScenarioError::Param(format!("flowpolice configuration: {e}")))?;
        let stage = Arc::new(Mutex::new(stage));
        let r = sim.add_node(Node::new("flowpolice", Pipeline::new().with(Shared(stage.clone()))));
        let ecfg = EgressConfig {
            link_bytes_per_sec: (cap_bps / 8.0) as u64,
            queue_packets,
            ..EgressConfig::default()
        };
        let egress = fp_egress::build::<Frame>(&ecfg, 0);
        let link = sim.connect(r, 0, Box::new(egress), self.bottleneck(cap_bps));
        Ok((r, link, stage))
    }

    /// Host `i` of `group` (address 10.group.i/256.i%256), sending to the
    /// server from `start`.
    pub fn host(&self, group: u16, i: u32, start: u64) -> HostPair {
        let src = Ipv4Addr::new(10, group as u8, (i >> 8) as u8, i as u8);
        let payload = vec![0u8; self.packet_bytes - 20 - REGULAR_LEN];
        let legit = group == GROUP_LEGIT;
        let levels = PuzzleLevels {
            step: if legit { self.legit_levels.step } else { 0 },
            ..self.legit_levels
        };
        let fp = CapClient::new(
            src,
            VICTIM,
            self.rtt_ns,
            self.period_ns,
            self.seeds.clone(),
            self.policy,
            levels,
        );
        HostPair {
            group,
            fp,
            regular: ipv4_packet(src, VICTIM, &[0; REGULAR_LEN], &payload),
            next: Some(start),
            last_send: start,
            stop_ns: self.stop_ns,
            seq: 0,
            mark_aware: legit && self.legit_mark_aware,
        }
    }
}
