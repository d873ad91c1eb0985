-- ddos_dataplanes.lua: Wireshark/tshark dissectors for what the ddos-dataplanes
-- routers put on the wire.
--
--   scion       SCION common and address header, on UDP port 30041 (preference)
--               and by heuristic on any UDP port; paths: Empty (0), SCION (1),
--               OneHop (2), EPIC-HP (3), SIBRA (200), EPIC-Z (201); COLIBRI (4)
--               is shown as raw bytes. SCION extension headers (200, 201), UDP
--               and SCMP after the path.
--   flowpolice  FlowPolice shim, IPv4 protocol / IPv6 next header 254.
--   fair        FAIR header, IPv6 extension header and IPv4 shim, 253.
--
-- Layouts follow the project's packet crate (crates/packet/src/): scion/header.rs,
-- scion/path.rs, scion/sibra/, scion/epic.rs, flowpolice.rs, fair.rs.
--
-- Install: copy or symlink this file into ~/.local/lib/wireshark/plugins/, or
-- run `tshark -X lua_script:tools/wireshark/ddos_dataplanes.lua ...` (README.md).
--
-- Headers the packet crate rejects raise the expert info `<protocol>.malformed`
-- (this includes a header longer than the packet as its IP or UDP length
-- says); a header cut short only by the capture's snap length raises
-- `<protocol>.truncated`. The dissectors never read past the captured bytes.
-- Any Lua error is turned into the expert info `<protocol>.dissector_bug`
-- instead of aborting the packet. Field names are listed in README.md.
--
-- Portable between Lua 5.2 (Wireshark 4.0) and 5.4 (Wireshark >= 4.2): no
-- bitwise operators or bit libraries, only arithmetic.

local PLUGIN_VERSION = "1.0.0"

if set_plugin_info then
    set_plugin_info({
        version = PLUGIN_VERSION,
        description = "SCION (SIBRA, EPIC-Z paths), FlowPolice and FAIR dissectors",
        repository = "ddos-dataplanes: tools/wireshark/",
    })
end

---------------------------------------------------------------------------
-- Helpers (arithmetic only)
---------------------------------------------------------------------------

local function bits(v, shift, width)
    return math.floor(v / 2 ^ shift) % 2 ^ width
end

local function flag(v, mask) -- mask is a single bit
    return math.floor(v / mask) % 2 == 1
end

local function utc(secs)
    local ok, s = pcall(os.date, "!%Y-%m-%d %H:%M:%S UTC", math.floor(secs))
    if ok and s then return s end
    return tostring(secs)
end

-- AS number as SCION prints it: decimal up to 2^32-1, else three 16-bit hex groups.
local function fmt_as(hi16, lo32)
    if hi16 == 0 then return string.format("%d", lo32) end
    return string.format("%x:%x:%x", hi16, math.floor(lo32 / 65536), lo32 % 65536)
end

-- ISD-AS at offset `o` (8 bytes, caller checked they are captured).
local function read_ia(tvb, o)
    local isd = tvb(o, 2):uint()
    local hi = tvb(o + 2, 2):uint()
    local lo = tvb(o + 4, 4):uint()
    return isd, fmt_as(hi, lo), string.format("%d-%s", isd, fmt_as(hi, lo))
end

-- SIBRA bandwidth class: 0 -> 0, else 16 Kibit/s * sqrt(2^(c-1)).
local function sibra_bw(c)
    if c == 0 then return "0 bit/s" end
    local bps = 16384 * 2 ^ ((c - 1) / 2)
    if bps >= 2 ^ 30 then return string.format("%.2f Gibit/s", bps / 2 ^ 30) end
    if bps >= 2 ^ 20 then return string.format("%.2f Mibit/s", bps / 2 ^ 20) end
    return string.format("%.1f Kibit/s", bps / 2 ^ 10)
end

local function hexbytes(tvb, o, n)
    local t = {}
    for i = 0, n - 1 do t[#t + 1] = string.format("%02x", tvb(o + i, 1):uint()) end
    return table.concat(t)
end

---------------------------------------------------------------------------
-- Value strings
---------------------------------------------------------------------------

local PATH_TYPES = {
    [0] = "Empty", [1] = "SCION", [2] = "OneHop", [3] = "EPIC-HP", [4] = "COLIBRI",
    [200] = "SIBRA", [201] = "EPIC-Z",
}
local SCION_NEXT_HDRS = {
    [6] = "TCP", [17] = "UDP", [200] = "Hop-by-hop options", [201] = "End-to-end options",
    [202] = "SCMP", [203] = "BFD",
}
local HOST_TYPES = { [0] = "IPv4", [3] = "IPv6", [4] = "Service" } -- T<<2|L
local SCMP_TYPES = {
    [1] = "Destination Unreachable", [2] = "Packet Too Big", [4] = "Parameter Problem",
    [5] = "External Interface Down", [6] = "Internal Connectivity Down",
    [128] = "Echo Request", [129] = "Echo Reply", [130] = "Traceroute Request",
    [131] = "Traceroute Reply",
}
local IP_PROTOS = {
    [1] = "ICMP", [6] = "TCP", [17] = "UDP", [41] = "IPv6", [47] = "GRE", [58] = "ICMPv6",
    [59] = "No next header", [253] = "FAIR (experimental)", [254] = "FlowPolice (experimental)",
}
local FP_TYPES = { [0] = "Request", [1] = "Undefined", [2] = "Best effort", [3] = "Privileged" }
local FAIR_CARRIERS = { [4] = "IPv4 shim", [6] = "IPv6 extension header" }

---------------------------------------------------------------------------
-- Protocols and fields
---------------------------------------------------------------------------

local p_scion = Proto("scion", "SCION")
local p_fp = Proto("flowpolice", "FlowPolice")
local p_fair = Proto("fair", "FAIR")

local PF = ProtoField
local H = {} -- SCION fields

-- common header
H.version = PF.uint8("scion.version", "Version", base.DEC, nil, 0xF0)
H.qos = PF.uint16("scion.qos", "QoS (traffic class)", base.HEX, nil, 0x0FF0)
H.flow_id = PF.uint24("scion.flow_id", "Flow ID", base.HEX, nil, 0x0FFFFF)
H.next_hdr = PF.uint8("scion.next_hdr", "Next header", base.DEC, SCION_NEXT_HDRS)
H.hdr_len = PF.uint8("scion.hdr_len", "Header length (4-byte units)", base.DEC)
H.payload_len = PF.uint16("scion.payload_len", "Payload length", base.DEC)
H.path_type = PF.uint8("scion.path_type", "Path type", base.DEC, PATH_TYPES)
H.dt = PF.uint8("scion.dt", "Destination host type (DT)", base.DEC, nil, 0xC0)
H.dl = PF.uint8("scion.dl", "Destination host length (DL)", base.DEC, nil, 0x30)
H.st = PF.uint8("scion.st", "Source host type (ST)", base.DEC, nil, 0x0C)
H.sl = PF.uint8("scion.sl", "Source host length (SL)", base.DEC, nil, 0x03)
H.rsv = PF.uint16("scion.rsv", "Reserved", base.HEX)
-- address header
H.dst_ia = PF.string("scion.dst_ia", "Destination ISD-AS")
H.dst_isd = PF.uint16("scion.dst_isd", "Destination ISD", base.DEC)
H.dst_as = PF.uint64("scion.dst_as", "Destination AS", base.HEX)
H.src_ia = PF.string("scion.src_ia", "Source ISD-AS")
H.src_isd = PF.uint16("scion.src_isd", "Source ISD", base.DEC)
H.src_as = PF.uint64("scion.src_as", "Source AS", base.HEX)
H.dst_host = PF.bytes("scion.dst_host", "Destination host")
H.dst_host_ipv4 = PF.ipv4("scion.dst_host.ipv4", "Destination host (IPv4)")
H.dst_host_ipv6 = PF.ipv6("scion.dst_host.ipv6", "Destination host (IPv6)")
H.dst_host_svc = PF.uint16("scion.dst_host.svc", "Destination host (service)", base.HEX)
H.src_host = PF.bytes("scion.src_host", "Source host")
H.src_host_ipv4 = PF.ipv4("scion.src_host.ipv4", "Source host (IPv4)")
H.src_host_ipv6 = PF.ipv6("scion.src_host.ipv6", "Source host (IPv6)")
H.src_host_svc = PF.uint16("scion.src_host.svc", "Source host (service)", base.HEX)
H.path = PF.bytes("scion.path", "Path")
-- standard path (type 1, and embedded in EPIC-HP / EPIC-Z)
H.meta = PF.uint32("scion.path.meta", "Path meta header", base.HEX)
H.curr_inf = PF.uint32("scion.path.curr_inf", "CurrINF", base.DEC, nil, 0xC0000000)
H.curr_hf = PF.uint32("scion.path.curr_hf", "CurrHF", base.DEC, nil, 0x3F000000)
H.meta_rsv = PF.uint32("scion.path.meta_rsv", "Reserved", base.HEX, nil, 0x00FC0000)
H.seg0_len = PF.uint32("scion.path.seg0_len", "Seg0Len", base.DEC, nil, 0x0003F000)
H.seg1_len = PF.uint32("scion.path.seg1_len", "Seg1Len", base.DEC, nil, 0x00000FC0)
H.seg2_len = PF.uint32("scion.path.seg2_len", "Seg2Len", base.DEC, nil, 0x0000003F)
H.num_inf = PF.uint8("scion.path.num_inf", "Info fields", base.DEC)
H.num_hf = PF.uint8("scion.path.num_hf", "Hop fields", base.DEC)
H.info = PF.bytes("scion.path.info", "Info field")
H.info_flags = PF.uint8("scion.path.info.flags", "Flags", base.HEX)
H.info_peer = PF.bool("scion.path.info.peer", "Peering (P)", 8, nil, 0x02)
H.info_cons = PF.bool("scion.path.info.cons_dir", "Construction direction (C)", 8, nil, 0x01)
H.info_rsv = PF.uint8("scion.path.info.rsv", "Reserved", base.HEX)
H.info_seg_id = PF.uint16("scion.path.info.seg_id", "SegID", base.HEX)
H.info_ts = PF.uint32("scion.path.info.timestamp", "Timestamp", base.DEC)
H.hf = PF.bytes("scion.path.hf", "Hop field")
H.hf_flags = PF.uint8("scion.path.hf.flags", "Flags", base.HEX)
H.hf_ing_alert = PF.bool("scion.path.hf.ingress_alert", "Ingress router alert (I)", 8, nil, 0x02)
H.hf_eg_alert = PF.bool("scion.path.hf.egress_alert", "Egress router alert (E)", 8, nil, 0x01)
H.hf_exp = PF.uint8("scion.path.hf.exp_time", "ExpTime", base.DEC)
H.hf_ingress = PF.uint16("scion.path.hf.cons_ingress", "ConsIngress", base.DEC)
H.hf_egress = PF.uint16("scion.path.hf.cons_egress", "ConsEgress", base.DEC)
H.hf_mac = PF.bytes("scion.path.hf.mac", "MAC")
-- EPIC-HP (3)
H.ehp_ts = PF.uint32("scion.epichp.timestamp", "PktID timestamp", base.DEC)
H.ehp_counter = PF.uint32("scion.epichp.counter", "PktID counter", base.DEC)
H.ehp_phvf = PF.bytes("scion.epichp.phvf", "PHVF")
H.ehp_lhvf = PF.bytes("scion.epichp.lhvf", "LHVF")
-- SIBRA (200)
H.sibra = PF.bytes("scion.sibra", "SIBRA path")
H.sb_flags = PF.uint8("scion.sibra.flags", "Flags", base.HEX)
H.sb_setup = PF.bool("scion.sibra.setup", "Setup (S)", 8, nil, 0x80)
H.sb_request = PF.bool("scion.sibra.request", "Request (R)", 8, nil, 0x40)
H.sb_accepted = PF.bool("scion.sibra.accepted", "Accepted (A)", 8, nil, 0x20)
H.sb_error = PF.bool("scion.sibra.error", "Error (E)", 8, nil, 0x10)
H.sb_steady = PF.bool("scion.sibra.steady", "Steady (T)", 8, nil, 0x08)
H.sb_forward = PF.bool("scion.sibra.forward", "Forward (F)", 8, nil, 0x04)
H.sb_version = PF.uint8("scion.sibra.version", "Version", base.DEC, nil, 0x03)
H.sb_curr_hop = PF.uint8("scion.sibra.curr_hop", "CurrHop", base.DEC)
H.sb_p0 = PF.uint8("scion.sibra.p0", "Block 0 hops (P0)", base.DEC)
H.sb_p1 = PF.uint8("scion.sibra.p1", "Block 1 hops (P1)", base.DEC)
H.sb_p2 = PF.uint8("scion.sibra.p2", "Block 2 hops (P2)", base.DEC)
H.sb_rsv = PF.uint24("scion.sibra.rsv", "Reserved", base.HEX)
H.sb_num_blocks = PF.uint8("scion.sibra.num_blocks", "Active blocks", base.DEC)
H.sb_total_hops = PF.uint8("scion.sibra.total_hops", "Hops (all active blocks)", base.DEC)
H.sb_steady_id = PF.bytes("scion.sibra.steady_id", "Steady path ID")
H.sb_eph_id = PF.bytes("scion.sibra.ephemeral_id", "Ephemeral path ID")
H.sb_block = PF.bytes("scion.sibra.block", "Active block")
H.sb_ri = PF.bytes("scion.sibra.resv_info", "Reservation info")
H.sb_ri_exp = PF.uint32("scion.sibra.resv_info.exp_tick", "Expiry (ticks of 4 s)", base.DEC)
H.sb_ri_bw_fwd = PF.uint8("scion.sibra.resv_info.bw_fwd", "Forward bandwidth class", base.DEC)
H.sb_ri_bw_rev = PF.uint8("scion.sibra.resv_info.bw_rev", "Reverse bandwidth class", base.DEC)
H.sb_ri_index = PF.uint8("scion.sibra.resv_info.index", "Reservation index", base.DEC, nil, 0xF0)
H.sb_ri_fwd = PF.bool("scion.sibra.resv_info.fwd", "Registered forward (F)", 8, nil, 0x08)
H.sb_ri_rsv = PF.uint8("scion.sibra.resv_info.rsv", "Reserved", base.HEX, nil, 0x07)
H.sb_ri_fail = PF.uint8("scion.sibra.resv_info.fail_hop", "Failed hop", base.DEC)
H.sb_sof = PF.bytes("scion.sibra.sof", "SIBRA opaque field (SOF)")
H.sb_sof_ingress = PF.uint16("scion.sibra.sof.ingress", "Ingress", base.DEC)
H.sb_sof_egress = PF.uint16("scion.sibra.sof.egress", "Egress", base.DEC)
H.sb_sof_mac = PF.bytes("scion.sibra.sof.mac", "MAC")
H.sb_req = PF.bytes("scion.sibra.request_block", "Request block")
H.sb_offer = PF.bytes("scion.sibra.offer", "Offer")
H.sb_offer_fwd = PF.uint8("scion.sibra.offer.max_fwd", "Max forward class", base.DEC)
H.sb_offer_rev = PF.uint8("scion.sibra.offer.max_rev", "Max reverse class", base.DEC)
-- EPIC-Z (201)
H.epic = PF.bytes("scion.epic", "EPIC-Z block")
H.ep_pkt_id = PF.bytes("scion.epic.pkt_id", "Packet ID")
H.ep_ts_rel = PF.uint32("scion.epic.ts_rel", "TsRel (4 us units)", base.DEC)
H.ep_core_id = PF.uint8("scion.epic.core_id", "Core ID", base.DEC)
H.ep_counter = PF.uint24("scion.epic.counter", "Counter", base.DEC)
H.ep_flags = PF.uint8("scion.epic.flags", "Flags", base.HEX)
H.ep_q = PF.bool("scion.epic.q", "QoS (Q)", 8, nil, 0x80)
H.ep_flags_rsv = PF.uint8("scion.epic.flags_rsv", "Reserved flags", base.HEX, nil, 0x7F)
H.ep_num_hvf = PF.uint8("scion.epic.num_hvf", "NumHVF", base.DEC)
H.ep_rsv = PF.uint16("scion.epic.rsv", "Reserved", base.HEX)
H.ep_hvf = PF.bytes("scion.epic.hvf", "HVF")
H.ep_time = PF.absolute_time("scion.epic.pkt_time", "Packet timestamp", base.UTC)
-- after the path
H.ext = PF.bytes("scion.ext", "Extension header")
H.ext_next_hdr = PF.uint8("scion.ext.next_hdr", "Next header", base.DEC, SCION_NEXT_HDRS)
H.ext_len = PF.uint8("scion.ext.len", "Extension length (4-byte units, minus 1)", base.DEC)
H.ext_options = PF.bytes("scion.ext.options", "Options")
H.udp = PF.bytes("scion.udp", "SCION/UDP header")
H.udp_srcport = PF.uint16("scion.udp.srcport", "Source port", base.DEC)
H.udp_dstport = PF.uint16("scion.udp.dstport", "Destination port", base.DEC)
H.udp_length = PF.uint16("scion.udp.length", "Length", base.DEC)
H.udp_checksum = PF.uint16("scion.udp.checksum", "Checksum", base.HEX)
H.scmp = PF.bytes("scion.scmp", "SCMP header")
H.scmp_type = PF.uint8("scion.scmp.type", "Type", base.DEC, SCMP_TYPES)
H.scmp_code = PF.uint8("scion.scmp.code", "Code", base.DEC)
H.scmp_checksum = PF.uint16("scion.scmp.checksum", "Checksum", base.HEX)

local F = {} -- FlowPolice fields
F.next_header = PF.uint8("flowpolice.next_header", "Next header", base.DEC, IP_PROTOS)
F.type = PF.uint8("flowpolice.type", "Packet type", base.DEC, FP_TYPES, 0xC0)
F.flags = PF.uint8("flowpolice.flags", "Flags", base.HEX, nil, 0x3F)
F.hdr_len = PF.uint16("flowpolice.hdr_len", "Header length", base.DEC)
F.capability = PF.bytes("flowpolice.capability", "Capability")
F.p_id = PF.uint16("flowpolice.p_id", "Packet ID (P_id)", base.DEC)
F.flow_id = PF.uint64("flowpolice.flow_id", "Flow ID", base.HEX)
F.ts = PF.uint32("flowpolice.ts", "Period start T_A (ms mod 2^32)", base.DEC)
F.mac = PF.bytes("flowpolice.mac", "MAC")
F.reserved = PF.uint16("flowpolice.reserved", "Reserved", base.HEX)
F.puzzle = PF.bytes("flowpolice.puzzle", "Puzzle")
F.epoch = PF.uint32("flowpolice.puzzle.epoch", "Seed epoch", base.DEC)
F.level = PF.uint8("flowpolice.puzzle.level", "Level (leading zero bits)", base.DEC)
F.puzzle_rsv = PF.uint24("flowpolice.puzzle.rsv", "Reserved", base.HEX)
F.nonce = PF.uint64("flowpolice.puzzle.nonce", "Nonce", base.HEX)

local R = {} -- FAIR fields
R.carrier = PF.uint8("fair.carrier", "Carrier", base.DEC, FAIR_CARRIERS)
R.next_header = PF.uint8("fair.next_header", "Next header", base.DEC, IP_PROTOS)
R.hdr_len = PF.uint8("fair.hdr_len", "Header length field", base.DEC)
R.length = PF.uint16("fair.length", "Header length (bytes)", base.DEC)
R.timestamp = PF.uint16("fair.timestamp", "Source timestamp (s mod 2^16)", base.DEC)
R.seqno = PF.uint24("fair.seqno", "Sequence number", base.DEC)
R.icv = PF.uint8("fair.icv", "ICV", base.HEX)
R.next_as = PF.uint8("fair.next_as", "NextAS", base.HEX)
R.sb = PF.bool("fair.sb", "Suspicious bit (SB)", 8, nil, 0x80)
R.ptr = PF.uint8("fair.ptr", "Pointer (marks written)", base.DEC, nil, 0x7F)
R.mark_count = PF.uint8("fair.mark_count", "Mark slots (N)", base.DEC)
R.marks = PF.bytes("fair.marks", "Marks")
R.mark = PF.uint8("fair.mark", "Mark", base.HEX)
R.mark_nonce = PF.uint8("fair.mark.nonce", "Nonce", base.HEX, nil, 0xF0)
R.mark_mac = PF.uint8("fair.mark.mac", "MAC", base.HEX, nil, 0x0F)

local function values(t)
    local out = {}
    for _, v in pairs(t) do out[#out + 1] = v end
    return out
end
p_scion.fields = values(H)
p_fp.fields = values(F)
p_fair.fields = values(R)

local EG, ES = expert.group, expert.severity
local function experts(proto, name)
    local e = {
        truncated = ProtoExpert.new(proto .. ".truncated", name .. " header truncated",
            EG.MALFORMED, ES.ERROR),
        malformed = ProtoExpert.new(proto .. ".malformed", "Malformed " .. name .. " header",
            EG.MALFORMED, ES.ERROR),
        bug = ProtoExpert.new(proto .. ".dissector_bug", name .. " dissector error (bug in ddos_dataplanes.lua)",
            EG.UNDECODED, ES.ERROR),
    }
    return e
end
local EX = {
    scion = experts("scion", "SCION"),
    flowpolice = experts("flowpolice", "FlowPolice"),
    fair = experts("fair", "FAIR"),
}
EX.scion.unsupported = ProtoExpert.new("scion.unsupported", "SCION header not decoded",
    EG.UNDECODED, ES.WARN)
EX.scion.nonstandard = ProtoExpert.new("scion.path.nonstandard",
    "SCION path does not follow the SCION specification (not checked by the routers)", EG.PROTOCOL, ES.WARN)
EX.scion.udp_length = ProtoExpert.new("scion.udp.bad_length",
    "SCION/UDP length does not match the payload", EG.PROTOCOL, ES.WARN)
EX.scion.inferred = ProtoExpert.new("scion.epic.num_hvf_inferred",
    "EPIC-Z NumHVF is 0: hop count inferred from the path length", EG.PROTOCOL, ES.NOTE)
p_scion.experts = values(EX.scion)
p_fp.experts = values(EX.flowpolice)
p_fair.experts = values(EX.fair)

p_scion.prefs.udp_ports = Pref.range("UDP ports", "30041",
    "UDP ports of the SCION underlay (the heuristic finds SCION on other ports too)", 65535)
p_scion.prefs.sibra_type = Pref.uint("SIBRA path type", 200, "SCION PathType of SIBRA paths")
p_scion.prefs.epicz_type = Pref.uint("EPIC-Z path type", 201, "SCION PathType of EPIC-Z paths")
p_fp.prefs.proto = Pref.uint("IP protocol number", 254,
    "IPv4 protocol / IPv6 next header of the FlowPolice shim")
p_fair.prefs.proto = Pref.uint("IP protocol number", 253,
    "IPv4 protocol / IPv6 next header of the FAIR header")

---------------------------------------------------------------------------
-- Shared plumbing
---------------------------------------------------------------------------

local data_dissector = Dissector.get("data")
local ip_proto_table = DissectorTable.get("ip.proto")

-- A dissection context: the tvb, the captured limit, where to put problems.
-- Inside paths the packet crate does not validate (ctx.lenient: OneHop,
-- EPIC-HP), a break of the SCION specification is a warning, not malformed.
local function problem(ctx, item, kind, text)
    ctx.problems = (ctx.problems or 0) + 1
    if ctx.lenient and kind == "malformed" then kind = "nonstandard" end
    local e = ctx.ex[kind]
    local target = item or ctx.root
    if target then target:add_proto_expert_info(e, text) end
end

-- Reports that `what` ends at offset `need` of ctx.tvb but the bytes are not
-- all there: malformed when the packet itself (its reported length, from the
-- IP or UDP length) is shorter, truncated when only the capture is.
-- Returns which of the two it was.
local function short(ctx, item, need, what)
    local rep = ctx.tvb:reported_len()
    if rep < need then
        problem(ctx, item, "malformed", string.format("%s needs %d bytes, the packet has %d", what, need, rep))
        return "malformed"
    end
    problem(ctx, item, "truncated", string.format("%s needs %d bytes, %d captured", what, need, ctx.tvb:len()))
    return "truncated"
end

-- Calls `fn(tvb, pinfo, tree, ctx)` and turns a Lua error into an expert info.
-- `fn` returns the bytes consumed and optionally a function that hands the
-- rest of the packet to another dissector; that one runs outside this guard
-- because errors of other dissectors are theirs (Wireshark has already marked
-- the packet), not ours.
local function guarded(proto, ex, fn)
    return function(tvb, pinfo, tree)
        local ctx = { ex = ex }
        local ok, consumed, next_fn = pcall(fn, tvb, pinfo, tree, ctx)
        if not ok then
            local where = ctx.root
            if not where then
                local okr, item = pcall(function() return tree:add(proto, tvb:range(0, tvb:len())) end)
                where = okr and item or nil
            end
            if where then
                where:add_proto_expert_info(ex.bug, "Dissector error (please report): " .. tostring(consumed))
            end
            return tvb:len()
        end
        if next_fn then
            local ok2, err = pcall(next_fn)
            if not ok2 and not string.find(tostring(err), "Malformed", 1, true) then
                local where = ctx.root
                if where then
                    where:add_proto_expert_info(ex.bug, "Dissector error (please report): " .. tostring(err))
                end
            end
        end
        return consumed
    end
end

-- Hands tvb[off..] to the IP protocol table (unknown values go to "data").
local function hand_to_ip_proto(tvb, off, proto, pinfo, tree)
    local n = tvb:len() - off
    if n <= 0 then return nil end
    return function()
        ip_proto_table:try(proto, tvb:range(off, n):tvb(), pinfo, tree)
    end
end

local function hand_to_data(tvb, off, pinfo, tree)
    local n = tvb:len() - off
    if n <= 0 then return nil end
    return function()
        data_dissector:call(tvb:range(off, n):tvb(), pinfo, tree)
    end
end

---------------------------------------------------------------------------
-- SCION
---------------------------------------------------------------------------

local function host_len(code) return (code % 4 + 1) * 4 end

-- Decoded PathMetaHdr and the SCION rules it must meet (scion/path.rs Meta::validate).
local function decode_meta(w)
    local m = {
        curr_inf = bits(w, 30, 2), curr_hf = bits(w, 24, 6),
        seg = { bits(w, 12, 6), bits(w, 6, 6), bits(w, 0, 6) },
    }
    m.n_inf = 0
    for i = 1, 3 do if m.seg[i] ~= 0 then m.n_inf = m.n_inf + 1 end end
    m.n_hf = m.seg[1] + m.seg[2] + m.seg[3]
    m.len = 4 + 8 * m.n_inf + 12 * m.n_hf
    return m
end

local function meta_error(m)
    if (m.seg[1] == 0 and m.seg[2] ~= 0) or (m.seg[2] == 0 and m.seg[3] ~= 0) then
        return "SegLen gap (non-zero segments must be contiguous from Seg0)"
    end
    if m.n_inf == 0 then return "path without segments (all SegLen zero)" end
    if m.n_hf > 64 then return "path longer than 64 hop fields" end
    if m.curr_inf >= m.n_inf then
        return string.format("CurrINF %d names no segment (%d info fields)", m.curr_inf, m.n_inf)
    end
    local start = 0
    if m.curr_inf >= 1 then start = start + m.seg[1] end
    if m.curr_inf >= 2 then start = start + m.seg[2] end
    if m.curr_hf < start or m.curr_hf >= start + m.seg[m.curr_inf + 1] then
        return string.format("CurrHF %d outside segment %d (hop fields %d..%d)", m.curr_hf,
            m.curr_inf, start, start + m.seg[m.curr_inf + 1] - 1)
    end
    return nil
end

local function add_info_field(ctx, tree, o, i, current)
    local tvb = ctx.tvb
    local flags = tvb(o, 1):uint()
    local seg_id = tvb(o + 2, 2):uint()
    local ts = tvb(o + 4, 4):uint()
    local t = tree:add(H.info, tvb(o, 8))
    t:set_text(string.format("Info field %d: SegID 0x%04x, %s%s%s", i, seg_id, utc(ts),
        flag(flags, 1) and ", C" or "", flag(flags, 2) and ", P" or ""))
    if current then t:append_text(" (current)") end
    local ft = t:add(H.info_flags, tvb(o, 1))
    ft:add(H.info_peer, tvb(o, 1))
    ft:add(H.info_cons, tvb(o, 1))
    t:add(H.info_rsv, tvb(o + 1, 1))
    t:add(H.info_seg_id, tvb(o + 2, 2))
    t:add(H.info_ts, tvb(o + 4, 4)):append_text(" (" .. utc(ts) .. ")")
    return ts
end

local function add_hop_field(ctx, tree, o, i, label, info_ts, current)
    local tvb = ctx.tvb
    local exp = tvb(o + 1, 1):uint()
    local ing, eg = tvb(o + 2, 2):uint(), tvb(o + 4, 2):uint()
    local t = tree:add(H.hf, tvb(o, 12))
    t:set_text(string.format("%s %d: %d -> %d, MAC %s", label, i, ing, eg, hexbytes(tvb, o + 6, 6)))
    if current then t:append_text(" (current)") end
    local ft = t:add(H.hf_flags, tvb(o, 1))
    ft:add(H.hf_ing_alert, tvb(o, 1))
    ft:add(H.hf_eg_alert, tvb(o, 1))
    local et = t:add(H.hf_exp, tvb(o + 1, 1))
    if info_ts then
        -- Absolute expiry = Timestamp + (1 + ExpTime) * 86400 / 256 s.
        et:append_text(" (expires " .. utc(info_ts + (1 + exp) * 337.5) .. ")")
    end
    t:add(H.hf_ingress, tvb(o + 2, 2))
    t:add(H.hf_egress, tvb(o + 4, 2))
    t:add(H.hf_mac, tvb(o + 6, 6))
    return t
end

-- Standard SCION path at `o`, `len` bytes by HdrLen (`exact`: the path must
-- fill them, as for PathType 1). Returns the decoded meta header or nil.
local function dissect_std_path(ctx, tree, o, len, exact)
    local tvb = ctx.tvb
    if len < 4 then
        problem(ctx, tree, "malformed", string.format("SCION path of %d bytes: no room for the meta header", len))
        return nil
    end
    if o + 4 > ctx.lim then
        short(ctx, tree, o + 4, "Path meta header")
        return nil
    end
    local w = tvb(o, 4):uint()
    local m = decode_meta(w)
    local mt = tree:add(H.meta, tvb(o, 4))
    mt:set_text(string.format("Path meta header: CurrINF %d, CurrHF %d, SegLen %d/%d/%d",
        m.curr_inf, m.curr_hf, m.seg[1], m.seg[2], m.seg[3]))
    mt:add(H.curr_inf, tvb(o, 4))
    mt:add(H.curr_hf, tvb(o, 4))
    mt:add(H.meta_rsv, tvb(o, 4))
    mt:add(H.seg0_len, tvb(o, 4))
    mt:add(H.seg1_len, tvb(o, 4))
    mt:add(H.seg2_len, tvb(o, 4))
    tree:add(H.num_inf, tvb(o, 4), m.n_inf):set_generated()
    tree:add(H.num_hf, tvb(o, 4), m.n_hf):set_generated()
    local err = meta_error(m)
    if err then problem(ctx, mt, "malformed", err) end
    if m.len > len then
        problem(ctx, mt, "malformed", string.format(
            "path needs %d bytes (%d info, %d hop fields), HdrLen leaves %d", m.len, m.n_inf, m.n_hf, len))
    elseif exact and m.len < len then
        problem(ctx, mt, "malformed", string.format(
            "path length %d does not match the %d bytes HdrLen leaves", m.len, len))
    end
    if m.n_inf == 0 or m.n_hf > 64 then return m end
    local ts = {}
    local p = o + 4
    for i = 0, m.n_inf - 1 do
        if p + 8 > o + len then return m end
        if p + 8 > ctx.lim then
            short(ctx, tree, p + 8, string.format("Info field %d", i))
            return m
        end
        ts[i] = add_info_field(ctx, tree, p, i, i == m.curr_inf)
        p = p + 8
    end
    local seg, in_seg = 0, 0
    for i = 0, m.n_hf - 1 do
        while seg < 3 and in_seg >= m.seg[seg + 1] do seg, in_seg = seg + 1, 0 end
        if p + 12 > o + len then return m end
        if p + 12 > ctx.lim then
            short(ctx, tree, p + 12, string.format("Hop field %d", i))
            return m
        end
        add_hop_field(ctx, tree, p, i, "Hop field", ts[seg], i == m.curr_hf)
        in_seg = in_seg + 1
        p = p + 12
    end
    m.info_ts = ts[0]
    return m
end

local function dissect_onehop(ctx, tree, o, len)
    if len ~= 8 + 2 * 12 then
        problem(ctx, tree, "malformed", string.format("OneHop path is 32 bytes, HdrLen leaves %d", len))
    end
    if o + math.min(len, 32) > ctx.lim then
        short(ctx, tree, o + math.min(len, 32), "OneHop path")
        return
    end
    if len < 32 then return end
    local ts = add_info_field(ctx, tree, o, 0, true)
    add_hop_field(ctx, tree, o + 8, 0, "Hop field", ts, false)
    add_hop_field(ctx, tree, o + 20, 1, "Hop field", ts, false)
end

local function dissect_epichp(ctx, tree, o, len)
    local tvb = ctx.tvb
    if len < 16 then
        problem(ctx, tree, "malformed", string.format("EPIC-HP path needs 16 bytes before the SCION path, HdrLen leaves %d", len))
        return
    end
    if o + 16 > ctx.lim then
        short(ctx, tree, o + 16, "EPIC-HP fields")
        return
    end
    tree:add(H.ehp_ts, tvb(o, 4))
    tree:add(H.ehp_counter, tvb(o + 4, 4))
    tree:add(H.ehp_phvf, tvb(o + 8, 4))
    tree:add(H.ehp_lhvf, tvb(o + 12, 4))
    dissect_std_path(ctx, tree, o + 16, len - 16, true)
end

-- SIBRA layout (scion/sibra/mod.rs Layout).
local function sibra_layout(flags, hops)
    local l = { hops = hops, n_blocks = 0, total = hops[1] + hops[2] + hops[3] }
    for k = 1, 3 do if hops[k] ~= 0 then l.n_blocks = l.n_blocks + 1 end end
    l.steady, l.setup, l.request = flag(flags, 0x08), flag(flags, 0x80), flag(flags, 0x40)
    l.accepted = flag(flags, 0x20)
    if l.steady then l.ids_len = 8
    elseif l.setup then l.ids_len = 16 + 8 * l.n_blocks
    else l.ids_len = 16 end
    l.blocks_off = 8 + l.ids_len
    l.request_off = l.blocks_off + 8 * l.n_blocks + 8 * l.total
    l.len = l.request_off + (l.request and (8 + 8 * l.total) or 0)
    return l
end

local function id_text(tvb, o, n)
    -- Path IDs start with the owner/source AS number (48 bits), then a suffix.
    local asn = fmt_as(tvb(o, 2):uint(), tvb(o + 2, 4):uint())
    return string.format("AS %s, suffix %s", asn, hexbytes(tvb, o + 6, n - 6))
end

local function add_resv_info(ctx, tree, o, label)
    local tvb = ctx.tvb
    local exp = tvb(o, 4):uint()
    local fwd, rev = tvb(o + 4, 1):uint(), tvb(o + 5, 1):uint()
    local idx = bits(tvb(o + 6, 1):uint(), 4, 4)
    local t = tree:add(H.sb_ri, tvb(o, 8))
    t:set_text(string.format("%s: expires tick %d, class %d/%d, index %d", label, exp, fwd, rev, idx))
    t:add(H.sb_ri_exp, tvb(o, 4)):append_text(" (" .. utc(exp * 4) .. ")")
    t:add(H.sb_ri_bw_fwd, tvb(o + 4, 1)):append_text(" (" .. sibra_bw(fwd) .. ")")
    t:add(H.sb_ri_bw_rev, tvb(o + 5, 1)):append_text(" (" .. sibra_bw(rev) .. ")")
    t:add(H.sb_ri_index, tvb(o + 6, 1))
    t:add(H.sb_ri_fwd, tvb(o + 6, 1))
    t:add(H.sb_ri_rsv, tvb(o + 6, 1))
    t:add(H.sb_ri_fail, tvb(o + 7, 1))
    return tvb(o + 7, 1):uint()
end

local function add_sof(ctx, tree, o, label, current)
    local tvb = ctx.tvb
    local ing, eg = tvb(o, 2):uint(), tvb(o + 2, 2):uint()
    local t = tree:add(H.sb_sof, tvb(o, 8))
    t:set_text(string.format("%s: %d -> %d, MAC %s", label, ing, eg, hexbytes(tvb, o + 4, 4)))
    if current then t:append_text(" (current)") end
    t:add(H.sb_sof_ingress, tvb(o, 2))
    t:add(H.sb_sof_egress, tvb(o + 2, 2))
    t:add(H.sb_sof_mac, tvb(o + 4, 4))
end

local function dissect_sibra(ctx, tree, o, len)
    local tvb = ctx.tvb
    local st = tree:add(H.sibra, tvb(o, math.max(0, math.min(len, ctx.lim - o))))
    st:set_text("SIBRA path")
    if len < 8 then
        problem(ctx, st, "malformed", string.format("SIBRA path needs 8 bytes, HdrLen leaves %d", len))
        return
    end
    if o + 8 > ctx.lim then
        short(ctx, st, o + 8, "SIBRA fixed header")
        return
    end
    local flags = tvb(o, 1):uint()
    local curr = tvb(o + 1, 1):uint()
    local hops = { tvb(o + 2, 1):uint(), tvb(o + 3, 1):uint(), tvb(o + 4, 1):uint() }
    local l = sibra_layout(flags, hops)
    local ft = st:add(H.sb_flags, tvb(o, 1))
    for _, f in ipairs({ H.sb_setup, H.sb_request, H.sb_accepted, H.sb_error, H.sb_steady, H.sb_forward, H.sb_version }) do
        ft:add(f, tvb(o, 1))
    end
    st:add(H.sb_curr_hop, tvb(o + 1, 1))
    st:add(H.sb_p0, tvb(o + 2, 1))
    st:add(H.sb_p1, tvb(o + 3, 1))
    st:add(H.sb_p2, tvb(o + 4, 1))
    st:add(H.sb_rsv, tvb(o + 5, 3))
    st:add(H.sb_num_blocks, tvb(o + 2, 3), l.n_blocks):set_generated()
    st:add(H.sb_total_hops, tvb(o + 2, 3), l.total):set_generated()
    local kind = (l.steady and "steady" or "ephemeral") .. (l.request and (l.setup and " setup request" or " renewal request") or " data")
    st:set_text(string.format("SIBRA path: %s, hop %d of %d, %d block%s", kind, curr, l.total,
        l.n_blocks, l.n_blocks == 1 and "" or "s"))
    ctx.info_path = string.format("SIBRA %s hop %d/%d", kind, curr, l.total)

    -- scion/sibra/view.rs SibraPath::check_len, in its order.
    local fatal = false
    if bits(flags, 0, 2) ~= 0 then
        problem(ctx, ft, "malformed", string.format("SIBRA version %d (only 0 is defined)", bits(flags, 0, 2)))
        fatal = true
    end
    if (hops[1] == 0 and hops[2] ~= 0) or (hops[2] == 0 and hops[3] ~= 0) then
        problem(ctx, st, "malformed", "SIBRA block hop counts not contiguous from P0")
        fatal = true
    elseif l.n_blocks == 0 then
        problem(ctx, st, "malformed", "SIBRA path without active block")
        fatal = true
    elseif l.total > 64 then
        problem(ctx, st, "malformed", "SIBRA path longer than 64 hops")
        fatal = true
    end
    if not fatal and curr >= l.total then
        problem(ctx, st, "malformed", string.format("SIBRA CurrHop %d beyond the %d hops of the active blocks", curr, l.total))
    end
    if not fatal and l.len ~= len then
        problem(ctx, st, "malformed", string.format("SIBRA path needs %d bytes, HdrLen leaves %d", l.len, len))
        if l.len > len then fatal = true end
    end
    if fatal then return end

    local function need(off, n, what)
        if off + n > ctx.lim then
            short(ctx, st, off + n, what)
            return false
        end
        return true
    end
    -- Path IDs.
    local p = o + 8
    if not need(p, l.ids_len, "SIBRA path IDs") then return end
    if l.steady then
        st:add(H.sb_steady_id, tvb(p, 8)):append_text(" (" .. id_text(tvb, p, 8) .. ")")
    else
        st:add(H.sb_eph_id, tvb(p, 16)):append_text(" (" .. id_text(tvb, p, 16) .. ")")
        if l.setup then
            for k = 0, l.n_blocks - 1 do
                local q = p + 16 + 8 * k
                st:add(H.sb_steady_id, tvb(q, 8)):append_text(string.format(" of block %d (%s)", k, id_text(tvb, q, 8)))
            end
        end
    end
    -- Active blocks.
    p = o + l.blocks_off
    local h = 0
    for k = 0, l.n_blocks - 1 do
        local n = hops[k + 1]
        if not need(p, 8 + 8 * n, string.format("SIBRA block %d", k)) then return end
        local bt = st:add(H.sb_block, tvb(p, 8 + 8 * n))
        bt:set_text(string.format("Active block %d: %d hops", k, n))
        add_resv_info(ctx, bt, p, "Reservation info")
        for j = 0, n - 1 do
            add_sof(ctx, bt, p + 8 + 8 * j, string.format("SOF %d.%d (hop %d)", k, j, h), h == curr)
            h = h + 1
        end
        p = p + 8 + 8 * n
    end
    -- Request block.
    if l.request then
        if not need(p, 8 + 8 * l.total, "SIBRA request block") then return end
        local rt = st:add(H.sb_req, tvb(p, 8 + 8 * l.total))
        rt:set_text(string.format("Request block: %d slots, %s", l.total, l.accepted and "accepted so far" or "denied"))
        local fail = add_resv_info(ctx, rt, p, "Requested reservation")
        for i = 0, l.total - 1 do
            local q = p + 8 + 8 * i
            -- While A=1 every hop writes its SOF; from the hop that denied
            -- (fail_hop, 1-based) on, the hops write offers.
            if l.accepted or fail == 0 or i + 1 < fail then
                add_sof(ctx, rt, q, string.format("Slot %d (SOF)", i), false)
            else
                local ot = rt:add(H.sb_offer, tvb(q, 8))
                ot:set_text(string.format("Slot %d (offer): max class %d/%d", i, tvb(q, 1):uint(), tvb(q + 1, 1):uint()))
                ot:add(H.sb_offer_fwd, tvb(q, 1)):append_text(" (" .. sibra_bw(tvb(q, 1):uint()) .. ")")
                ot:add(H.sb_offer_rev, tvb(q + 1, 1)):append_text(" (" .. sibra_bw(tvb(q + 1, 1):uint()) .. ")")
            end
        end
    end
end

-- EPIC-Z: hop count from NumHVF, or inferred from the length (scion/epic.rs locate).
local function epic_locate(tvb, o, len)
    local FIXED, PER_HOP = 16, 16
    if len < FIXED + 8 + PER_HOP then
        return nil, "malformed", string.format("EPIC-Z path of %d bytes is shorter than the smallest (40)", len)
    end
    local n = tvb(o + 9, 1):uint()
    if n ~= 0 then
        if n > 64 then return nil, "malformed", string.format("EPIC-Z NumHVF %d above 64", n) end
        local meta = 12 + 4 * n
        if meta + 4 > len then return nil, "malformed", "EPIC-Z path ends before its SCION meta header" end
        local m = decode_meta(tvb(o + meta, 4):uint())
        if m.n_hf ~= n then
            return nil, "malformed", string.format("EPIC-Z NumHVF %d but the SCION path has %d hop fields", n, m.n_hf)
        end
        local err = meta_error(m)
        if err then return nil, "malformed", "EPIC-Z embedded path: " .. err end
        local want = FIXED + n * PER_HOP + 8 * m.n_inf
        if len < want then
            return nil, "malformed", string.format("EPIC-Z path needs %d bytes, HdrLen leaves %d", want, len)
        elseif len > want then
            return nil, "malformed", string.format("EPIC-Z path length %d does not match its SCION path (%d)", len, want)
        end
        return n
    end
    local rest = len - FIXED
    local function try_k(k)
        local infos = 8 * k
        if rest < infos + PER_HOP then return nil end
        local cand = math.floor((rest - infos) / PER_HOP)
        if cand > 64 then return nil end
        local m = decode_meta(tvb(o + 12 + 4 * cand, 4):uint())
        if m.n_inf == k and m.n_hf == cand and not meta_error(m) then return cand end
        return nil
    end
    local found
    if rest % PER_HOP == 0 then found = try_k(2)
    elseif rest % PER_HOP == 8 then found = try_k(1) or try_k(3) end
    if not found then return nil, "malformed", "EPIC-Z path length does not match its SCION path" end
    return found
end

local function dissect_epicz(ctx, tree, o, len)
    local tvb = ctx.tvb
    local et = tree:add(H.epic, tvb(o, math.max(0, math.min(len, ctx.lim - o))))
    et:set_text("EPIC-Z path")
    if len < 12 then
        problem(ctx, et, "malformed", string.format("EPIC-Z block needs 12 bytes, HdrLen leaves %d", len))
        return
    end
    if o + 12 > ctx.lim then
        short(ctx, et, o + 12, "EPIC-Z block")
        return
    end
    local pt = et:add(H.ep_pkt_id, tvb(o, 8))
    pt:add(H.ep_ts_rel, tvb(o, 4))
    pt:add(H.ep_core_id, tvb(o + 4, 1))
    pt:add(H.ep_counter, tvb(o + 5, 3))
    local flags = tvb(o + 8, 1):uint()
    local ft = et:add(H.ep_flags, tvb(o + 8, 1))
    ft:add(H.ep_q, tvb(o + 8, 1))
    ft:add(H.ep_flags_rsv, tvb(o + 8, 1))
    et:add(H.ep_num_hvf, tvb(o + 9, 1))
    et:add(H.ep_rsv, tvb(o + 10, 2))
    local q = flag(flags, 0x80)
    ctx.info_path = "EPIC-Z" .. (q and " Q" or "")
    if o + len > ctx.lim then
        short(ctx, et, o + len, "EPIC-Z path")
        return
    end
    local n, kind, why = epic_locate(tvb, o, len)
    if not n then
        problem(ctx, et, kind, why)
        return
    end
    if tvb(o + 9, 1):uint() == 0 then
        et:add_proto_expert_info(EX.scion.inferred, string.format(
            "NumHVF is 0: hop count %d inferred from the path length", n))
    end
    local hvfs = {}
    for i = 0, n - 1 do
        hvfs[i] = et:add(H.ep_hvf, tvb(o + 12 + 4 * i, 4))
        hvfs[i]:set_text(string.format("HVF %d: %s", i, hexbytes(tvb, o + 12 + 4 * i, 4)))
    end
    local m = dissect_std_path(ctx, et, o + 12 + 4 * n, len - 12 - 4 * n, true)
    if m then
        if hvfs[m.curr_hf] then hvfs[m.curr_hf]:append_text(" (current)") end
        if m.info_ts then
            local ts_rel = tvb(o, 4):uint()
            local us = ts_rel * 4
            local secs = m.info_ts + math.floor(us / 1000000)
            local ns = (us % 1000000) * 1000
            pt:add(H.ep_time, tvb(o, 4), NSTime.new(secs, ns)):set_generated()
        end
        ctx.info_path = string.format("EPIC-Z%s hop %d/%d", q and " Q" or "", m.curr_hf, m.n_hf)
    end
end

local function add_host(ctx, tree, o, code, which)
    local tvb = ctx.tvb
    local n = host_len(code)
    local f_raw = which == "dst" and H.dst_host or H.src_host
    local item = tree:add(f_raw, tvb(o, n))
    local text
    if code == 0 then
        item:add(which == "dst" and H.dst_host_ipv4 or H.src_host_ipv4, tvb(o, 4))
        text = tostring(tvb(o, 4):ipv4())
    elseif code == 3 then
        item:add(which == "dst" and H.dst_host_ipv6 or H.src_host_ipv6, tvb(o, 16))
        text = tostring(tvb(o, 16):ipv6())
    elseif code == 4 then
        item:add(which == "dst" and H.dst_host_svc or H.src_host_svc, tvb(o, 2))
        text = string.format("SVC 0x%04x", tvb(o, 2):uint())
    else
        text = hexbytes(tvb, o, n)
        item:add_proto_expert_info(EX.scion.unsupported, string.format(
            "host address type %d, length %d bytes: not decoded", math.floor(code / 4), n))
    end
    item:set_text(string.format("%s host: %s", which == "dst" and "Destination" or "Source", text))
    return text
end

-- SCION/UDP, SCMP and extension headers after the path.
local function dissect_scion_payload(ctx, pinfo, tree, root, off, payload_len, next_hdr)
    local tvb = ctx.tvb
    local pend = off + payload_len
    local stop = math.min(pend, ctx.lim)
    -- An extension header must fit in PayloadLen; past the capture it is cut.
    local function ext_short(need)
        if need > pend then
            problem(ctx, root, "malformed", string.format(
                "SCION extension header ends at byte %d, PayloadLen ends the payload at %d", need, pend))
        else
            short(ctx, root, need, "SCION extension header")
        end
    end
    -- At most one hop-by-hop then one end-to-end options header (packet.rs l4()).
    for _, ext in ipairs({ 200, 201 }) do
        if next_hdr == ext then
            if off + 2 > stop then
                ext_short(off + 2)
                return nil
            end
            local n = (tvb(off + 1, 1):uint() + 1) * 4
            if off + n > stop then
                ext_short(off + n)
                return nil
            end
            local t = root:add(H.ext, tvb(off, n))
            t:set_text((ext == 200 and "Hop-by-hop" or "End-to-end") .. " options header")
            t:add(H.ext_next_hdr, tvb(off, 1))
            t:add(H.ext_len, tvb(off + 1, 1))
            if n > 2 then t:add(H.ext_options, tvb(off + 2, n - 2)) end
            next_hdr = tvb(off, 1):uint()
            off = off + n
        end
    end
    if next_hdr == 200 or next_hdr == 201 then
        problem(ctx, root, "malformed", "SCION extension headers out of order")
        return hand_to_data(tvb, off, pinfo, tree)
    end
    if next_hdr == 17 and off + 8 <= stop then
        local ut = root:add(H.udp, tvb(off, 8))
        local sp, dp, ulen = tvb(off, 2):uint(), tvb(off + 2, 2):uint(), tvb(off + 4, 2):uint()
        ut:set_text(string.format("SCION/UDP, Src Port: %d, Dst Port: %d", sp, dp))
        ut:add(H.udp_srcport, tvb(off, 2))
        ut:add(H.udp_dstport, tvb(off + 2, 2))
        local lt = ut:add(H.udp_length, tvb(off + 4, 2))
        ut:add(H.udp_checksum, tvb(off + 6, 2))
        local avail = payload_len - (off - ctx.hdr_len)
        if ulen ~= avail then
            lt:add_proto_expert_info(EX.scion.udp_length, string.format(
                "SCION/UDP length %d, the SCION payload leaves %d", ulen, avail))
        end
        ctx.info_l4 = string.format("UDP %d -> %d", sp, dp)
        off = off + 8
    elseif next_hdr == 202 and off + 4 <= stop then
        local typ = tvb(off, 1):uint()
        local t = root:add(H.scmp, tvb(off, 4))
        t:set_text(string.format("SCMP: %s, code %d", SCMP_TYPES[typ] or ("type " .. typ), tvb(off + 1, 1):uint()))
        t:add(H.scmp_type, tvb(off, 1))
        t:add(H.scmp_code, tvb(off + 1, 1))
        t:add(H.scmp_checksum, tvb(off + 2, 2))
        ctx.info_l4 = "SCMP " .. (SCMP_TYPES[typ] or tostring(typ))
        off = off + 4
    end
    if stop > off then
        return function() data_dissector:call(tvb:range(off, stop - off):tvb(), pinfo, tree) end
    end
    return nil
end

local function dissect_scion(tvb, pinfo, tree, ctx)
    ctx.tvb = tvb
    local cap = tvb:len()
    ctx.lim = cap
    pinfo.cols.protocol = "SCION"
    local root = tree:add(p_scion, tvb(0, math.min(cap, 12)))
    ctx.root = root
    if cap < 12 then
        pinfo.cols.info = "SCION [" .. short(ctx, root, 12, "SCION common header") .. "]"
        return cap
    end
    local ver = bits(tvb(0, 1):uint(), 4, 4)
    local hl_units = tvb(5, 1):uint()
    local hl = hl_units * 4
    local payload_len = tvb(6, 2):uint()
    local path_type = tvb(8, 1):uint()
    local types = tvb(9, 1):uint()
    local dcode, scode = bits(types, 4, 4), bits(types, 0, 4)
    local path_off = 28 + host_len(dcode) + host_len(scode)
    ctx.hdr_len = hl
    root:set_len(math.min(cap, math.max(hl, 12)))

    local vt = root:add(H.version, tvb(0, 1))
    root:add(H.qos, tvb(0, 2))
    root:add(H.flow_id, tvb(1, 3))
    root:add(H.next_hdr, tvb(4, 1))
    local ht = root:add(H.hdr_len, tvb(5, 1))
    ht:append_text(string.format(" (%d bytes)", hl))
    local plt = root:add(H.payload_len, tvb(6, 2))
    local ptt = root:add(H.path_type, tvb(8, 1))
    root:add(H.dt, tvb(9, 1)):append_text(" (" .. (HOST_TYPES[dcode] or "?") .. ")")
    root:add(H.dl, tvb(9, 1)):append_text(string.format(" (%d bytes)", host_len(dcode)))
    root:add(H.st, tvb(9, 1)):append_text(" (" .. (HOST_TYPES[scode] or "?") .. ")")
    root:add(H.sl, tvb(9, 1)):append_text(string.format(" (%d bytes)", host_len(scode)))
    root:add(H.rsv, tvb(10, 2))

    -- scion/header.rs ScionHeader::check_len, in its order.
    if ver ~= 0 then
        problem(ctx, vt, "malformed", string.format("SCION version %d (only 0 is defined)", ver))
        pinfo.cols.info = string.format("SCION version %d", ver)
        return cap
    end
    local hl_ok = true
    if hl < path_off then
        problem(ctx, ht, "malformed", string.format(
            "HdrLen %d bytes is shorter than the common and address headers (%d)", hl, path_off))
        hl_ok = false
    end
    local short_payload = nil -- "malformed" or "truncated"
    if hl_ok and tvb:reported_len() >= hl and tvb:reported_len() - hl < payload_len then
        problem(ctx, plt, "malformed", string.format(
            "PayloadLen %d exceeds the %d bytes after the header", payload_len, tvb:reported_len() - hl))
        short_payload = "malformed"
    elseif hl_ok and cap >= hl and cap - hl < payload_len then
        problem(ctx, plt, "truncated", string.format("payload of %d bytes, %d captured", payload_len, cap - hl))
        short_payload = "truncated"
    end

    -- Address header.
    local dst_ia, src_ia = "?", "?"
    if cap < 28 then
        pinfo.cols.info = "SCION [" .. short(ctx, root, 28, "SCION address header") .. "]"
        return cap
    end
    local isd, as_text, ia = read_ia(tvb, 12)
    dst_ia = ia
    local at = root:add(H.dst_ia, tvb(12, 8), ia)
    at:add(H.dst_isd, tvb(12, 2))
    at:add(H.dst_as, tvb(14, 6)):set_text("Destination AS: " .. as_text)
    isd, as_text, ia = read_ia(tvb, 20)
    src_ia = ia
    at = root:add(H.src_ia, tvb(20, 8), ia)
    at:add(H.src_isd, tvb(20, 2))
    at:add(H.src_as, tvb(22, 6)):set_text("Source AS: " .. as_text)
    local dst_text, src_text = "?", "?"
    if 28 + host_len(dcode) <= cap then
        dst_text = add_host(ctx, root, 28, dcode, "dst")
        if path_off <= cap then
            src_text = add_host(ctx, root, 28 + host_len(dcode), scode, "src")
        end
    end
    local info = string.format("%s,[%s] -> %s,[%s]", src_ia, src_text, dst_ia, dst_text)
    root:append_text(string.format(", %s -> %s, %s path", src_ia, dst_ia, PATH_TYPES[path_type] or tostring(path_type)))
    if path_off > cap then
        short(ctx, root, path_off, "SCION host addresses")
        pinfo.cols.info = info
        return cap
    end
    if not hl_ok then
        pinfo.cols.info = info .. " [malformed]"
        return cap
    end

    -- Path.
    local plen = hl - path_off
    if hl > cap then
        short(ctx, root, hl, "SCION header (HdrLen)")
    end
    ctx.lim = math.min(cap, hl)
    local pathtree = root
    if plen > 0 and path_off < ctx.lim then
        pathtree = root:add(H.path, tvb(path_off, ctx.lim - path_off))
        pathtree:set_text(string.format("Path: %s, %d bytes", PATH_TYPES[path_type] or ("type " .. path_type), plen))
    end
    local sibra_t, epicz_t = p_scion.prefs.sibra_type, p_scion.prefs.epicz_type
    ctx.info_path = PATH_TYPES[path_type] or ("path type " .. path_type)
    if path_type == 0 then
        if plen ~= 0 then
            problem(ctx, ptt, "malformed", string.format("empty path but HdrLen leaves %d bytes", plen))
        end
    elseif path_type == 1 then
        local m = dissect_std_path(ctx, pathtree, path_off, plen, true)
        if m then ctx.info_path = string.format("SCION hop %d/%d", m.curr_hf, m.n_hf) end
    elseif path_type == sibra_t then
        dissect_sibra(ctx, pathtree, path_off, plen)
    elseif path_type == epicz_t then
        dissect_epicz(ctx, pathtree, path_off, plen)
    elseif path_type == 2 or path_type == 3 then
        ctx.lenient = true
        if path_type == 2 then
            dissect_onehop(ctx, pathtree, path_off, plen)
        else
            dissect_epichp(ctx, pathtree, path_off, plen)
        end
        ctx.lenient = false
    else
        ptt:add_proto_expert_info(EX.scion.unsupported, string.format(
            "path type %d is not decoded (%d bytes shown raw)", path_type, plen))
    end
    pinfo.cols.info = info .. " " .. ctx.info_path

    ctx.lim = cap
    if hl > cap then return cap end
    local after = dissect_scion_payload(ctx, pinfo, tree, root, hl, payload_len, tvb(4, 1):uint())
    if ctx.info_l4 then pinfo.cols.info:append(" " .. ctx.info_l4) end
    if short_payload then pinfo.cols.info:append(" [" .. short_payload .. "]") end
    return cap, after
end

p_scion.dissector = guarded(p_scion, EX.scion, dissect_scion)

-- Heuristic on UDP: accepts only what parses as a consistent SCION header whose
-- header and payload fill the UDP payload exactly.
local function heur_scion(tvb, pinfo, tree)
    local cap = tvb:len()
    if cap < 36 then return false end
    if tvb(0, 1):uint() >= 16 then return false end -- version != 0
    local hl = tvb(5, 1):uint() * 4
    if hl + tvb(6, 2):uint() ~= tvb:reported_len() then return false end
    local pt = tvb(8, 1):uint()
    if not (PATH_TYPES[pt] or pt == p_scion.prefs.sibra_type or pt == p_scion.prefs.epicz_type) then
        return false
    end
    if not SCION_NEXT_HDRS[tvb(4, 1):uint()] then return false end
    local types = tvb(9, 1):uint()
    local dcode, scode = bits(types, 4, 4), bits(types, 0, 4)
    if not HOST_TYPES[dcode] or not HOST_TYPES[scode] then return false end
    local po = 28 + host_len(dcode) + host_len(scode)
    if hl < po then return false end
    if pt == 0 and hl ~= po then return false end
    if pt == 1 then
        if po + 4 > cap then return false end
        local m = decode_meta(tvb(po, 4):uint())
        if meta_error(m) or m.len ~= hl - po then return false end
    end
    p_scion.dissector(tvb, pinfo, tree)
    return true
end

---------------------------------------------------------------------------
-- FlowPolice (flowpolice.rs)
---------------------------------------------------------------------------

local function dissect_fp(tvb, pinfo, tree, ctx)
    ctx.tvb = tvb
    local cap = tvb:len()
    pinfo.cols.protocol = "FlowPolice"
    local root = tree:add(p_fp, tvb(0, math.min(cap, 28)))
    ctx.root = root
    if cap < 4 then
        pinfo.cols.info = "FlowPolice [" .. short(ctx, root, 4, "FlowPolice header") .. "]"
        return cap
    end
    local nh = tvb(0, 1):uint()
    local t = bits(tvb(1, 1):uint(), 6, 2)
    local hdr_len = tvb(2, 2):uint()
    root:add(F.next_header, tvb(0, 1))
    local tt = root:add(F.type, tvb(1, 1))
    root:add(F.flags, tvb(1, 1))
    local lt = root:add(F.hdr_len, tvb(2, 2))
    local want = (t == 0) and 44 or 28
    local ok = true
    if t == 1 then
        problem(ctx, tt, "malformed", "FlowPolice type 01 is undefined")
        ok = false
    elseif hdr_len ~= want then
        problem(ctx, lt, "malformed", string.format("hdr_len %d does not match type %s (%d bytes)", hdr_len, FP_TYPES[t], want))
        ok = false
    end
    root:set_len(math.min(cap, want))
    root:append_text(", " .. FP_TYPES[t])
    local info = "FlowPolice " .. FP_TYPES[t]
    if cap < 28 then
        pinfo.cols.info = info .. " [" .. short(ctx, root, want, "FlowPolice " .. FP_TYPES[t] .. " header") .. "]"
        return cap
    end
    local ct = root:add(F.capability, tvb(4, 22))
    local p_id, ts = tvb(4, 2):uint(), tvb(14, 4):uint()
    local flow_hi, flow_lo = tvb(6, 4):uint(), tvb(10, 4):uint()
    ct:set_text(string.format("Capability: P_id %d, flow %08x%08x, T_A %d ms, MAC %s", p_id, flow_hi, flow_lo, ts,
        hexbytes(tvb, 18, 8)))
    ct:add(F.p_id, tvb(4, 2))
    local fi = ct:add(F.flow_id, tvb(6, 8))
    if flow_hi == 0 and flow_lo ~= 0 then
        fi:append_text(string.format(" (IPv4 %d.%d.%d.%d)", bits(flow_lo, 24, 8), bits(flow_lo, 16, 8),
            bits(flow_lo, 8, 8), bits(flow_lo, 0, 8)))
    end
    ct:add(F.ts, tvb(14, 4))
    ct:add(F.mac, tvb(18, 8))
    root:add(F.reserved, tvb(26, 2))
    if t == 0 then
        if cap < 44 then
            pinfo.cols.info = info .. " [" .. short(ctx, root, 44, "FlowPolice request header") .. "]"
            return cap
        end
        local pz = root:add(F.puzzle, tvb(28, 16))
        local level = tvb(32, 1):uint()
        pz:set_text(string.format("Puzzle: epoch %d, level %d, nonce 0x%s", tvb(28, 4):uint(), level, hexbytes(tvb, 36, 8)))
        pz:add(F.epoch, tvb(28, 4))
        pz:add(F.level, tvb(32, 1))
        pz:add(F.puzzle_rsv, tvb(33, 3))
        pz:add(F.nonce, tvb(36, 8))
        info = string.format("%s level %d epoch %d", info, level, tvb(28, 4):uint())
    else
        info = string.format("%s P_id %d flow %08x%08x", info, p_id, flow_hi, flow_lo)
    end
    pinfo.cols.info = info .. ", "
    pinfo.cols.info:fence()
    if not ok then return math.min(cap, want), hand_to_data(tvb, math.min(cap, want), pinfo, tree) end
    return cap, hand_to_ip_proto(tvb, want, nh, pinfo, tree)
end

p_fp.dissector = guarded(p_fp, EX.flowpolice, dissect_fp)

---------------------------------------------------------------------------
-- FAIR (fair.rs)
---------------------------------------------------------------------------

local fx_ip_version = Field.new("ip.version")
local fx_ipv6_version = Field.new("ipv6.version")

-- 6 if the innermost IP header before `tvb` is IPv6, else 4. Both IP
-- dissectors add `ip.version` (IPv6 as a hidden field at the same offset as
-- `ipv6.version`), so the carrier is the version value of the innermost one,
-- not which of the two fields was found.
local function fair_carrier(tvb, pinfo)
    local here = tvb:offset()
    local best, carrier = -1, nil
    for _, fx in ipairs({ fx_ip_version, fx_ipv6_version }) do
        local ok, list = pcall(function() return { fx() } end)
        if ok then
            for _, fi in ipairs(list) do
                local off, v = fi.offset, tonumber(fi.value)
                if off and off < here and off >= best and (v == 4 or v == 6) then
                    best, carrier = off, v
                end
            end
        end
    end
    if carrier then return carrier end
    if string.find(tostring(pinfo.net_dst), ":", 1, true) then return 6 end
    return 4
end

local function dissect_fair(tvb, pinfo, tree, ctx)
    ctx.tvb = tvb
    local cap = tvb:len()
    pinfo.cols.protocol = "FAIR"
    local carrier = fair_carrier(tvb, pinfo)
    local root = tree:add(p_fair, tvb(0, math.min(cap, 9)))
    ctx.root = root
    root:add(R.carrier, tvb(0, 0), carrier):set_generated()
    if cap < 9 then
        pinfo.cols.info = "FAIR [" .. short(ctx, root, 9, "FAIR header") .. "]"
        return cap
    end
    local nh, h = tvb(0, 1):uint(), tvb(1, 1):uint()
    root:add(R.next_header, tvb(0, 1))
    local ht = root:add(R.hdr_len, tvb(1, 1))
    local len
    if carrier == 6 then
        len = (h + 1) * 8
        ht:append_text(string.format(" (8-octet units beyond the first 8: %d bytes)", len))
        if h == 0 or h > 16 then
            problem(ctx, ht, "malformed", string.format("IPv6 FAIR hdr_len %d outside 1..16", h))
            len = nil
        end
    else
        len = h
        ht:append_text(" (bytes)")
        if h < 9 or h > 136 then
            problem(ctx, ht, "malformed", string.format("IPv4 FAIR shim hdr_len %d outside 9..136", h))
            len = nil
        end
    end
    local ts, seq = tvb(2, 2):uint(), tvb(4, 3):uint()
    root:add(R.timestamp, tvb(2, 2))
    root:add(R.seqno, tvb(4, 3))
    root:add(R.icv, tvb(7, 1))
    local nat = root:add(R.next_as, tvb(8, 1))
    nat:add(R.sb, tvb(8, 1))
    nat:add(R.ptr, tvb(8, 1))
    local ptr = bits(tvb(8, 1):uint(), 0, 7)
    local sb = flag(tvb(8, 1):uint(), 0x80)
    local info = string.format("FAIR seq %d ts %d", seq, ts)
    if not len then
        pinfo.cols.info = info .. " [malformed]"
        return cap, hand_to_data(tvb, 9, pinfo, tree)
    end
    local n = len - 9
    root:set_len(math.min(cap, len))
    root:add(R.length, tvb(1, 1), len):set_generated()
    root:add(R.mark_count, tvb(1, 1), n):set_generated()
    root:append_text(string.format(", %s, %d of %d marks written%s", FAIR_CARRIERS[carrier], ptr, n, sb and ", SB" or ""))
    info = string.format("%s marks %d/%d%s", info, ptr, n, sb and " SB" or "")
    if ptr > n then
        problem(ctx, nat, "malformed", string.format("NextAS pointer %d beyond the %d slots", ptr, n))
    end
    local shown = math.min(n, cap - 9)
    if shown > 0 then
        local mt = root:add(R.marks, tvb(9, shown))
        mt:set_text(string.format("Marks (%d slots)", n))
        for i = 0, shown - 1 do
            local v = tvb(9 + i, 1):uint()
            local it = mt:add(R.mark, tvb(9 + i, 1))
            it:set_text(string.format("Mark %d: 0x%02x (nonce 0x%x, MAC 0x%x)%s", i, v, bits(v, 4, 4), bits(v, 0, 4),
                i < ptr and "" or " unused"))
            it:add(R.mark_nonce, tvb(9 + i, 1))
            it:add(R.mark_mac, tvb(9 + i, 1))
        end
    end
    if len > cap then
        pinfo.cols.info = info .. " [" .. short(ctx, root, len, "FAIR header (hdr_len)") .. "]"
        return cap
    end
    pinfo.cols.info = info .. ", "
    pinfo.cols.info:fence()
    return cap, hand_to_ip_proto(tvb, len, nh, pinfo, tree)
end

p_fair.dissector = guarded(p_fair, EX.fair, dissect_fair)

---------------------------------------------------------------------------
-- Registration
---------------------------------------------------------------------------

local udp_table = DissectorTable.get("udp.port")
local registered = { udp = nil, fp = nil, fair = nil }

local function register_all()
    if registered.udp then pcall(function() udp_table:remove(registered.udp, p_scion) end) end
    local ports = p_scion.prefs.udp_ports
    if ports and ports ~= "" then
        udp_table:add(ports, p_scion)
        registered.udp = ports
    end
    if registered.fp then pcall(function() ip_proto_table:remove(registered.fp, p_fp) end) end
    ip_proto_table:add(p_fp.prefs.proto, p_fp)
    registered.fp = p_fp.prefs.proto
    if registered.fair then pcall(function() ip_proto_table:remove(registered.fair, p_fair) end) end
    ip_proto_table:add(p_fair.prefs.proto, p_fair)
    registered.fair = p_fair.prefs.proto
end

register_all()
p_scion.prefs_changed = register_all
p_fp.prefs_changed = register_all
p_fair.prefs_changed = register_all

-- "Decode As" entries, so that a user can put SCION on any UDP port.
if udp_table.add_for_decode_as then
    udp_table:add_for_decode_as(p_scion)
    ip_proto_table:add_for_decode_as(p_fp)
    ip_proto_table:add_for_decode_as(p_fair)
end

p_scion:register_heuristic("udp", heur_scion)
