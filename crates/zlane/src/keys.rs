//! DRKey keys as Z-Lane uses them.
//!
//! **ADAPTER (temporary):** the project's `drkey` crate was not yet usable
//! when this crate was written. [`Level1`] and [`SvKeys`] implement just the
//! two derivations Z-Lane needs, exactly as `drkey.md` specifies them
//! (PRF = AES-128 CBC-MAC, zero IV, zero padding):
//! * level 1 `K_{A,B} = PRF_{SV_A}(0x00 ‖ IA(B))`,
//! * generic level 2 AS-host `K_{A,B:H} = PRF_{K_{A,B}}(0x01 ‖ proto(2) ‖ type/len ‖ host)`.
//!
//! Swap them for the `drkey` crate's cache once it lands; the rest of the
//! crate only sees [`RouterKeys`] and [`Level1`].

use mac::{Aes, Cmac, Key};
use packet::Ia;

/// DRKey protocol id Z-Lane uses with the generic derivation (configurable).
pub const EPIC_Z_PROTOCOL: u16 = 64;

/// A level-1 key K_{A_i,A_0}: its AES schedule (to derive level-2 keys) and
/// its CMAC (for Ṽ_i). Zeroized on drop by `mac`.
#[derive(Clone, Debug)]
pub struct Level1 {
    aes: Aes,
    cmac: Cmac,
}

impl Level1 {
    /// Expands a level-1 key.
    pub fn new(key: &Key) -> Self {
        let aes = Aes::new(key);
        Level1 { cmac: Cmac::from_aes(aes.clone()), aes }
    }

    /// The CMAC under this key (AS-level HVFs).
    #[inline]
    pub fn cmac(&self) -> &Cmac {
        &self.cmac
    }

    /// Derives the generic-protocol level-2 AS-host key for `host`
    /// (4-bit type/length code `type_len`, wire bytes `host`).
    #[inline]
    pub fn as_host(&self, protocol: u16, type_len: u8, host: &[u8]) -> Key {
        let mut input = [0u8; 32];
        input[0] = 1;
        input[1..3].copy_from_slice(&protocol.to_be_bytes());
        input[3] = type_len & 0x0f;
        let n = host.len().min(16);
        input[4..4 + n].copy_from_slice(&host[..n]);
        let blocks = if 4 + n <= 16 { 1 } else { 2 };
        Key::from(self.aes.cbc_mac(&input[..16 * blocks]))
    }

    /// The host-level CMAC key for `host` (derivation plus expansion).
    #[inline]
    pub fn host_cmac(&self, protocol: u16, type_len: u8, host: &[u8]) -> Cmac {
        Cmac::new(&self.as_host(protocol, type_len, host))
    }
}

/// Where a border router gets the level-1 keys of source ASes.
pub trait RouterKeys: Send {
    /// K_{local,src} valid at `now_unix_s`, or `None` if unknown.
    fn level1(&mut self, src: Ia, now_unix_s: u64) -> Option<&Level1>;
}

/// A router's DRKey state for one epoch: its secret value and a per-worker
/// cache of expanded level-1 keys by source IA (bounded; cleared when full).
#[derive(Debug)]
pub struct SvKeys {
    sv: Aes,
    epoch: (u64, u64),
    cache: std::collections::HashMap<Ia, Level1>,
    cap: usize,
}

impl SvKeys {
    /// The state for secret value `sv` valid over `[begin, end)` Unix seconds.
    pub fn new(sv: &Key, begin: u64, end: u64) -> Self {
        SvKeys { sv: Aes::new(sv), epoch: (begin, end), cache: Default::default(), cap: 1 << 16 }
    }

    /// The raw level-1 key K_{local,dst} (what the DRKey service hands to AS `dst`).
    pub fn derive_key(&self, dst: Ia) -> [u8; 16] {
        let mut input = [0u8; 16];
        input[1..9].copy_from_slice(&dst.to_bytes());
        self.sv.cbc_mac(&input)
    }

    /// Level-1 key derivation from the SV (no caching).
    pub fn derive(&self, dst: Ia) -> Level1 {
        Level1::new(&Key::from(self.derive_key(dst)))
    }
}

impl RouterKeys for SvKeys {
    fn level1(&mut self, src: Ia, now_unix_s: u64) -> Option<&Level1> {
        if now_unix_s < self.epoch.0 || now_unix_s >= self.epoch.1 {
            return None;
        }
        if !self.cache.contains_key(&src) {
            if self.cache.len() >= self.cap {
                self.cache.clear();
            }
            let l1 = self.derive(src);
            self.cache.insert(src, l1);
        }
        self.cache.get(&src)
    }
}
