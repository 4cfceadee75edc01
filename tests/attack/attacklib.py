"""Shared pieces of the attack suite: resource accounting of the plugin process and
raw peers on its socket.

Every lifecycle test takes a Snapshot before and after and asserts the plugin's
threads and fds are flat and its RSS stays under the shipped manifests' limit.
"""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import harness  # noqa: E402  (the integration harness: fake host, test kubelet, plugin)

# The memory limit of deployments/static/gpu-device-plugin.yml and the Helm chart's
# default; tests/attack/test_budget.py checks the manifests say the same.
MANIFEST_MEMORY_LIMIT = 128 * 1024 * 1024

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _status(pid):
    out = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def sanitized(pid):
    """ASan keeps freed memory in its quarantine and adds shadow memory: the RSS of a
    sanitizer build is not the product's, so it is reported but not judged."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as f:
        return "libasan" in f.read()


class Snapshot:
    """Threads, fds (by kind) and RSS of a process at one moment."""

    def __init__(self, pid):
        self.sanitized = sanitized(pid)
        st = _status(pid)
        self.threads = int(st["Threads"])
        self.rss = int(st["VmRSS"].split()[0]) * 1024
        self.fds = {}
        d = f"/proc/{pid}/fd"
        for name in os.listdir(d):
            try:
                target = os.readlink(os.path.join(d, name))
            except OSError:
                continue
            kind = target.split(":", 1)[0] if ":" in target else "file"
            self.fds[kind] = self.fds.get(kind, 0) + 1

    @property
    def n_fds(self):
        return sum(self.fds.values())

    def __repr__(self):
        return f"threads={self.threads} fds={self.n_fds} {self.fds} rss={self.rss // 1024}KiB"


def settled(pid, before, timeout=10.0):
    """The process's snapshot once its threads and fds are back at `before`'s counts (a
    peer's close reaches the plugin's loop a moment after the peer returns), or the last
    one taken when `timeout` runs out, which assert_flat then reports."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        snap = Snapshot(pid)
        if (snap.threads <= before.threads and snap.n_fds <= before.n_fds) or \
                time.monotonic() > deadline:
            return snap
        time.sleep(0.05)


def assert_flat(tc, before, after, fd_slack=0, what=""):
    """Threads and fds did not grow; RSS is under the manifests' limit."""
    tc.assertLessEqual(after.threads, before.threads, f"{what}: threads grew: {before} -> {after}")
    tc.assertLessEqual(after.n_fds, before.n_fds + fd_slack, f"{what}: fds grew: {before} -> {after}")
    if not after.sanitized:
        tc.assertLess(after.rss, MANIFEST_MEMORY_LIMIT,
                      f"{what}: RSS over the manifests' limit: {after}")


def raw_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
