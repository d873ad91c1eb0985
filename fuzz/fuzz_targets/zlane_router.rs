//! `zlane::ZlaneClassify` + `scion::ScionForward` + the scheduler on arbitrary
//! packets: never panics; every packet is forwarded in a class, or dropped
//! with a reason. Byte 0 = arrival port; byte 1 bit 0 selects raw mode or
//! template mode (XOR over a valid gateway-authorized EPIC-Z packet).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mac::Key;
use packet::Ia;
use pipeline::{Batch, Egress, Now, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::keys::{SvKeys, EPIC_Z_PROTOCOL};
use zlane::{Classifier, Gateway, GatewayConfig, Scheduler, SchedulerConfig, ZlaneClassify};

const NOW_NS: u64 = 1_700_000_000_000_000_000;
const SRC: Ia = Ia::new(1, 10);
const TRANSIT: Ia = Ia::new(1, 20);

fn sv() -> SvKeys {
    SvKeys::new(&Key::from([2; 16]), 1_699_999_000, 1_700_100_000)
}

fn fkey() -> ForwardingKey {
    ForwardingKey::new(&Key::from([1; 16]))
}

fn template() -> Vec<u8> {
    let hops: Vec<HopSpec> = [(0, 1), (2, 3), (4, 0)]
        .iter()
        .map(|&(i, e)| HopSpec { key: fkey(), cons_ingress: i, cons_egress: e, exp_time: 255 })
        .collect();
    let mut path = build::path(&[build::segment(true, 7, 1_700_000_000, &hops)]).unwrap();
    path.curr_hf = 1;
    path.info_fields[0].seg_id = scion::chain_seg_id(7, &path.hops()[0].mac);
    let hdr = fuzz::udp_hdr(SRC, Ia::new(1, 30), 0);
    let s = sv();
    let k = s.derive(SRC).host_cmac(EPIC_Z_PROTOCOL, 0, hdr.src_host.as_bytes());
    let mut pkt = zlane::host::epic_packet(&hdr, &path, &[&k, &k, &k], 0, 0, 1, &[0; 16]).unwrap();
    let mut gw = Gateway::new(GatewayConfig { host_capacity: 16, ..Default::default() }).unwrap();
    gw.set_as_key(TRANSIT, &Key::from(s.derive_key(SRC)));
    for h in path.hops() {
        gw.register_hop(h.mac, TRANSIT);
    }
    gw.process(&mut pkt, Now::from_unix_ns(NOW_NS)).unwrap();
    pkt
}

fuzz_target!(|data: &[u8]| {
    let Some(pkt) = fuzz::raw_or_xored(data, |_| template()) else { return };
    // The router's one-pass EPIC-Z reader agrees with the full views, and
    // so does its layout-memoising variant, whether the memo holds the
    // unmodified template's layout (so the fuzzed packet takes the cheap
    // per-packet checks) or this packet's own.
    let want = via_views(&pkt);
    assert_eq!(packet::scion::epic_fields(&pkt), want);
    let mut shape = packet::scion::EpicShape::default();
    static TEMPLATE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let _ = packet::scion::epic_fields_memo(TEMPLATE.get_or_init(template), &mut shape);
    assert_eq!(packet::scion::epic_fields_memo(&pkt, &mut shape), want);
    assert_eq!(packet::scion::epic_fields_memo(&pkt, &mut shape), want);
    let now = Now::from_unix_ns(NOW_NS);
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![
            RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(100_000_000)) },
            RateConfig { origin: Origin::Isd(2), rate: None },
        ],
        ..Default::default()
    };
    let classify = ZlaneClassify::new(Classifier::new(&cfg, sv(), now.mono_ns).unwrap());
    let fwd = Forwarder::new(
        fkey(),
        InterfaceTable::new().with(2, 1).with(3, 2),
        ForwardConfig::default(),
    );
    let mut p: Pipeline<Vec<u8>> = Pipeline::new().with(classify).with(ScionForward::new(fwd));
    let mut batch = Batch::new();
    batch.push(pkt, u16::from(data[0] & 3)).unwrap();
    p.run(&mut batch, now);
    let mut sched: Scheduler<Vec<u8>> = Scheduler::new(SchedulerConfig::default()).unwrap();
    batch.drain(|b, m| match m.verdict {
        Verdict::Forward { class, .. } => {
            let _ = sched.enqueue(b, class, now);
        }
        Verdict::Drop(_) => {}
        Verdict::ToControl => panic!("no control path in Z-Lane"),
    });
    let mut out = Vec::new();
    sched.dequeue(now.plus_ns(1_000_000), 64, &mut out);
    assert_eq!(sched.queued(), 0);
});

/// What `epic_fields` must return, computed through the header and path views.
fn via_views(b: &[u8]) -> Result<packet::scion::EpicFields, packet::Error> {
    use packet::scion::{EpicPath, PathType, ScionHeader};
    let h = ScionHeader::new_checked(b)?;
    if h.path_type() != PathType::EPIC_Z {
        return Err(packet::Error::unsupported("not an EPIC-Z path"));
    }
    let e = EpicPath::new_checked(h.path())?;
    let sp = e.scion_path();
    Ok(packet::scion::EpicFields {
        src_ia: h.src_ia(),
        src_type_len: h.src_type_len(),
        src_host: h.src_host_raw().padded(),
        pkt_id: e.pkt_id(),
        flags: e.flags(),
        info0_timestamp: sp.info_field(0).expect("checked path has an info field").timestamp(),
        hvf: e.current_hvf().expect("checked path has its current HVF"),
        hop_mac: sp.current_hop().mac(),
        payload_len: h.payload_len(),
        header_len: h.header_len(),
    })
}
