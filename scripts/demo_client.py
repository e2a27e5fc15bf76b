#!/usr/bin/env python3
"""Linux-side client of the demo: talks to SlimTCP's tap_echo with ordinary kernel sockets.

1. 2,000 round trips of 64 bytes on the echo port (7): p50/p99 latency.
2. A bulk transfer to the discard port (9) with a live progress line: goodput.
3. A 16 MB echo transfer, verified by SHA-256 in both directions.
4. A UDP echo.
"""
import hashlib
import os
import socket
import sys
import threading
import time

HOST = sys.argv[1] if len(sys.argv) > 1 else "10.99.0.2"
BULK = int(os.environ.get("DEMO_BULK_MB", "200")) * 1024 * 1024
ECHO = 16 * 1024 * 1024


def latency():
    with socket.create_connection((HOST, 7), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = b"x" * 64
        samples = []
        for _ in range(2000):
            t0 = time.perf_counter()
            s.sendall(msg)
            got = 0
            while got < 64:
                chunk = s.recv(64 - got)
                if not chunk:
                    raise RuntimeError("echo closed early")
                got += len(chunk)
            samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def bulk():
    block = os.urandom(256 * 1024)
    sent = 0
    start = last = time.perf_counter()
    with socket.create_connection((HOST, 9), timeout=10) as s:
        while sent < BULK:
            s.sendall(block)
            sent += len(block)
            now = time.perf_counter()
            if now - last >= 0.25 or sent >= BULK:
                rate = sent * 8 / (now - start) / 1e9
                bar = "#" * int(40 * sent / BULK)
                print(f"\r   [{bar:<40}] {sent >> 20:4d}/{BULK >> 20} MB  {rate:5.2f} Gb/s", end="", flush=True)
                last = now
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    elapsed = time.perf_counter() - start
    print()
    return sent * 8 / elapsed / 1e9


def echo_verified():
    data = os.urandom(ECHO)
    want = hashlib.sha256(data).hexdigest()
    got = hashlib.sha256()
    received = 0
    with socket.create_connection((HOST, 7), timeout=10) as s:
        def writer():
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=writer)
        start = time.perf_counter()
        t.start()
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            got.update(chunk)
            received += len(chunk)
        t.join()
        elapsed = time.perf_counter() - start
    return received == ECHO and got.hexdigest() == want, ECHO * 8 * 2 / elapsed / 1e9


def udp_echo():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(2)
        u.sendto(b"hello over UDP", (HOST, 7))
        data, peer = u.recvfrom(2048)
        return data == b"hello over UDP" and peer == (HOST, 7)


def main():
    print("== 64-byte TCP echo round trips (Linux client -> SlimTCP, 2000 samples)")
    p50, p99 = latency()
    print(f"   p50 {p50:.0f} us, p99 {p99:.0f} us")
    print(f"== bulk transfer to the discard port, {BULK >> 20} MB")
    gbps = bulk()
    print("== 16 MB through the echo port, verified by SHA-256")
    ok, echo_gbps = echo_verified()
    print(f"   {'identical' if ok else 'MISMATCH'}, {echo_gbps:.2f} Gb/s both ways combined")
    print("== UDP echo")
    udp_ok = udp_echo()
    print(f"   {'ok' if udp_ok else 'FAILED'}")
    print()
    print("== summary")
    print(f"   round trip 64 B: p50 {p50:.0f} us, p99 {p99:.0f} us")
    print(f"   goodput Linux -> SlimTCP: {gbps:.2f} Gb/s")
    print(f"   echo verified: {ok}; UDP echo: {udp_ok}")
    sys.exit(0 if ok and udp_ok else 1)


if __name__ == "__main__":
    main()
