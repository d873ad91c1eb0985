//! Stage entries of the FAIR node (§5.1 role dispatch over source, SB,
//! transit and destination) and the defense stage (§5.12) on arbitrary
//! bursts: no panic, the burst keeps its size, and every live packet is
//! classified at most once. Input: up to 8 packets separated by 0xfe; the
//! first byte of each selects its ingress and egress port.
#![no_main]

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::MarkBinding;
use fair::defense::{
    DefenseAction, DefenseConfig, DefenseMatch, DefenseRule, DefenseTable, FairDefense,
};
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::KeyRing;
use fair::record::Record;
use fair::role::{FairNode, NodeConfig};
use fair::sb::{SbConfig, SusPorts, SuspiciousBit};
use fair::source::{FairSource, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use fair::Key;
use libfuzzer_sys::fuzz_target;
use pipeline::{Batch, Class, Now, Stage};

const NOW: u64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let mut node: FairNode<Vec<u8>, Vec<Record>> = FairNode::new(NodeConfig {
        framing: Framing::Ip,
        external_ports: 0b01,
        ..Default::default()
    });
    node.add_local_prefix(IpAddr::from([10, 0, 0, 0]), 8);
    node.add_local_prefix("2001:db8::".parse().unwrap(), 32);
    let mut src = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    let ch = SourceChannel::new(0, 2, &Key::from([1; 16]), 2, 1 << 20, 1 << 20, 0, {
        Arc::new(AtomicU32::new(0))
    });
    let i = src.add_channel(ch);
    src.route(IpAddr::from([0, 0, 0, 0]), 0, i);
    src.route("::".parse().unwrap(), 0, i);
    node.source = Some(src);
    let mut ring = KeyRing::data(60, 43_200).unwrap();
    ring.install(NOW / 60, &Key::from([2; 16]), MarkBinding::Paper).unwrap();
    node.transit = Some(FairTransit::new(
        TransitConfig { framing: Framing::Ip, ..Default::default() },
        Arc::new(ring),
        1,
    ));
    node.sb = Some(SuspiciousBit::new(
        SbConfig { framing: Framing::Ip, ..Default::default() },
        Arc::new(SusPorts::default()),
    ));
    let mut dst =
        FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new());
    dst.add_source_prefix(IpAddr::from([0, 0, 0, 0]), 0, 1);
    dst.add_channel(DestChannel::new(0, 1, &Key::from([1; 16]), 2, 1000, 2000, 0), 0, 2);
    node.dest = Some(dst);
    let mut table = DefenseTable::new(4);
    table.note_ack([1; 32], NOW + 100);
    let rule = DefenseRule {
        id: 0,
        matcher: DefenseMatch {
            src_prefixes: vec![(IpAddr::from([192, 0, 2, 0]), 24)],
            ingress_ports: None,
            policy_id: None,
        },
        action: DefenseAction::RateLimit { cir: 100, cbs: 200 },
        expires_at: NOW + 50,
        evidence: [1; 32],
    };
    table.install(rule, NOW).unwrap();
    let mut def =
        FairDefense::new(DefenseConfig { framing: Framing::Ip, ..Default::default() }, table);

    let mut b: Batch<Vec<u8>> = Batch::new();
    let mut inputs = Vec::new();
    for part in data.split(|&x| x == 0xfe).take(8) {
        let Some((&ports, pkt)) = part.split_first() else { continue };
        let k = b.push(pkt.to_vec(), (ports & 1) as u16).unwrap();
        b.forward(k, ((ports >> 1) & 1) as u16, Class::BEST_EFFORT);
        inputs.push(pkt.to_vec());
    }
    let n = b.len();
    let now = Now::from_unix_ns(NOW * 1_000_000_000);
    def.process(&mut b, now);
    node.process(&mut b, now);
    assert_eq!(b.len(), n);
    let s = node.stats;
    let classified = s.send
        + s.mark
        + s.receive
        + s.deliver_plain
        + s.forward_unmodified
        + s.plain
        + s.src_preexisting_fair;
    assert!(classified <= n as u64);
});
