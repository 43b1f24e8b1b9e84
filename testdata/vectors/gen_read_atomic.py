#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes read_atomic_v2_ipv4.pcap: the RDMA READ and atomic frames of one
RC connection, built by scapy (scapy.contrib.roce, 2.5.0) from header values
written out here, with scapy's own ICRC (BTH.compute_icrc).

The connection and its traffic (README.md "READ and atomic vectors"):
requester A (02:00:00:00:00:0a, 10.0.0.1, QPN 0x11) and responder B
(02:00:00:00:00:0b, 10.0.0.2, QPN 0x22), RoCEv2 over IPv4, path MTU 256,
A's first PSN 0xFFFFFE (the READ's responses wrap to 0). A posts, in order:
  1. READ 600 bytes at VA 0x10100, R_Key 0x1234 (PSNs 0xFFFFFE..0x000000)
  2. READ 5 bytes at VA 0x10400 (PSN 1)
  3. FETCH_ADD 0x0123456789ABCDEF at VA 0x10800 (PSN 2)
  4. CMP_SWAP compare 0x0A0B0C0D0E0F1011 swap 0xCAFEF00DDEADBEEF at VA 0x10808 (PSN 3)
  5. READ 0 bytes at VA 0x10000 (PSN 4)
B's memory at VA 0x10000 + i holds (7i + 3) mod 256, except the two
8-byte words at 0x10800 and 0x10808, which hold 0x1122334455667788 and
0x0A0B0C0D0E0F1011 little-endian. Frames 0-4 are A's requests, frames 5-11
B's responses, each side's IPv4 identification counting from 0.

Run: /usr/bin/python3 gen_read_atomic.py OUT.pcap
"""
import struct
import sys

from scapy.all import Ether, IP, UDP, Raw, wrpcap
from scapy.contrib.roce import BTH, AETH

MAC = {"A": "02:00:00:00:00:0a", "B": "02:00:00:00:00:0b"}
IPS = {"A": "10.0.0.1", "B": "10.0.0.2"}
QPN = {"A": 0x11, "B": 0x22}
MEM_VA = 0x10000


def sport(qpn):
    # rxe's per-QP UDP source port: 0xC000 | hash_32(qpn, 14)
    return 0xC000 | (((qpn * 0x61C88647) & 0xFFFFFFFF) >> 18)


def mem(va, n):
    out = bytearray((7 * (va - MEM_VA + i) + 3) & 0xFF for i in range(n))
    return bytes(out)


ipid = {"A": 0, "B": 0}


def frame(src, opcode, psn, ackreq, ext=b"", payload=b"", aeth=None):
    dst = "B" if src == "A" else "A"
    pad = (4 - len(payload) % 4) % 4
    bth = BTH(opcode=opcode, solicited=0, migreq=0, padcount=pad, version=0, pkey=0xFFFF,
              fecn=0, becn=0, resv6=0, dqpn=QPN[dst], ackreq=ackreq, resv7=0, psn=psn & 0xFFFFFF)
    p = (Ether(src=MAC[src], dst=MAC[dst]) /
         IP(src=IPS[src], dst=IPS[dst], id=ipid[src], flags="DF", ttl=64, tos=0) /
         UDP(sport=sport(QPN[src]), dport=4791, chksum=0) / bth)
    if aeth is not None:
        p = p / AETH(syndrome=0x1F, msn=aeth)
    p = p / Raw(ext + payload + b"\x00" * pad)
    ipid[src] += 1
    return p


def reth(va, rkey, n):
    return struct.pack(">QII", va, rkey, n)


def atomiceth(va, rkey, swap_add, compare):
    return struct.pack(">QIQQ", va, rkey, swap_add, compare)


RKEY = 0x1234
FA_ORIG, CS_ORIG = 0x1122334455667788, 0x0A0B0C0D0E0F1011
# IBA opcodes (ib_pack.h): READ request 12, responses 13-16, ATOMIC ACK 18,
# COMPARE_SWAP 19, FETCH_ADD 20.
frames = [
    frame("A", 12, 0xFFFFFE, 1, reth(0x10100, RKEY, 600)),
    frame("A", 12, 1, 1, reth(0x10400, RKEY, 5)),
    frame("A", 20, 2, 1, atomiceth(0x10800, RKEY, 0x0123456789ABCDEF, 0)),
    frame("A", 19, 3, 1, atomiceth(0x10808, RKEY, 0xCAFEF00DDEADBEEF, CS_ORIG)),
    frame("A", 12, 4, 1, reth(0x10000, RKEY, 0)),
    frame("B", 13, 0xFFFFFE, 0, payload=mem(0x10100, 256), aeth=1),
    frame("B", 14, 0xFFFFFF, 0, payload=mem(0x10200, 256)),
    frame("B", 15, 0x000000, 0, payload=mem(0x10300, 88), aeth=1),
    frame("B", 16, 1, 0, payload=mem(0x10400, 5), aeth=2),
    frame("B", 18, 2, 0, ext=struct.pack(">Q", FA_ORIG), aeth=3),
    frame("B", 18, 3, 0, ext=struct.pack(">Q", CS_ORIG), aeth=4),
    frame("B", 16, 4, 0, aeth=5),
]
# The AtomicAckETH follows the AETH: Raw after AETH puts it there.
for i, f in enumerate(frames):
    f.time = 1700000000 + i / 1000
wrpcap(sys.argv[1], frames, linktype=1)
