//! DPDK `net_af_packet` on a veth pair (cargo feature `dpdk`): the test puts
//! one end in a network namespace it creates, sends frames into it from the
//! namespace, and checks that the router (on the other end, hairpin
//! forwarding with `ipv4-forward`) sends them back with TTL decremented.
//! Skips with a message when not root or without `ip`/netns support.
#![cfg(feature = "dpdk")]

use std::path::Path;
use std::process::Command;

use runtime::config;
use runtime::templates::{group_of, tag_for, TemplateCtx, Templates};

fn sh(args: &[&str]) -> bool {
    Command::new(args[0]).args(&args[1..]).output().map(|o| o.status.success()).unwrap_or(false)
}

struct Netns {
    ns: String,
    veth: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = sh(&["ip", "link", "del", &self.veth]);
        let _ = sh(&["ip", "netns", "del", &self.ns]);
    }
}

const PEER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
frames = [bytes.fromhex(h) for h in sys.argv[2:]]
time.sleep(0.3)
for f in frames:
    s.send(f)
end = time.time() + 2.0
while time.time() < end:
    try:
        d = s.recv(4096)
    except socket.timeout:
        continue
    if len(d) >= 4 and d[-4:-2] == b"\xd5\x5d" and d[22] < 64:
        print(d.hex())
"#;

#[test]
fn af_packet_veth_hairpin() {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.ok().as_deref() != Some("0") {
        eprintln!("SKIPPED af_packet test: needs root to create a netns and veth pair");
        return;
    }
    let id = std::process::id() % 100_000;
    let env = Netns { ns: format!("rtns{id}"), veth: format!("rtv{id}a") };
    let peer = format!("rtv{id}b");
    if !sh(&["ip", "netns", "add", &env.ns])
        || !sh(&["ip", "link", "add", &env.veth, "type", "veth", "peer", "name", &peer])
        || !sh(&["ip", "link", "set", &peer, "netns", &env.ns])
        || !sh(&["ip", "link", "set", &env.veth, "up"])
        || !sh(&["ip", "netns", "exec", &env.ns, "ip", "link", "set", &peer, "up"])
    {
        eprintln!("SKIPPED af_packet test: cannot create netns/veth (no `ip` or no netns support)");
        return;
    }
    let t: toml::Table = toml::from_str("dst = \"10.2.0.9\"\nsize = 90").unwrap();
    let frames =
        Templates::with::<()>().build("ipv4-udp", &t, &TemplateCtx::new(10, tag_for(1))).unwrap();
    let text = format!(
        "[io]\nbackend = \"dpdk\"\n[io.dpdk]\neal_args = [\"--no-huge\", \"-m\", \"256\", \"--no-pci\", \"--vdev\", \"net_af_packet0,iface={}\"]\n\
         [workers]\npin = false\n[[ports]]\nid = 0\n[[pipeline]]\nkind = \"ipv4-forward\"\n\
         routes = [{{ prefix = \"10.2.0.0/16\", port = 0 }}]\n[run]\nduration_ms = 3000\n",
        env.veth
    );
    let cfg = config::parse(&text, Path::new("af_packet.toml")).unwrap();
    let router = runtime::start::<()>(cfg).unwrap();
    let mut args = vec![
        "netns".to_string(),
        "exec".into(),
        env.ns.clone(),
        "python3".into(),
        "-c".into(),
        PEER.into(),
        peer.clone(),
    ];
    args.extend(frames.iter().map(|f| f.iter().map(|b| format!("{b:02x}")).collect::<String>()));
    let out = Command::new("ip").args(&args).output().expect("python3 in netns");
    let s = router.wait().unwrap();
    let got: Vec<Vec<u8>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            (0..l.len()).step_by(2).map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap()).collect()
        })
        .collect();
    assert!(
        s.rx() >= frames.len() as u64,
        "router received {} (stderr: {})",
        s.rx(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got.len(), frames.len(), "frames back: {}", got.len());
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(group_of(g), Some(1));
        assert_eq!(g[22], f[22] - 1, "TTL decremented");
        assert_eq!(&g[26..], &f[26..], "addresses and payload unchanged");
        assert_eq!(runtime::templates::checksum(0, &g[14..34]), 0);
    }
}
