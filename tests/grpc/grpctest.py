"""Helpers for the gRPC layer tests: run grpc-test-server, talk raw HTTP/2."""
import os
import socket
import struct
import subprocess
import sys
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


class Server:
    """grpc-test-server in a scratch directory (removed by stop(), else at exit);
    stdout collected in a file."""

    def __init__(self, binary, *args):
        self.dir = scratch.socket_dir("gdp-grpc-")  # its socket: sun_path's 108 bytes
        self.sock = os.path.join(self.dir, "srv.sock")
        self.out = open(os.path.join(self.dir, "out"), "w+")
        self.proc = scratch.adopt(subprocess.Popen([binary, self.sock] + [str(a) for a in args],
                                                   stdout=self.out, stderr=subprocess.STDOUT))
        for _ in range(500):
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early")
            try:
                connect(self.sock).close()  # bound is not enough: wait for listen()
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.01)
        self.channel = self.open_channel()

    def open_channel(self, options=()):
        return grpc.insecure_channel("unix://" + self.sock, options=list(options))

    def unary(self, method, req=b"", channel=None, **kw):
        ch = channel or self.channel
        return ch.unary_unary("/test.Echo/" + method)(req, timeout=kw.pop("timeout", 10), **kw)

    def stats(self):
        txt = self.unary("Stats").decode()
        return {k: int(v) for k, v in (f.split("=") for f in txt.split())}

    def wait_stats(self, pred, what):
        """Poll Stats until pred(stats) holds; the guard only stops a hung test."""
        for _ in range(1000):
            st = self.stats()
            if pred(st):
                return st
            time.sleep(0.01)
        raise AssertionError("never reached: %s (last %r)" % (what, st))

    def output(self):
        self.out.flush()
        self.out.seek(0)
        return self.out.read()

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            rc = self.proc.wait(timeout=20)
        else:
            rc = self.proc.returncode
        self.out.close()
        scratch.remove(self.dir)
        return rc


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def _hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, no Huffman: enough to send requests."""
    out = b""
    for name, value in headers:
        name, value = name.encode(), value.encode()
        out += b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value
    return out


def request_headers(path, authority="localhost"):
    return hpack([(":method", "POST"), (":scheme", "http"), (":path", path),
                  (":authority", authority), ("content-type", "application/grpc"),
                  ("te", "trailers")])


def settings(**kw):
    ids = {"initial_window_size": 4, "max_frame_size": 5}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in kw.items()))


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def connect(path, timeout=20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s


def read_frame(s, buf):
    """Return (type, flags, sid, payload) or None at EOF; buf is a bytearray."""
    while True:
        if len(buf) >= 9:
            n = int.from_bytes(buf[0:3], "big")
            if len(buf) >= 9 + n:
                ftype, flags = buf[3], buf[4]
                sid = int.from_bytes(buf[5:9], "big") & 0x7fffffff
                payload = bytes(buf[9:9 + n])
                del buf[:9 + n]
                return ftype, flags, sid, payload
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        buf.extend(chunk)


def wait_closed(s):
    """Read until the server closes; return the frame types seen (raw bytes ignored)."""
    seen = bytearray()
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return bytes(seen)
        if not chunk:
            return bytes(seen)
        seen.extend(chunk)
