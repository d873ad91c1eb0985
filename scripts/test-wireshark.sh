#!/usr/bin/env bash
# Tests the Wireshark plugin tools/wireshark/ddos_dataplanes.lua with tshark.
#
# 1. Installs tshark and python3 if missing (as root; otherwise the test is skipped).
# 2. Writes a capture of every built-in trafgen profile (`trafgen list`) and
#    decodes it with the plugin. Each packet carries its traffic group's tag in
#    its last four bytes, so it is checked against the values trafgen wrote
#    for its group: those of bins/trafgen/profiles/<p>.toml and the template
#    defaults, the flow (the group's packet count modulo its flows), and the
#    build time (the capture time, minus a replay's delay, rounded down to the
#    profile's refresh_ms). MACs, HVFs and puzzle nonces, which the test
#    cannot recompute, are compared with the frame bytes at their offsets.
#    No Lua error and no malformed or truncated expert info is allowed.
# 3. Decodes a crafted capture: the FAIR sheet's worked examples (fair.md
#    §2.8), SCION paths and SIBRA reservations trafgen does not send, one
#    packet per rejection of the packet crate's parsers (each must raise the
#    plugin's malformed expert info), every cut of one packet of each kind
#    (by the snap length: `truncated`; by the IP/UDP length: `malformed`),
#    and random mutations and garbage (no Lua error).
#
# Environment: WIRESHARK_TEST_COUNT (packets per profile, default 2000),
# WIRESHARK_TEST_KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."

LUA=tools/wireshark/ddos_dataplanes.lua
COUNT=${WIRESHARK_TEST_COUNT:-2000}
say() { echo "test-wireshark: $*"; }
die() { echo "test-wireshark: FAIL: $*" >&2; exit 1; }
[ -f "$LUA" ] || die "$LUA not found"

missing=()
command -v tshark >/dev/null || missing+=(tshark)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "SKIP: ${missing[*]} not installed and installing needs root (sudo apt-get install ${missing[*]})"
    exit 0
  fi
  say "installing ${missing[*]}"
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
tshark -v 2>/dev/null | grep -q "with Lua" || die "this tshark has no Lua support"
python3 -c 'import tomllib' 2>/dev/null || die "python3 >= 3.11 is needed (tomllib)"

cargo build -q --locked -p trafgen
TRAFGEN="${CARGO_TARGET_DIR:-target}/debug/trafgen"
[ -x "$TRAFGEN" ] || die "$TRAFGEN not built"

work=$(mktemp -d "${TMPDIR:-/tmp}/test-wireshark.XXXXXX")
if [ "${WIRESHARK_TEST_KEEP:-0}" = 1 ]; then say "work directory: $work"; else trap 'rm -rf "$work"' EXIT; fi

python3 -u - "$LUA" "$TRAFGEN" "$COUNT" "$work" <<'PY'
import ipaddress
import json
import os
import random
import struct
import subprocess
import sys
import time
import tomllib

LUA, TRAFGEN, COUNT, WORK = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
START_NS = 1_767_225_600 * 10**9  # trafgen's default start, covered by the profiles' keys
T0 = time.monotonic()
errors = []


def fail(where, msg):
    errors.append(f"{where}: {msg}")


def finish(what):
    if errors:
        print(f"test-wireshark: FAIL ({what}): {len(errors)} problem(s)", file=sys.stderr)
        for e in errors[:25]:
            print("  " + e, file=sys.stderr)
        sys.exit(1)


# ---- tshark -------------------------------------------------------------------
# A clean home: no personal preferences or installed copy of the plugin.
ENV = dict(os.environ, HOME=f"{WORK}/home", XDG_CONFIG_HOME=f"{WORK}/home/.config")
os.makedirs(f"{WORK}/home", exist_ok=True)


def tshark(*args):
    r = subprocess.run(["tshark", *args, "-n", "-X", f"lua_script:{LUA}"],
                       env=ENV, capture_output=True, text=True)
    err = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("Running as user"))
    if r.returncode != 0 or err:
        sys.exit(f"test-wireshark: FAIL: tshark {' '.join(args[:2])}: {err or r.returncode}")
    return r.stdout


protos = {l.split("\t")[2] for l in tshark("-G", "protocols").splitlines() if l.count("\t") >= 2}
for p in ("scion", "flowpolice", "fair"):
    if p not in protos:
        sys.exit(f"test-wireshark: FAIL: protocol {p} not registered")

OURS = [f"{p}.{k}" for p in ("scion", "flowpolice", "fair") for k in ("malformed", "truncated")]
BUGS = ["_ws.lua.error", "scion.dissector_bug", "flowpolice.dissector_bug", "fair.dissector_bug"]
FIELDS = """
frame.protocols ip.src ip.dst ip.proto udp.srcport udp.dstport udp.length
scion.version scion.next_hdr scion.hdr_len scion.payload_len scion.path_type scion.flow_id
scion.src_ia scion.dst_ia scion.src_host.ipv4 scion.dst_host.ipv4 scion.src_host.ipv6 scion.dst_host.svc
scion.path.num_inf scion.path.num_hf scion.path.curr_inf scion.path.curr_hf
scion.path.info.cons_dir scion.path.info.peer scion.path.info.timestamp
scion.path.hf.exp_time scion.path.hf.cons_ingress scion.path.hf.cons_egress scion.path.hf.mac
scion.sibra.setup scion.sibra.request scion.sibra.accepted scion.sibra.error scion.sibra.steady
scion.sibra.forward scion.sibra.version scion.sibra.curr_hop scion.sibra.p0 scion.sibra.p1 scion.sibra.p2
scion.sibra.num_blocks scion.sibra.total_hops scion.sibra.ephemeral_id scion.sibra.steady_id
scion.sibra.resv_info.exp_tick scion.sibra.resv_info.bw_fwd scion.sibra.resv_info.bw_rev
scion.sibra.resv_info.index scion.sibra.resv_info.fwd scion.sibra.resv_info.fail_hop
scion.sibra.sof.ingress scion.sibra.sof.egress scion.sibra.sof.mac
scion.sibra.offer.max_fwd scion.sibra.offer.max_rev
scion.epic.ts_rel scion.epic.core_id scion.epic.counter scion.epic.q scion.epic.num_hvf scion.epic.hvf
scion.udp.srcport scion.udp.dstport scion.udp.length scion.scmp.type
flowpolice.next_header flowpolice.type flowpolice.hdr_len flowpolice.p_id flowpolice.flow_id
flowpolice.ts flowpolice.mac flowpolice.puzzle.epoch flowpolice.puzzle.level flowpolice.puzzle.nonce
fair.carrier fair.next_header fair.hdr_len fair.length fair.timestamp fair.seqno fair.icv
fair.sb fair.ptr fair.mark_count fair.mark
scion.unsupported scion.path.nonstandard scion.udp.bad_length scion.epic.num_hvf_inferred
_ws.expert.message _ws.expert.group
""".split() + OURS + BUGS


def decode(pcap):
    args = ["-r", pcap, "-T", "json"]
    for f in FIELDS:
        args += ["-e", f]
    return [p["_source"]["layers"] for p in json.loads(tshark(*args))]


# ---- values -------------------------------------------------------------------
def num(v):
    if v.lower().startswith("0x"):
        return int(v, 16)
    if v.lstrip("-").isdigit():
        return int(v)
    return {"True": 1, "False": 0}.get(v)


def same(got, want):
    if isinstance(want, int):
        return num(got) == want
    return got == want or got.replace(":", "") == want  # byte strings may come with colons


def eq(where, r, field, want):
    got = r.get(field, [])
    want = want if isinstance(want, list) else [want]
    if len(got) != len(want) or not all(same(g, w) for g, w in zip(got, want)):
        fail(where, f"{field} is {got}, expected {want}")


def count(where, r, field, n):
    if len(r.get(field, [])) != n:
        fail(where, f"{len(r.get(field, []))} x {field}, expected {n}")


def msgs(r):
    return " | ".join(r.get("_ws.expert.message", []))


def no_bug(where, r):
    for f in BUGS:
        if f in r:
            fail(where, f"{f}: {msgs(r)}")


def ours_clean(where, r):
    no_bug(where, r)
    for f in OURS:
        if f in r:
            fail(where, f"unexpected {f}: {msgs(r)}")


def clean(where, r, allow=()):
    """No Lua error and no malformed-group expert info from any dissector."""
    ours_clean(where, r)
    for g, m in zip(r.get("_ws.expert.group", []), r.get("_ws.expert.message", [])):
        if num(g) == 0x07000000 and m not in allow:
            fail(where, f"malformed expert info: {m}")


def as_number(ia):
    asn = ia.split("-", 1)[1]
    if ":" not in asn:
        return int(asn)
    a, b, c = (int(x, 16) for x in asn.split(":"))
    return a << 32 | b << 16 | c


def ip_plus(a, n):
    return str(ipaddress.IPv4Address((int(ipaddress.IPv4Address(a)) + n) % 2**32))


# ---- pcap ---------------------------------------------------------------------
def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    scale = 1 if struct.unpack(e + "I", data[:4])[0] == 0xA1B23C4D else 1000
    out, off = [], 24
    while off + 16 <= len(data):
        s, frac, incl, _ = struct.unpack(e + "IIII", data[off:off + 16])
        out.append((s * 10**9 + frac * scale, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return out


def write_pcap(path, recs):  # [(bytes, orig_len or None)]
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, (b, orig) in enumerate(recs):
            f.write(struct.pack("<IIII", 1767225600, i, len(b), orig or len(b)) + b)


# ---- trafgen profiles -----------------------------------------------------------
def host_len(code):
    return (code % 4 + 1) * 4


def check_scion(where, r, f, t, p, i, built):
    """scion, epic-z and sibra templates (crates/adapters/src/{scion,zlane,sibra}/templates.rs)."""
    ing, egr = p.get("ingress", 2), p.get("egress", 3)
    size = p.get("size", 200)
    eq(where, r, "ip.src", p.get("underlay_src", "192.0.2.1"))
    eq(where, r, "ip.dst", p.get("underlay_dst", "192.0.2.2"))
    eq(where, r, "udp.srcport", 30042 + i % 1024)
    eq(where, r, "udp.dstport", 30041)
    eq(where, r, "scion.version", 0)
    eq(where, r, "scion.next_hdr", 17)
    eq(where, r, "scion.path_type", {"scion": 1, "sibra": 200, "epic-z": 201}[t])
    # Common and address header (IPv4 hosts: 36 bytes), then the path: a
    # SCION path of one segment with 3 hops (48), plus the EPIC-Z block (24),
    # or a SIBRA path with an ephemeral ID and one block of 3 hops (56).
    po = 42 + 36
    hl = 36 + {"scion": 48, "epic-z": 48 + 24, "sibra": 56}[t]
    eq(where, r, "scion.hdr_len", hl // 4)
    eq(where, r, "scion.payload_len", size - 42 - hl)
    if len(f) != size:
        fail(where, f"frame of {len(f)} bytes, the profile says {size}")
    eq(where, r, "scion.flow_id", 1 if t == "sibra" else i)
    eq(where, r, "scion.src_ia", p["src_ia"])
    eq(where, r, "scion.dst_ia", p.get("dst_ia", "1-ff00:0:130"))
    eq(where, r, "scion.src_host.ipv4", ip_plus(p.get("src_host", "10.0.0.1"), i))
    eq(where, r, "scion.dst_host.ipv4", "10.9.0.1")
    eq(where, r, "scion.udp.length", 0)  # the payload is zeros and the tag
    if t == "sibra":
        for flag, v in [("setup", 0), ("request", 0), ("accepted", 0), ("error", 0), ("steady", 0),
                        ("forward", 1), ("version", 0), ("curr_hop", 1), ("p0", 3), ("p1", 0), ("p2", 0),
                        ("num_blocks", 1), ("total_hops", 3)]:
            eq(where, r, "scion.sibra." + flag, v)
        eq(where, r, "scion.sibra.ephemeral_id", "%012x%012x%08x" % (as_number(p["src_ia"]), 0, i))
        count(where, r, "scion.sibra.steady_id", 0)
        ri = "scion.sibra.resv_info."
        eq(where, r, ri + "exp_tick", built // 4 + 4)  # sibra EPHEMERAL_HORIZON
        eq(where, r, ri + "bw_fwd", p.get("bw_class", 24))
        eq(where, r, ri + "bw_rev", p.get("bw_class", 24))
        eq(where, r, ri + "index", 0)
        eq(where, r, ri + "fwd", 0)
        eq(where, r, ri + "fail_hop", 0)
        eq(where, r, "scion.sibra.sof.ingress", [0, ing, 4])
        eq(where, r, "scion.sibra.sof.egress", [1, egr, 0])
        sofs = po + 8 + 16 + 8
        eq(where, r, "scion.sibra.sof.mac", [f[sofs + 8 * j + 4:sofs + 8 * j + 8].hex() for j in range(3)])
        return
    hops = po + 4 + 8
    if t == "epic-z":
        eq(where, r, "scion.epic.ts_rel", 0)
        eq(where, r, "scion.epic.core_id", 0)
        eq(where, r, "scion.epic.counter", i)
        eq(where, r, "scion.epic.q", 1 if p.get("via_gateway") else 0)
        eq(where, r, "scion.epic.num_hvf", 3)
        eq(where, r, "scion.epic.hvf", [f[po + 12 + 4 * j:po + 16 + 4 * j].hex() for j in range(3)])
        hops += 12 + 12
    else:
        count(where, r, "scion.epic.num_hvf", 0)
    for fld, v in [("num_inf", 1), ("num_hf", 3), ("curr_inf", 0), ("curr_hf", 1), ("info.cons_dir", 1),
                   ("info.peer", 0), ("info.timestamp", built), ("hf.exp_time", [255] * 3),
                   ("hf.cons_ingress", [0, ing, 4]), ("hf.cons_egress", [1, egr, 0])]:
        eq(where, r, "scion.path." + fld, v)
    eq(where, r, "scion.path.hf.mac", [f[hops + 12 * j + 6:hops + 12 * j + 12].hex() for j in range(3)])


def check_flowpolice(where, r, f, p, i, built):
    """crates/adapters/src/flowpolice/templates.rs"""
    dst = ip_plus(p.get("dst", "10.2.0.1"), i)
    eq(where, r, "ip.src", ip_plus(p.get("src", "10.1.0.1"), i))
    eq(where, r, "ip.dst", dst)
    eq(where, r, "ip.proto", 254)
    eq(where, r, "flowpolice.next_header", 17)
    eq(where, r, "udp.length", 0)  # trafgen sends zeros after the shim
    if p.get("kind", "request") == "request":
        for fld, v in [("type", 0), ("hdr_len", 44), ("p_id", 0), ("flow_id", 0), ("ts", 0), ("mac", "00" * 8),
                       ("puzzle.level", p.get("level", 4)),
                       ("puzzle.epoch", built * 1000 // p.get("epoch_ms", 60000)),
                       ("puzzle.nonce", int.from_bytes(f[34 + 36:34 + 44], "big"))]:
            eq(where, r, "flowpolice." + fld, v)
    else:
        for fld, v in [("type", 2), ("hdr_len", 28), ("p_id", p.get("p_id", 1)),
                       ("flow_id", int(ipaddress.IPv4Address(dst))), ("ts", p.get("cap_ts_ms", 0)),
                       ("mac", f[34 + 18:34 + 26].hex())]:
            eq(where, r, "flowpolice." + fld, v)
        count(where, r, "flowpolice.puzzle.level", 0)


def check_fair(where, r, f, p, i, built):
    """crates/adapters/src/fair/templates.rs: IPv4/UDP stamped by the FAIR source."""
    m = p.get("m", 2)
    eq(where, r, "ip.src", ip_plus(p.get("src", "10.1.0.1"), i))
    eq(where, r, "ip.dst", p.get("dst", "10.2.0.1"))
    eq(where, r, "ip.proto", 253)
    for fld, v in [("carrier", 4), ("next_header", 17), ("hdr_len", 9 + m), ("length", 9 + m), ("mark_count", m),
                   ("mark", [0] * m), ("ptr", 0), ("sb", 0), ("timestamp", (built - p.get("age_s", 0)) % 65536),
                   ("seqno", i), ("icv", f[34 + 7])]:
        eq(where, r, "fair." + fld, v)
    eq(where, r, "udp.srcport", 1024 + i % 60000)
    eq(where, r, "udp.dstport", 5000)


GENERATOR_KEYS = {"name", "rate_pps", "flows", "template", "pattern", "on_ms", "off_ms", "regenerate_ms",
                  "replay_of", "replay_delay_ms", "max_packets", "start_ms", "expect", "port"}


def check_profile(name):
    pcap = f"{WORK}/{name}.pcap"
    # COUNT packets over two seconds of capture time: templates are rebuilt
    # (refresh_ms) and flows regenerated (regenerate_ms) along the way.
    r = subprocess.run([TRAFGEN, "gen", "--profile", name, "-o", pcap, "--count", str(COUNT),
                        "--rate", str(COUNT / 2), "--start-unix-ns", str(START_NS)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"test-wireshark: FAIL: trafgen gen --profile {name}: {r.stderr}")
    toml = f"bins/trafgen/profiles/{name}.toml"
    if not os.path.exists(toml):
        sys.exit(f"test-wireshark: FAIL: built-in profile {name} has no {toml} to take expectations from")
    prof = tomllib.load(open(toml, "rb"))
    groups = prof["traffic"]
    by_name = {g["name"]: g for g in groups}
    refresh_ns = round(prof.get("refresh_ms", 500) * 1e6)
    frames, rows = read_pcap(pcap), decode(pcap)
    if len(frames) != len(rows):
        fail(pcap, f"{len(frames)} frames, tshark decoded {len(rows)}")
    seen = [0] * len(groups)
    for n, ((t_ns, f), r) in enumerate(zip(frames, rows), 1):
        gi = int.from_bytes(f[-2:], "big")
        if f[-4:-2] != b"\xd5\x5d" or gi >= len(groups):
            fail(f"{name} frame {n}", "no traffic group tag")
            continue
        g = groups[gi]
        where = f"{name} frame {n} ({g['name']})"
        src = by_name[g["replay_of"]] if "replay_of" in g else g  # a replay re-sends its group's packets
        flows = src.get("flows", 1)
        i = seen[gi] % flows
        seen[gi] += 1
        built_ns = t_ns - round(g.get("replay_delay_ms", 0) * 1e6)
        built = built_ns // refresh_ns * refresh_ns // 10**9
        p = {k: v for k, v in src.items() if k not in GENERATOR_KEYS}
        if "regenerate_ms" in g:  # fresh source addresses every period
            shift = (t_ns - START_NS) // round(g["regenerate_ms"] * 1e6) * flows
            p.update({k: ip_plus(p[k], shift) for k in ("src", "src_host") if k in p})
        t = src.get("template")
        layers = r.get("frame.protocols", [""])[0].split(":")
        if t in ("scion", "epic-z", "sibra"):
            if "scion" not in layers:
                fail(where, f"not decoded as SCION ({layers})")
            clean(where, r)
            check_scion(where, r, f, t, p, i, built)
        elif t == "flowpolice":
            if "flowpolice" not in layers:
                fail(where, f"not decoded as FlowPolice ({layers})")
            clean(where, r, allow=("Bad length value 0 < 8",))  # Wireshark's UDP on trafgen's zeros
            check_flowpolice(where, r, f, p, i, built)
        elif t == "fair":
            if "fair" not in layers:
                fail(where, f"not decoded as FAIR ({layers})")
            clean(where, r)
            check_fair(where, r, f, p, i, built)
        elif t == "ipv4-udp":
            if {"scion", "flowpolice", "fair"} & set(layers):
                fail(where, f"plain UDP decoded as {layers}")
            clean(where, r)
            eq(where, r, "ip.proto", 17)
        else:
            fail(where, f"no expectations for template {t!r} (add them to scripts/test-wireshark.sh)")
    for g, k in zip(groups, seen):
        if not k:
            fail(name, f"group {g['name']} sent no packet (raise WIRESHARK_TEST_COUNT)")
    finish(f"profile {name}")
    print(f"  {name:<11} {len(rows):5d} packets: " + ", ".join(f"{g['name']} {k}" for g, k in zip(groups, seen)))
    return frames, groups


# ---- crafted packets --------------------------------------------------------------
def csum(b, s=0):
    b += b"\0" * (len(b) % 2)
    s += sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


ETH = bytes.fromhex("020000000002020000000001")
V4S, V4D = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
V6S, V6D = bytes.fromhex("20010db8" + "0" * 23 + "1"), bytes.fromhex("20010db9" + "0" * 23 + "2")


def ipv4(proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0, V4S, V4D)
    return ETH + b"\x08\x00" + h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def ipv6(nh, payload):
    return ETH + b"\x86\xdd" + struct.pack("!IHBB", 0x60000000, len(payload), nh, 64) + V6S + V6D + payload


def udp(sp, dp, payload, v6=False):
    n = 8 + len(payload)
    pseudo = sum(struct.unpack("!16H" if v6 else "!4H", (V6S + V6D) if v6 else (V4S + V4D))) + 17 + n
    c = csum(struct.pack("!HHHH", sp, dp, n, 0) + payload, pseudo) or 0xFFFF
    return struct.pack("!HHHH", sp, dp, n, c) + payload


def udp4(sp, dp, payload):
    return ipv4(17, udp(sp, dp, payload))


def cut_ip_length(f, cut):
    """The first `cut` bytes of an Ethernet/IPv4 frame with its IP (and UDP) lengths saying so."""
    c = bytearray(f[:cut])
    c[16:18] = struct.pack("!H", cut - 14)
    c[24:26] = b"\0\0"
    c[24:26] = struct.pack("!H", csum(bytes(c[14:34])))
    if c[23] == 17 and cut >= 42:
        c[38:42] = struct.pack("!HH", cut - 34, 0)
    return bytes(c)


IA_DST, IA_SRC = bytes.fromhex("0001ff0000000120"), bytes.fromhex("0001ff0000000110")
V4H = bytes([10, 0, 0, 7])


def scion(ptype, path, payload, next_hdr=17, dcode=0, scode=0, dst=V4H, src=V4H):
    hl = 28 + len(dst) + len(src) + len(path)
    assert hl % 4 == 0
    common = struct.pack("!IBBHBBH", 0, next_hdr, hl // 4, len(payload), ptype, dcode << 4 | scode, 0)
    return common + IA_DST + IA_SRC + dst + src + path + payload


def scion_udp(data):
    return struct.pack("!HHHH", 40001, 40002, 8 + len(data), 0) + data


def info(flags=1, seg_id=0x1234, ts=1767225600):
    return struct.pack("!BBHI", flags, 0, seg_id, ts)


def hop(ing, egr):
    return struct.pack("!BBHH", 0, 63, ing, egr) + bytes.fromhex("0a0b0c0d0e0f")


def meta(ci, ch, s0, s1, s2):
    return struct.pack("!I", ci << 30 | ch << 24 | s0 << 12 | s1 << 6 | s2)


def resv(exp, fwd, rev, idx=0, f=0, fail_hop=0):
    return struct.pack("!IBBBB", exp, fwd, rev, idx << 4 | f << 3, fail_hop)


def sof(ing, egr, mac):
    return struct.pack("!HH", ing, egr) + mac


def sibra_path(flags, curr, hops, ids, blocks, request=b""):
    return struct.pack("!BBBBB3x", flags, curr, *hops) + ids + b"".join(blocks) + request


class Cases:
    def __init__(self):
        self.recs, self.exp = [], []

    def add(self, name, frame, orig=None, **expect):
        self.recs.append((frame, orig))
        self.exp.append((name, expect))


def craft(seeds):
    c = Cases()
    add = c.add
    # FAIR worked examples (fair.md §2.8) and variations.
    v6send = bytes.fromhex("60000000001cfd40" + V6S.hex() + V6D.hex() + "1101beef0000015d" + "00" * 8
                           + "04d2162e000cabcd46414952")
    v6fwd = v6send[:48] + bytes.fromhex("01a3") + v6send[50:]
    common6 = dict(carrier=6, hdr_len=1, length=16, mark_count=7, timestamp=0xBEEF, seqno=1, icv=0x5D, sb=0,
                   next_header=17)
    add("fair.md 2.8 IPv6 after SEND", ETH + b"\x86\xdd" + v6send, clean=True, udp=(1234, 5678),
        fair=dict(common6, ptr=0, mark=[0] * 7))
    add("fair.md 2.8 IPv6 after FORWARD", ETH + b"\x86\xdd" + v6fwd, clean=True, udp=(1234, 5678),
        fair=dict(common6, ptr=1, mark=[0xA3] + [0] * 6))
    v4send = bytes.fromhex("4500002d1234400040fd3b64c0000201c6336407" + "110d0001ffffffc000" + "00000000"
                           + "04d2162e000cabcd46414952")
    v4fwd = v4send[:28] + bytes.fromhex("015d") + v4send[30:]
    common4 = dict(carrier=4, hdr_len=13, length=13, mark_count=4, timestamp=1, seqno=0xFFFFFF, icv=0xC0,
                   next_header=17)
    add("fair.md 2.8 IPv4 after SEND", ETH + b"\x08\x00" + v4send, clean=True, udp=(1234, 5678),
        fair=dict(common4, ptr=0, mark=[0] * 4))
    add("fair.md 2.8 IPv4 after FORWARD", ETH + b"\x08\x00" + v4fwd, clean=True, udp=(1234, 5678),
        fair=dict(common4, ptr=1, mark=[0x5D, 0, 0, 0]))
    eh, u = v6fwd[40:56], v6fwd[56:]
    add("FAIR IPv6 after hop-by-hop", ipv6(0, bytes.fromhex("fd00010400000000") + eh + u), clean=True,
        udp=(1234, 5678), fair=dict(carrier=6, mark_count=7, ptr=1))
    add("FAIR IPv6 all slots used, SB", ipv6(253, eh[:8] + b"\x87" + eh[9:] + u), clean=True,
        fair=dict(ptr=7, sb=1))
    for v in (0, 17):
        add(f"FAIR IPv6 hdr_len {v}", ipv6(253, eh[:1] + bytes([v]) + eh[2:] + u), flag="fair.malformed")
    add("FAIR IPv6 pointer beyond N", ipv6(253, eh[:8] + b"\x08" + eh[9:] + u), flag="fair.malformed")
    add("FAIR IPv6 EH longer than the packet", ipv6(253, eh[:12]), flag="fair.malformed")
    add("FAIR IPv6 EH cut by the capture", ipv6(253, eh + u)[:54 + 12], orig=len(ipv6(253, eh + u)),
        flag="fair.truncated")
    add("FAIR IPv4 5 bytes", ipv4(253, bytes.fromhex("1109000100")), flag="fair.malformed")
    shim = v4fwd[20:]
    for v in (5, 140):
        add(f"FAIR IPv4 hdr_len {v}", ipv4(253, shim[:1] + bytes([v]) + shim[2:]), flag="fair.malformed")
    add("FAIR IPv4 pointer beyond N", ipv4(253, shim[:8] + b"\x05" + shim[9:]), flag="fair.malformed")
    add("FAIR IPv4 no slots", ipv4(253, bytes.fromhex("110900010000000700") + shim[13:]), clean=True,
        fair=dict(hdr_len=9, mark_count=0, mark=[], ptr=0))

    # FlowPolice over IPv4 and IPv6, and every rejection of flowpolice.rs check_len.
    reg = bytes.fromhex("1180001c" "0007" "00000000c6336407" "000003e8" "0102030405060708" "0000")
    req = bytes.fromhex("1100002c" "0000" + "00" * 8 + "00000000" + "00" * 8 + "0000"
                        "01c16bc0" "0c" "000000" "00000000deadbeef")
    u = udp(1234, 5678, b"FPFP")
    add("FlowPolice regular over IPv4", ipv4(254, reg + u), clean=True, udp=(1234, 5678),
        flowpolice=dict(type=2, hdr_len=28, p_id=7, flow_id=0xC6336407, ts=1000, mac="0102030405060708",
                        next_header=17))
    add("FlowPolice request over IPv6", ipv6(254, req + udp(1234, 5678, b"FPFP", v6=True)), clean=True,
        udp=(1234, 5678), flowpolice={"type": 0, "hdr_len": 44, "puzzle.epoch": 29453248, "puzzle.level": 12,
                                      "puzzle.nonce": 0xDEADBEEF})
    add("FlowPolice privileged", ipv4(254, reg[:1] + b"\xc0" + reg[2:] + u), clean=True,
        flowpolice=dict(type=3))
    add("FlowPolice type 01", ipv4(254, reg[:1] + b"\x40" + reg[2:] + u), flag="flowpolice.malformed")
    add("FlowPolice regular, hdr_len 44", ipv4(254, reg[:2] + b"\x00\x2c" + reg[4:] + u), flag="flowpolice.malformed")
    add("FlowPolice request, hdr_len 28", ipv4(254, req[:2] + b"\x00\x1c" + req[4:] + u), flag="flowpolice.malformed")
    add("FlowPolice 3 bytes", ipv4(254, reg[:3]), flag="flowpolice.malformed")
    add("FlowPolice regular, 20 bytes", ipv4(254, reg[:20]), flag="flowpolice.malformed")
    add("FlowPolice request, 30 bytes", ipv4(254, req[:30]), flag="flowpolice.malformed")

    # SCION: host address kinds, paths and payloads trafgen does not send.
    v6h = bytes.fromhex("20010db8" + "0" * 22 + "42")
    add("SCION empty path, SVC -> IPv6 hosts, SCION/UDP",
        udp4(30041, 30041, scion(0, b"", scion_udp(b"hello!!!"), dcode=4, scode=3, dst=bytes.fromhex("00020000"),
                                 src=v6h)), clean=True, absent=["scion.udp.bad_length"],
        scion={"path_type": 0, "dst_ia": "1-ff00:0:120", "src_ia": "1-ff00:0:110", "dst_host.svc": 2,
               "src_host.ipv6": "2001:db8::42", "udp.length": 16, "udp.dstport": 40002})
    add("SCION OneHop path", udp4(30041, 30041, scion(2, info() + hop(0, 5) + hop(6, 0), scion_udp(b""))),
        clean=True, scion={"path_type": 2, "path.hf.cons_ingress": [0, 6], "path.hf.cons_egress": [5, 0]})
    three = meta(1, 3, 2, 2, 1) + info() * 3 + b"".join(hop(k, k + 1) for k in range(1, 6))
    add("SCION three segments, SCMP echo",
        udp4(30041, 30041, scion(1, three, struct.pack("!BBHHH", 128, 0, 0, 1, 1), next_hdr=202)), clean=True,
        scion={"path.num_inf": 3, "path.num_hf": 5, "path.curr_inf": 1, "path.curr_hf": 3, "scmp.type": 128,
               "path.hf.cons_egress": [2, 3, 4, 5, 6]})
    add("SCION path of 65 hop fields", udp4(30041, 30041, scion(1, meta(0, 0, 63, 2, 0) + info() * 2
                                                               + hop(1, 2) * 65, scion_udp(b""))),
        flag="scion.malformed")
    add("SCION EPIC-HP path", udp4(30041, 30041, scion(3, struct.pack("!II", 1, 2) + b"PHVFLHVF" + meta(0, 0, 2, 0, 0)
                                                       + info() + hop(0, 1) + hop(2, 0), scion_udp(b""))),
        clean=True, scion={"path_type": 3, "path.num_hf": 2})
    # The packet crate does not check OneHop and EPIC-HP paths: breaks of the
    # SCION specification there are warnings.
    add("SCION OneHop path of one hop field", udp4(30041, 30041, scion(2, info() + hop(0, 5), scion_udp(b""))),
        clean=True, present=["scion.path.nonstandard"])
    add("SCION EPIC-HP path with a SegLen gap",
        udp4(30041, 30041, scion(3, bytes(16) + meta(0, 0, 0, 2, 0) + info() + hop(0, 1) + hop(2, 0), scion_udp(b""))),
        clean=True, present=["scion.path.nonstandard"])
    add("SCION COLIBRI path (not decoded)", udp4(30041, 30041, scion(4, b"COLIBRI!", scion_udp(b""))),
        clean=True, present=["scion.unsupported"], scion={"path_type": 4})
    add("SCION hop-by-hop then end-to-end options",
        udp4(30041, 30041, scion(0, b"", struct.pack("!4B", 201, 0, 1, 0) + struct.pack("!8B", 17, 1, 1, 2, 0, 0, 0, 0)
                                 + scion_udp(b"x"), next_hdr=200)), clean=True, scion={"udp.length": 9})
    add("SCION 5 bytes", udp4(30041, 30041, b"abcde"), flag="scion.malformed")
    add("SCION 20 bytes", udp4(30041, 30041, scion(0, b"", b"")[:20]), flag="scion.malformed")
    add("SCION version 1", udp4(30041, 30041, b"\x10" + scion(0, b"", b"")[1:]), flag="scion.malformed")
    add("SCION empty path with path bytes", udp4(30041, 30041, scion(0, b"abcd", b"")), flag="scion.malformed")
    add("SCION extension header beyond PayloadLen", udp4(30041, 30041, scion(0, b"", b"\x11\x05\x00\x00", next_hdr=200)),
        flag="scion.malformed")

    # SIBRA reservations trafgen does not send (sibra.md "Wire format").
    sid, eid = bytes.fromhex("ff0000000110" "0001"), bytes.fromhex("ff0000000111" + "00" * 6 + "00000009")
    mac = bytes.fromhex("a1b2c3d4")

    def sibra(name, path, **expect):
        add(name, udp4(30041, 30041, scion(200, path, scion_udp(b""))), clean=True, scion=expect)

    sibra("SIBRA steady data, 2 blocks",
          sibra_path(0x0C, 2, (2, 1, 0), sid, [resv(100, 10, 11, 3, 1) + sof(0, 1, mac) + sof(2, 3, mac),
                                                resv(200, 12, 13) + sof(4, 0, mac)]),
          **{"sibra.steady": 1, "sibra.forward": 1, "sibra.curr_hop": 2, "sibra.num_blocks": 2,
             "sibra.total_hops": 3, "sibra.steady_id": sid.hex(), "sibra.resv_info.exp_tick": [100, 200],
             "sibra.resv_info.bw_fwd": [10, 12], "sibra.resv_info.bw_rev": [11, 13],
             "sibra.resv_info.index": [3, 0], "sibra.resv_info.fwd": [1, 0],
             "sibra.sof.ingress": [0, 2, 4], "sibra.sof.egress": [1, 3, 0], "sibra.sof.mac": [mac.hex()] * 3})
    sid2 = sid[:7] + b"\x02"
    sibra("SIBRA ephemeral setup request over 2 steady blocks",
          sibra_path(0xE0, 0, (1, 1, 0), eid + sid + sid2, [resv(50, 9, 9) + sof(0, 1, mac), resv(50, 9, 9) + sof(2, 0, mac)],
                     resv(51, 20, 21) + sof(0, 1, mac) + bytes(8)),
          **{"sibra.setup": 1, "sibra.request": 1, "sibra.accepted": 1, "sibra.steady": 0,
             "sibra.ephemeral_id": eid.hex(), "sibra.steady_id": [sid.hex(), sid2.hex()],
             "sibra.resv_info.bw_fwd": [9, 9, 20], "sibra.sof.ingress": [0, 2, 0, 0]})
    sibra("SIBRA steady renewal denied at hop 2: offers",
          sibra_path(0x48, 1, (3, 0, 0), sid, [resv(7, 5, 5) + sof(0, 1, mac) + sof(2, 3, mac) + sof(4, 0, mac)],
                     resv(8, 30, 30, fail_hop=2) + sof(0, 1, mac) + bytes([10, 12]) + bytes(6) + bytes([11, 13]) + bytes(6)),
          **{"sibra.request": 1, "sibra.accepted": 0, "sibra.resv_info.fail_hop": [0, 2],
             "sibra.offer.max_fwd": [10, 11], "sibra.offer.max_rev": [12, 13], "sibra.sof.ingress": [0, 2, 4, 0]})

    # One packet per rejection of the packet crate's parsers, applied to trafgen packets.
    def mut(k, name, edits, **expect):
        f = bytearray(seeds[k])
        po = 42 + 28 + host_len(f[51] >> 4) + host_len(f[51] & 15)
        for base, off, b in edits:
            o = {"path": po, "scion": 42, "ip": 34}[base] + off
            f[o:o + len(b)] = b
        add(f"{k}: {name}", bytes(f), **expect)

    for name, edits in [("CurrHop beyond the path", [("path", 1, b"\x03")]),
                        ("block hop counts not contiguous", [("path", 2, b"\x00\x03")]),
                        ("no active block", [("path", 2, b"\x00")]),
                        ("more than 64 hops", [("path", 2, b"\x40\x01")]),
                        ("version 1", [("path", 0, b"\x05")]),
                        ("steady flag: IDs shorter than HdrLen says", [("path", 0, b"\x0c")]),
                        ("request flag: no request block", [("path", 0, b"\x44")]),
                        ("SCION version 1", [("scion", 0, b"\x10")]),
                        ("HdrLen shorter than the address header", [("scion", 5, b"\x05")]),
                        ("HdrLen beyond the packet", [("scion", 5, b"\xff")]),
                        ("PayloadLen beyond the packet", [("scion", 6, b"\xff\xff")])]:
        mut("sibra", name, edits, flag="scion.malformed")
    for name, w in [("SegLen gap", 1 << 24 | 3 << 6), ("CurrHF outside the segment", 5 << 24 | 3 << 12),
                    ("CurrINF without segment", 1 << 30 | 1 << 24 | 3 << 12), ("no segments", 0),
                    ("more hop fields than HdrLen leaves", 1 << 24 | 4 << 12),
                    ("fewer hop fields than HdrLen leaves", 1 << 24 | 2 << 12)]:
        mut("scion", name, [("path", 0, struct.pack("!I", w))], flag="scion.malformed")
    mut("epic-z", "NumHVF 65", [("path", 9, b"\x41")], flag="scion.malformed")
    mut("epic-z", "NumHVF 2 for 3 hop fields", [("path", 9, b"\x02")], flag="scion.malformed")
    mut("epic-z", "CurrHF outside the embedded path", [("path", 24, b"\x05")], flag="scion.malformed")
    mut("epic-z", "NumHVF 0: inferred", [("path", 9, b"\x00")], clean=True, present=["scion.epic.num_hvf_inferred"],
        scion={"epic.num_hvf": 0, "path.num_hf": 3})
    mut("epic-z", "Q flag", [("path", 8, b"\x80")], clean=True, scion={"epic.q": 1})
    mut("flowpolice-request", "type 01", [("ip", 1, b"\x40")], flag="flowpolice.malformed")
    mut("flowpolice-regular", "hdr_len 29", [("ip", 2, b"\x00\x1d")], flag="flowpolice.malformed")
    mut("fair", "hdr_len 8", [("ip", 1, b"\x08")], flag="fair.malformed")
    mut("fair", "pointer 3 of 2 slots", [("ip", 8, b"\x03")], flag="fair.malformed")
    mut("fair", "pointer 2 of 2 slots, SB", [("ip", 8, b"\x82")], clean=True, fair=dict(ptr=2, sb=1))

    # SCION found by the heuristic on other ports, and over an IPv6 underlay.
    for k in ("scion", "epic-z", "sibra"):
        sc, pt = seeds[k][42:], seeds[k][42 + 8]
        add(f"{k}: heuristic on UDP 40000", udp4(40000, 40001, sc), ours=True, scion={"path_type": pt})
        add(f"{k}: IPv6 underlay", ipv6(17, udp(30042, 30041, sc, v6=True)), ours=True, scion={"path_type": pt})

    # Every cut of a packet of each kind, by the capture and by the IP (and UDP) length.
    for k, f in sorted(seeds.items()):
        p = "scion" if k in ("scion", "epic-z", "sibra") else k.split("-")[0]
        start, end = (43, len(f)) if p == "scion" else (35, 34 + (
            struct.unpack("!H", f[36:38])[0] if p == "flowpolice" else f[35]))
        for cut in range(start, len(f)):
            inside = cut < end
            add(f"{k} cut at {cut} (capture)", f[:cut], orig=len(f),
                **({"flag": f"{p}.truncated", "absent": [f"{p}.malformed"]} if inside else {"ours": True}))
            add(f"{k} cut at {cut} (IP length)", cut_ip_length(f, cut),
                **({"flag": f"{p}.malformed", "absent": [f"{p}.truncated"]} if inside else {"ours": True}))

    # Random bytes in the seeds and garbage: no Lua error, whatever the dissectors say.
    rnd = random.Random(20260101)
    for k, f in sorted(seeds.items()):
        for n in range(150):
            b = bytearray(f)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(34, min(len(b), 154))] = rnd.randrange(256)
            add(f"{k} mutation {n}", bytes(b))
    for n in range(300):
        b = bytearray(rnd.randbytes(rnd.randrange(160)))
        if len(b) >= 12 and rnd.randrange(4):
            b[0] = rnd.randrange(16)
            b[8] = rnd.choice([0, 1, 2, 3, 4, 200, 201, rnd.randrange(256)])
            if rnd.randrange(2):
                b[5] = max(0, len(b) // 4 + rnd.randrange(3) - 1)
        add(f"garbage on UDP 30041 #{n}", udp4(30042, 30041, bytes(b)))
    for n in range(150):
        b = bytearray(rnd.randbytes(rnd.randrange(60)))
        if len(b) >= 4:
            b[2:4] = struct.pack("!H", rnd.choice([28, 44, rnd.randrange(80)]))
        add(f"garbage FlowPolice #{n}", (ipv4 if rnd.randrange(2) else ipv6)(254, bytes(b)))
    for n in range(150):
        b = bytearray(rnd.randbytes(rnd.randrange(150)))
        if len(b) >= 2:
            b[1] = rnd.randrange(20) if rnd.randrange(2) else len(b)
        add(f"garbage FAIR #{n}", (ipv4 if rnd.randrange(2) else ipv6)(253, bytes(b)))
    return c


def check_crafted(seeds):
    c = craft(seeds)
    pcap = f"{WORK}/crafted.pcap"
    write_pcap(pcap, c.recs)
    rows = decode(pcap)
    if len(rows) != len(c.recs):
        fail(pcap, f"{len(c.recs)} packets crafted, tshark decoded {len(rows)}")
    flagged = 0
    for n, ((name, e), r) in enumerate(zip(c.exp, rows), 1):
        where = f"crafted frame {n} ({name})"
        (clean if e.get("clean") else ours_clean if e.get("ours") else no_bug)(where, r)
        if "flag" in e:
            flagged += 1
            if e["flag"] not in r:
                fail(where, f"no {e['flag']} ({msgs(r) or 'no expert info'})")
        for f in e.get("present", []):
            if f not in r:
                fail(where, f"no {f}")
        for f in e.get("absent", []):
            if f in r:
                fail(where, f"unexpected {f}: {msgs(r)}")
        if "udp" in e:
            eq(where, r, "udp.srcport", e["udp"][0])
            eq(where, r, "udp.dstport", e["udp"][1])
        for proto in ("scion", "flowpolice", "fair"):
            for fld, v in e.get(proto, {}).items():
                eq(where, r, f"{proto}.{fld}", v)
    finish("crafted packets")
    print(f"  crafted     {len(rows):5d} packets: {flagged} malformed or truncated ones flagged, no Lua error")


# ---- main -------------------------------------------------------------------------
profiles = [l.split()[0] for l in subprocess.run([TRAFGEN, "list"], check=True, capture_output=True,
                                                  text=True).stdout.splitlines() if l.strip()]
if not profiles:
    sys.exit("test-wireshark: FAIL: trafgen lists no profile")
print(f"test-wireshark: {len(profiles)} trafgen profiles, {COUNT} packets each, and a crafted capture")
seeds = {}
for name in profiles:
    frames, groups = check_profile(name)
    # Seeds: the first packet of each kind from a group that is not a replay or a forgery.
    for _, f in frames:
        g = groups[int.from_bytes(f[-2:], "big")]
        if "replay_of" in g or any(k.startswith("forge") for k in g):
            continue
        t = g["template"]
        k = {"flowpolice": f"flowpolice-{g.get('kind', 'request')}", "fair": "fair" if g.get("m", 2) else None,
             "ipv4-udp": None}.get(t, t)
        if k:
            seeds.setdefault(k, f)
want = {"scion", "epic-z", "sibra", "flowpolice-request", "flowpolice-regular", "fair"}
if want - seeds.keys():
    sys.exit(f"test-wireshark: FAIL: no trafgen packet of kind {sorted(want - seeds.keys())} to craft from")
check_crafted(seeds)
print(f"test-wireshark: ok ({time.monotonic() - T0:.1f} s after the build)")
PY
