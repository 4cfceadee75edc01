"""Hostile HTTP/2 peers for the attack suite: raw sockets speaking just enough HTTP/2
(frames from tests/grpc/grpctest.py) to hold what a server gives them, and a fresh
kubelet-style client to check that the plugin still serves a newcomer."""

import os
import select
import socket
import struct
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "grpc"))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "tools", "test-kubelet"))

import dpapi  # noqa: E402
import grpctest as h  # noqa: E402

ALLOCATE = "/v1beta1.DevicePlugin/Allocate"


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    return s


def idle(path):
    """A connection that completes the handshake, then says nothing."""
    s = connect(path)
    s.sendall(h.PREFACE + h.settings() + h.frame(h.SETTINGS, h.ACK, 0))
    return s


def slowloris(path):
    """A request whose header block never ends (HEADERS without END_HEADERS)."""
    s = connect(path)
    s.sendall(h.PREFACE + h.settings() +
              h.frame(h.HEADERS, 0, 1, h.request_headers(ALLOCATE)))
    return s


def closed_by_server(s, timeout):
    """Waits (up to `timeout`) for EOF from the server; True if it came."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return False
        try:
            if not s.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True


class BodyHolder:
    """Opens `streams` unary requests on one connection, each declaring `declared`
    bytes, and sends body bytes as far as the server's flow-control windows allow,
    stopping one byte short: every body stays unfinished. It honours the windows
    like a real client, so it gets whatever the server is willing to buffer."""

    def __init__(self, path, streams, declared):
        self.s = connect(path)
        self.s.setblocking(False)
        self.buf = bytearray()
        self.conn_window = 65535
        self.init_window = 65535
        self.closed = False
        self.reset = set()
        self.left = {}
        self.window = {}
        out = h.PREFACE + h.settings()
        for i in range(streams):
            sid = 1 + 2 * i
            out += h.frame(h.HEADERS, h.END_HEADERS, sid, h.request_headers(ALLOCATE))
            self.left[sid] = 5 + declared - 1
            self.window[sid] = self.init_window
        self.prefix = b"\x00" + struct.pack(">I", declared)
        self.sent = {sid: 0 for sid in self.left}
        self._send(out)

    def _send(self, data):
        view = memoryview(data)
        while view and not self.closed:
            try:
                n = self.s.send(view)
                view = view[n:]
            except BlockingIOError:
                select.select([], [self.s], [], 1)
                self._read()
            except (BrokenPipeError, ConnectionResetError):
                self.closed = True

    def _read(self):
        while True:
            try:
                chunk = self.s.recv(65536)
            except BlockingIOError:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                return
            self.buf.extend(chunk)
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + n:
                break
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
            payload = bytes(self.buf[9:9 + n])
            del self.buf[:9 + n]
            if ftype == h.SETTINGS and not flags & h.ACK:
                for k in range(0, len(payload), 6):
                    ident, val = struct.unpack(">HI", payload[k:k + 6])
                    if ident == 4:
                        for x in self.window:
                            self.window[x] += val - self.init_window
                        self.init_window = val
                self._send(h.frame(h.SETTINGS, h.ACK, 0))
            elif ftype == h.WINDOW_UPDATE:
                inc = struct.unpack(">I", payload)[0] & 0x7fffffff
                if sid == 0:
                    self.conn_window += inc
                elif sid in self.window:
                    self.window[sid] += inc
            elif ftype == h.RST_STREAM or (ftype == h.HEADERS and flags & h.END_STREAM):
                self.reset.add(sid)
            elif ftype == h.GOAWAY:
                self.closed = True

    def push(self, quiet=2.0):
        """Sends until every body is one byte short, or the server stops granting
        window for `quiet` seconds, or it closes the connection. Returns bytes sent."""
        total = 0
        last_progress = time.monotonic()
        while not self.closed:
            progressed = False
            for sid in list(self.left):
                if sid in self.reset or self.left[sid] == 0:
                    continue
                n = min(16384, self.left[sid], self.window[sid], self.conn_window)
                if n <= 0:
                    continue
                body = self.prefix[self.sent[sid]:] if self.sent[sid] < 5 else b""
                body = (body + b"\x0a" * n)[:n]
                self._send(h.frame(h.DATA, 0, sid, body))
                self.sent[sid] += n
                self.left[sid] -= n
                self.window[sid] -= n
                self.conn_window -= n
                total += n
                progressed = True
            if all(self.left[s] == 0 or s in self.reset for s in self.left):
                break
            if progressed:
                last_progress = time.monotonic()
                self._read()
                continue
            left = quiet - (time.monotonic() - last_progress)
            if left <= 0:
                break
            r, _, _ = select.select([self.s], [], [], left)
            if r:
                self._read()
        return total

    def close(self):
        self.s.close()


def fresh_kubelet(path, ids, timeout):
    """What a kubelet does on a new connection: Allocate `ids`, then open ListAndWatch
    and take its first list. Returns (allocate latency s, first list latency s,
    NVIDIA_VISIBLE_DEVICES, device count); raises grpc.RpcError on failure."""
    ch = dpapi.dial(path)
    try:
        stub = dpapi.PluginStub(ch)
        t0 = time.monotonic()
        resp = stub.Allocate(dpapi.allocate_request([ids]), timeout=timeout)
        t_alloc = time.monotonic() - t0
        t0 = time.monotonic()
        call = stub.ListAndWatch(dpapi.pb.Empty(), timeout=timeout)
        first = next(call)
        t_list = time.monotonic() - t0
        call.cancel()
        visible = resp.container_responses[0].envs.get("NVIDIA_VISIBLE_DEVICES", "")
        return t_alloc, t_list, visible, len(first.devices)
    finally:
        ch.close()
