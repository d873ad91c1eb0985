//! F-4: FAIR destination processing (check, police, capture, strip) on
//! arbitrary IP packets: no panic; a packet that is delivered after stripping
//! is a well-formed IP packet again.
#![no_main]

use fair::common::Framing;
use fair::dest::{DestChannel, DestConfig, FairDestination, UnknownChannel};
use fair::record::Record;
use fair::Key;
use libfuzzer_sys::fuzz_target;
use pipeline::{Batch, Now, Stage, Verdict};

const NOW: u64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let mut d = FairDestination::new(
        DestConfig {
            framing: Framing::Ip,
            unknown_channel: UnknownChannel::Deliver,
            ..Default::default()
        },
        Vec::<Record>::new(),
    );
    d.add_source_prefix("0.0.0.0".parse().unwrap(), 0, 1);
    d.add_source_prefix("::".parse().unwrap(), 0, 1);
    for n in [0u8, 1, 4, 7, 15] {
        d.add_channel(DestChannel::new(n as u32, 1, &Key::from([7; 16]), n, 1000, 1000, 0), 0, n);
    }
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(data.to_vec(), 0).unwrap();
    d.process(&mut b, Now::from_unix_ns(NOW * 1_000_000_000));
    if matches!(b.meta(0).verdict, Verdict::Forward { .. })
        && d.stats.accepted + d.stats.unknown_channel == 1
    {
        let out = b.data(0);
        match out[0] >> 4 {
            4 => assert!(packet::ipv4::Ipv4::new_checked(out).is_ok()),
            6 => assert!(packet::ipv6::Ipv6::new_checked(out).is_ok()),
            v => panic!("version {v}"),
        }
    }
    for r in d.sink() {
        let mut e = [0u8; fair::record::RECORD_LEN];
        r.encode(&mut e);
        assert_eq!(Record::decode(&e), Ok(*r));
    }
});
