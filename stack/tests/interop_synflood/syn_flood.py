"""Hostile peers from the Linux side of a TAP link, through an AF_PACKET socket (whole Ethernet
frames, so any source address can be forged and no kernel check applies).

  syn_flood.py flood IFACE SRC_MAC DST_MAC DST_IP PORT COUNT SUBNET_PREFIX
      COUNT SYNs to DST_IP:PORT from 252 spoofed sources SUBNET_PREFIX.3 .. .254 (random ports
      and sequence numbers, MSS 1460, window scale 7). Prints "flooding" once the first burst is
      out, then "sent=N seconds=T".
  syn_flood.py martians IFACE SRC_MAC DST_MAC DST_IP PORT SUBNET_PREFIX
      One SYN from each martian source, then one from an ordinary spoofed source (the control),
      and listens 1.5 s for the stack's answers. Prints "martian_answers=N control_answers=M".

Run inside the test's namespace only.
"""
import random
import socket
import struct
import sys
import time


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def syn_frame(src_mac, dst_mac, src_ip, dst_ip, sport, dport, seq):
    opts = struct.pack("!BBH", 2, 4, 1460) + struct.pack("!BBBB", 1, 3, 3, 7)
    tcp_len = 20 + len(opts)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (tcp_len // 4) << 4, 0x02, 64240, 0, 0) + opts
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 6, tcp_len)
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, 0, 0x4000, 64, 6, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def mac(text):
    return bytes(int(x, 16) for x in text.split(":"))


def packet_socket(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    return s


def flood(iface, src_mac, dst_mac, dst_ip, port, count, prefix):
    rng = random.Random(14)
    dst = socket.inet_aton(dst_ip)
    # 252 sources x 64 ports, sent round and round (a repeated SYN is just another SYN).
    frames = [
        syn_frame(src_mac, dst_mac, socket.inet_aton("%s.%d" % (prefix, host)), dst,
                  rng.randrange(1024, 65536), port, rng.getrandbits(32))
        for _ in range(64) for host in range(3, 255)
    ]
    s = packet_socket(iface)
    send = s.send
    n = len(frames)
    start = time.monotonic()
    sent = 0
    burst = 1000
    while sent < count:
        for i in range(sent, min(sent + burst, count)):
            try:
                send(frames[i % n])
            except BlockingIOError:
                pass
        if sent == 0:
            print("flooding", flush=True)
        sent = min(sent + burst, count)
    print("sent=%d seconds=%.3f" % (sent, time.monotonic() - start), flush=True)


def martians(iface, src_mac, dst_mac, dst_ip, port, prefix):
    dst = socket.inet_aton(dst_ip)
    sources = ["0.0.0.0", "255.255.255.255", prefix + ".255", "224.0.0.1", "127.0.0.1", dst_ip]
    control = prefix + ".77"
    s = packet_socket(iface)
    s.settimeout(0.1)
    for i, src in enumerate(sources + [control]):
        s.send(syn_frame(src_mac, dst_mac, socket.inet_aton(src), dst, 2000 + i, port, 1000 + i))
    answers = {src: 0 for src in sources + [control]}
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        try:
            f = s.recv(2048)
        except socket.timeout:
            continue
        if len(f) < 54 or f[6:12] != dst_mac or f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        to = socket.inet_ntoa(f[30:34])
        if to in answers:
            answers[to] += 1
    bad = sum(answers[s] for s in sources)
    print("martian_answers=%d control_answers=%d" % (bad, answers[control]), flush=True)


def main():
    mode, iface, src_mac, dst_mac, dst_ip, port = sys.argv[1:7]
    if mode == "flood":
        flood(iface, mac(src_mac), mac(dst_mac), dst_ip, int(port), int(sys.argv[7]), sys.argv[8])
    elif mode == "martians":
        martians(iface, mac(src_mac), mac(dst_mac), dst_ip, int(port), sys.argv[7])
    else:
        sys.exit("unknown mode " + mode)


main()
