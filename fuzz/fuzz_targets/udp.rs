//! UDP view, repr and checksums on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::udp::{PseudoHeader, Udp, UdpRepr};

fuzz_target!(|data: &[u8]| {
    let v4 = PseudoHeader::V4 { src: [192, 0, 2, 1].into(), dst: [198, 51, 100, 7].into() };
    let v6 = PseudoHeader::V6 { src: [0x20; 16].into(), dst: [0x30; 16].into() };
    if let Ok(u) = Udp::new_checked(data) {
        let _ = (u.src_port(), u.dst_port(), u.checksum(), u.payload().len());
        let _ = (u.verify_checksum(&v4), u.verify_checksum(&v6));
    }
    let _ = UdpRepr::parse(&Udp::new_unchecked(data), Some(&v6));
    if let Ok(r) = UdpRepr::parse(&Udp::new_unchecked(data), None) {
        let len = 8 + r.payload_len as usize;
        let mut buf = data[..len].to_vec();
        for ph in [&v4, &v6] {
            r.emit(&mut Udp::new_unchecked(&mut buf[..]), Some(ph)).expect("emit");
            let back = UdpRepr::parse(&Udp::new_checked(&buf[..]).expect("check"), Some(ph))
                .expect("reparse");
            assert_eq!(back, r);
        }
    }
});
