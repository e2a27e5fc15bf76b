#!/usr/bin/env python3
"""The Linux side of the demo: plain kernel sockets.

- echo on port 7000: returns every byte;
- discard on port 9000: reads to end of stream, then answers "<bytes> <sha256>\\n".
Prints "ready" once both listen; serves until killed.
"""
import hashlib
import socket
import sys
import threading

HOST = sys.argv[1] if len(sys.argv) > 1 else "0.0.0.0"


def serve(port, handler):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((HOST, port))
    ls.listen(64)

    def loop():
        while True:
            conn, _ = ls.accept()
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


def echo(conn):
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)


def discard(conn):
    with conn:
        h = hashlib.sha256()
        n = 0
        while True:
            data = conn.recv(1 << 20)
            if not data:
                break
            h.update(data)
            n += len(data)
        conn.sendall(f"{n} {h.hexdigest()}\n".encode())


serve(7000, echo)
serve(9000, discard)
print("ready", flush=True)
threading.Event().wait()
