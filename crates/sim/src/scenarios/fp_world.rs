//! What the FlowPolice scenarios share: the protected servers and the
//! statistics groups, the puzzles, the FlowPolice router (the real
//! `flowpolice::FlowPolice` stage and its strict-priority egress,
//! `flowpolice::egress::build`), the places of the bottleneck links (thesis
//! Fig. 5.2, [`Topology`]) with the plain routers in front of remote ones,
//! and the hosts' addresses and packets.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use ::flowpolice::config::{Config, LinkLayer};
use ::flowpolice::egress::{self as fp_egress, EgressConfig};
use ::flowpolice::host::ipv4_packet;
use ::flowpolice::puzzle::{PuzzlePolicy, SeedChain};
use ::flowpolice::{class, FlowPolice, Params};
use packet::flowpolice::{FlowPolice as ShimView, PacketType, REGULAR_LEN, REQUEST_LEN};
use packet::ipv4::{protocol, Ipv4};
use pipeline::{Batch, Egress, Element, Fifo, Frame, Now, PacketBuf, Pipeline, Stage};
use serde::Deserialize;

use super::fp_client::{CapClient, HostPair, PuzzleLevels};
use super::{positive, ScenarioError};
use crate::baselines::RouteByDst;
use crate::net::{Endpoint, Link, Node, Shared, Sim, TAG_LEN};

/// Unix time of virtual time 0 (ns).
pub(crate) const EPOCH_UNIX_NS: u64 = 1_700_000_000_000_000_000;
/// Statistics group of the legitimate senders.
pub const GROUP_LEGIT: u16 = 0;
/// Statistics group of the attackers.
pub const GROUP_ATTACK: u16 = 1;
/// The attacked server (declared protected: flows are per source).
pub(crate) const VICTIM: Ipv4Addr = victim(0);

/// The attacked server behind bottleneck link `k` (`192.0.2.(k + 1)`,
/// `k < 254`); [`VICTIM`] is the first.
pub(crate) const fn victim(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, k as u8 + 1)
}

/// Where the bottleneck links are (thesis Fig. 5.2).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum Topology {
    /// Case (a): the bottleneck link is the FlowPolice router's own egress.
    #[serde(rename = "a")]
    A,
    /// Case (b): the bottleneck is a downstream link: the FlowPolice router
    /// forwards over an uncongested link to a plain router whose egress
    /// link is the bottleneck.
    #[serde(rename = "b")]
    B,
    /// Case (c): several remote bottleneck links, one behind each of the
    /// FlowPolice router's downstream plain routers, each towards its own
    /// server.
    #[serde(rename = "c")]
    C,
}

impl Topology {
    /// Name used in tables and notes (`a`, `b`, `c`).
    pub fn name(self) -> &'static str {
        match self {
            Topology::A => "a",
            Topology::B => "b",
            Topology::C => "c",
        }
    }

    /// One line on the shape, for report notes.
    pub fn describe(self, bottlenecks: usize) -> String {
        match self {
            Topology::A => "case (a): the FlowPolice router owns the bottleneck link".into(),
            Topology::B => {
                "case (b): FlowPolice router -> plain router -> bottleneck link (one downstream bottleneck)"
                    .into()
            }
            Topology::C => format!(
                "case (c): FlowPolice router -> {bottlenecks} plain routers, each with its own bottleneck link, server and hosts"
            ),
        }
    }
}

/// How the plain router in front of a remote bottleneck (cases (b), (c))
/// queues: it runs none of FlowPolice's state or cryptography.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RemoteEgress {
    /// The thesis' "simple prioritization mechanism": strict priority on
    /// the packet type the FlowPolice router wrote (privileged over best
    /// effort over legacy), with the capped request channel by puzzle level
    /// ([`PriorityByMark`] in front of the `flowpolice::egress::build`
    /// queue layout).
    Priority,
    /// One drop-tail FIFO: the remote router ignores the marks.
    Fifo,
}

/// The stage of a plain router in front of a remote bottleneck: reads the
/// packet type in the FlowPolice shim (no state, no MAC) and sets the class
/// the strict-priority egress maps to its queues: privileged, best effort,
/// requests by puzzle level; anything else stays legacy.
pub struct PriorityByMark;

impl Element for PriorityByMark {
    fn name(&self) -> &str {
        "priority-by-mark"
    }
}

impl<B: PacketBuf> Stage<B> for PriorityByMark {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let c = mark_class(batch.data(i));
            batch.set_class(i, c);
        }
    }
}

/// The class of an IPv4 packet by its FlowPolice packet type.
fn mark_class(data: &[u8]) -> pipeline::Class {
    let Ok(ip) = Ipv4::new_checked(data) else { return class::LEGACY };
    if ip.protocol() != protocol::FLOWPOLICE {
        return class::LEGACY;
    }
    let Ok(shim) = ShimView::new_checked(ip.payload()) else { return class::LEGACY };
    match shim.packet_type() {
        Some(PacketType::Privileged) => class::PRIVILEGED,
        Some(PacketType::BestEffort) => class::BEST_EFFORT,
        Some(PacketType::Request) => class::request(shim.puzzle_level().unwrap_or(0)),
        None => class::LEGACY,
    }
}

/// What [`World::add_network`] builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NetworkSpec {
    /// Where the bottleneck links are.
    pub topology: Topology,
    /// Number of remote bottleneck links in case (c) (cases (a), (b): one).
    pub remote_bottlenecks: usize,
    /// Capacity of each bottleneck link.
    pub cap_bps: f64,
    /// Capacity of each link from the FlowPolice router to a plain router
    /// (cases (b), (c); never congested).
    pub access_bps: f64,
    /// Packets per egress queue (every router).
    pub queue_packets: usize,
    /// The plain routers' egress.
    pub remote_egress: RemoteEgress,
}

impl NetworkSpec {
    /// Number of bottleneck links.
    pub fn bottlenecks(&self) -> usize {
        match self.topology {
            Topology::A | Topology::B => 1,
            Topology::C => self.remote_bottlenecks,
        }
    }
}

/// The network of one run: the FlowPolice router and, per bottleneck link,
/// the link and the server behind it.
pub(crate) struct Network {
    /// Node of the FlowPolice router (the hosts' ingress, port 0).
    pub router: usize,
    /// The FlowPolice stage (for reading its state).
    pub stage: Arc<Mutex<FlowPolice>>,
    /// Per bottleneck: its link index and the server behind it.
    pub bottlenecks: Vec<(usize, Ipv4Addr)>,
}

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

    /// The FlowPolice stage (4096 table lines: room for every host's flow)
    /// with the Algorithm 1 `params`, policing the traffic to `victims` per
    /// source.
    fn stage(
        &self,
        victims: Vec<Ipv4Addr>,
        params: Params,
    ) -> Result<Arc<Mutex<FlowPolice>>, ScenarioError> {
        let key = [0x9d3c_5a1b_77e2_4f01, 0x2f6b_8e4d_13a7_c959];
        let mut cfg = Config::new(mac::Key::from([0x42; 16]), key, 4096, self.seeds.clone());
        cfg.link = LinkLayer::Ip;
        // The victims are protected servers: their traffic is policed per
        // source (otherwise every sender would share one per-destination flow).
        cfg.protected_v4 = victims;
        cfg.puzzle = self.policy;
        cfg.params = params;
        let stage = FlowPolice::new(cfg)
            .map_err(|e| ScenarioError::Param(format!("flowpolice configuration: {e}")))?;
        Ok(Arc::new(Mutex::new(stage)))
    }

    /// Adds the FlowPolice router with the Algorithm 1 `params`, forwarding
    /// port 0 through its egress of `queue_packets` per queue onto the
    /// bottleneck (case (a)); returns the node, the bottleneck link and the
    /// stage (for reading its state).
    pub fn add_router(
        &self,
        sim: &mut Sim,
        cap_bps: f64,
        queue_packets: usize,
        params: Params,
    ) -> Result<(usize, usize, Arc<Mutex<FlowPolice>>), ScenarioError> {
        let spec = NetworkSpec {
            topology: Topology::A,
            remote_bottlenecks: 1,
            cap_bps,
            access_bps: cap_bps,
            queue_packets,
            remote_egress: RemoteEgress::Priority,
        };
        let net = self.add_network(sim, &spec, params)?;
        Ok((net.router, net.bottlenecks[0].0, net.stage))
    }

    /// Adds the network of `spec` (thesis Fig. 5.2): the FlowPolice router
    /// with the Algorithm 1 `params`, taking the hosts' packets on port 0,
    /// and
    /// * case (a): its strict-priority egress onto the bottleneck link (a
    ///   quarter RTT of delay) to the server;
    /// * cases (b), (c): per bottleneck `k`, its strict-priority egress on
    ///   port `k` onto an access link (`access_bps`, an eighth of the RTT)
    ///   to plain router `k`, whose egress (`remote_egress`) feeds
    ///   bottleneck link `k` (an eighth of the RTT) to server `k`: the
    ///   one-way delay is the same as in case (a). Packets are routed by
    ///   destination ([`RouteByDst`]).
    pub fn add_network(
        &self,
        sim: &mut Sim,
        spec: &NetworkSpec,
        params: Params,
    ) -> Result<Network, ScenarioError> {
        let victims: Vec<Ipv4Addr> = (0..spec.bottlenecks()).map(victim).collect();
        let stage = self.stage(victims.clone(), params)?;
        let mut pipeline = Pipeline::new().with(Shared(stage.clone()));
        if victims.len() > 1 {
            pipeline =
                pipeline.with(RouteByDst::new(victims.iter().zip(0u16..).map(|(&v, k)| (v, k))));
        }
        let router = sim.add_node(Node::new("flowpolice", pipeline));
        let fp_egress = |bps: f64| -> Box<dyn Egress<Frame>> {
            let cfg = EgressConfig {
                link_bytes_per_sec: (bps / 8.0) as u64,
                queue_packets: spec.queue_packets,
                ..EgressConfig::default()
            };
            Box::new(fp_egress::build::<Frame>(&cfg, 0))
        };
        let mut bottlenecks = Vec::new();
        for (k, &v) in victims.iter().enumerate() {
            if spec.topology == Topology::A {
                let link =
                    sim.connect(router, 0, fp_egress(spec.cap_bps), self.bottleneck(spec.cap_bps));
                bottlenecks.push((link, v));
                continue;
            }
            let (plain, egress) = match spec.remote_egress {
                RemoteEgress::Priority => {
                    (Pipeline::new().with(PriorityByMark), fp_egress(spec.cap_bps))
                }
                RemoteEgress::Fifo => (
                    Pipeline::new(),
                    Box::new(Fifo::new(spec.queue_packets)) as Box<dyn Egress<Frame>>,
                ),
            };
            let remote = sim.add_node(Node::new(&format!("plain-{k}"), plain));
            let to_remote = Endpoint::Node { node: remote, port: 0 };
            let access = Link::new(
                &format!("access-{k}"),
                spec.access_bps as u64,
                self.rtt_ns / 8,
                to_remote,
            );
            sim.connect(router, k as u16, fp_egress(spec.access_bps), access);
            let down = Link::new(
                &format!("bottleneck-{k}"),
                spec.cap_bps as u64,
                self.rtt_ns / 8,
                Endpoint::Sink,
            );
            let link = sim.connect(remote, 0, egress, down);
            bottlenecks.push((link, v));
        }
        Ok(Network { router, stage, bottlenecks })
    }

    /// Host `i` of `group` (address 10.group.i/256.i%256), sending to the
    /// server from `start`.
    pub fn host(&self, group: u16, i: u32, start: u64) -> HostPair {
        self.host_to(group, i, VICTIM, start)
    }

    /// Host `i` of `group` (address 10.group.i/256.i%256), sending to
    /// server `dst` from `start`.
    pub fn host_to(&self, group: u16, i: u32, dst: Ipv4Addr, start: u64) -> HostPair {
        let src = Ipv4Addr::new(10, group as u8, (i >> 8) as u8, i as u8);
        let payload = vec![0u8; self.packet_bytes - 20 - REGULAR_LEN];
        let legit = group == GROUP_LEGIT;
        let levels = PuzzleLevels {
            step: if legit { self.legit_levels.step } else { 0 },
            ..self.legit_levels
        };
        let fp = CapClient::new(
            src,
            dst,
            self.rtt_ns,
            self.period_ns,
            self.seeds.clone(),
            self.policy,
            levels,
        );
        HostPair {
            group,
            fp,
            regular: ipv4_packet(src, dst, &[0; REGULAR_LEN], &payload),
            next: Some(start),
            last_send: start,
            stop_ns: self.stop_ns,
            seq: 0,
            mark_aware: legit && self.legit_mark_aware,
        }
    }
}

#[cfg(test)]
mod tests {
    use ::flowpolice::host::ipv4_packet;
    use packet::flowpolice::Puzzle;
    use pipeline::Verdict;

    use super::*;

    /// An IPv4 packet to the victim with a FlowPolice shim of type `t`
    /// (a request at puzzle `level`).
    fn packet(t: PacketType, level: u8) -> Vec<u8> {
        let mut shim = vec![0u8; t.header_len()];
        let mut v = ShimView::new_unchecked(&mut shim[..]);
        v.set_packet_type(t);
        v.set_hdr_len(t.header_len() as u16);
        if t == PacketType::Request {
            v.set_puzzle(&Puzzle { epoch: 1, level, nonce: 7 });
        }
        ipv4_packet(Ipv4Addr::new(10, 0, 0, 1), VICTIM, &shim, &[0; 16])
    }

    #[test]
    fn plain_router_classes_follow_the_mark() {
        assert_eq!(mark_class(&packet(PacketType::Privileged, 0)), class::PRIVILEGED);
        assert_eq!(mark_class(&packet(PacketType::BestEffort, 0)), class::BEST_EFFORT);
        assert_eq!(mark_class(&packet(PacketType::Request, 9)), class::request(9));
        // Not FlowPolice (UDP), not IPv4, a broken shim: legacy.
        let mut udp = packet(PacketType::Privileged, 0);
        udp[9] = 17;
        assert_eq!(mark_class(&udp), class::LEGACY);
        assert_eq!(mark_class(&[0x45; 12]), class::LEGACY);
        let mut broken = packet(PacketType::Privileged, 0);
        broken[21] = 0b01 << 6;
        assert_eq!(mark_class(&broken), class::LEGACY);

        // The stage keeps each packet's port and only sets its class.
        let mut batch: Batch<Vec<u8>> = Batch::new();
        batch.push(packet(PacketType::Privileged, 0), 3).unwrap();
        batch.push(packet(PacketType::BestEffort, 0), 3).unwrap();
        Stage::process(&mut PriorityByMark, &mut batch, Now::default());
        let forwarded = |i| batch.meta(i).verdict;
        assert_eq!(forwarded(0), Verdict::Forward { port: 3, class: class::PRIVILEGED });
        assert_eq!(forwarded(1), Verdict::Forward { port: 3, class: class::BEST_EFFORT });
    }

    #[test]
    fn victims_are_distinct_and_the_first_is_the_victim() {
        assert_eq!(victim(0), VICTIM);
        assert_eq!(victim(1), Ipv4Addr::new(192, 0, 2, 2));
        let spec = |topology, remote_bottlenecks| NetworkSpec {
            topology,
            remote_bottlenecks,
            cap_bps: 1e6,
            access_bps: 1e7,
            queue_packets: 10,
            remote_egress: RemoteEgress::Fifo,
        };
        assert_eq!(spec(Topology::A, 3).bottlenecks(), 1);
        assert_eq!(spec(Topology::B, 3).bottlenecks(), 1);
        assert_eq!(spec(Topology::C, 3).bottlenecks(), 3);
    }
}
