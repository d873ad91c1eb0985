//! AES-128 encryption for data-plane MACs, with AES-NI intrinsics where the
//! CPU has them: key expansion, one-block encryption, CBC chains, and
//! **interleaved** encryption of many independent lanes, each lane under its
//! own key if need be.
//!
//! # Why this crate exists (the `unsafe` exception)
//! The protocol crates are `#![forbid(unsafe_code)]` and used RustCrypto's
//! `aes` crate through `mac`. Profiling the Z-Lane router showed two costs
//! that crate cannot avoid for our access pattern:
//!
//! * every call goes through its CPU-feature dispatch and backend set-up
//!   (on VAES-512 machines: broadcasting all 11 round keys into `zmm`
//!   registers) — a large share of a one- to four-block MAC;
//! * it encrypts many blocks in parallel only under **one** key, while a
//!   router verifies per-host DRKey MACs: every packet of a burst has a
//!   different key, so each packet's AES chain ran alone, bound by the AES
//!   latency (4 cycles × 10 rounds per block) instead of its throughput
//!   (two AES rounds per cycle on current x86 cores).
//!
//! [`cbc_lanes`] runs up to [`LANES`] independent CBC chains side by side,
//! lane `i` under key `key(i)`, so the CPU overlaps their rounds.
//!
//! Same-key batches ([`Aes128::cbc_lanes_one_key`], [`Aes128::encrypt_blocks`])
//! go wider on CPUs with VAES and AVX-512F: up to [`WIDE_LANES`] lanes per
//! group, four blocks per `zmm` register and one `vaesenc` per register and
//! round, with the 11 round keys broadcast to `zmm` once per group (per
//! call, not per lane as in the `xmm` path, where each lane may have its own
//! key). The register count is a const generic picked from the group size,
//! so states stay in registers; each step's four blocks per register are
//! combined with lane inserts (gathering them in a stack buffer and loading
//! 64 bytes at once measured slower: that load spans four fresh stores,
//! which the CPU cannot forward, and stalls). Groups of one or two lanes stay on
//! `xmm`, where a `zmm` pass would be mostly padding. VAES and AVX-512F are
//! detected once, in [`Aes128::new`], and remembered in the key.
//!
//! The
//! `core::arch` intrinsics need `unsafe` (they are `#[target_feature]`
//! functions, and loads/stores take raw pointers); this crate is the one
//! place they live, like `memhint` for prefetches. Every `unsafe` block
//! carries its `SAFETY` argument; the invariant behind all of them is that
//! an [`Aes128`] holds AES-NI round keys **only** if AES-NI was detected
//! when it was built, and its VAES flag is set **only** if VAES and
//! AVX-512F were detected too (checked once, in [`Aes128::new`]).
//!
//! # Fallback
//! Without AES-NI (or on other architectures) every operation runs through
//! the `aes` crate (constant-time software, or its own hardware backends),
//! one block at a time. Results are identical; the tests compare both paths
//! on random keys and blocks.
//!
//! # Detection
//! With the `std` feature (default), `std::is_x86_feature_detected!("aes")`
//! (and `"vaes"`, `"avx512f"`) at construction; without it, AES-NI and
//! VAES-512 are used only if the build enables them
//! (`-C target-feature=+aes`, `+vaes,+avx512f`).
//!
//! ```
//! use aesni::Aes128;
//!
//! let keys = [Aes128::new(&[1; 16]), Aes128::new(&[2; 16])];
//! let msgs = [[[3u8; 16]; 2], [[4u8; 16]; 2]];
//! // Two CBC-MACs (zero IV) over two blocks, each under its own key, interleaved.
//! let mut tags = [[0u8; 16]; 2];
//! aesni::cbc_lanes(|i| &keys[i], &mut tags, 2, |i, j| msgs[i][j]);
//! let mut one = [0u8; 16];
//! keys[1].cbc_chain(&mut one, 2, |j| msgs[1][j]);
//! assert_eq!(tags[1], one);
//! ```
#![no_std]
#![deny(unsafe_code)]

#[cfg(feature = "std")]
extern crate std;

use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

mod groups;
mod nested;
pub use nested::cbc_lanes_nested;
pub use nested::{cbc_lanes_nested_native, cbc_lanes_nested_native_last, LastBlock, NativeAes128};

/// Size of an AES block in bytes.
pub const BLOCK: usize = 16;

/// One AES block.
pub type Block = [u8; BLOCK];

/// Lanes encrypted side by side per pass: 8 chains keep both AES units of a
/// current x86 core busy (latency 4 cycles × throughput 2 per cycle).
pub const LANES: usize = 8;

/// Lanes per group of [`Aes128::cbc_lanes_one_key`] on VAES-512: 8 `zmm`
/// registers of 4 blocks; with the 11 broadcast round keys that is 19 of
/// the 32 vector registers, so the whole state stays in registers.
pub const WIDE_LANES: usize = 32;

/// An expanded AES-128 encryption key (zeroized on drop, never printed).
#[derive(Clone)]
pub struct Aes128 {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    /// AES-NI round keys. Only constructed after AES-NI was detected; the
    /// flag says whether VAES with AVX-512F was detected too (once, here,
    /// so the same-key batch path needs no per-call CPUID check).
    #[cfg(target_arch = "x86_64")]
    Ni(ni::RoundKeys, bool),
    /// Anything else: the `aes` crate.
    Portable(PortableKey),
}

/// The `aes` crate's key schedule, boxed where an allocator exists so that
/// the common AES-NI variant keeps [`Aes128`] at 176 bytes of round keys
/// (key caches hold thousands of them).
#[cfg(feature = "std")]
type PortableKey = std::boxed::Box<aes::Aes128Enc>;
#[cfg(not(feature = "std"))]
type PortableKey = aes::Aes128Enc;

impl Aes128 {
    /// Expands `key`, with AES-NI if the CPU has it.
    #[inline]
    pub fn new(key: &[u8; 16]) -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = ni::RoundKeys::new(key) {
            return Aes128 { inner: Inner::Ni(rk, ni::vaes_detected()) };
        }
        Self::new_portable(key)
    }

    /// Expands `key` for the portable path only (the `aes` crate), whatever
    /// the CPU offers: for comparisons and tests.
    // `into` boxes with `std` and is the identity without it.
    #[cfg_attr(not(feature = "std"), allow(clippy::useless_conversion))]
    pub fn new_portable(key: &[u8; 16]) -> Self {
        Aes128 { inner: Inner::Portable(aes::Aes128Enc::new(&Array::from(*key)).into()) }
    }

    /// Whether this key runs on AES-NI.
    pub fn is_accelerated(&self) -> bool {
        !matches!(self.inner, Inner::Portable(_))
    }

    /// AES-NI round keys, if this key has them.
    #[inline(always)]
    #[cfg(target_arch = "x86_64")]
    fn round_keys(&self) -> Option<&ni::RoundKeys> {
        match &self.inner {
            Inner::Ni(rk, _) => Some(rk),
            Inner::Portable(_) => None,
        }
    }

    /// Encrypts one block in place.
    #[inline]
    pub fn encrypt_block(&self, block: &mut Block) {
        self.cbc_chain(block, 1, |_| [0; BLOCK]);
    }

    /// Encrypts independent blocks in place, interleaved (see
    /// [`cbc_lanes_one_key`](Self::cbc_lanes_one_key)).
    #[inline]
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        self.cbc_lanes_one_key(blocks, 1, |_, _| [0; BLOCK]);
    }

    /// [`cbc_lanes`] with every lane under this one key: for every lane `i`,
    /// `steps` times `states[i] = AES(states[i] ⊕ block(i, j))`.
    ///
    /// With VAES and AVX-512F (detected in [`Aes128::new`]) up to
    /// [`WIDE_LANES`] lanes run per group, four per `zmm` register, with the
    /// round keys broadcast once per group; groups of one or two lanes, and
    /// CPUs without VAES, take the `xmm` path of [`cbc_lanes`]. Results are
    /// identical either way. `block` is called once per (lane, step), for
    /// each group of lanes step by step.
    #[inline]
    #[allow(unsafe_code)]
    pub fn cbc_lanes_one_key(
        &self,
        states: &mut [Block],
        steps: usize,
        mut block: impl FnMut(usize, usize) -> Block,
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Inner::Ni(rk, true) = &self.inner {
            for (c, chunk) in states.chunks_mut(WIDE_LANES).enumerate() {
                let base = c * WIDE_LANES;
                let b = |l: usize, j: usize| block(base + l, j);
                // SAFETY (all eight): the `true` flag is set only when VAES
                // and AVX-512F were detected (`ni::vaes_detected`), next to
                // AES-NI (`Ni` round keys exist only then): the target
                // features `ni::wide` needs. Each call gets a chunk of at
                // most 4 × Z lanes, as `wide::<Z>` requires.
                match chunk.len().div_ceil(4) {
                    // One or two lanes: a zmm pass would be mostly padding.
                    1 if chunk.len() <= 2 => cbc_lanes(|_| self, chunk, steps, b),
                    1 => unsafe { ni::wide::<1>(rk, chunk, steps, b) },
                    2 => unsafe { ni::wide::<2>(rk, chunk, steps, b) },
                    3 => unsafe { ni::wide::<3>(rk, chunk, steps, b) },
                    4 => unsafe { ni::wide::<4>(rk, chunk, steps, b) },
                    5 => unsafe { ni::wide::<5>(rk, chunk, steps, b) },
                    6 => unsafe { ni::wide::<6>(rk, chunk, steps, b) },
                    7 => unsafe { ni::wide::<7>(rk, chunk, steps, b) },
                    _ => unsafe { ni::wide::<8>(rk, chunk, steps, b) },
                }
            }
            return;
        }
        cbc_lanes(|_| self, states, steps, block);
    }

    /// A CBC chain: `steps` times `state = AES(state ⊕ block(j))`, in one
    /// call (one dispatch, round keys loaded once). CBC-MAC is this from a
    /// zero state; CMAC masks the last block.
    #[inline]
    #[allow(unsafe_code)]
    pub fn cbc_chain(&self, state: &mut Block, steps: usize, block: impl FnMut(usize) -> Block) {
        match &self.inner {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Ni` round keys exist only if AES-NI was detected
            // (`ni::RoundKeys::new`), which is the target feature `chain` needs.
            Inner::Ni(rk, _) => unsafe { ni::chain(rk, state, steps, block) },
            Inner::Portable(a) => portable_chain(a, state, steps, block),
        }
    }
}

/// The portable CBC chain through the `aes` crate.
#[inline]
fn portable_chain(
    a: &aes::Aes128Enc,
    state: &mut Block,
    steps: usize,
    mut block: impl FnMut(usize) -> Block,
) {
    for j in 0..steps {
        let b = block(j);
        state.iter_mut().zip(b).for_each(|(s, b)| *s ^= b);
        a.encrypt_block(Array::cast_from_core_mut(state));
    }
}

/// Runs `states.len()` independent CBC chains side by side: for every lane
/// `i`, `steps` times `states[i] = AES_{key(i)}(states[i] ⊕ block(i, j))`.
///
/// Lanes may use different keys (per-host DRKeys) or the same one. Up to
/// [`LANES`] chains run interleaved, so the CPU overlaps their AES rounds;
/// the result is exactly that of [`Aes128::cbc_chain`] per lane. `block` is
/// called once per (lane, step), steps of a group of lanes in order; `key`
/// is called once per lane and group (twice for the first lane).
#[inline]
#[allow(unsafe_code)]
pub fn cbc_lanes<'k>(
    key: impl Fn(usize) -> &'k Aes128,
    states: &mut [Block],
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if !states.is_empty() && key(0).round_keys().is_some() {
        // SAFETY: the first lane's key has AES-NI round keys, which exist
        // only if AES-NI was detected (`ni::RoundKeys::new`): the target
        // feature `ni::lanes` needs.
        done = unsafe { ni::lanes(|i| key(i).round_keys(), states, steps, &mut block) };
    }
    // Lanes from the first group with a key without AES-NI round keys
    // (or every lane, without AES-NI): one chain at a time.
    if done < states.len() {
        chains_from(key, states, done, steps, block);
    }
}

/// The chains of `states` from lane `first` on, one at a time, lane `i`
/// under `key(i)` ([`cbc_lanes`] without interleaving). Out of line: the
/// callers, inlined into theirs, stay small.
#[cold]
#[inline(never)]
fn chains_from<'k>(
    key: impl Fn(usize) -> &'k Aes128,
    states: &mut [Block],
    first: usize,
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    for (l, state) in states.iter_mut().enumerate().skip(first) {
        key(l).cbc_chain(state, steps, |j| block(l, j));
    }
}

impl core::fmt::Debug for Aes128 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Aes128")
            .field("accelerated", &self.is_accelerated())
            .finish_non_exhaustive()
    }
}

/// The AES-NI implementation (x86_64 only).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
// Lanes are indexed in lockstep across several arrays (states, round keys,
// messages); index loops say that more plainly than zipped iterators.
#[allow(clippy::needless_range_loop)]
mod ni {
    use core::arch::x86_64::{
        __m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_aeskeygenassist_si128,
        _mm_loadu_si128, _mm_setzero_si128, _mm_shuffle_epi32, _mm_slli_si128, _mm_storeu_si128,
        _mm_xor_si128,
    };

    use core::arch::x86_64::{
        __m512i, _mm512_aesenc_epi128, _mm512_aesenclast_epi128, _mm512_broadcast_i32x4,
        _mm512_castsi128_si512, _mm512_inserti32x4, _mm512_loadu_si512, _mm512_setzero_si512,
        _mm512_storeu_si512, _mm512_xor_si512,
    };

    use zeroize::Zeroize;

    use super::Block;

    /// Whether the CPU executes VAES on 512-bit registers (checked once per
    /// key expansion, next to AES-NI).
    #[inline]
    pub(crate) fn vaes_detected() -> bool {
        #[cfg(feature = "std")]
        {
            std::is_x86_feature_detected!("vaes") && std::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(feature = "std"))]
        {
            cfg!(all(target_feature = "vaes", target_feature = "avx512f"))
        }
    }

    /// The 11 round keys of AES-128.
    #[derive(Clone)]
    pub(crate) struct RoundKeys([__m128i; 11]);

    impl Drop for RoundKeys {
        fn drop(&mut self) {
            self.0.zeroize();
        }
    }

    /// Whether the CPU executes AES-NI (checked once per key expansion;
    /// `is_x86_feature_detected!` caches the CPUID result itself).
    #[inline]
    fn detected() -> bool {
        #[cfg(feature = "std")]
        {
            std::is_x86_feature_detected!("aes")
        }
        #[cfg(not(feature = "std"))]
        {
            cfg!(target_feature = "aes")
        }
    }

    impl RoundKeys {
        /// Expands `key` if AES-NI is available.
        #[inline]
        pub(crate) fn new(key: &[u8; 16]) -> Option<Self> {
            if !detected() {
                return None;
            }
            // SAFETY: AES-NI was just detected.
            Some(RoundKeys(unsafe { expand(key) }))
        }
    }

    /// Loads a block (any alignment).
    #[inline(always)]
    fn load(b: &Block) -> __m128i {
        // SAFETY: `b` is a live reference to 16 readable bytes; `loadu` has no
        // alignment requirement; SSE2 is part of the x86_64 baseline.
        unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
    }

    /// Stores a block (any alignment).
    #[inline(always)]
    fn store(b: &mut Block, v: __m128i) {
        // SAFETY: `b` is a live exclusive reference to 16 writable bytes;
        // `storeu` has no alignment requirement.
        unsafe { _mm_storeu_si128(b.as_mut_ptr().cast(), v) }
    }

    /// One key-expansion step (FIPS-197 §5.2 for Nk = 4): the next round key
    /// from the previous one and `SubWord(RotWord(w3)) ⊕ Rcon` in `assist`.
    #[inline]
    #[target_feature(enable = "aes")]
    fn next_key(prev: __m128i, assist: __m128i) -> __m128i {
        let t = _mm_shuffle_epi32::<0xff>(assist);
        let mut k = _mm_xor_si128(prev, _mm_slli_si128::<4>(prev));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, t)
    }

    /// AES-128 key expansion.
    #[target_feature(enable = "aes")]
    fn expand(key: &[u8; 16]) -> [__m128i; 11] {
        let mut rk = [_mm_setzero_si128(); 11];
        rk[0] = load(key);
        macro_rules! round {
            ($i:literal, $rcon:literal) => {
                rk[$i] = next_key(rk[$i - 1], _mm_aeskeygenassist_si128::<$rcon>(rk[$i - 1]));
            };
        }
        round!(1, 0x01);
        round!(2, 0x02);
        round!(3, 0x04);
        round!(4, 0x08);
        round!(5, 0x10);
        round!(6, 0x20);
        round!(7, 0x40);
        round!(8, 0x80);
        round!(9, 0x1b);
        round!(10, 0x36);
        rk
    }

    /// Encrypts the `N` states `$s`, lane `l` under round keys `$rk[l]`,
    /// round by round across lanes (so the CPU overlaps the lanes' AES
    /// latencies). A macro rather than a function: a `#[target_feature]`
    /// function cannot be forced inline, and a call per block would cost
    /// more than the rounds.
    macro_rules! encrypt {
        ($s:ident, $rk:ident, $n:expr) => {{
            for l in 0..$n {
                $s[l] = _mm_xor_si128($s[l], $rk[l][0]);
            }
            encrypt!(@from1 $s, $rk, $n);
        }};
        // Rounds 1 to 10 (round key 0 already XORed into the states).
        (@from1 $s:ident, $rk:ident, $n:expr) => {{
            encrypt!(@round $s, $rk, $n, 1);
            encrypt!(@round $s, $rk, $n, 2);
            encrypt!(@round $s, $rk, $n, 3);
            encrypt!(@round $s, $rk, $n, 4);
            encrypt!(@round $s, $rk, $n, 5);
            encrypt!(@round $s, $rk, $n, 6);
            encrypt!(@round $s, $rk, $n, 7);
            encrypt!(@round $s, $rk, $n, 8);
            encrypt!(@round $s, $rk, $n, 9);
            for l in 0..$n {
                $s[l] = _mm_aesenclast_si128($s[l], $rk[l][10]);
            }
        }};
        (@round $s:ident, $rk:ident, $n:expr, $r:literal) => {
            for l in 0..$n {
                $s[l] = _mm_aesenc_si128($s[l], $rk[l][$r]);
            }
        };
    }

    /// One CBC chain under one key.
    ///
    /// # Safety
    /// The CPU must support AES-NI.
    #[inline]
    #[target_feature(enable = "aes")]
    pub(crate) unsafe fn chain(
        rk: &RoundKeys,
        state: &mut Block,
        steps: usize,
        mut block: impl FnMut(usize) -> Block,
    ) {
        let mut s = [load(state)];
        let rk = [&rk.0];
        for j in 0..steps {
            s[0] = _mm_xor_si128(s[0], load(&block(j)));
            encrypt!(s, rk, 1);
        }
        store(state, s[0]);
    }

    /// Every chain of `states`, lane `i` under `key(i)`, `steps` blocks
    /// `block(i, j)` each: in groups of [`LANES`](super::LANES) interleaved
    /// chains, then the rest as one group. Returns the number of lanes done:
    /// all, or up to the first group with a lane whose key has no AES-NI
    /// round keys (that group and the ones after it untouched).
    ///
    /// One call for the whole slice: the groups share its set-up, and a
    /// group's lane `l` is `base | l` with `base` a multiple of the group
    /// size, so that the closures see lanes at known offsets from the
    /// group's first (a caller's per-lane tables read through one pointer
    /// and constant displacements instead of an address per lane).
    ///
    /// # Safety
    /// The CPU must support AES-NI.
    #[inline]
    #[target_feature(enable = "aes")]
    pub(crate) unsafe fn lanes<'k>(
        key: impl Fn(usize) -> Option<&'k RoundKeys>,
        states: &mut [Block],
        steps: usize,
        mut block: impl FnMut(usize, usize) -> Block,
    ) -> usize {
        const N: usize = super::LANES;
        // (The key gather below names the eight lanes.)
        const _: () = assert!(N == 8);
        let mut done = 0;
        let mut groups = states.chunks_exact_mut(N);
        for full in groups.by_ref() {
            // (A multiple of `N`, as the mask tells the compiler.)
            let base = done & !(N - 1);
            // Every lane's key first, then one check (the pointers stay in
            // registers until the array is built).
            let ks: [Option<&RoundKeys>; N] = core::array::from_fn(|l| key(base | l));
            let [Some(k0), Some(k1), Some(k2), Some(k3), Some(k4), Some(k5), Some(k6), Some(k7)] =
                ks
            else {
                return done;
            };
            let rk = [&k0.0, &k1.0, &k2.0, &k3.0, &k4.0, &k5.0, &k6.0, &k7.0];
            let mut s = [_mm_setzero_si128(); N];
            for l in 0..N {
                s[l] = load(&full[l]);
            }
            // One step. The key pointers pass an optimisation barrier
            // every step: otherwise the compiler copies every lane's round
            // keys to the stack once (they do not fit in registers)
            // instead of reading them where they are.
            macro_rules! step {
                ($j:expr) => {{
                    let rk = *core::hint::black_box(&rk);
                    for l in 0..N {
                        s[l] = _mm_xor_si128(s[l], load(&block(base | l, $j)));
                    }
                    encrypt!(s, rk, N);
                }};
            }
            // Up to three steps written out: each step's index is then a
            // constant in `block` (which may pick its source by step).
            match steps {
                1 => step!(0),
                2 => {
                    step!(0);
                    step!(1);
                }
                3 => {
                    step!(0);
                    step!(1);
                    step!(2);
                }
                _ => {
                    for j in 0..steps {
                        step!(j);
                    }
                }
            }
            for l in 0..N {
                store(&mut full[l], s[l]);
            }
            done += N;
        }
        let tail = groups.into_remainder();
        let (base, n) = (done, tail.len());
        // (Padding lanes past the end take the last lane's key.)
        let k = |l: usize| key(base + l.min(n.saturating_sub(1)));
        let b = |l: usize, j: usize| block(base + l, j);
        // SAFETY (all four): AES-NI is this function's precondition.
        let ok = match tail.len() {
            0 => true,
            1 => unsafe { group::<1>(k, tail, steps, b) },
            2 => unsafe { group::<2>(k, tail, steps, b) },
            3 | 4 => unsafe { group::<4>(k, tail, steps, b) },
            _ => unsafe { group::<N>(k, tail, steps, b) },
        };
        if ok {
            done + tail.len()
        } else {
            done
        }
    }

    /// `states.len()` (≤ `N`) chains side by side, lane `l` under `key(l)`
    /// (lanes past the end are padding: the last lane's key, zero blocks,
    /// results discarded). Returns `false`, touching nothing, if some
    /// lane's key has no AES-NI round keys.
    ///
    /// # Safety
    /// The CPU must support AES-NI.
    #[inline]
    #[target_feature(enable = "aes")]
    unsafe fn group<'k, const N: usize>(
        key: impl Fn(usize) -> Option<&'k RoundKeys>,
        states: &mut [Block],
        steps: usize,
        mut block: impl FnMut(usize, usize) -> Block,
    ) -> bool {
        let n = states.len().min(N);
        let Some(first) = key(0) else { return false };
        let mut rk = [&first.0; N];
        for (l, slot) in rk.iter_mut().enumerate().skip(1) {
            match key(l) {
                Some(k) => *slot = &k.0,
                None => return false,
            }
        }
        if let Some(full) = states.first_chunk_mut::<N>() {
            // A whole group (the usual case): fixed-size loads and stores,
            // no per-lane bounds test, and no copy of the states through a
            // stack buffer (for a variable lane count the compiler emits
            // `memset` + `memcpy` calls for that, measured ≈ 60
            // instructions per group). Its own state array: one shared with
            // the partial path below, which indexes it by a run-time lane
            // count, would live in memory, stored back every round.
            let mut s = [_mm_setzero_si128(); N];
            for l in 0..N {
                s[l] = load(&full[l]);
            }
            for j in 0..steps {
                // With 8 lanes the key pointers pass an optimisation
                // barrier every step: otherwise, with a constant step
                // count, the compiler unrolls the steps and copies every
                // lane's round keys to the stack once (they do not fit in
                // registers) instead of reading them where they are. (With
                // fewer lanes they fit, and the barrier only costs.)
                let rk = if N >= LANES_BARRIER { *core::hint::black_box(&rk) } else { rk };
                for l in 0..N {
                    s[l] = _mm_xor_si128(s[l], load(&block(l, j)));
                }
                encrypt!(s, rk, N);
            }
            for l in 0..N {
                store(&mut full[l], s[l]);
            }
            return true;
        }
        let mut s = [_mm_setzero_si128(); N];
        for l in 0..n {
            s[l] = load(&states[l]);
        }
        for j in 0..steps {
            for l in 0..n {
                s[l] = _mm_xor_si128(s[l], load(&block(l, j)));
            }
            encrypt!(s, rk, N);
        }
        for l in 0..n {
            store(&mut states[l], s[l]);
        }
        true
    }

    /// Lane count from which [`group`] hides the key pointers from the
    /// optimiser every step (see there).
    const LANES_BARRIER: usize = 8;

    pub(crate) mod groups;

    /// Four blocks, 64 bytes, loaded as one `zmm`.
    type Quad = [Block; 4];

    /// Loads four blocks (any alignment).
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load4(q: &Quad) -> __m512i {
        // SAFETY: `q` is a live reference to 64 readable bytes; `loadu` has
        // no alignment requirement; AVX-512F is the caller's promise.
        unsafe { _mm512_loadu_si512(q.as_ptr().cast()) }
    }

    /// `states.len()` (≤ 4 × `Z`) chains side by side under one key, four
    /// per `zmm` register (lanes past the end are padding, results
    /// discarded). Each step's blocks enter their register by lane inserts;
    /// states of whole quads load and store 64 bytes straight from `states`.
    ///
    /// # Safety
    /// The CPU must support VAES and AVX-512F (and AES-NI, implied by `rk`).
    #[inline]
    #[target_feature(enable = "avx512f,vaes")]
    pub(crate) unsafe fn wide<const Z: usize>(
        rk: &RoundKeys,
        states: &mut [Block],
        steps: usize,
        mut block: impl FnMut(usize, usize) -> Block,
    ) {
        let n = states.len().min(4 * Z);
        let k: [__m512i; 11] = core::array::from_fn(|r| _mm512_broadcast_i32x4(rk.0[r]));
        let mut s = [_mm512_setzero_si512(); Z];
        for z in 0..Z {
            let lo = 4 * z;
            s[z] = match states.get(lo..).and_then(<[Block]>::first_chunk::<4>) {
                // SAFETY: AVX-512F is this function's precondition.
                Some(q) => unsafe { load4(q) },
                // A partial quad, lane by lane (padding lanes zero).
                None => {
                    let x = |l: usize| if l < n { load(&states[l]) } else { _mm_setzero_si128() };
                    let mut m = _mm512_castsi128_si512(x(lo));
                    m = _mm512_inserti32x4::<1>(m, x(lo + 1));
                    m = _mm512_inserti32x4::<2>(m, x(lo + 2));
                    _mm512_inserti32x4::<3>(m, x(lo + 3))
                }
            };
        }
        for j in 0..steps {
            // Each block goes into its quad with a lane insert rather than
            // through a stack buffer: a 64-byte load spanning four fresh
            // 16-byte stores cannot be store-forwarded and stalls.
            let mut x = |l: usize| if l < n { load(&block(l, j)) } else { _mm_setzero_si128() };
            for z in 0..Z {
                let lo = 4 * z;
                let mut m = _mm512_castsi128_si512(x(lo));
                m = _mm512_inserti32x4::<1>(m, x(lo + 1));
                m = _mm512_inserti32x4::<2>(m, x(lo + 2));
                m = _mm512_inserti32x4::<3>(m, x(lo + 3));
                s[z] = _mm512_xor_si512(s[z], m);
            }
            for z in 0..Z {
                s[z] = _mm512_xor_si512(s[z], k[0]);
            }
            for r in 1..10 {
                for z in 0..Z {
                    s[z] = _mm512_aesenc_epi128(s[z], k[r]);
                }
            }
            for z in 0..Z {
                s[z] = _mm512_aesenclast_epi128(s[z], k[10]);
            }
        }
        for z in 0..Z {
            let lo = 4 * z;
            match states.get_mut(lo..).and_then(<[Block]>::first_chunk_mut::<4>) {
                // SAFETY: `q` is a live exclusive borrow of 4 blocks, 64
                // writable bytes; `storeu` has no alignment requirement;
                // AVX-512F is this function's precondition.
                Some(q) => unsafe { _mm512_storeu_si512(q.as_mut_ptr().cast(), s[z]) },
                None => {
                    let mut buf: Quad = [[0; 16]; 4];
                    // SAFETY: as above, into the 64-byte stack quad.
                    unsafe { _mm512_storeu_si512(buf.as_mut_ptr().cast(), s[z]) };
                    let tail = &mut states[lo.min(n)..n];
                    tail.copy_from_slice(&buf[..tail.len()]);
                }
            }
        }
    }

    /// The kernel of [`cbc_lanes_nested`](crate::cbc_lanes_nested).
    pub(crate) mod nested;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex16(s: &str) -> Block {
        core::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
    }

    /// FIPS-197 Appendix C.1 and Appendix B, on both paths.
    #[test]
    fn fips197_known_answers() {
        let cases = [
            (
                "000102030405060708090a0b0c0d0e0f",
                "00112233445566778899aabbccddeeff",
                "69c4e0d86a7b0430d8cdb78070b4c55a",
            ),
            (
                "2b7e151628aed2a6abf7158809cf4f3c",
                "3243f6a8885a308d313198a2e0370734",
                "3925841d02dc09fbdc118597196a0b32",
            ),
        ];
        for (k, p, c) in cases {
            for aes in [Aes128::new(&hex16(k)), Aes128::new_portable(&hex16(k))] {
                let mut b = hex16(p);
                aes.encrypt_block(&mut b);
                assert_eq!(b, hex16(c));
                let mut bs = [hex16(p); 11];
                aes.encrypt_blocks(&mut bs);
                assert!(bs.iter().all(|x| *x == hex16(c)));
            }
        }
    }

    /// Interleaved lanes under a key each equal one chain per lane on the
    /// portable path, for every lane count up to 70 (whole groups, a
    /// partial last one) and 1 to 5 steps (written out up to three);
    /// also with some keys portable (those lanes and every lane after
    /// the first group holding one take the one-chain path).
    #[test]
    fn lanes_with_a_key_each_every_size() {
        let raw = |i: usize| -> Block { core::array::from_fn(|k| (i * 53 + k * 7) as u8) };
        let fast: [Aes128; 70] = core::array::from_fn(|i| Aes128::new(&raw(i)));
        let slow: [Aes128; 70] = core::array::from_fn(|i| Aes128::new_portable(&raw(i)));
        let mixed: [Aes128; 70] = core::array::from_fn(|i| {
            if i % 11 == 5 {
                Aes128::new_portable(&raw(i))
            } else {
                Aes128::new(&raw(i))
            }
        });
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 31 + j * 13 + k) as u8) };
        for steps in 1..=5 {
            for n in 1..=70 {
                let init: [Block; 70] = core::array::from_fn(|i| [i as u8 ^ 0x5a; 16]);
                let mut want = init;
                for (i, s) in want[..n].iter_mut().enumerate() {
                    slow[i].cbc_chain(s, steps, |j| msg(i, j));
                }
                for keys in [&fast, &mixed] {
                    let mut got = init;
                    cbc_lanes(|i| &keys[i], &mut got[..n], steps, msg);
                    assert_eq!(got, want, "n={n} steps={steps}");
                }
            }
        }
    }

    /// The same-key path (VAES-512 where present) equals the portable
    /// path for every group size up to 70 and 1 to 4 steps.
    #[test]
    fn one_key_lanes_every_size() {
        let key = hex16("2b7e151628aed2a6abf7158809cf4f3c");
        let (fast, slow) = (Aes128::new(&key), Aes128::new_portable(&key));
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 29 + j * 11 + k) as u8) };
        for steps in 1..=4 {
            for n in 1..=70 {
                let mut a = [[0x5au8; 16]; 70];
                let mut b = a;
                fast.cbc_lanes_one_key(&mut a[..n], steps, msg);
                slow.cbc_lanes_one_key(&mut b[..n], steps, msg);
                assert_eq!(a, b, "n={n} steps={steps}");
            }
        }
    }

    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    #[test]
    fn vaes_flag_follows_the_cpu() {
        let vaes =
            std::is_x86_feature_detected!("vaes") && std::is_x86_feature_detected!("avx512f");
        match Aes128::new(&[0; 16]).inner {
            Inner::Ni(_, flag) => assert_eq!(flag, vaes),
            Inner::Portable(_) => assert!(!std::is_x86_feature_detected!("aes")),
        }
    }

    #[test]
    fn compact() {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        assert_eq!(core::mem::size_of::<Aes128>(), 192);
    }

    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    #[test]
    fn uses_aes_ni_when_the_cpu_has_it() {
        assert_eq!(Aes128::new(&[0; 16]).is_accelerated(), std::is_x86_feature_detected!("aes"));
        assert!(!Aes128::new_portable(&[0; 16]).is_accelerated());
    }
}
