//! The DPDK backend (cargo feature `dpdk`): poll-mode drivers, zero-copy mbufs.
//!
//! * The EAL is initialised once per process from `[io.dpdk] eal_args`
//!   (`--no-huge --no-pci --vdev net_null0` and friends work); the runtime adds
//!   a per-process `--file-prefix` unless one (or `--in-memory`) is given, so that
//!   several routers (or tests) can run side by side, and `-l 0` unless an
//!   lcore option is given. Workers are the runtime's own pinned threads,
//!   registered with the EAL (`rte_thread_register`) so that they get an lcore
//!   id and mempool caches.
//! * Port `id`s in `[[ports]]` are DPDK port ids (the order of `--vdev`s / PCI
//!   devices). Every port gets one RX and one TX queue per worker; with more
//!   than one worker, RSS (IP/UDP/TCP as far as the device supports it)
//!   spreads flows over the RX queues (over the fields `[workers] rss` names:
//!   IP/UDP/TCP for `flow`, IP for `addresses`, with the NIC's L3 source- or
//!   destination-only mode for `src`/`dst`), and the NIC's RSS hash becomes
//!   `Meta::hash`. Devices without RSS (e.g. `net_null`) leave it 0 unless
//!   `software_hash = true`, which computes [`hash_by`] per packet (it reads
//!   the headers, which costs a cache miss per packet on a cold buffer).
//! * Each worker has its own mbuf pool; [`Mbuf`] implements
//!   [`PacketBuf`] directly over the mbuf, so a `Batch<Mbuf>` is built without
//!   copying. Only single-segment mbufs are accepted (others are freed on RX
//!   and counted as `too_long` drops of their port; ports whose device cannot
//!   chain frames skip that check, see [`SegmentCheck`]).
//! * Per burst, the hot path is: `rte_eth_rx_burst` writes the mbuf pointers
//!   straight into the batch's buffer vector ([`Batch::extend_with`]; `Mbuf`
//!   is a transparent pointer), one pass over the new mbufs ORs their segment
//!   counts and, when a port has RSS, their flags (the RSS hash and
//!   multi-segment handling only run if that pass found any) and prefetches
//!   their first data line (`[io.dpdk] prefetch`, on by default, and skipped
//!   while no stage of the worker's pipeline reads packet bytes). The worker
//!   then hands a burst that goes to one port to `rte_eth_tx_burst` as the batch's own vector, and frees dropped
//!   packets with one `rte_pktmbuf_free_bulk` per burst ([`WorkerIo::free_bulk`]).

use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::sync::OnceLock;

use dpdk_sys as sys;
use pipeline::{Batch, NoRoom, Now, PacketBuf, BURST};

use crate::config::{ConfigError, DpdkConfig, RouterConfig, SegmentCheck};
use crate::io::{TscClock, WorkerIo};
use crate::rss::{hash_by, RssKey};
use crate::stats::LocalCounters;
use crate::RuntimeError;

const _: () = assert!(
    sys::AVAILABLE,
    "dpdk-sys was built without libdpdk (install libdpdk-dev and pkg-config)"
);

/// `RTE_MBUF_F_RX_RSS_HASH`: the driver filled `hash.rss`.
const RX_RSS_HASH: u64 = 1 << 1;

/// A single-segment DPDK mbuf owned by the holder; freed on drop.
///
/// `repr(transparent)`: a `[Mbuf]` is an array of `rte_mbuf` pointers, so a
/// TX vector is handed to `rte_eth_tx_burst` as is, without copying.
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an `Mbuf` is the unique owner of its mbuf (it was received or
// allocated into this handle and is handed over, never shared), and DPDK mbufs
// may be freed or transmitted from any thread.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `m` must be a valid, single-segment mbuf that nothing else owns.
    pub unsafe fn from_raw(m: NonNull<sys::rte_mbuf>) -> Self {
        Mbuf(m)
    }

    /// Gives up ownership (for transmission).
    pub fn into_raw(self) -> *mut sys::rte_mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    fn m(&self) -> &sys::rte_mbuf {
        // SAFETY: self.0 is a valid mbuf we own for our lifetime.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; after this it is never used again.
        unsafe { sys::shim_pktmbuf_free(self.0.as_ptr()) }
    }
}

impl PacketBuf for Mbuf {
    #[inline]
    fn data(&self) -> &[u8] {
        let m = self.m();
        // SAFETY: for a single-segment mbuf, buf_addr + data_off points at
        // data_len initialised bytes inside the mbuf's buffer, which we own.
        unsafe {
            std::slice::from_raw_parts(
                (m.buf_addr as *const u8).add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        let m = self.m();
        let (addr, off, len) =
            (m.buf_addr as *mut u8, usize::from(m.data_off), usize::from(m.data_len));
        // SAFETY: as in `data`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(addr.add(off), len) }
    }

    fn headroom(&self) -> usize {
        usize::from(self.m().data_off)
    }

    fn tailroom(&self) -> usize {
        let m = self.m();
        usize::from(m.buf_len) - usize::from(m.data_off) - usize::from(m.data_len)
    }

    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        let n = u16::try_from(n).map_err(|_| NoRoom)?;
        // SAFETY: valid owned mbuf; the function checks the headroom and
        // returns NULL without changing anything if it is too small.
        let p = unsafe { sys::shim_pktmbuf_prepend(self.0.as_ptr(), n) };
        if p.is_null() {
            Err(NoRoom)
        } else {
            Ok(())
        }
    }

    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        let n = u16::try_from(n).map_err(|_| NoRoom)?;
        // SAFETY: valid owned mbuf; NULL (no change) if n exceeds the data.
        let p = unsafe { sys::shim_pktmbuf_adj(self.0.as_ptr(), n) };
        if p.is_null() {
            Err(NoRoom)
        } else {
            Ok(())
        }
    }

    fn append(&mut self, n: usize) -> Result<(), NoRoom> {
        let n = u16::try_from(n).map_err(|_| NoRoom)?;
        // SAFETY: valid owned mbuf; NULL (no change) if the tailroom is too small.
        let p = unsafe { sys::shim_pktmbuf_append(self.0.as_ptr(), n) };
        if p.is_null() {
            Err(NoRoom)
        } else {
            Ok(())
        }
    }

    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        let n = u16::try_from(n).map_err(|_| NoRoom)?;
        // SAFETY: valid owned mbuf; returns -1 (no change) if n exceeds the data.
        let r = unsafe { sys::shim_pktmbuf_trim(self.0.as_ptr(), n) };
        if r != 0 {
            Err(NoRoom)
        } else {
            Ok(())
        }
    }
}

/// Prefetches the cache line at `p` into all cache levels.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One pass over `n` freshly received mbufs: returns the OR of their
/// offload flags (with `FLAGS`; 0 otherwise) and of their segment counts
/// (with `SEGS`; 1 otherwise), and with `PREFETCH` starts loading each
/// one's first data line, so that the pipeline's parser finds the headers
/// in cache.
///
/// The prefetch address is the mbuf's own address plus the first one's
/// data offset from its header (`buf_addr + data_off - m`): the mbufs of a
/// queue come from one pool, whose buffers all lie at one offset from their
/// headers, and drivers start received data at the same headroom. So each
/// packet costs no loads beyond its pointer and segment count; were an
/// mbuf laid out otherwise, only that hint would miss.
///
/// # Safety
/// `mbufs` points to `n` valid, non-NULL mbuf pointers whose headers the
/// driver just filled.
#[inline(always)]
unsafe fn scan_rx<const SEGS: bool, const FLAGS: bool, const PREFETCH: bool>(
    mbufs: *const *mut sys::rte_mbuf,
    n: usize,
) -> (u64, u16) {
    let (mut flags, mut segs) = (0u64, 1u16);
    if n == 0 {
        return (flags, segs);
    }
    // SAFETY: n > 0, so the first pointer is a valid mbuf.
    let data_at = unsafe {
        let m = *mbufs;
        ((*m).buf_addr as usize + usize::from((*m).data_off)).wrapping_sub(m as usize)
    };
    // SAFETY: the caller's contract: n valid, non-NULL mbuf pointers.
    let ms = unsafe { std::slice::from_raw_parts(mbufs, n) };
    let mut visit = |m: *mut sys::rte_mbuf| {
        // SAFETY: `m` is a valid mbuf (the caller's contract); reading its
        // header is in bounds and a prefetch never faults.
        unsafe {
            if SEGS {
                segs |= (*m).nb_segs;
            }
            if FLAGS {
                flags |= (*m).ol_flags;
            }
            if PREFETCH {
                prefetch(m.cast::<u8>().cast_const().wrapping_add(data_at));
            }
        }
    };
    // A full burst, the usual case under load, has a compile-time count:
    // the loop unrolls completely, with no count, branch or remainder.
    if let Ok(full) = <&[*mut sys::rte_mbuf; BURST]>::try_from(ms) {
        for &m in full {
            visit(m);
        }
        return (flags, segs);
    }
    // Four per step: the loop's own count and branch are a third of a
    // packet's work here.
    let mut quads = ms.chunks_exact(4);
    for q in &mut quads {
        visit(q[0]);
        visit(q[1]);
        visit(q[2]);
        visit(q[3]);
    }
    for &m in quads.remainder() {
        visit(m);
    }
    (flags, segs)
}

/// Whether the RX pass reads the segment counts of frames from a port with
/// device information `info` under the setting `check` ([`SegmentCheck`]).
fn reads_segments(check: SegmentCheck, info: &sys::rte_eth_dev_info) -> bool {
    // SAFETY: a pure function returning a constant.
    let scatter = info.rx_offload_capa & unsafe { sys::shim_rx_offload_scatter() } != 0;
    let driver = if info.driver_name.is_null() {
        None
    } else {
        // SAFETY: DPDK fills `driver_name` with a static NUL-terminated string.
        Some(unsafe { CStr::from_ptr(info.driver_name) })
    };
    let single_segment = matches!(driver.map(CStr::to_bytes), Some(b"net_null" | b"net_af_packet"));
    check == SegmentCheck::Always || scatter || !single_segment
}

/// The total length of `bufs` in bytes (TX byte counters), reading one
/// word of each mbuf: `pkt_len`, which equals `data_len` (the
/// [`PacketBuf::len`] of an [`Mbuf`]) since every `Mbuf` is a single
/// segment, added up 32-bit (each length is below 2^16, so 2^16 of them
/// cannot overflow) and four per step.
#[inline(always)]
fn mbuf_bytes(bufs: &[Mbuf]) -> u64 {
    let len = |b: &Mbuf| b.m().pkt_len;
    // A full burst (the usual TX vector): a compile-time count, unrolled.
    if let Ok(full) = <&[Mbuf; BURST]>::try_from(bufs) {
        return u64::from(full.iter().fold(0u32, |sum, b| sum.wrapping_add(len(b))));
    }
    let mut total = 0u64;
    for chunk in bufs.chunks(1 << 16) {
        let mut sum = 0u32;
        let mut quads = chunk.chunks_exact(4);
        for q in &mut quads {
            sum = sum.wrapping_add(len(&q[0]));
            sum = sum.wrapping_add(len(&q[1]));
            sum = sum.wrapping_add(len(&q[2]));
            sum = sum.wrapping_add(len(&q[3]));
        }
        for b in quads.remainder() {
            sum = sum.wrapping_add(len(b));
        }
        total += u64::from(sum);
    }
    total
}

fn dpdk_err(what: &str, rc: i32) -> RuntimeError {
    let code = if rc < 0 {
        -rc
    } else {
        // SAFETY: reads the calling thread's rte_errno.
        unsafe { sys::shim_errno() }
    };
    // SAFETY: rte_strerror returns a pointer to a static or thread-local string.
    let msg = unsafe { CStr::from_ptr(sys::rte_strerror(code)) }.to_string_lossy().into_owned();
    RuntimeError::Dpdk(format!("{what}: {msg} ({code})"))
}

static EAL: OnceLock<Result<Vec<String>, String>> = OnceLock::new();

fn eal_args(c: &DpdkConfig) -> Vec<String> {
    let mut args = vec!["router".to_string()];
    let has = |opts: &[&str]| {
        c.eal_args.iter().any(|a| opts.iter().any(|o| a == o || a.starts_with(&format!("{o}="))))
    };
    if !has(&["-l", "--lcores", "-c"]) {
        args.extend(["-l".into(), "0".into()]);
    }
    if !has(&["--file-prefix", "--in-memory"]) {
        // A per-process prefix keeps runtime files of concurrent routers
        // apart (`--in-memory` would do too, but not with `--no-huge`).
        args.push(format!("--file-prefix=rt{}", std::process::id()));
    }
    args.extend(c.eal_args.iter().cloned());
    args
}

/// Initialises the EAL once per process; later calls must use the same arguments.
fn init_eal(c: &DpdkConfig) -> Result<(), RuntimeError> {
    let args = eal_args(c);
    let res = EAL.get_or_init(|| {
        let cargs: Vec<CString> = match args.iter().map(|a| CString::new(a.as_str())).collect() {
            Ok(v) => v,
            Err(_) => return Err("EAL argument contains a NUL byte".into()),
        };
        let mut argv: Vec<*mut std::os::raw::c_char> =
            cargs.iter().map(|a| a.as_ptr() as *mut _).collect();
        // SAFETY: argv holds argc valid NUL-terminated strings that outlive the
        // call; the EAL may permute argv but does not keep the pointers.
        let rc = unsafe { sys::rte_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
        if rc < 0 {
            return Err(format!("{}", dpdk_err("rte_eal_init", rc)));
        }
        Ok(args.clone())
    });
    match res {
        Ok(prev) if *prev == args => Ok(()),
        Ok(prev) => Err(RuntimeError::Dpdk(format!(
            "the EAL is already initialised with {prev:?}; it cannot be re-initialised in one process"
        ))),
        Err(e) => Err(RuntimeError::Dpdk(e.clone())),
    }
}

/// Validates `[io.dpdk]` without touching DPDK.
pub fn check(cfg: &RouterConfig) -> Result<(), ConfigError> {
    let c = cfg.io.dpdk.as_ref().ok_or_else(|| ConfigError::at("io.dpdk", "missing"))?;
    if c.mbufs < 2 * BURST as u32 + u32::from(c.rx_desc) + u32::from(c.tx_desc) {
        return Err(ConfigError::at("io.dpdk.mbufs", "too few for the RX and TX rings"));
    }
    for (key, d) in [("rx_desc", c.rx_desc), ("tx_desc", c.tx_desc)] {
        if d == 0 || !d.is_power_of_two() {
            return Err(ConfigError::at(format!("io.dpdk.{key}"), "must be a power of two"));
        }
    }
    Ok(())
}

/// One worker's queues on every port, and its mbuf pool.
pub struct DpdkIo {
    queue: u16,
    ports: Vec<u16>,
    /// The worker's clock, read once per loop iteration: the TSC,
    /// anchored to the monotonic clock (see [`TscClock`] for its bounds).
    clock: TscClock,
    /// `[io.dpdk] unix_time_s` in ns: the pinned Unix clock, if any.
    pinned_unix_ns: Option<u64>,
    registered: bool,
    software_hash: bool,
    /// Whether a port was configured for RSS, so drivers may deliver a hash
    /// (the RX pass reads the offload flags only then).
    hardware_hash: bool,
    rss: RssKey,
    /// `[io.dpdk] prefetch`: the operator's setting.
    prefetch: bool,
    /// Whether the RX pass prefetches: the setting, while the worker's
    /// pipeline reads packet bytes.
    prefetch_now: bool,
    /// Per port (in `ports` order): multi-segment frames freed on RX since
    /// the last publication, reported as `too_long` drops of that port.
    too_long: Vec<u64>,
    /// By port id: whether the RX pass reads segment counts there
    /// ([`SegmentCheck`]); ids past the end are checked.
    check_segments: Vec<bool>,
}

/// Stops and closes the ports and frees the pools, after the workers have stopped.
pub type Teardown = Box<dyn FnOnce() + Send>;

/// Initialises the EAL, configures and starts the ports; returns one I/O
/// handle per worker and a teardown that stops the ports.
pub fn open(cfg: &RouterConfig) -> Result<(Vec<DpdkIo>, Teardown), RuntimeError> {
    let c = cfg.io.dpdk.as_ref().ok_or(ConfigError::at("io.dpdk", "missing"))?;
    check(cfg)?;
    init_eal(c)?;
    let workers = cfg.workers.count as u16;
    let ports: Vec<u16> = cfg.ports.iter().map(|p| p.id).collect();
    let mut pools = Vec::new();
    let mut hardware_hash = false;
    let max_id = ports.iter().copied().max().unwrap_or(0);
    let mut check_segments = vec![true; usize::from(max_id) + 1];
    for w in 0..workers {
        // Names are global in the EAL: number every pool of the process.
        static POOLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = POOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = CString::new(format!("rt_pool_{n}_w{w}")).expect("no NUL");
        // SAFETY: EAL initialised; the name is a valid C string.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                c.mbufs,
                c.mbuf_cache,
                0,
                sys::shim_mbuf_default_buf_size(),
                sys::rte_socket_id() as i32,
            )
        };
        if pool.is_null() {
            return Err(dpdk_err("rte_pktmbuf_pool_create", 0));
        }
        pools.push(pool);
    }
    for &port in &ports {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: a valid out pointer; an unknown port id yields -ENODEV.
        let rc = unsafe { sys::rte_eth_dev_info_get(port, &mut info) };
        if rc != 0 {
            let i = cfg.port_index(port).unwrap_or(0);
            return Err(ConfigError::at(
                format!("ports[{i}].id"),
                format!(
                    "{} (port ids are DPDK port ids, in --vdev/PCI order)",
                    dpdk_err("no such DPDK port", rc)
                ),
            )
            .in_file(&cfg.source)
            .into());
        }
        check_segments[usize::from(port)] = reads_segments(c.check_segments, &info);
        if info.max_rx_queues < workers || info.max_tx_queues < workers {
            return Err(RuntimeError::Dpdk(format!(
                "port {port} supports {} RX / {} TX queues, {workers} workers need one each",
                info.max_rx_queues, info.max_tx_queues
            )));
        }
        let mut conf = sys::rte_eth_conf::default();
        if workers > 1 {
            // SAFETY: pure functions returning constants.
            let (types, l3_only) = unsafe {
                match cfg.workers.rss {
                    RssKey::Flow => (sys::shim_rss_hf_ip_udp_tcp(), 0),
                    RssKey::Addresses => (sys::shim_rss_hf_ip(), 0),
                    RssKey::Src => (sys::shim_rss_hf_ip(), sys::shim_rss_l3_src_only()),
                    RssKey::Dst => (sys::shim_rss_hf_ip(), sys::shim_rss_l3_dst_only()),
                }
            };
            let hf = types & info.flow_type_rss_offloads;
            if l3_only != 0 && info.flow_type_rss_offloads & l3_only == 0 && hf != 0 {
                return Err(RuntimeError::Dpdk(format!(
                    "port {port} cannot hash on the {} address alone ([workers] rss = \"{}\"); \
                     use \"addresses\" or \"flow\"",
                    if cfg.workers.rss == RssKey::Src { "source" } else { "destination" },
                    cfg.workers.rss.name()
                )));
            }
            let hf = hf | l3_only;
            if hf != 0 {
                hardware_hash = true;
                conf.rxmode.mq_mode = unsafe { sys::shim_mq_rx_rss() };
                conf.rx_adv_conf.rss_conf.rss_hf = hf;
            }
        }
        // SAFETY: valid port, valid config pointer; the port is stopped.
        let rc = unsafe { sys::rte_eth_dev_configure(port, workers, workers, &conf) };
        if rc != 0 {
            return Err(dpdk_err("rte_eth_dev_configure", rc));
        }
        // SAFETY: valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port) } as u32;
        for q in 0..workers {
            // SAFETY: configured port, queue < configured count, live mempool;
            // NULL confs select the driver defaults.
            let rc = unsafe {
                sys::rte_eth_rx_queue_setup(
                    port,
                    q,
                    c.rx_desc,
                    socket,
                    std::ptr::null(),
                    pools[usize::from(q)],
                )
            };
            if rc != 0 {
                return Err(dpdk_err("rte_eth_rx_queue_setup", rc));
            }
            // SAFETY: as above.
            let rc = unsafe {
                sys::rte_eth_tx_queue_setup(port, q, c.tx_desc, socket, std::ptr::null())
            };
            if rc != 0 {
                return Err(dpdk_err("rte_eth_tx_queue_setup", rc));
            }
        }
        // SAFETY: all queues are set up.
        let rc = unsafe { sys::rte_eth_dev_start(port) };
        if rc != 0 {
            return Err(dpdk_err("rte_eth_dev_start", rc));
        }
        if c.promiscuous {
            // SAFETY: started port. Virtual devices may not support it; ignore.
            let _ = unsafe { sys::rte_eth_promiscuous_enable(port) };
        }
    }
    // SAFETY: the EAL is initialised; it measured the TSC rate then.
    let tsc_hz = unsafe { sys::rte_get_tsc_hz() };
    let ios = (0..workers)
        .map(|q| DpdkIo {
            queue: q,
            ports: ports.clone(),
            clock: TscClock::new(tsc_hz),
            pinned_unix_ns: c.unix_time_s.map(|s| s.saturating_mul(1_000_000_000)),
            registered: false,
            software_hash: c.software_hash,
            hardware_hash,
            rss: cfg.workers.rss,
            prefetch: c.prefetch,
            prefetch_now: c.prefetch,
            too_long: vec![0; ports.len()],
            check_segments: check_segments.clone(),
        })
        .collect();
    let teardown_ports = ports.clone();
    // Raw pointers are not Send; the pools are only touched again here.
    let pool_addrs: Vec<usize> = pools.iter().map(|p| *p as usize).collect();
    let teardown = Box::new(move || {
        for p in teardown_ports {
            // SAFETY: workers have stopped (teardown runs after join); stopping
            // and closing a started port is allowed from the main thread.
            unsafe {
                sys::rte_eth_dev_stop(p);
                sys::rte_eth_dev_close(p);
            }
        }
        for p in pool_addrs {
            // SAFETY: the ports using the pool are closed and every mbuf has
            // been returned (workers dropped their batches and queues).
            unsafe { sys::rte_mempool_free(p as *mut sys::rte_mempool) };
        }
    });
    Ok((ios, teardown))
}

impl WorkerIo for DpdkIo {
    type Buf = Mbuf;

    fn attach(&mut self) -> Result<(), RuntimeError> {
        // SAFETY: called once on the worker's own thread after EAL init.
        let rc = unsafe { sys::rte_thread_register() };
        if rc != 0 {
            return Err(dpdk_err("rte_thread_register", rc));
        }
        self.registered = true;
        Ok(())
    }

    fn rx_ports(&self) -> &[u16] {
        &self.ports
    }

    fn pipeline_reads_packets(&mut self, reads: bool) {
        self.prefetch_now = self.prefetch && reads;
    }

    #[inline]
    fn rx_burst(&mut self, port: u16, batch: &mut Batch<Mbuf>) -> usize {
        let (queue, want_prefetch, want_flags) =
            (self.queue, self.prefetch_now, self.hardware_hash);
        // With the offload flags read, the segment count in the same line
        // costs nothing more.
        let want_segs =
            want_flags || self.check_segments.get(usize::from(port)).copied().unwrap_or(true);
        // OR of every received mbuf's `ol_flags` (read only when a port has
        // RSS), and of their segment counts (on ports that may chain): both
        // rarely matter, so one pass checks them for the whole burst and the
        // per-packet work below is skipped.
        let (mut flags, mut freed) = (0u64, 0u64);
        let new = batch.extend_with(port, |bufs| {
            let start = bufs.len();
            let room = BURST.saturating_sub(start);
            if room == 0 {
                return;
            }
            bufs.reserve(room); // a no-op: a batch keeps BURST slots
            let dst = bufs.spare_capacity_mut().as_mut_ptr().cast::<*mut sys::rte_mbuf>();
            // SAFETY: started port, this worker's own queue; `dst` has room
            // for `room` pointers (`Mbuf` is a transparent mbuf pointer, so
            // the vector's spare slots are an array of `rte_mbuf *`).
            let n = usize::from(unsafe { sys::shim_rx_burst(port, queue, dst, room as u16) });
            let n = n.min(room);
            let mut segs = 1;
            if want_segs {
                // The driver has just written these headers. Loaded at once,
                // they cost about 8 ns per packet (`port-forward` on
                // `net_null`: 63–67 % of testpmd io; 81–82 % with this fence;
                // 88–89 % reading no header), as memory-ordering flushes
                // would. One fence per burst lets the driver's stores
                // resolve first.
                #[cfg(target_arch = "x86_64")]
                // SAFETY: lfence is part of SSE2, which every x86_64 CPU has.
                unsafe {
                    std::arch::x86_64::_mm_lfence()
                };
                // SAFETY: the driver wrote n valid, non-NULL mbuf pointers.
                (flags, segs) = unsafe {
                    match (want_flags, want_prefetch) {
                        (false, true) => scan_rx::<true, false, true>(dst, n),
                        (true, true) => scan_rx::<true, true, true>(dst, n),
                        (false, false) => scan_rx::<true, false, false>(dst, n),
                        (true, false) => scan_rx::<true, true, false>(dst, n),
                    }
                };
            } else if want_prefetch {
                // SAFETY: as above.
                unsafe { scan_rx::<false, false, true>(dst, n) };
            }
            let mut keep = n;
            // Every count is at least 1, so the OR exceeds 1 only if one does.
            if segs > 1 {
                // Multi-segment frames are unsupported: free them here and
                // close the gaps (rare; jumbo frames on a scatter-RX port).
                keep = 0;
                for k in 0..n {
                    // SAFETY: as above; each pointer is either moved down
                    // to slot `keep <= k` or freed, never both.
                    unsafe {
                        let raw = *dst.add(k);
                        if (*raw).nb_segs == 1 {
                            *dst.add(keep) = raw;
                            keep += 1;
                        } else {
                            sys::shim_pktmbuf_free(raw);
                            freed += 1;
                        }
                    }
                }
            }
            // SAFETY: slots [start, start + keep) now hold owned, valid,
            // single-segment mbufs, i.e. initialised `Mbuf`s; keep <= room.
            unsafe { bufs.set_len(start + keep) };
        });
        if freed > 0 {
            if let Some(s) = self.ports.iter().position(|&p| p == port) {
                self.too_long[s] += freed;
            }
        }
        if flags & RX_RSS_HASH != 0 || self.software_hash {
            for i in new.clone() {
                let buf = batch.buf(i);
                let m = buf.m();
                let hash = if m.ol_flags & RX_RSS_HASH != 0 {
                    // SAFETY: the flag says the driver filled `hash.rss`.
                    unsafe { m.__bindgen_anon_2.hash.rss }
                } else if self.software_hash {
                    hash_by(buf.data(), self.rss)
                } else {
                    0
                };
                batch.set_hash(i, hash);
            }
        }
        new.len()
    }

    #[inline]
    fn tx_burst(&mut self, port: u16, pkts: &mut Vec<Mbuf>, _now: Now) -> usize {
        let n = pkts.len().min(usize::from(u16::MAX));
        // SAFETY: `Mbuf` is a transparent mbuf pointer, so the vector is an
        // array of n owned mbufs; the driver takes ownership of the first
        // `sent`, which are then forgotten (not dropped) below.
        let sent = usize::from(unsafe {
            sys::shim_tx_burst(port, self.queue, pkts.as_mut_ptr().cast(), n as u16)
        });
        let rest = pkts.len() - sent;
        // SAFETY: elements [sent, len) are still owned and initialised; they
        // move to the front (overlapping copy) and the length shrinks, so the
        // transmitted ones are never dropped and the rest stay for the caller.
        // Usually everything was sent: then there is nothing to copy (and
        // `copy` of nothing is still a `memmove` call).
        unsafe {
            if rest > 0 {
                let p = pkts.as_mut_ptr();
                std::ptr::copy(p.add(sent), p, rest);
            }
            pkts.set_len(rest);
        }
        sent
    }

    fn free(&mut self, buf: Mbuf) {
        drop(buf);
    }

    #[inline]
    fn bytes(bufs: &[Mbuf]) -> u64 {
        mbuf_bytes(bufs)
    }

    #[inline]
    fn free_bulk(&mut self, bufs: &mut Vec<Mbuf>) {
        let n = bufs.len();
        if n == 0 {
            return;
        }
        // SAFETY: `Mbuf` is a transparent mbuf pointer, so the vector is an
        // array of n owned mbufs; DPDK frees them all (segments, refcounts),
        // and the length is reset without running `Mbuf::drop` on them.
        unsafe {
            sys::rte_pktmbuf_free_bulk(bufs.as_mut_ptr().cast(), n as u32);
            bufs.set_len(0);
        }
    }

    fn io_counters(&mut self, local: &mut LocalCounters) {
        for (s, n) in self.too_long.iter_mut().enumerate() {
            if *n > 0 {
                if let Some(pc) = local.ports.get_mut(s) {
                    pc.rx += *n;
                    pc.drops.add(pipeline::DropReason::TooLong, *n);
                }
                *n = 0;
            }
        }
    }

    #[inline]
    fn now(&mut self) -> Now {
        let now = self.clock.now();
        match self.pinned_unix_ns {
            Some(unix_ns) => Now { mono_ns: now.mono_ns, unix_ns },
            None => now,
        }
    }
}

impl Drop for DpdkIo {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: dropped on the worker thread that registered itself.
            unsafe { sys::rte_thread_unregister() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Device information naming `driver`, with scatter RX advertised or not.
    fn info(driver: &'static CStr, scatter: bool) -> sys::rte_eth_dev_info {
        let mut info = sys::rte_eth_dev_info { driver_name: driver.as_ptr(), ..Default::default() };
        if scatter {
            // SAFETY: a pure function returning a constant.
            info.rx_offload_capa = unsafe { sys::shim_rx_offload_scatter() };
        }
        info
    }

    #[test]
    fn segment_counts_are_skipped_only_where_frames_cannot_chain() {
        use SegmentCheck::{Always, Auto};
        // Known single-segment software devices: skipped.
        assert!(!reads_segments(Auto, &info(c"net_null", false)));
        assert!(!reads_segments(Auto, &info(c"net_af_packet", false)));
        // ... unless the operator asks, or the device says it can scatter.
        assert!(reads_segments(Always, &info(c"net_null", false)));
        assert!(reads_segments(Auto, &info(c"net_null", true)));
        // net_pcap chains oversize frames while advertising nothing; an
        // unknown or unnamed driver is checked.
        assert!(reads_segments(Auto, &info(c"net_pcap", false)));
        assert!(reads_segments(Auto, &info(c"net_ixgbe", true)));
        assert!(reads_segments(Auto, &info(c"mystery", false)));
        let unnamed = sys::rte_eth_dev_info { driver_name: std::ptr::null(), ..Default::default() };
        assert!(reads_segments(Auto, &unnamed));
    }
}
