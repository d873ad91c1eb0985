//! Finds the system DPDK with pkg-config, compiles the C shim and generates bindings.
//!
//! Without libdpdk the crate builds empty (cfg `dpdk_missing`) so that
//! `cargo build --workspace` works on machines without DPDK; the runtime's
//! `dpdk` feature then refuses to compile with a clear message.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpdk_missing)");
    println!("cargo::rerun-if-changed=src/shim.c");
    println!("cargo::rerun-if-changed=src/shim.h");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new().atleast_version("21.11").probe("libdpdk") {
        Ok(lib) => lib,
        Err(e) => {
            println!("cargo::warning=libdpdk not found by pkg-config ({e}); dpdk-sys builds empty");
            println!("cargo::rustc-cfg=dpdk_missing");
            return;
        }
    };

    // pkg-config's cflags also carry `-include rte_config.h` and `-march=...`,
    // which both the shim and the bindings need to see the same struct layouts.
    let cflags = pkg_config::get_variable("libdpdk", "cflags").unwrap_or_default();
    let cflags_out = std::process::Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or(cflags);
    let args: Vec<String> = cflags_out.split_whitespace().map(str::to_owned).collect();

    let mut build = cc::Build::new();
    build.file("src/shim.c").opt_level(3).warnings(false);
    // The shim is linked into the executable, and DPDK's per-lcore TLS
    // (`rte_lcore_id()`, used by every mempool put/get) lives in librte_eal,
    // which is loaded at startup: initial-exec avoids a `__tls_get_addr` call
    // per access that the default -fPIC model would make.
    build.flag_if_supported("-ftls-model=initial-exec");
    for p in &lib.include_paths {
        build.include(p);
    }
    for a in &args {
        if !a.starts_with("-I") {
            build.flag(a);
        }
    }
    build.compile("ddos_dpdk_shim");

    let bindings = bindgen::Builder::default()
        .header("src/shim.h")
        .clang_args(&args)
        .allowlist_function("shim_.*")
        .allowlist_function("rte_eal_(init|cleanup|process_type)")
        .allowlist_function("rte_eth_(dev_count_avail|dev_configure|rx_queue_setup|tx_queue_setup|dev_start|dev_stop|dev_close|dev_info_get|stats_get|promiscuous_enable|dev_socket_id|dev_get_port_by_name|dev_get_name_by_port|stats_reset)")
        .allowlist_function("rte_pktmbuf_pool_create|rte_pktmbuf_free_bulk|rte_mempool_free|rte_mempool_avail_count|rte_mempool_in_use_count")
        .allowlist_function("rte_socket_id|rte_get_tsc_hz|rte_thread_register|rte_thread_unregister|rte_strerror|rte_lcore_count")
        .allowlist_type("rte_eth_conf|rte_eth_dev_info|rte_eth_stats|rte_mbuf|rte_mempool|rte_eth_rxconf|rte_eth_txconf")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on the DPDK headers");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    bindings.write_to_file(out).expect("writing bindings");
}
