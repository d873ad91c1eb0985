//! The FlowPolice stage on arbitrary bytes: never panics, every packet ends
//! forwarded or dropped with a reason.
//!
//! Input: 4 control bytes, then the packet. Control bits choose the link layer,
//! bogus parse-stage offsets in `Meta`, whether the harness fixes up the
//! capability MAC (so the table and Algorithm 1 paths are reached), the burst
//! size and the time of a second burst (period roll-over, reclaim).
#![no_main]

use flowpolice::config::{Config, LinkLayer};
use flowpolice::puzzle::SeedChain;
use flowpolice::CapabilityKey;
use flowpolice::FlowPolice;
use libfuzzer_sys::fuzz_target;
use pipeline::{Batch, Now, Proto, Stage, Verdict, L3};

const KEY: [u8; 16] = [1; 16];

/// In raw-IPv4 mode, makes the capability verify and the flow exist.
fn fix_up(pkt: &mut [u8], st: &mut FlowPolice, now_ms: u64) {
    if pkt.len() < 20 || pkt[0] >> 4 != 4 {
        return;
    }
    let h = usize::from(pkt[0] & 0x0f) * 4;
    if pkt.len() < h + 28 {
        return;
    }
    let s = &pkt[h..];
    let p_id = u16::from_be_bytes([s[4], s[5]]);
    let flow_id = u64::from_be_bytes(s[6..14].try_into().unwrap());
    let ts = u32::from_be_bytes(s[14..18].try_into().unwrap());
    let _ = st.router_mut().on_request(flow_id, now_ms);
    let mac = CapabilityKey::new(&mac::Key::from(KEY)).mac(p_id, flow_id, ts);
    pkt[h + 18..h + 26].copy_from_slice(&mac);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (ctl, pkt) = data.split_at(4);
    // One chunk of four slots (the table's granule), so table-full paths run too.
    let mut cfg = Config::new(mac::Key::from(KEY), [1, 2], 4, SeedChain::generate([0; 32], 0, 4));
    cfg.link = if ctl[0] & 1 == 0 { LinkLayer::Ethernet } else { LinkLayer::Ip };
    cfg.probe_window = 4;
    cfg.puzzle.min_level = 0;
    cfg.puzzle.epoch_ms = 1_000;
    cfg.check_flow_binding = ctl[0] & 8 == 0;
    cfg.params.over_window = match ctl[0] >> 6 {
        0 => flowpolice::OverWindow::DropWhenMisbehaving,
        1 => flowpolice::OverWindow::Demote,
        2 => flowpolice::OverWindow::DropWhileLossy,
        _ => flowpolice::OverWindow::Drop,
    };
    let Ok(mut st) = FlowPolice::new(cfg) else { return };
    let now = Now::from_unix_ns(1_000_000_000);
    let mut pkt = pkt.to_vec();
    if ctl[0] & 4 != 0 {
        fix_up(&mut pkt, &mut st, now.mono_ns / 1_000_000);
    }
    let mut batch: Batch<Vec<u8>> = Batch::new();
    for _ in 0..=(ctl[1] % 4) {
        let i = batch.push(pkt.clone(), 0).unwrap();
        if ctl[0] & 2 != 0 {
            let m = batch.meta_mut(i);
            m.l3 = if ctl[2] & 0x80 == 0 { L3::Ipv4 } else { L3::Ipv6 };
            m.l3_off = u16::from(ctl[2] & 0x7f);
            m.proto = Proto::FlowPolice;
            m.proto_off = u16::from(ctl[3]);
        }
    }
    for t in [0u64, u64::from(ctl[3]) * 50_000_000] {
        st.process(&mut batch, now.plus_ns(t));
        for i in 0..batch.len() {
            assert!(matches!(batch.meta(i).verdict, Verdict::Forward { .. } | Verdict::Drop(_)));
        }
    }
});
