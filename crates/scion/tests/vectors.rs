//! Known answers from SCION's reference implementation
//! (`shared/vectors/scion-packets-sample.json`, copied to `crates/packet/tests/data/`): per hop in traversal order,
//! the hop-field MAC under the AS key and the SegID before and after.

use mac::Key;
use packet::scion::{parse, Path, ScionPath};
use packet::Ia;
use scion::{current_input, process_hop, ForwardingKey};
use serde::Deserialize;

#[derive(Deserialize)]
struct Hop {
    key: String,
    segid_before: u16,
    segid_after: u16,
    mac: String,
    cons_ingress: u16,
    cons_egress: u16,
    exp_time: u8,
    cons_dir: bool,
    inf_idx: u8,
}

#[derive(Deserialize)]
struct Sample {
    bytes: String,
    dst_ia: String,
    src_ia: String,
    hdr_len_bytes: usize,
    payload_len: u16,
    seg_lens: Vec<u8>,
    info_timestamps: Vec<u32>,
    hops_in_traversal_order: Vec<Hop>,
}

fn samples() -> Vec<Sample> {
    // The packet crate keeps a verbatim copy of shared/vectors/scion-packets-sample.json.
    let text = include_str!("../../packet/tests/data/scion-packets-sample.json");
    serde_json::from_str(text).expect("json")
}

#[test]
fn reference_packets_verify_and_chain_exactly() {
    let samples = samples();
    assert_eq!(samples.len(), 3);
    let mut hops_checked = 0;
    for s in samples {
        let mut bytes = hex::decode(&s.bytes).unwrap();
        let (path_range, n_hops) = {
            let pkt = parse(&bytes).expect("reference packet parses");
            assert_eq!(pkt.header.src_ia(), s.src_ia.parse::<Ia>().unwrap());
            assert_eq!(pkt.header.dst_ia(), s.dst_ia.parse::<Ia>().unwrap());
            assert_eq!(pkt.header.header_len(), s.hdr_len_bytes);
            assert_eq!(pkt.header.payload_len(), s.payload_len);
            let Path::Scion(p) = pkt.path else { panic!("not a SCION path") };
            let lens: Vec<u8> = p.seg_lens().into_iter().filter(|&l| l != 0).collect();
            assert_eq!(lens, s.seg_lens);
            for (i, ts) in s.info_timestamps.iter().enumerate() {
                assert_eq!(p.info_field(i).unwrap().timestamp(), *ts);
            }
            (pkt.header.path_offset()..pkt.header.header_len(), p.num_hf())
        };
        assert_eq!(n_hops, s.hops_in_traversal_order.len());
        let path = &mut bytes[path_range];
        for (k, h) in s.hops_in_traversal_order.iter().enumerate() {
            let mut p = ScionPath::new_checked(&mut path[..]).unwrap();
            assert_eq!(usize::from(p.curr_hf()), k);
            assert_eq!(p.curr_inf(), h.inf_idx);
            {
                let info = p.current_info();
                let hop = p.current_hop();
                assert_eq!(info.cons_dir(), h.cons_dir);
                assert_eq!(info.seg_id(), h.segid_before, "SegID before hop {k}");
                assert_eq!(
                    (hop.cons_ingress(), hop.cons_egress(), hop.exp_time()),
                    (h.cons_ingress, h.cons_egress, h.exp_time)
                );
            }
            let key = ForwardingKey::new(&Key::from_hex(&h.key).unwrap());
            let sigma = key.mac(&current_input(&p));
            assert_eq!(hex::encode(sigma), h.mac, "MAC of hop {k}");
            // Batched computation agrees.
            let mut batched = [[0u8; 6]; 1];
            key.mac_batch(&[current_input(&p)], &mut batched);
            assert_eq!(batched[0], sigma);
            // Processed before the hop expires (timestamps are from Nov 2023).
            let now = u64::from(p.current_info().timestamp()) * 1_000_000_000;
            process_hop(&mut p, &sigma, now).expect("hop verifies");
            assert_eq!(p.current_info().seg_id(), h.segid_after, "SegID after hop {k}");
            // A flipped MAC bit is rejected and leaves the SegID untouched.
            let mut bad = sigma;
            bad[0] ^= 0x80;
            let before = p.current_info().seg_id();
            assert!(process_hop(&mut p, &bad, now).is_err());
            assert_eq!(p.current_info().seg_id(), before);
            if !p.is_last_hop() {
                p.advance().unwrap();
            }
            hops_checked += 1;
        }
    }
    assert_eq!(hops_checked, 35);
}
