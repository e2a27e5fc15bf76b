#!/usr/bin/env python3
"""The kernel-side peer of tests/preload/semantics.py (run without the preload library).

Usage: peer.py HOST DIR. Serves on HOST: TCP echo (7000), a TCP sink that writes
"<bytes> <eof>" to DIR/sink-<n>.txt when a connection ends (7002), UDP echo (7003), and a
TCP client helper (7004): for each connection it reads "HOST PORT\n", connects there, sends
"from-kernel", and closes. Runs until killed.
"""
import os
import socket
import sys
import threading

HOST, DIR = sys.argv[1], sys.argv[2]


def serve(port, handle):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((HOST, port))
    ls.listen(64)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def echo(conn):
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)


SINKS = iter(range(1_000_000))


def sink(conn):
    n = next(SINKS)
    total, eof = 0, False
    with conn:
        try:
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    eof = True
                    break
                total += len(data)
        except OSError:
            pass
    with open(os.path.join(DIR, f"sink-{n}.tmp"), "w") as f:
        f.write(f"{total} {int(eof)}\n")
    os.rename(os.path.join(DIR, f"sink-{n}.tmp"), os.path.join(DIR, f"sink-{n}.txt"))


def dialer(conn):
    with conn:
        host, port = conn.makefile().readline().split()
    with socket.create_connection((host, int(port))) as c:
        c.sendall(b"from-kernel")


def udp_echo():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((HOST, 7003))
    while True:
        data, src = s.recvfrom(65536)
        s.sendto(data, src)


for port, handle in ((7000, echo), (7002, sink), (7004, dialer)):
    threading.Thread(target=serve, args=(port, handle), daemon=True).start()
threading.Thread(target=udp_echo, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
