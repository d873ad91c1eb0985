//! IPv6 view, repr and extension-header walk on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::ipv6::{Ipv6, Ipv6Repr};
use packet::ipv6_ext::{walk, ExtConfig};

fuzz_target!(|data: &[u8]| {
    let cfg = ExtConfig::DEFAULT;
    if let Ok(p) = Ipv6::new_checked(data) {
        let _ = (p.traffic_class(), p.flow_label(), p.hop_limit(), p.src_addr(), p.dst_addr());
        let _ = p.payload().len();
        let mut n = 0;
        for h in p.ext_headers(&cfg) {
            n += 1;
            assert!(n <= cfg.max_headers + 1);
            if let Ok(h) = h {
                assert!(h.offset + h.len <= p.packet().len());
            }
        }
        if let Ok(c) = p.walk_ext(&cfg) {
            assert!(c.upper_offset <= p.packet().len());
            assert!(c.count <= cfg.max_headers);
            if let Some((o, l)) = c.fair {
                assert!(o + l <= p.packet().len());
            }
        }
    }
    if data.len() > 1 {
        let _ = walk(&data[1..], 0, data[0], &cfg);
    }
    if let Ok(r) = Ipv6Repr::parse(&Ipv6::new_unchecked(data)) {
        let mut buf = vec![0u8; 40 + r.payload_len as usize];
        r.emit(&mut Ipv6::new_unchecked(&mut buf[..])).expect("emit");
        let back = Ipv6Repr::parse(&Ipv6::new_checked(&buf[..]).expect("check")).expect("reparse");
        assert_eq!(back, r);
    }
});
