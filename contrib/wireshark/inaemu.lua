-- inaemu.lua: shows NetReduce's INA header (InetTag "INA1", RingID, MsgID,
-- MsgLen, Rank) at the start of the payload of RDMA WRITE FIRST and
-- WRITE ONLY packets, as inaemu and the NetReduce paper (ASPLOS '23,
-- Fig. 4) put it there.
--
-- Load it for one run:   wireshark -X lua_script:contrib/wireshark/inaemu.lua run.pcapng
--                        tshark -X lua_script:contrib/wireshark/inaemu.lua -r run.pcapng -V
-- or copy it into your personal plugins folder (Help > About > Folders).
--
-- Filter fields: ina.tag, ina.ring, ina.msg, ina.msglen, ina.rank, ina.data_len.

local INA_TAG = 0x494E4131 -- "INA1"

local ina = Proto("ina", "NetReduce INA header")
local f_tag = ProtoField.uint32("ina.tag", "InetTag", base.HEX)
local f_ring = ProtoField.uint8("ina.ring", "RingID", base.DEC)
local f_msg = ProtoField.uint8("ina.msg", "MsgID", base.DEC)
local f_msglen = ProtoField.uint8("ina.msglen", "MsgLen (packets)", base.DEC)
local f_rank = ProtoField.uint8("ina.rank", "Rank", base.DEC)
local f_data = ProtoField.uint32("ina.data_len", "Tensor bytes in this packet", base.DEC)
ina.fields = { f_tag, f_ring, f_msg, f_msglen, f_rank, f_data }

-- The InfiniBand dissector hands RDMA payloads to heuristic dissectors of
-- "infiniband.payload". Only WRITE FIRST (6) and WRITE ONLY (10) / ONLY
-- WITH IMMEDIATE (11) carry the header; the tag makes the match certain.
local f_opcode = Field.new("infiniband.bth.opcode")

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
	local t = tree:add(ina, tvb(0, 8))
	t:add(f_tag, tvb(0, 4))
	t:add(f_ring, tvb(4, 1))
	t:add(f_msg, tvb(5, 1))
	t:add(f_msglen, tvb(6, 1))
	t:add(f_rank, tvb(7, 1))
	t:add(f_data, tvb(8, 0), tvb:len() - 8)
	t:append_text(string.format(", Ring %d, Msg %d, MsgLen %d, Rank %d",
		tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(6, 1):uint(), tvb(7, 1):uint()))
	pinfo.cols.info:append(string.format(" [INA ring=%d msg=%d len=%d rank=%d]",
		tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(6, 1):uint(), tvb(7, 1):uint()))
	return true
end

ina:register_heuristic("infiniband.payload", heuristic)
