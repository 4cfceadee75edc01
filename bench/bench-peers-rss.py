#!/usr/bin/python3
"""Peak RSS of the real plugin under the worst hostile mix its budgets allow
(docs/operations.md, "Resource budgets"): every connection slot of the socket held,
each with the most concurrent streams, each stream an unfinished request body, plus
one unfinished header block per connection. Prints the figures; asserts nothing.

usage (from the source tree, after a build):
  GDP_BUILD_DIR=build-test GDP_SOURCE_DIR=. GDP_TEST_DATA=tests/data \\
      python3 bench/bench-peers-rss.py"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "attack"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import attacklib  # noqa: E402
import harness  # noqa: E402
import h2peer  # noqa: E402
from h2peer import h  # noqa: E402

CONNS, STREAMS = 64, 100


def hold_everything(sock):
    """One connection: STREAMS requests with a 16 KiB unfinished body each (the
    stream window allows 64 KiB; the budgets decide what stays), then a header block
    with a 60 KB value that never ends."""
    s = h2peer.connect(sock)
    out = h.PREFACE + h.settings()
    for i in range(STREAMS):
        sid = 1 + 2 * i
        out += h.frame(h.HEADERS, h.END_HEADERS, sid, h.request_headers(h2peer.ALLOCATE))
        out += h.frame(h.DATA, 0, sid, b"\x00\x00\x40\x00\x00" + b"b" * 16379)
    big = h.hpack([(":method", "POST"), ("x-filler", "f" * 60000)])
    out += h.frame(h.HEADERS, 0, 1 + 2 * STREAMS, big[:16384])
    try:
        s.sendall(out)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return s


class Bench(harness.PluginTestCase):
    def test_peak_rss(self):
        self.start_all("a100")
        pid = self.plugin.pid
        base = attacklib.Snapshot(pid)
        peers, peak = [], base.rss
        for _ in range(CONNS - 1):  # the kubelet holds one slot
            peers.append(hold_everything(self.plugin_socket()))
            peak = max(peak, attacklib.Snapshot(pid).rss)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            peak = max(peak, attacklib.Snapshot(pid).rss)
            time.sleep(0.05)
        during = attacklib.Snapshot(pid)
        for s in peers:
            s.close()
        print("baseline      %r" % base)
        print("under attack  %r" % during)
        print("peak RSS      %.1f MiB (manifest limit %d MiB)" % (
            peak / 2**20, attacklib.MANIFEST_MEMORY_LIMIT // 2**20))


if __name__ == "__main__":
    harness.main()
