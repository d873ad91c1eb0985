//! Ethernet II / 802.1Q view and repr on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::ethernet::{Ethernet, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = Ethernet::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.vlan(), f.ethertype(), f.header_len());
        assert!(f.header_len() <= data.len());
        let _ = f.payload();
    }
    if let Ok(r) = EthernetRepr::parse(&Ethernet::new_unchecked(data)) {
        let mut buf = [0u8; 18];
        let n = r.buffer_len();
        r.emit(&mut Ethernet::new_unchecked(&mut buf[..n])).expect("emit");
        let back = EthernetRepr::parse(&Ethernet::new_checked(&buf[..n]).expect("check"))
            .expect("reparse");
        assert_eq!(back, r);
    }
});
