//! F-3: FAIR transit marking on arbitrary IP packets (fixed key, clock and
//! nonce): the packet is dropped, or left unchanged (not FAIR / overflow
//! forwarding off), or differs from the input in exactly the NextAS byte and
//! the written slot, with SB preserved.
#![no_main]

use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::MarkBinding;
use fair::keys::KeyRing;
use fair::rng::NonceGen;
use fair::transit::{FairTransit, TransitConfig};
use fair::Key;
use libfuzzer_sys::fuzz_target;
use pipeline::{Batch, Now, Stage, Verdict};

const NOW: u64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let mut ring = KeyRing::data(60, 43_200).unwrap();
    ring.install(NOW / 60 - 1, &Key::from([1; 16]), MarkBinding::Paper).unwrap();
    ring.install(NOW / 60, &Key::from([2; 16]), MarkBinding::Bound).unwrap();
    ring.install(NOW / 60 + 1, &Key::from([3; 16]), MarkBinding::Paper).unwrap();
    let mut t = FairTransit::new(
        TransitConfig { framing: Framing::Ip, ..Default::default() },
        Arc::new(ring),
        1,
    );
    t.set_nonce_gen(NonceGen::fixed(0xa));
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(data.to_vec(), 0).unwrap();
    t.process(&mut b, Now::from_unix_ns(NOW * 1_000_000_000));
    if let Verdict::Drop(_) = b.meta(0).verdict {
        return;
    }
    let out = b.data(0);
    assert_eq!(out.len(), data.len());
    let diff: Vec<usize> = (0..out.len()).filter(|&i| out[i] != data[i]).collect();
    if t.stats.marked == 1 {
        let off = b.meta(0).proto_off as usize;
        let s = (data[off + 8] & 0x7f) as usize;
        assert!(diff.iter().all(|&i| i == off + 8 || i == off + 9 + s), "{diff:?}");
        assert_eq!(out[off + 8], (data[off + 8] & 0x80) | (s as u8 + 1));
        assert_eq!(out[off + 9 + s] >> 4, 0xa);
    } else {
        assert!(diff.is_empty());
    }
});
