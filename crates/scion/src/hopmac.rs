//! Hop-field MACs (path authorization), SegID chaining and hop expiry.

use mac::{Block, Cmac, Key};
use packet::scion::{hop_expiry_unix_ns, HopField, InfoField};

/// Length of a hop-field MAC on the wire.
pub const MAC_LEN: usize = 6;

/// A truncated hop-field MAC σ.
pub type HopMac = [u8; MAC_LEN];

/// The 16-byte CMAC input of a hop-field MAC (`scion.md`):
///
/// ```text
/// 0-1 zero | 2-3 Beta (SegID) | 4-7 info Timestamp | 8 zero | 9 ExpTime
/// 10-11 ConsIngress | 12-13 ConsEgress | 14-15 zero
/// ```
#[inline]
pub fn mac_input(beta: u16, timestamp: u32, exp_time: u8, ingress: u16, egress: u16) -> Block {
    let mut b = [0u8; 16];
    b[2..4].copy_from_slice(&beta.to_be_bytes());
    b[4..8].copy_from_slice(&timestamp.to_be_bytes());
    b[9] = exp_time;
    b[10..12].copy_from_slice(&ingress.to_be_bytes());
    b[12..14].copy_from_slice(&egress.to_be_bytes());
    b
}

/// The MAC input of hop field `hop` under info field `info` with SegID `beta`.
#[inline]
pub fn hop_input<I: AsRef<[u8]>, H: AsRef<[u8]>>(
    beta: u16,
    info: &InfoField<I>,
    hop: &HopField<H>,
) -> Block {
    mac_input(beta, info.timestamp(), hop.exp_time(), hop.cons_ingress(), hop.cons_egress())
}

/// SegID chaining: `β' = β XOR σ[0:2]` (the same operation in both directions).
#[inline]
pub fn chain_seg_id(seg_id: u16, mac: &HopMac) -> u16 {
    seg_id ^ u16::from_be_bytes([mac[0], mac[1]])
}

/// Whether two hop-field MACs are equal, in time independent of their
/// contents: one 64-bit XOR, kept opaque to the optimiser so that it cannot
/// become an early-exit comparison (a byte-wise constant-time compare costs
/// about ten times as much).
#[inline]
pub fn mac_eq(a: &HopMac, b: &HopMac) -> bool {
    let word = |m: &HopMac| u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
    core::hint::black_box(word(a) ^ word(b)) == 0
}

/// Whether a hop field with `exp_time` under an info field with `timestamp` has
/// expired at `now_unix_ns`. A hop is valid up to and including its expiry instant.
#[inline]
pub fn is_expired(timestamp: u32, exp_time: u8, now_unix_ns: u64) -> bool {
    now_unix_ns > hop_expiry_unix_ns(timestamp, exp_time)
}

/// `now_unix_ns` as the bound [`is_expired_by`] compares against: Unix
/// half-seconds, rounded up. Computed once for a burst, it spares each hop
/// field the nanosecond arithmetic of [`is_expired`].
#[inline]
pub fn expiry_bound(now_unix_ns: u64) -> u64 {
    now_unix_ns.div_ceil(500_000_000)
}

/// [`is_expired`] against a bound from [`expiry_bound`], with the same
/// result. Every expiry falls on a half-second: `Timestamp` seconds plus
/// `(1 + ExpTime)` units of 337.5 s is `E = 2·Timestamp + 675·(1 + ExpTime)`
/// half-seconds, and for a whole number `E`, `now > E half-seconds` holds
/// exactly when `E < ⌈now / 0.5 s⌉`.
#[inline]
pub fn is_expired_by(timestamp: u32, exp_time: u8, bound: u64) -> bool {
    2 * u64::from(timestamp) + 675 * (1 + u64::from(exp_time)) < bound
}

/// An AS's hop-field (forwarding) key with its CMAC subkeys derived once.
#[derive(Clone, Debug)]
pub struct ForwardingKey(Cmac);

impl ForwardingKey {
    /// Expands `key`.
    pub fn new(key: &Key) -> Self {
        ForwardingKey(Cmac::new(key))
    }

    /// The full 16-byte CMAC of a MAC input.
    #[inline]
    pub fn full_mac(&self, input: &Block) -> Block {
        self.0.mac(input)
    }

    /// `σ = CMAC(input)[0:6]`.
    #[inline]
    pub fn mac(&self, input: &Block) -> HopMac {
        mac::truncate::<MAC_LEN>(&self.0.mac(input))
    }

    /// Whether `mac` is the MAC of `input` (constant-time compare).
    #[inline]
    pub fn verify(&self, input: &Block, mac: &HopMac) -> bool {
        mac_eq(&self.mac(input), mac)
    }

    /// MACs a burst of inputs at once (AES-NI pipelines the independent blocks).
    /// Writes `min(inputs.len(), out.len())` MACs.
    pub fn mac_batch(&self, inputs: &[Block], out: &mut [HopMac]) {
        let mut tags = [[0u8; 16]; pipeline::BURST];
        for (ins, outs) in inputs.chunks(pipeline::BURST).zip(out.chunks_mut(pipeline::BURST)) {
            let n = ins.len().min(outs.len());
            tags[..n].copy_from_slice(&ins[..n]);
            self.full_mac_in_place(&mut tags[..n]);
            for (o, t) in outs.iter_mut().zip(&tags[..n]) {
                *o = mac::truncate::<MAC_LEN>(t);
            }
        }
    }

    /// The full 16-byte MACs of a burst of inputs at once (EPIC-HP keys its
    /// HVFs with them). Writes `min(inputs.len(), out.len())` MACs.
    pub fn full_mac_batch(&self, inputs: &[Block], out: &mut [Block]) {
        let n = inputs.len().min(out.len());
        out[..n].copy_from_slice(&inputs[..n]);
        self.full_mac_in_place(&mut out[..n]);
    }

    /// Replaces each MAC input in `blocks` by its full 16-byte MAC, all in
    /// one pass: a hop-field MAC input is one complete block, so its CMAC is
    /// `AES(input ⊕ K1)`, and the blocks are encrypted side by side.
    #[inline]
    pub fn full_mac_in_place(&self, blocks: &mut [Block]) {
        let k1 = u128::from_ne_bytes(*self.0.subkeys().0);
        for b in blocks.iter_mut() {
            *b = (u128::from_ne_bytes(*b) ^ k1).to_ne_bytes();
        }
        self.0.aes().encrypt_blocks(blocks);
    }

    /// The CMAC key (for callers that batch other inputs under the same key).
    pub fn cmac(&self) -> &Cmac {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_layout() {
        let b = mac_input(0x1234, 0xa1b2c3d4, 0x3f, 0x0102, 0x0304);
        assert_eq!(b, [0, 0, 0x12, 0x34, 0xa1, 0xb2, 0xc3, 0xd4, 0, 0x3f, 1, 2, 3, 4, 0, 0]);
    }

    #[test]
    fn batch_equals_single() {
        let k = ForwardingKey::new(&Key::from([5u8; 16]));
        let inputs: Vec<Block> = (0..40u16).map(|i| mac_input(i, 7, 1, i, 2)).collect();
        let mut out = vec![[0u8; 6]; 40];
        k.mac_batch(&inputs, &mut out);
        for (i, o) in inputs.iter().zip(&out) {
            assert_eq!(k.mac(i), *o);
            assert!(k.verify(i, o));
        }
        let mut full = inputs.clone();
        k.full_mac_in_place(&mut full);
        for (i, f) in inputs.iter().zip(&full) {
            assert_eq!(k.full_mac(i), *f);
        }
        let mut bad = out[0];
        bad[5] ^= 1;
        assert!(!k.verify(&inputs[0], &bad));
        for i in 0..6 {
            let mut other = out[1];
            other[i] ^= 0x80;
            assert!(!mac_eq(&out[1], &other), "byte {i}");
        }
        assert!(mac_eq(&out[1], &out[1]));
    }

    #[test]
    fn expiry_boundary() {
        // ExpTime 0: 337.5 s after the timestamp.
        let exp = 1_000 * 1_000_000_000 + 337_500_000_000;
        assert!(!is_expired(1_000, 0, exp));
        assert!(is_expired(1_000, 0, exp + 1));
        assert_eq!(chain_seg_id(0xffff, &[0x0f, 0xf0, 9, 9, 9, 9]), 0xf00f);
        // The same instants through the per-burst bound.
        for (now, expired) in [(exp - 1, false), (exp, false), (exp + 1, true)] {
            assert_eq!(is_expired_by(1_000, 0, expiry_bound(now)), expired, "{now}");
        }
        // The largest fields: no overflow, the last instant still valid.
        let last = u64::from(u32::MAX) * 1_000_000_000 + 256 * 337_500_000_000;
        assert!(!is_expired_by(u32::MAX, 255, expiry_bound(last)));
        assert!(is_expired_by(u32::MAX, 255, expiry_bound(last + 1)));
    }

    proptest::proptest! {
        #[test]
        fn the_bound_decides_as_the_nanoseconds(ts: u32, exp: u8, delta in -2_000_000_000i64..2_000_000_000, far: u64) {
            // Around the expiry instant, and anywhere.
            let at = hop_expiry_unix_ns(ts, exp).saturating_add_signed(delta);
            for now in [at, far] {
                proptest::prop_assert_eq!(
                    is_expired_by(ts, exp, expiry_bound(now)),
                    is_expired(ts, exp, now),
                    "now {}", now
                );
            }
        }
    }
}
