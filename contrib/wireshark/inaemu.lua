-- inaemu.lua: shows NetReduce's INA header (InetTag "INA1", RingID, MsgID,
-- MsgLen, Rank) at the start of the payload of RDMA WRITE FIRST and
-- WRITE ONLY packets, as inaemu and the NetReduce paper (ASPLOS '23,
-- Fig. 4) put it there; multi-rack NetReduce's switch-to-switch frames
-- (partial sums, totals and notifications); INCEPTIONN's packed payloads;
-- INA-PS frames (ATP, ESA) and the INA-PS reliable channel (UDP port
-- 4792), each described further down.
--
-- Load it for one run:   wireshark -X lua_script:contrib/wireshark/inaemu.lua run.pcapng
--                        tshark -X lua_script:contrib/wireshark/inaemu.lua -r run.pcapng -V
-- or copy it into your personal plugins folder (Help > About > Folders).
--
-- Filter fields: ina.tag, ina.ring, ina.msg, ina.msglen, ina.rank, ina.data_len,
-- ina.reserved (the AllReduce-Switch's, below); ina.tree.* for the
-- switch-to-switch frames (listed further down).
--
-- The AllReduce-Switch program (inaemu run --switch-program ars; TCSI '21
-- Table IV, docs/ars.md) puts a 20-byte header in front of the data: the
-- same 8-byte INA header, then 12 reserved bytes that are zero. Its
-- captures say so in their section comment ("inaemu: switch-program=ars"),
-- which a Lua dissector cannot read, so the preference ina.header_len
-- (Edit > Preferences > Protocols > INA; tshark -o ina.header_len:20)
-- says how long the header is: 8 (NetReduce), 20 (AllReduce-Switch) or
-- auto, the default, which takes 20 when the 12 bytes after the INA
-- header are zero, the packet holds data after them and not all of it is
-- zero, and the WRITE's RETH DMA length has room for the 20 bytes. A tensor
-- whose first three elements are zero in a NetReduce capture, or of zeros
-- in an AllReduce-Switch capture, fools auto: set the preference.

local INA_TAG = 0x494E4131 -- "INA1"

local ina = Proto("ina", "NetReduce INA header")
local f_tag = ProtoField.uint32("ina.tag", "InetTag", base.HEX)
local f_ring = ProtoField.uint8("ina.ring", "RingID", base.DEC)
local f_msg = ProtoField.uint8("ina.msg", "MsgID", base.DEC)
local f_msglen = ProtoField.uint8("ina.msglen", "MsgLen (packets)", base.DEC)
local f_rank = ProtoField.uint8("ina.rank", "Rank", base.DEC)
local f_data = ProtoField.uint32("ina.data_len", "Tensor bytes in this packet", base.DEC)
local f_reserved = ProtoField.bytes("ina.reserved", "Reserved (AllReduce-Switch header, zero)")
ina.fields = { f_tag, f_ring, f_msg, f_msglen, f_rank, f_data, f_reserved }

local NR_HEADER, ARS_HEADER = 8, 20
ina.prefs.header_len = Pref.enum("Header length", 0,
	"Bytes in front of the data of a WRITE FIRST/ONLY: 8 (NetReduce's INA header), 20 (the AllReduce-Switch's: "
		.. "the INA header and 12 reserved bytes) or auto (20 when those 12 bytes are zero and data follows)",
	{ { 1, "auto", 0 }, { 2, "8", NR_HEADER }, { 3, "20", ARS_HEADER } }, false)

-- The InfiniBand dissector hands RDMA payloads to heuristic dissectors of
-- "infiniband.payload". Only WRITE FIRST (6) and WRITE ONLY (10) / ONLY
-- WITH IMMEDIATE (11) carry the header; the tag makes the match certain.
local f_opcode = Field.new("infiniband.bth.opcode")
local f_dmalen = Field.new("infiniband.reth.dmalen")

local function zeros(tvb, off, n)
	for i = off, off + n - 1 do
		if tvb(i, 1):uint() ~= 0 then
			return false
		end
	end
	return true
end

-- header_len is the header in front of this packet's data (ina.header_len;
-- auto as described at the top).
local function header_len(tvb)
	local pref = ina.prefs.header_len
	if pref ~= 0 then
		return pref
	end
	local n = tvb:len()
	if n <= ARS_HEADER or not zeros(tvb, NR_HEADER, ARS_HEADER - NR_HEADER) or zeros(tvb, ARS_HEADER, n - ARS_HEADER) then
		return NR_HEADER
	end
	local dl = f_dmalen()
	if dl ~= nil and dl.value < ARS_HEADER then
		return NR_HEADER
	end
	return ARS_HEADER
end

local function heuristic(tvb, pinfo, tree)
	if tvb:len() < 8 or tvb(0, 4):uint() ~= INA_TAG then
		return false
	end
	local op = f_opcode()
	if op == nil then
		return false
	end
	local code = op.value
	if code ~= 6 and code ~= 10 and code ~= 11 then
		return false
	end
	local hl = math.min(header_len(tvb), tvb:len())
	local t = tree:add(ina, tvb(0, hl))
	t:add(f_tag, tvb(0, 4))
	t:add(f_ring, tvb(4, 1))
	t:add(f_msg, tvb(5, 1))
	t:add(f_msglen, tvb(6, 1))
	t:add(f_rank, tvb(7, 1))
	if hl > NR_HEADER then
		t:add(f_reserved, tvb(NR_HEADER, hl - NR_HEADER))
	end
	t:add(f_data, tvb(hl, 0), tvb:len() - hl)
	local ars = hl > NR_HEADER and " hdr=" .. hl or ""
	t:append_text(string.format(", Ring %d, Msg %d, MsgLen %d, Rank %d%s",
		tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(6, 1):uint(), tvb(7, 1):uint(),
		hl > NR_HEADER and ", " .. (hl - NR_HEADER) .. " reserved bytes (AllReduce-Switch)" or ""))
	pinfo.cols.info:append(string.format(" [INA ring=%d msg=%d len=%d rank=%d%s]",
		tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(6, 1):uint(), tvb(7, 1):uint(), ars))
	return true
end

ina:register_heuristic("infiniband.payload", heuristic)

-- Multi-rack NetReduce's switch-to-switch frames (frames/wire/headers.go):
-- RoCEv2 packets with BTH opcode 0xE0 (partial sum, leaf to spine), 0xE1
-- (total, spine to leaf) or 0xE2 (notification: the headers of a
-- connection's first or last packet, leaf to leaf), whose payload is
--
--   INA (8) | INATree (16) | data | pad | ICRC (4, little-endian)
--
-- INATree: Msg (u32), Offset (u16, PSN minus the message's first PSN),
-- Flags (u8: 0x01 last packet of the message, 0x02 a notification of a
-- last packet, else of a first), a zero byte, then Ranks (u64, bit r set
-- when rank r is in the sum) for a partial or total, or for a
-- notification the header block length (u16), the original frame length
-- (u16) and 4 zero bytes. A notification's data is that header block.
--
-- How they are hooked: the opcodes are in the manufacturer-specific range,
-- which Wireshark's InfiniBand dissector (checked with tshark 4.0) shows as
-- "Vendor Specific or Unknown Header Sequence" without calling the
-- "infiniband.payload" heuristic dissectors or the "infiniband" Decode As
-- table. So the ina protocol is also a post-dissector: after a frame is
-- dissected it looks at the last BTH opcode, and for 0xE0-0xE2 with the
-- INA1 tag it reads the payload from 12 bytes past the opcode to the end
-- of the UDP datagram. This leaves the InfiniBand dissector and its UDP
-- port 4791 registration alone.
--
-- Filter fields: ina.tree.kind ("partial", "total", "notification"),
-- ina.tree.msg, ina.tree.offset, ina.tree.flags, ina.tree.flags.last,
-- ina.tree.flags.notify_last, ina.tree.ranks (the bitmap),
-- ina.tree.rank (one per rank in the sum), ina.tree.block_len,
-- ina.tree.frame_len, ina.tree.data_len, ina.tree.block, ina.tree.icrc;
-- the INA header's own fields are ina.tag, ina.ring, ina.msg, ina.msglen
-- and ina.rank, as above (for a partial, Rank is the leaf's child index).

local TREE_KINDS = {
	[0xE0] = { "partial", "Partial sum (leaf to spine)" },
	[0xE1] = { "total", "Total (spine to leaf)" },
	[0xE2] = { "notification", "Notification (leaf to leaf)" },
}
local INA_LEN, TREE_LEN, BTH_LEN, ICRC_LEN = 8, 16, 12, 4

local ft_kind = ProtoField.string("ina.tree.kind", "Kind")
local ft_msg = ProtoField.uint32("ina.tree.msg", "Msg (message number)", base.DEC)
local ft_offset = ProtoField.uint16("ina.tree.offset", "Offset (PSN - message's first PSN)", base.DEC)
local ft_flags = ProtoField.uint8("ina.tree.flags", "Flags", base.HEX)
local ft_flast = ProtoField.bool("ina.tree.flags.last", "Last packet of the message", 8, nil, 0x01)
local ft_fnlast = ProtoField.bool("ina.tree.flags.notify_last", "Notification of", 8,
	{ "a last packet", "a first packet" }, 0x02)
local ft_zero = ProtoField.bytes("ina.tree.reserved", "Reserved")
local ft_ranks = ProtoField.uint64("ina.tree.ranks", "Ranks", base.HEX)
local ft_rank = ProtoField.uint8("ina.tree.rank", "Rank in the sum", base.DEC)
local ft_blocklen = ProtoField.uint16("ina.tree.block_len", "Header block length", base.DEC)
local ft_framelen = ProtoField.uint16("ina.tree.frame_len", "Original frame length", base.DEC)
local ft_datalen = ProtoField.uint32("ina.tree.data_len", "Data bytes in this packet", base.DEC)
local ft_block = ProtoField.bytes("ina.tree.block", "Header block (original Ethernet..transport headers)")
local ft_icrc = ProtoField.uint32("ina.tree.icrc", "ICRC", base.HEX)
for _, f in ipairs({ ft_kind, ft_msg, ft_offset, ft_flags, ft_flast, ft_fnlast, ft_zero, ft_ranks, ft_rank,
	ft_blocklen, ft_framelen, ft_datalen, ft_block, ft_icrc }) do
	table.insert(ina.fields, f)
end
local ex_short = ProtoExpert.new("ina.tree.short", "INA switch-to-switch frame too short",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_block = ProtoExpert.new("ina.tree.block_mismatch", "Header block length differs from the data length",
	expert.group.MALFORMED, expert.severity.WARN)
ina.experts = { ex_short, ex_block }

local f_padcnt = Field.new("infiniband.bth.padcnt")
local f_udplen = Field.new("udp.length")

local function last(...)
	local n = select("#", ...)
	if n == 0 then
		return nil
	end
	return (select(n, ...))
end

-- hex64 prints a u64 read as two u32 halves without leading zeros.
local function hex64(hi, lo)
	if hi == 0 then
		return string.format("0x%x", lo)
	end
	return string.format("0x%x%08x", hi, lo)
end

local function bit(v, r)
	return math.floor(v / 2 ^ r) % 2 == 1
end

function ina.dissector(tvb, pinfo, tree)
	local op = last(f_opcode())
	if op == nil then
		return
	end
	local kind = TREE_KINDS[op.value]
	if kind == nil then
		return
	end
	local p = op.offset + BTH_LEN -- the payload, in the frame's tvb
	local stop = tvb:len()
	local ul = last(f_udplen())
	if ul ~= nil and ul.offset < op.offset then
		stop = math.min(stop, ul.offset - 4 + ul.value) -- UDP header starts 4 bytes before Length
	end
	if stop - p < INA_LEN or tvb(p, 4):uint() ~= INA_TAG then
		return
	end
	local t = tree:add(ina, tvb(p, stop - p), "NetReduce INA switch-to-switch frame: " .. kind[2])
	t:add(ft_kind, tvb(op.offset, 1), kind[1])
	local h = t:add(tvb(p, INA_LEN), "INA header")
	h:add(f_tag, tvb(p, 4))
	h:add(f_ring, tvb(p + 4, 1))
	h:add(f_msg, tvb(p + 5, 1))
	h:add(f_msglen, tvb(p + 6, 1))
	h:add(f_rank, tvb(p + 7, 1)):append_text(op.value == 0xE0 and " (the leaf's child index)" or "")
	local ring = tvb(p + 4, 1):uint()
	local q = p + INA_LEN
	if stop - q < TREE_LEN + ICRC_LEN then
		t:add_proto_expert_info(ex_short)
		pinfo.cols.info:append(string.format(" [INA %s ring=%d, truncated]", kind[1], ring))
		return
	end
	local msg, off, flags = tvb(q, 4):uint(), tvb(q + 4, 2):uint(), tvb(q + 6, 1):uint()
	local x = t:add(tvb(q, TREE_LEN), "INATree header")
	x:add(ft_msg, tvb(q, 4))
	x:add(ft_offset, tvb(q + 4, 2))
	local fl = x:add(ft_flags, tvb(q + 6, 1))
	fl:add(ft_flast, tvb(q + 6, 1))
	if op.value == 0xE2 then
		fl:add(ft_fnlast, tvb(q + 6, 1))
	end
	x:add(ft_zero, tvb(q + 7, 1))

	local pad = 0
	local pc = last(f_padcnt())
	if pc ~= nil then
		pad = pc.value
	end
	local d = q + TREE_LEN
	local dlen = math.max(0, stop - ICRC_LEN - pad - d)
	local info
	if op.value == 0xE2 then
		local blen, flen = tvb(q + 8, 2):uint(), tvb(q + 10, 2):uint()
		x:add(ft_blocklen, tvb(q + 8, 2))
		x:add(ft_framelen, tvb(q + 10, 2))
		x:add(ft_zero, tvb(q + 12, 4))
		local which = bit(flags, 1) and "last" or "first"
		t:add(ft_datalen, tvb(d, 0), dlen)
		if dlen > 0 then
			t:add(ft_block, tvb(d, dlen))
		end
		if blen ~= dlen then
			t:add_proto_expert_info(ex_block)
		end
		t:append_text(string.format(", of a %s packet, Ring %d, Msg %d, Offset %d, block %d of %d bytes",
			which, ring, msg, off, blen, flen))
		info = string.format("[INA notification %s ring=%d msg=%d off=%d block=%d frame=%d]",
			which, ring, msg, off, blen, flen)
	else
		local hi, lo = tvb(q + 8, 4):uint(), tvb(q + 12, 4):uint()
		local ranks = {}
		for r = 0, 63 do
			if (r < 32 and bit(lo, r)) or (r >= 32 and bit(hi, r - 32)) then
				table.insert(ranks, r)
			end
		end
		local list = table.concat(ranks, ", ")
		local ri = x:add(ft_ranks, tvb(q + 8, 8))
		ri:append_text(" (ranks " .. list .. ")")
		for _, r in ipairs(ranks) do
			ri:add(ft_rank, tvb(q + 8, 8), r)
		end
		t:add(ft_datalen, tvb(d, dlen), dlen)
		local last_s = bit(flags, 0) and " last" or ""
		t:append_text(string.format(", Ring %d, Msg %d, Offset %d, Ranks %s (%s)%s",
			ring, msg, off, hex64(hi, lo), list, last_s))
		info = string.format("[INA %s ring=%d msg=%d off=%d ranks=%s%s]",
			kind[1], ring, msg, off, hex64(hi, lo), last_s)
	end
	t:add_le(ft_icrc, tvb(stop - ICRC_LEN, ICRC_LEN))
	pinfo.cols.info:append(" " .. info)
end

register_postdissector(ina)

-- INCEPTIONN compressed payloads (MICRO '18; frames/inceptionn, emu/nic):
-- a NIC compresses the payload of WRITE and SEND packets whose DSCP is 10
-- (ToS 0x28 in the paper: the IPv4 DSCP, the IPv6 traffic class's, or
-- RoCEv1's GRH traffic class >> 2). The packed payload is
--
--   L (u16, the uncompressed bytes) | groups | zero pad to a byte | L mod 4 tail bytes
--
-- where each group of eight float32s is a 16-bit tag vector (tag 0 in
-- the top two bits; 00: 0-bit, 01: 8-bit, 10: 16-bit, 11: the raw 32
-- bits) and then the eight fields, most significant bit first, as one
-- bit stream. The heuristic walks the tag vectors, so a payload that is
-- not a packed one is flagged.
--
-- Filter fields: inceptionn.len, inceptionn.values, inceptionn.groups,
-- inceptionn.class0 .. inceptionn.class32 (values per class),
-- inceptionn.packed_len, inceptionn.ratio, inceptionn.tail.

local COMPRESSED_DSCP = 10
local inc = Proto("inceptionn", "INCEPTIONN compressed payload")
local fc_len = ProtoField.uint16("inceptionn.len", "Uncompressed length (L)", base.DEC)
local fc_values = ProtoField.uint32("inceptionn.values", "Values (float32)", base.DEC)
local fc_groups = ProtoField.uint32("inceptionn.groups", "Groups of eight", base.DEC)
local fc_class = {
	[0] = ProtoField.uint32("inceptionn.class0", "0-bit values (|f| < 2^-k)", base.DEC),
	[1] = ProtoField.uint32("inceptionn.class8", "8-bit values", base.DEC),
	[2] = ProtoField.uint32("inceptionn.class16", "16-bit values", base.DEC),
	[3] = ProtoField.uint32("inceptionn.class32", "32-bit values (|f| >= 1, Inf, NaN)", base.DEC),
}
local fc_packed = ProtoField.uint32("inceptionn.packed_len", "Packed length (bytes)", base.DEC)
local fc_ratio = ProtoField.string("inceptionn.ratio", "Ratio (L / packed length)")
local fc_tail = ProtoField.bytes("inceptionn.tail", "Tail bytes (L mod 4)")
inc.fields = { fc_len, fc_values, fc_groups, fc_class[0], fc_class[1], fc_class[2], fc_class[3], fc_packed, fc_ratio, fc_tail }
local ex_packed = ProtoExpert.new("inceptionn.malformed", "Compressed payload does not unpack",
	expert.group.MALFORMED, expert.severity.ERROR)
inc.experts = { ex_packed }

local f_dscp4 = Field.new("ip.dsfield.dscp")
local f_dscp6 = Field.new("ipv6.tclass.dscp")
local f_grhtc = Field.new("infiniband.grh.tclass")
local WIDTH = { [0] = 0, [1] = 8, [2] = 16, [3] = 32 }

local function dscp()
	local d = last(f_dscp4())
	if d ~= nil then
		return d.value
	end
	d = last(f_dscp6())
	if d ~= nil then
		return d.value
	end
	d = last(f_grhtc())
	if d ~= nil then
		return math.floor(d.value / 4)
	end
	return nil
end

-- WRITE (6-11) and SEND (0-5, 22, 23) of the RC and UC classes.
local function carries_data(code)
	local class, op = math.floor(code / 32), code % 32
	return (class == 0 or class == 1) and (op <= 11 or op == 22 or op == 23)
end

local function compressed(tvb, pinfo, tree)
	local op = last(f_opcode())
	if op == nil or not carries_data(op.value) or dscp() ~= COMPRESSED_DSCP or tvb:len() < 2 then
		return false
	end
	local r = tvb:range()
	local l = r(0, 2):uint()
	local n = math.floor(l / 4)
	local pos, bits = 16, tvb:len() * 8
	local counts = { [0] = 0, [1] = 0, [2] = 0, [3] = 0 }
	local bad = nil
	local groups = math.ceil(n / 8)
	for g = 0, groups - 1 do
		if pos + 16 > bits then
			bad = string.format("cut in group %d of %d", g, groups)
			break
		end
		local tv = r:bitfield(pos, 16)
		pos = pos + 16
		for i = 0, 7 do
			local tag = math.floor(tv / 4 ^ (7 - i)) % 4
			if g * 8 + i < n then
				counts[tag] = counts[tag] + 1
				pos = pos + WIDTH[tag]
			elseif tag ~= 0 then
				bad = string.format("value %d past the payload's %d is tagged", g * 8 + i, n)
			end
		end
		if pos > bits then
			bad = string.format("cut in group %d of %d", g, groups)
			break
		end
	end
	local packed = math.ceil(pos / 8) + l % 4
	if bad == nil and packed > tvb:len() then
		bad = string.format("%d bytes, the packed form needs %d", tvb:len(), packed)
	end
	-- What follows the packed form can only be the BTH pad (0-3 bytes).
	if bad == nil and tvb:len() - packed > 3 then
		bad = string.format("%d bytes after the packed form", tvb:len() - packed)
	end
	local t = tree:add(inc, tvb(0, math.min(packed, tvb:len())))
	t:add(fc_len, tvb(0, 2))
	if bad ~= nil then
		t:add_proto_expert_info(ex_packed, "Compressed payload does not unpack: " .. bad)
		pinfo.cols.info:append(" [INCEPTIONN BAD: " .. bad .. "]")
		return true
	end
	t:add(fc_values, tvb(0, 2), n)
	t:add(fc_groups, tvb(2, 0), groups)
	for c = 0, 3 do
		t:add(fc_class[c], tvb(2, 0), counts[c])
	end
	t:add(fc_packed, tvb(0, 0), packed)
	local ratio = string.format("%.2f", l / packed)
	t:add(fc_ratio, tvb(0, 0), ratio)
	if l % 4 > 0 then
		t:add(fc_tail, tvb(packed - l % 4, l % 4))
	end
	t:append_text(string.format(", L %d, %s x, classes 0/8/16/32-bit %d/%d/%d/%d", l, ratio,
		counts[0], counts[1], counts[2], counts[3]))
	pinfo.cols.info:append(string.format(" [INCEPTIONN L=%d %sx]", l, ratio))
	return true
end

inc:register_heuristic("infiniband.payload", compressed)

-- INA-PS frames: in-network aggregation with a parameter server, ATP's
-- 308-byte layout (github.com/in-ATP/ATP, common/packet.h struct agghdr)
-- with ESA's priority (frames/inaps.go draws it): Ethernet with EtherType
-- 0x0700, an IPv4 header with no UDP after it, then
--
--   bitmap (4) | fan-in (1) | flags (1) | job (2) | sequence (2) |
--   aggregator (2) | priority (1) | level (1) | 62 × int32 | key (8) |
--   tensor length (4)
--
-- Flags, most significant bit first: overflow, PS index (2 bits), data
-- index, ECN, resend, switch collision, ACK; resend and collision without
-- ACK is inaemu's reminder. Priority and level are ATP's second
-- aggregator index (agtr2) in ATP's own frames.
--
-- Filter fields: inaps.bitmap, inaps.fanin, inaps.flags (and
-- inaps.flags.overflow, .psindex, .dataindex, .ecn, .resend, .collision,
-- .ack), inaps.job, inaps.seq, inaps.aggregator, inaps.priority,
-- inaps.level, inaps.value (62 of them), inaps.key, inaps.tensor_len.

local INAPS_LEN = 274
local inaps = Proto("inaps", "INA-PS header (ATP, ESA)")
local fp = {
	bitmap = ProtoField.uint32("inaps.bitmap", "Bitmap (workers in)", base.HEX),
	fanin = ProtoField.uint8("inaps.fanin", "Fan-in (workers)", base.DEC),
	flags = ProtoField.uint8("inaps.flags", "Flags", base.HEX),
	overflow = ProtoField.bool("inaps.flags.overflow", "Overflow (raw floats)", 8, nil, 0x80),
	psindex = ProtoField.uint8("inaps.flags.psindex", "PS index", base.DEC, nil, 0x60),
	dataindex = ProtoField.bool("inaps.flags.dataindex", "Data index", 8, nil, 0x10),
	ecn = ProtoField.bool("inaps.flags.ecn", "ECN", 8, nil, 0x08),
	resend = ProtoField.bool("inaps.flags.resend", "Resend", 8, nil, 0x04),
	collision = ProtoField.bool("inaps.flags.collision", "Switch collision", 8, nil, 0x02),
	ack = ProtoField.bool("inaps.flags.ack", "ACK", 8, nil, 0x01),
	job = ProtoField.uint16("inaps.job", "Job ID", base.DEC),
	seq = ProtoField.uint16("inaps.seq", "Sequence", base.DEC),
	aggregator = ProtoField.uint16("inaps.aggregator", "Aggregator index", base.DEC),
	priority = ProtoField.uint8("inaps.priority", "Priority (ESA; ATP: agtr2 high byte)", base.DEC),
	level = ProtoField.uint8("inaps.level", "Level (ESA; ATP: agtr2 low byte)", base.HEX),
	value = ProtoField.int32("inaps.value", "Value", base.DEC),
	key = ProtoField.uint64("inaps.key", "Key", base.HEX),
	tensor_len = ProtoField.uint32("inaps.tensor_len", "Tensor length", base.DEC),
}
inaps.fields = { fp.bitmap, fp.fanin, fp.flags, fp.overflow, fp.psindex, fp.dataindex, fp.ecn, fp.resend, fp.collision,
	fp.ack, fp.job, fp.seq, fp.aggregator, fp.priority, fp.level, fp.value, fp.key, fp.tensor_len }
local ex_short = ProtoExpert.new("inaps.short", "INA-PS header cut short", expert.group.MALFORMED, expert.severity.ERROR)
inaps.experts = { ex_short }

-- inaps_header adds the INA-PS header at the start of h (a TvbRange) to
-- tree; nil when h is cut short, else the header's frame kind by its flags
-- (gradient, reminder, ACK), job, sequence, aggregator and bitmap. Both
-- the INA-PS frames and the reliable channel's messages (below) use it.
local function inaps_header(h, tree)
	local t = tree:add(inaps, h:range(0, math.min(h:len(), INAPS_LEN)))
	if h:len() < INAPS_LEN then
		t:add_proto_expert_info(ex_short)
		return nil
	end
	t:add(fp.bitmap, h(0, 4))
	t:add(fp.fanin, h(4, 1))
	local ft = t:add(fp.flags, h(5, 1))
	for _, f in ipairs({ fp.overflow, fp.psindex, fp.dataindex, fp.ecn, fp.resend, fp.collision, fp.ack }) do
		ft:add(f, h(5, 1))
	end
	t:add(fp.job, h(6, 2))
	t:add(fp.seq, h(8, 2))
	t:add(fp.aggregator, h(10, 2))
	t:add(fp.priority, h(12, 1))
	t:add(fp.level, h(13, 1))
	local vt = t:add(h(14, 248), "Values (62 × int32)")
	for i = 0, 61 do
		vt:add(fp.value, h(14 + 4 * i, 4))
	end
	t:add(fp.key, h(262, 8))
	t:add(fp.tensor_len, h(270, 4))
	local flags = h(5, 1):uint()
	local kind = "gradient"
	if flags == 0x06 then
		kind = "reminder"
	elseif flags % 2 == 1 then
		kind = "ACK"
	end
	return { kind = kind, job = h(6, 2):uint(), seq = h(8, 2):uint(), agg = h(10, 2):uint(), bitmap = h(0, 4):uint() }
end

function inaps.dissector(tvb, pinfo, tree)
	-- The IPv4 header first (its protocol field says nothing of what
	-- follows, so IP shows the rest as data: ATP's switch parses by
	-- EtherType).
	local ihl = 20
	if tvb:len() >= 1 then
		ihl = (tvb(0, 1):uint() % 16) * 4
	end
	Dissector.get("ip"):call(tvb, pinfo, tree)
	pinfo.cols.protocol = "INA-PS"
	local x = inaps_header(tvb(ihl), tree)
	if x == nil then
		return
	end
	pinfo.cols.info = string.format("INA-PS %s job=%d seq=%d agg=%d bitmap=0x%x", x.kind, x.job, x.seq, x.agg, x.bitmap)
end

DissectorTable.get("ethertype"):add(0x0700, inaps)

-- The reliable worker <-> parameter server channel (emu/inaps/endpoint,
-- channel.go): ESA sends retransmissions to the PS over a reliable
-- transport; inaemu carries them as UDP datagrams to and from port 4792,
-- go-back-N with a cumulative ACK. The payload is a 10-byte header
--
--   kind (1) | reserved (1) | seq (4) | ack (4)
--
-- then, for kinds 1..7, the INA-PS header above (274 bytes, the same
-- fields). Kinds: 1 gradient (a worker's retransmission), 2 reminder (a
-- worker missing a result), 3 resend request, 4 query (does the worker
-- hold the result?), 5 answer (it does: the result), 6 not held,
-- 7 parameter (a result sent to one worker), 0x80 ack (no INA-PS header;
-- its seq is the next one the sender will number). seq numbers the
-- messages of one direction of a (worker, PS) pair; ack is the next seq
-- the sender expects from its peer.
--
-- Filter fields: inaps_chan.kind, inaps_chan.reserved, inaps_chan.seq,
-- inaps_chan.ack, and the inaps.* fields of the embedded header.

local CHAN_PORT, CHAN_LEN = 4792, 10
local CHAN_KINDS = { [1] = "gradient", [2] = "reminder", [3] = "resend request", [4] = "query", [5] = "answer",
	[6] = "not held", [7] = "parameter", [0x80] = "ack" }
local inaps_chan = Proto("inaps_chan", "INA-PS channel")
local fch = {
	kind = ProtoField.uint8("inaps_chan.kind", "Kind", base.DEC, CHAN_KINDS),
	reserved = ProtoField.uint8("inaps_chan.reserved", "Reserved", base.HEX),
	seq = ProtoField.uint32("inaps_chan.seq", "Sequence (this direction's message number)", base.DEC),
	ack = ProtoField.uint32("inaps_chan.ack", "ACK (next sequence expected from the peer)", base.DEC),
}
inaps_chan.fields = { fch.kind, fch.reserved, fch.seq, fch.ack }
local ex_chan_short = ProtoExpert.new("inaps_chan.short", "INA-PS channel header cut short", expert.group.MALFORMED,
	expert.severity.ERROR)
inaps_chan.experts = { ex_chan_short }

function inaps_chan.dissector(tvb, pinfo, tree)
	pinfo.cols.protocol = "INA-PS"
	local t = tree:add(inaps_chan, tvb(0, math.min(tvb:len(), CHAN_LEN)))
	if tvb:len() < CHAN_LEN then
		t:add_proto_expert_info(ex_chan_short)
		pinfo.cols.info = "channel (cut short)"
		return
	end
	local k, seq, ack = tvb(0, 1):uint(), tvb(2, 4):uint(), tvb(6, 4):uint()
	t:add(fch.kind, tvb(0, 1))
	t:add(fch.reserved, tvb(1, 1))
	t:add(fch.seq, tvb(2, 4))
	t:add(fch.ack, tvb(6, 4))
	local name = CHAN_KINDS[k] or string.format("kind %d", k)
	t:append_text(string.format(", %s #%d, ack %d", name, seq, ack))
	local what = ""
	if k >= 1 and k <= 7 then
		local x = nil
		if tvb:len() > CHAN_LEN then
			x = inaps_header(tvb(CHAN_LEN), tree)
		else
			t:add_proto_expert_info(ex_short)
		end
		if x == nil then
			what = " (header cut short)"
		else
			what = string.format(" job %d seq %d", x.job, x.seq)
		end
	end
	pinfo.cols.info = string.format("channel %s%s (#%d, ack %d)", name, what, seq, ack)
end

DissectorTable.get("udp.port"):add(CHAN_PORT, inaps_chan)
