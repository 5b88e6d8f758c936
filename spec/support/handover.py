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
    if kind == "odd_listener":
        # options a sandbox may set on a listener before it sends it
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.2", 0))
        twin = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        twin.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        twin.bind(s.getsockname())
        twin.listen(16)  # a twin the sender could accept on itself
        for opt, val in ((socket.TCP_DEFER_ACCEPT, 5), (socket.TCP_FASTOPEN, 16)):
            s.setsockopt(socket.IPPROTO_TCP, opt, val)
        for opt, val in ((socket.SO_RCVLOWAT, 1000), (socket.SO_RCVBUF, 1), (socket.SO_SNDBUF, 1),
                         (socket.SO_LINGER, struct.pack("ii", 1, 60))):
            s.setsockopt(socket.SOL_SOCKET, opt, val)
        s.listen(16)
        keep.extend([s, twin])
        return [s.fileno()]
    if kind == "dual_stack":
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::1", 0))
        s.listen(16)
        keep.append(s)
        return [s.fileno()]
    if kind in ("after_http", "socks_after"):
        s = tcp_listener()
        keep.append(s)
        return [s.fileno()]
    if kind == "eventfd":
        fd = os.eventfd(0)
        keep.append(fd)
        return [fd]
    if kind == "memfd":
        fd = os.memfd_create("handover-spec")
        os.write(fd, b"secret")
        keep.append(fd)
        return [fd]
    if kind == "pidfd":
        fd = os.pidfd_open(os.getpid())
        keep.append(fd)
        return [fd]
    if kind == "epoll":
        e = select.epoll()
        keep.append(e)
        return [e.fileno()]
    if kind == "none":
        return []
    raise SystemExit("unknown kind " + kind)


REQUEST = b"GET http://blocked.example.net/ HTTP/1.1\r\nHost: blocked.example.net\r\n\r\n"


def status_line(data):
    return data.split(b"\r\n")[0].split(b"\n")[0].decode(errors="replace") or "<eof>"


def request(path):
    # another client of the proxy, on a new connection: its status line
    o = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    o.settimeout(5)
    o.connect(path)
    o.sendall(REQUEST)
    try:
        return status_line(o.recv(200))
    except OSError as e:
        return "<%s>" % e.__class__.__name__
    finally:
        o.close()


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
    if kind == "after_http":
        # a request first; then the handover on the same connection
        c.sendall(REQUEST)
        print(status_line(c.recv(200)), flush=True)
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
    if kind in ("odd_listener", "dual_stack") and reply.startswith(b"ok"):
        lines.append("other:" + request(path))
    if kind == "odd_listener" and reply.startswith(b"ok"):
        # the socket is shared with the proxy: what it set shows here too
        on, secs = struct.unpack("ii", keep[0].getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
        lines.append("linger:%d,%d" % (on, secs))
    if kind == "socks_after" and reply.startswith(b"ok"):
        # SOCKS5's greeting on the control connection: it is closed
        c.sendall(b"\x05\x01\x00")
        try:
            lines.append("ctl:" + (c.recv(100).decode(errors="replace") or "<eof>"))
        except OSError as e:
            lines.append("ctl:<%s>" % e.__class__.__name__)
        try:
            k = socket.create_connection(keep[0].getsockname()[:2], timeout=1)
            k.sendall(REQUEST)
            lines.append("served-after:" + ("yes" if k.recv(100) else "<eof>"))
            k.close()
        except socket.timeout:
            lines.append("served-after:no")
        except ConnectionRefusedError:
            lines.append("served-after:refused")
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
