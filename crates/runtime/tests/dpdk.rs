//! DPDK end to end (cargo feature `dpdk`): `net_null` smoke and a `net_pcap`
//! replay checked packet by packet. The EAL can be initialised only once per
//! process, so both scenarios share one EAL (with both virtual devices) and
//! run in one test, on disjoint ports: net_null0 is port 0, net_pcap0 port 1.
#![cfg(feature = "dpdk")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use runtime::config;
use runtime::templates::{tag_for, TemplateCtx, Templates};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runtime-dpdk-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (i, dst) in ["10.2.0.1", "10.9.0.1", "10.2.0.2"].iter().enumerate() {
        let t: toml::Table =
            toml::from_str(&format!("dst = \"{dst}\"\nsport = {}", 100 + i)).unwrap();
        v.extend(
            Templates::with::<()>()
                .build("ipv4-udp", &t, &TemplateCtx::new(4, tag_for(0)))
                .unwrap(),
        );
    }
    // A malformed frame in the middle: dropped and counted, the worker goes on.
    let mut bad = v[0].clone();
    bad[24] ^= 0xff;
    v.insert(5, bad);
    // One more routable frame, so that the routed ones are not a multiple
    // of four (the TX byte count's tail).
    v.push(v[1].clone());
    v
}

#[test]
fn null_smoke_and_pcap_replay() {
    let input = tmp("in.pcap");
    let output = tmp("out.pcap");
    let sent = frames();
    // A frame longer than an mbuf's data room, which net_pcap hands over as a
    // chain of segments: freed on RX and counted as too long.
    let mut jumbo = sent[0].clone();
    jumbo.resize(4000, 0);
    let mut w = PcapWriter::new(std::fs::File::create(&input).unwrap()).unwrap();
    for (i, f) in sent.iter().enumerate() {
        if i == 2 {
            w.write_packet(&PcapPacket::new(Duration::from_secs(1), 4000, &jumbo)).unwrap();
        }
        w.write_packet(&PcapPacket::new(Duration::from_secs(1), f.len() as u32, f)).unwrap();
    }
    drop(w);
    let eal = format!(
        r#"eal_args = ["--no-huge", "-m", "256", "--no-pci", "--vdev", "net_null0", "--vdev", "net_pcap0,rx_pcap={},tx_pcap={}"]"#,
        input.display(),
        output.display()
    );

    // 1. net_null: port-forward at full speed for 300 ms of wall time.
    let text = format!(
        "[io]\nbackend = \"dpdk\"\n[io.dpdk]\n{eal}\n[workers]\npin = false\n[[ports]]\nid = 0\n\
         [[pipeline]]\nkind = \"port-forward\"\nport = 0\n[run]\nduration_ms = 300\n"
    );
    let cfg = config::parse(&text, Path::new("null.toml")).unwrap();
    let s = runtime::start::<()>(cfg).unwrap().wait().unwrap();
    assert!(s.rx() > 10_000, "net_null delivered only {} packets", s.rx());
    assert!(s.tx() > 0);
    // net_null's frames are 64 bytes long.
    assert_eq!(s.ports[0].counters.tx_bytes, 64 * s.ports[0].counters.tx);

    // 2. net_pcap: ipv4-forward; the output capture must be exactly the
    //    routable inputs with TTL decremented and checksum updated.
    let text = format!(
        "[io]\nbackend = \"dpdk\"\n[io.dpdk]\n{eal}\n[workers]\npin = false\n[[ports]]\nid = 1\n\
         [[pipeline]]\nkind = \"ipv4-forward\"\nroutes = [{{ prefix = \"10.2.0.0/16\", port = 1 }}]\n\
         [run]\nduration_ms = 500\n"
    );
    let cfg = config::parse(&text, Path::new("pcap.toml")).unwrap();
    let s = runtime::start::<()>(cfg).unwrap().wait().unwrap();
    assert_eq!(s.rx(), sent.len() as u64 + 1);
    assert_eq!(s.drops().total(), 6, "4 unroutable + 1 bad checksum + 1 too long");
    assert_eq!(s.drops().get(pipeline::DropReason::TooLong), 1);
    let mut want = Vec::new();
    for (i, f) in sent.iter().enumerate() {
        if i == 5 || f[30..32] != [10, 2] {
            continue;
        }
        let mut o = f.clone();
        o[22] -= 1;
        let sum = u32::from(u16::from_be_bytes([o[24], o[25]])) + 0x0100;
        let sum = (sum & 0xffff) + (sum >> 16);
        o[24..26].copy_from_slice(&(sum as u16).to_be_bytes());
        want.push(o);
    }
    // net_pcap flushes its output when the port is closed (router teardown).
    let mut r = PcapReader::new(std::fs::File::open(&output).unwrap()).unwrap();
    let mut got = Vec::new();
    while let Some(p) = r.next_packet() {
        got.push(p.unwrap().data.into_owned());
    }
    assert_eq!(got.len(), want.len());
    let bytes: usize = want.iter().map(Vec::len).sum();
    assert_eq!(s.ports[0].counters.tx_bytes, bytes as u64);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "packet {i}");
    }
}
