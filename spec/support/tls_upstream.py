"""A local HTTPS upstream for the route specs (loopback only).

usage: tls_upstream.py CERT KEY DIR [PORT]
Listens on 127.0.0.1:PORT (default 0: any free port), writes its port to DIR/port, and for each request
appends one JSON line (method, path, peer: the client's port, headers, body)
to DIR/requests.jsonl.
  /json        answers {"ok": true, "path": ...}
  /sse         two server-sent events: the first, then waits (10 s at most)
               for DIR/go to exist, then the second names which came first
  /hang        reads the request and never answers
  /echo        answers the request body back (Content-Length)
  /close       answers as /json, with Connection: close, and closes
  /drop2       answers as /json the first request on a connection, and
               closes any later one on it unanswered (before its body is
               read; with ?rst=1 the close is a reset): a kept connection
               the upstream closes just as the proxy sends on it
  /drop1       closes every request unanswered, the first on a connection too
Each recorded request also says whether its TLS connection was resumed
(resumed), whether it was dropped unanswered (dropped), and the port it
came to (server_port). A second listener, on any free port written to
DIR/port2, serves the same with the same TLS context (the same session
ticket keys): a session one port issued would be resumed on the other.
  /sink        reads the body in pieces and answers its length
  /source?n=N  answers N bytes, chunked, 1 MiB at a time
  /git/...     git smart HTTP (git http-backend, repositories under
               DIR/git) when DIR/git_auth holds the Authorization value every
               request must carry (else 401)
"""
import json
import os
import socket
import struct
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CERT, KEY, DIR = sys.argv[1], sys.argv[2], sys.argv[3]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _record(self, body, dropped=False):
        with open(os.path.join(DIR, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "peer": self.client_address[1],
                                "headers": [[k, v] for k, v in self.headers.items()],
                                "body": body.decode("latin-1"), "dropped": dropped,
                                "resumed": self.connection.session_reused,
                                "server_port": self.server.server_address[1]}) + "\n")

    def _drop(self):
        # Unanswered: the connection ends once this handler returns (a reset
        # with ?rst=1, see Server.shutdown_request).
        self._record(b"", dropped=True)
        self.close_connection = True
        self.connection.rst = "rst=1" in self.path

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding") == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return data
        return self.rfile.read(n) if n else b""

    def _git(self, body):
        with open(os.path.join(DIR, "git_auth")) as f:
            want = f.read().strip()
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=os.path.join(DIR, "git"), GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path[len("/git"):], QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), REMOTE_USER="x-access-token",
                   REMOTE_ADDR="127.0.0.1", CONTENT_LENGTH=str(len(body)))
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        hdrs = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                hdrs.append((k, v.strip()))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    def _sink(self):
        total = 0
        if self.headers.get("Transfer-Encoding") == "chunked":
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                while size > 0:
                    got = len(self.rfile.read(min(size, 1 << 20)))
                    total += got
                    size -= got
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            while n > 0:
                got = len(self.rfile.read(min(n, 1 << 20)))
                total += got
                n -= got
        out = str(total).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _source(self, n):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        block = b"x" * (1 << 20)
        while n > 0:
            b = block[:min(n, len(block))]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            n -= len(b)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _any(self):
        p = self.path.split("?")[0]
        served = getattr(self, "served", 0)
        self.served = served + 1
        if p.endswith("/drop1") or (p.endswith("/drop2") and served > 0):
            self._drop()
            return
        if p.endswith("/sink"):
            self._sink()
            return
        if p.endswith("/source"):
            self._source(int(self.path.split("n=")[1]))
            return
        body = self._body()
        self._record(body)
        p = self.path.split("?")[0]
        if p.startswith("/git/") and os.path.exists(os.path.join(DIR, "git_auth")):
            self._git(body)
            return
        if p.endswith("/hang"):
            time.sleep(30)
            return
        if p.endswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(s):
                b = s.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                self.wfile.flush()
            chunk("data: first\n\n")
            go = os.path.join(DIR, "go")
            deadline = time.time() + 10
            while not os.path.exists(go) and time.time() < deadline:
                time.sleep(0.05)
            chunk("data: %s\n\n" % ("after-go" if os.path.exists(go) else "timeout"))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if p.endswith("/echo"):
            out = body
        else:
            out = json.dumps({"ok": True, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if p.endswith("/close"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = _any


class Server(ThreadingHTTPServer):
    def shutdown_request(self, request):
        if getattr(request, "rst", False):
            # No FIN first: linger 0 makes the close a reset.
            request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_request(request)
            return
        super().shutdown_request(request)


Server.allow_reuse_address = True
srv = Server(("127.0.0.1", int(sys.argv[4]) if len(sys.argv) > 4 else 0), H)
srv.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv2 = Server(("127.0.0.1", 0), H)
srv2.daemon_threads = True
srv2.socket = ctx.wrap_socket(srv2.socket, server_side=True)
threading.Thread(target=srv2.serve_forever, daemon=True).start()
for name, s in (("port2", srv2), ("port", srv)):
    with open(os.path.join(DIR, name + ".tmp"), "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(os.path.join(DIR, name + ".tmp"), os.path.join(DIR, name))
srv.serve_forever()
