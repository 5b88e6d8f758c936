#!/usr/bin/env python3
# handover.py SOCKET KIND [PORT]: acts as a sandboxed process handing the
# proxy descriptors over its unix socket (SCM_RIGHTS), as bridge "pass"
# does, and prints the proxy's reply line (or "<eof>"). KIND picks what is
# sent; for "listener" the kept listener is then used for one request
# through the proxy ("GET http://blocked.example.net/") and its status line
# printed after "via-listener:"; the last line is "end". With "hold" as
# the third argument the control connection stays open until stdin ends
# ("ctl-closed" is printed if the proxy closes it first). When the kernel
# refuses the send (the proxy's socket takes no descriptors: SO_PASSRIGHTS
# off), the one line is "send-refused:EPERM". KIND "lingering" sends, with
# an HTTP request, a connected TCP socket with SO_LINGER (10 s) and unsent
# bytes whose peer never reads: the last close() of it waits.
import os
import struct
import select
import socket
import sys
import tempfile

MAGIC = b"\0isolation-pass 1\n"


def tcp_listener(addr="127.0.0.1", port=0, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    return s


def descriptors(kind, keep):
    if kind in ("listener", "bad_magic", "http_with_fd", "listener6"):
        fam = socket.AF_INET6 if kind == "listener6" else socket.AF_INET
        s = tcp_listener("::1" if kind == "listener6" else "127.0.0.1", 0, fam)
        keep.append(s)
        return [s.fileno()]
    if kind == "connected":
        srv = tcp_listener()
        c = socket.create_connection(srv.getsockname())
        a, _ = srv.accept()
        keep.extend([srv, c, a])
        return [c.fileno()]
    if kind == "file":
        f = tempfile.TemporaryFile()
        f.write(b"secret")
        f.flush()
        keep.append(f)
        return [f.fileno()]
    if kind == "pipe":
        r, w = os.pipe()
        keep.extend([r, w])
        return [r]
    if kind == "udp":
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        keep.append(u)
        return [u.fileno()]
    if kind == "any_address":
        s = tcp_listener("0.0.0.0")
        keep.append(s)
        return [s.fileno()]
    if kind == "unix_listener":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0handover-spec-%d" % os.getpid())
        s.listen(1)
        keep.append(s)
        return [s.fileno()]
    if kind == "three":
        ls = [tcp_listener() for _ in range(3)]
        keep.extend(ls)
        return [s.fileno() for s in ls]
    if kind == "flood":
        ls = [tcp_listener() for _ in range(200)]
        keep.extend(ls)
        return [s.fileno() for s in ls]
    if kind == "lingering":
        srv = tcp_listener()
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        c.connect(srv.getsockname())
        a, _ = srv.accept()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        c.setblocking(False)
        try:
            while True:
                c.send(b"x" * 65536)
        except BlockingIOError:
            pass
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 10))
        # the peer stays open and never reads; the sender keeps no copy of c
        keep.extend([srv, a])
        fd = os.dup(c.fileno())
        c.close()
        keep.append(("close-after-send", fd))
        return [fd]
    if kind == "none":
        return []
    raise SystemExit("unknown kind " + kind)


def main():
    path, kind = sys.argv[1], sys.argv[2]
    keep = []
    fds = descriptors(kind, keep)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.settimeout(10)
    msg = MAGIC
    if kind == "bad_magic":
        msg = b"\0isolation-pass 9\n"
    elif kind in ("http_with_fd", "lingering"):
        msg = b"GET http://blocked.example.net/ HTTP/1.1\r\nHost: blocked.example.net\r\n\r\n"
    try:
        socket.send_fds(c, [msg], fds)
    except PermissionError:
        print("send-refused:EPERM\nend", flush=True)
        return
    for k in keep:
        if isinstance(k, tuple) and k[0] == "close-after-send":
            os.close(k[1])  # the proxy holds the last reference now
    try:
        reply = c.recv(200)
    except OSError as e:
        reply = ("<%s>" % e.__class__.__name__).encode()
    lines = [(reply.split(b"\n")[0].split(b"\r")[0] or b"<eof>").decode(errors="replace")]
    if kind in ("listener", "listener6") and reply.startswith(b"ok"):
        # the proxy accepts on it now: one request through it
        lst = keep[0]
        host, port = lst.getsockname()[:2]
        k = socket.create_connection((host, port), timeout=10)
        k.sendall(b"GET http://blocked.example.net/ HTTP/1.1\r\nHost: blocked.example.net\r\n\r\n")
        lines.append("via-listener:" + k.recv(200).split(b"\r\n")[0].decode())
        k.close()
    if kind == "file":
        f = keep[0]
        f.seek(0)
        lines.append("file:" + f.read().decode())
    if kind == "connected":
        a = keep[2]
        a.setblocking(False)
        try:
            got = a.recv(100)
            lines.append("peer-got:" + (got.decode() if got else "<eof>"))
        except BlockingIOError:
            lines.append("peer-got:<nothing>")
    print("\n".join(lines + ["end"]), flush=True)
    if len(sys.argv) > 3 and sys.argv[3] == "hold":
        # keep the control connection until stdin ends; say when the
        # proxy closes it
        c.settimeout(None)
        watch = [sys.stdin, c]
        while watch:
            ready, _, _ = select.select(watch, [], [])
            if c in ready:
                c.recv(100)
                print("ctl-closed", flush=True)
                watch.remove(c)
            if sys.stdin in ready:
                if not sys.stdin.buffer.read1(100):
                    break


main()
