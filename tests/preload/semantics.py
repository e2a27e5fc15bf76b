#!/usr/bin/env python3
"""Linux socket semantics an unmodified program relies on, checked through the preload library
(run as LD_PRELOAD=libslimtcp_preload.so SLIMTCP_DEVICE=... semantics.py GUEST HOST DIR, with
tests/preload/peer.py serving on HOST). Python's socket, select and os modules call the C
library's socket, connect, send, recv, accept4, fcntl, ioctl, poll, select, epoll_*, dup, fork
directly. Prints "ok NAME" per check; any failure raises (exit status 1).
"""
import errno
import fcntl
import os
import select
import socket
import struct
import sys
import termios
import threading
import time

GUEST, HOST, DIR = sys.argv[1], sys.argv[2], sys.argv[3]
ECHO, SINK, UDP_ECHO, DIALER = (HOST, 7000), (HOST, 7002), (HOST, 7003), (HOST, 7004)


def ok(name):
    print("ok", name, flush=True)


def recv_exactly(s, n):
    out = bytearray()
    while len(out) < n:
        data = s.recv(n - len(out))
        assert data, f"end of stream after {len(out)} of {n} bytes"
        out += data
    return bytes(out)


def echo_check(s, size):
    payload = os.urandom(size)
    sender = threading.Thread(target=s.sendall, args=(payload,))
    sender.start()
    got = recv_exactly(s, size)
    sender.join()
    assert got == payload, "echo differs"


# A plain blocking echo; the tenant's address; the peer's.
s = socket.create_connection(ECHO)
echo_check(s, 1 << 20)
assert s.getsockname()[0] == GUEST, s.getsockname()
assert s.getpeername() == ECHO, s.getpeername()
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
ok("echo")

# MSG_PEEK, then the same bytes again; FIONREAD counts what is readable.
s.sendall(b"hello world")
select.select([s], [], [], 10)
time.sleep(0.1)
avail = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0]
assert avail == 11, avail
assert s.recv(5, socket.MSG_PEEK) == b"hello"
assert s.recv(11) == b"hello world"
ok("peek-fionread")

# SO_RCVTIMEO on a blocking socket: EAGAIN after the timeout.
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200_000))
t0 = time.monotonic()
try:
    s.recv(10)
    raise AssertionError("recv returned without data")
except BlockingIOError:
    pass
assert time.monotonic() - t0 >= 0.19
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
ok("rcvtimeo")

# dup: the copy works after the original is closed.
s2 = s.dup()
s.close()
echo_check(s2, 4096)
s2.close()
ok("dup")

# A refused connection, blocking and non-blocking (SO_ERROR).
c = socket.socket()
try:
    c.connect((HOST, 7001))
    raise AssertionError("connected to a closed port")
except ConnectionRefusedError:
    pass
c.close()
c = socket.socket()
c.setblocking(False)
assert c.connect_ex((HOST, 7001)) == errno.EINPROGRESS
select.select([], [c], [], 10)
assert c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED
c.close()
ok("refused")

# Non-blocking connect, then poll() over a kernel pipe and the socket together.
c = socket.socket()
c.setblocking(False)
assert c.connect_ex(ECHO) == errno.EINPROGRESS
p = select.poll()
p.register(c, select.POLLOUT)
assert p.poll(10_000), "connect never completed"
assert c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
r, w = os.pipe()
p = select.poll()
p.register(c, select.POLLIN)
p.register(r, select.POLLIN)
assert p.poll(50) == []
os.write(w, b"x")
assert p.poll(1000) == [(r, select.POLLIN)]
os.read(r, 1)
c.send(b"ping")
ready = p.poll(10_000)
assert ready == [(c.fileno(), select.POLLIN)], ready
assert c.recv(4) == b"ping"
ok("poll-mixed")

# epoll, edge-triggered, with the pipe in the same set.
ep = select.epoll()
ep.register(c, select.EPOLLIN | select.EPOLLET)
ep.register(r, select.EPOLLIN)
assert ep.poll(0.05) == []
c.send(b"pong")
events = ep.poll(10)
assert events == [(c.fileno(), select.EPOLLIN)], events
again = ep.poll(0.05)
assert again == [], f"edge-triggered: reported once, then again {again}"
os.write(w, b"y")
assert ep.poll(1) == [(r, select.EPOLLIN)]
assert c.recv(4) == b"pong"
ep.close()
c.setblocking(True)
c.close()
os.close(r)
os.close(w)
ok("epoll-mixed")

# A listener on the tenant's address; the kernel connects to it (through the dialer).
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", 7100))
ls.listen(8)
assert ls.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
d = socket.create_connection(DIALER)
d.sendall(f"{GUEST} 7100\n".encode())
conn, peer = ls.accept()
assert peer[0] == HOST, peer
assert recv_exactly(conn, 11) == b"from-kernel"
assert conn.recv(10) == b"", "the kernel closed"
conn.close()
d.close()
ls.close()
ok("listen-accept")

# Loopback stays with the kernel.
kl = socket.socket()
kl.bind(("127.0.0.1", 0))
kl.listen(1)
kc = socket.create_connection(kl.getsockname())
assert kc.getsockname()[0] == "127.0.0.1"
ka, _ = kl.accept()
kc.sendall(b"k")
assert ka.recv(1) == b"k"
for x in (ka, kc, kl):
    x.close()
ok("loopback-kernel")

# UDP: unconnected and connected.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(10)
u.sendto(b"dgram", UDP_ECHO)
data, src = u.recvfrom(100)
assert (data, src) == (b"dgram", UDP_ECHO), (data, src)
u.connect(UDP_ECHO)
u.send(b"again")
assert u.recv(100) == b"again"
u.close()
ok("udp")

# Threads: each makes its own connection (a queue pair each while they last) and echoes.
errors = []


def worker(i):
    try:
        t = socket.create_connection(ECHO)
        echo_check(t, 256 << 10)
        t.close()
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append(f"thread {i}: {e!r}")


threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
ok("threads")

# fork: the child's inherited socket and new sockets fail with ENETDOWN; the parent's work on.
s = socket.create_connection(ECHO)
pid = os.fork()
if pid == 0:
    code = 0
    try:
        s.send(b"x")
        code = 2
    except OSError as e:
        code = 0 if e.errno == errno.ENETDOWN else 3
    try:
        socket.socket()
        code = code or 4
    except OSError as e:
        code = code or (0 if e.errno == errno.ENETDOWN else 5)
    s.close()
    os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
echo_check(s, 65536)
s.close()
ok("fork")

# close_range (os.closerange) closes SlimTCP sockets too: their numbers go to new kernel
# descriptors, which then behave as kernel descriptors.
s = socket.create_connection(ECHO)
n = s.detach()  # Python forgets the number without closing it
os.closerange(n, n + 1)
opened = []
while True:
    fd = os.open("/dev/null", os.O_RDONLY)
    opened.append(fd)
    if fd >= n:
        break
assert n in opened, (n, opened)
assert os.read(n, 1) == b"", "the reused number is /dev/null's"
for fd in opened:
    os.close(fd)
ok("close-range")
