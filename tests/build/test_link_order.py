#!/usr/bin/python3
"""The profile-ordered link (src/link-order.txt, bench/link-order.py, meson option
link_order) on this build: the generator still runs end to end against the real binary,
and the checked-in list still names the code the serving path runs.

A list whose serve group no longer matches what a fresh profile finds has gone stale (the
functions were renamed, split or replaced): the binary still works, but its serving path
spreads over more 64 KiB windows again. The threshold leaves room for the inlining
differences between this build type and the release build the list comes from."""
import os
import re
import subprocess
import sys
import unittest

BUILD = os.environ["GDP_BUILD_DIR"]
SOURCE = os.environ["GDP_SOURCE_DIR"]
PLUGIN = os.path.join(BUILD, "src", "gpu-device-plugin")


def groups(text):
    """{"serve": [...], "metrics": [...], "api": [...], "dra": [...]} from a link-order
    list."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^# (serve|metrics|api|dra): ", line)
        if m:
            cur = out.setdefault(m.group(1), [])
        elif line and not line.startswith("#") and cur is not None:
            cur.append(line)
    return out


def functions(binary):
    """The names of the binary's functions (the .rodata names in a list are compiler
    numbered, __PRETTY_FUNCTION__.12, and differ between build types)."""
    nm = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    return {f[2] for f in (l.split() for l in nm.splitlines()) if len(f) == 3 and f[1] in "tT"}


class LinkOrder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "bench", "link-order.py"),
                            "--build", BUILD], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError("link-order.py failed: %s" % r.stderr[-2000:])
        cls.fresh = groups(r.stdout)
        with open(os.path.join(SOURCE, "src", "link-order.txt")) as f:
            cls.stored = groups(f.read())

    def test_generator_profiles_every_setup(self):
        for setup in ("serve", "metrics", "api", "dra"):
            self.assertTrue(self.fresh.get(setup), setup)
        serve = set(self.fresh["serve"])
        for fn in ("main", "loop_run", "protobuf_c_message_unpack", "nghttp2_session_mem_recv"):
            self.assertIn(fn, serve)
        api = set(self.fresh["api"])
        self.assertIn("mbedtls_ssl_handshake", api)
        self.assertIn("kube_new", api)
        dra = set(self.fresh["dra"])
        for fn in ("dra_publish_plan", "dra_service_start", "dra_claims_prepare"):
            self.assertIn(fn, dra)

    def test_stored_list_is_current(self):
        # serve: the device plugin's path; dra: what serve --dra adds (a stale DRA group
        # leaves DRA's code among the code nothing runs, as before the group existed)
        fns = functions(PLUGIN)
        for setup in ("serve", "dra"):
            fresh = set(self.fresh[setup]) & fns
            stored = set(self.stored.get(setup, [])) & fns
            covered = len(fresh & stored) / len(fresh)
            self.assertGreaterEqual(
                covered, 0.8, "src/link-order.txt names %.0f%% of the %d functions the %s setup "
                "runs now; regenerate it (bench/link-order.py says how). Missing: %s" % (
                    100 * covered, len(fresh), setup, sorted(fresh - stored)[:20]))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
