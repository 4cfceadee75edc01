"""A hostile node against the claim engine (dra-claims-probe on the real API client, as
test_dra_claims.py drives it; issue 30, rows 4, 5, 9, 11 and 12): what is not a regular
file where the checkpoint or its spare goes (a FIFO, a symlink, a directory; at start or
while serving) is moved aside once, with one warning, and never blocks; a checkpoint whose
records do not check out (another node's pool, a CDI ID with "../") is moved aside like a
corrupt one instead of being answered; a claim namespace or name that is no Kubernetes
name is that claim's error, never part of a GET. The engine answers other claims
meanwhile, and its fds and threads are as before.

usage: test_dra_claims_files.py <dra-claims-probe> <fake-apiserver>"""
import copy
import json
import os
import re
import stat
import sys
import time
import unittest

import test_dra_claims as base
from test_dra_claims import obj, ref



def warning(path, why, aside):
    """The one warning of a file moved aside."""
    return r"^W.*checkpoint %s %s: moved to %s" % (re.escape(path), re.escape(why), re.escape(aside))


class Files(base.Claims):
    def path(self, suffix=""):
        return os.path.join(self.plugin, "checkpoint.json" + suffix)

    def moved(self, want):
        """The warnings about a file moved aside so far, once want of them are read: the
        probe writes them before it answers "count", but its stderr is read by a thread of
        its own, which may be behind stdout's (a bare count was 0 != 1 once in 12 runs)."""
        self.p.send("count")
        self.p.expect(r"^count \d+$")
        end = time.monotonic() + 10
        while True:
            lines = [line for line in self.p.errlines if "moved to" in line]
            if len(lines) >= want or time.monotonic() > end:
                return lines
            time.sleep(0.01)

    def usage(self):
        pid = self.p.p.pid
        return len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))

    def two_claims(self):
        return (self.load(obj("resourceclaim-from-template-allocated")),
                self.load(obj("resourceclaim-two-gpus-allocated")))

    def assert_served(self, *claims):
        """Each claim prepared, then all unprepared: the checkpoint written each time."""
        for o in claims:
            self.assertNotIn("error", self.prepare(ref(o))[0])
        self.assertEqual(self.call("unprepare", *map(ref, claims)),
                         [{"uid": o["metadata"]["uid"], "devices": []} for o in claims])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})

    # ---- row 4: a FIFO at the spare --------------------------------------------------------

    def test_fifo_at_the_spare_never_blocks(self):
        a, b = self.two_claims()
        self.assertNotIn("error", self.prepare(ref(a))[0])  # the first save: no spare after it
        before = self.usage()
        os.mkfifo(self.path(".old"))
        self.assertNotIn("error", self.prepare(ref(b))[0])  # blocked in open() before
        aside = self.path(".old.not-regular")
        self.assertTrue(stat.S_ISFIFO(os.lstat(aside).st_mode))
        self.assertRegex(self.p.stderr_has("moved to"),
                         warning(self.path(".old"), "is a FIFO, not a regular file", aside))
        # A FIFO with a reader opens at once: it is refused by its type, after the open.
        os.unlink(self.path(".old"))
        os.mkfifo(self.path(".old"))
        reader = os.open(self.path(".old"), os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, reader)
        self.assertEqual(self.call("unprepare", ref(a)), [{"uid": a["metadata"]["uid"], "devices": []}])
        self.assertEqual(os.read(reader, 100), b"")  # nothing was written into it
        self.assertEqual(len(self.moved(2)), 2)
        self.assert_served(a, b)
        self.assertEqual(len(self.moved(2)), 2)
        self.assertEqual(list(self.checkpoint()), ["version", "nodeBootID", "preparedClaims"])
        self.assertEqual(self.usage(), before)

    # ---- row 5: a symlink at checkpoint.json -----------------------------------------------

    def test_symlink_at_the_checkpoint_is_moved_aside(self):
        a, b = self.two_claims()
        self.assertNotIn("error", self.prepare(ref(a))[0])
        # Outside the directory: a checkpoint of this boot, which must be neither read nor written.
        elsewhere = os.path.join(self.dir, "elsewhere.json")
        with open(self.path()) as f:
            text = f.read()
        with open(elsewhere, "w") as f:
            f.write(text)
        # While serving: the next save moves it aside, and every later call is served.
        os.symlink(elsewhere, self.path(".tmp"))
        os.rename(self.path(".tmp"), self.path())
        self.assert_served(b, a)
        aside = self.path(".not-regular")
        self.assertEqual(os.readlink(aside), elsewhere)
        self.assertEqual(len(self.moved(1)), 1)
        self.assertRegex(self.moved(1)[0], warning(self.path(), "is a symbolic link, not a regular file",
                                                    aside))
        # At start: not followed (its claim is not answered from it), moved aside once.
        os.unlink(aside)
        os.unlink(self.path())
        os.symlink(elsewhere, self.path())
        self.restart()
        self.assertRegex(self.p.stderr_has("moved to"),
                         warning(self.path(), "is a symbolic link, not a regular file", aside))
        self.p.send("count")
        self.p.expect(r"^count 0$")
        self.gets()
        self.assert_served(a, b)
        self.assertEqual(len(self.gets()), 2)
        self.assertEqual(len(self.moved(1)), 1)
        with open(elsewhere) as f:
            self.assertEqual(f.read(), text)

    # ---- row 12: a directory or FIFO at checkpoint.json at start ---------------------------

    def test_checkpoint_not_a_file_at_start(self):
        a, b = self.two_claims()
        os.makedirs(self.path())
        self.restart()  # the probe exited here before: "reading checkpoint ...: Invalid argument"
        self.assertRegex(self.p.stderr_has("moved to"),
                         warning(self.path(), "is a directory, not a regular file", self.path(".not-regular")))
        self.assertTrue(os.path.isdir(self.path(".not-regular")))
        self.assert_served(a)
        # A FIFO, and the first name for it taken by that directory: the next one.
        os.unlink(self.path())
        os.mkfifo(self.path())
        self.restart()
        self.assertRegex(self.p.stderr_has("moved to"),
                         warning(self.path(), "is a FIFO, not a regular file", self.path(".not-regular.1")))
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path(".not-regular.1")).st_mode))
        self.assert_served(b, a)
        self.assertEqual(len(self.moved(1)), 1)

    # ---- row 11: a record is checked like a request ----------------------------------------

    def test_records_that_do_not_check_out_are_not_answered(self):
        a, _ = self.two_claims()
        uid = a["metadata"]["uid"]
        good = self.prepare(ref(a))
        self.assertNotIn("error", good[0])
        with open(self.path()) as f:
            recorded = json.load(f)
        dev = recorded["preparedClaims"][uid]["devices"][0]
        bad = {"pool": ("a device of another node's pool", dict(dev, pool="gpu-node-2")),
               "cdi": ("a CDI device ID not its own", dict(dev, cdiDeviceID="k8s.gpu.nvidia.com/claim=../../x")),
               "device": ("a device name that is not a DNS label", dict(dev, device="../gpu-1")),
               "request": ("a request name that is not a DNS label", dict(dev, request="gpu/x")),
               "ns": ("a namespace or name that is not a Kubernetes name", None)}
        for what, (reason, d) in bad.items():
            ck = copy.deepcopy(recorded)
            if d:
                ck["preparedClaims"][uid]["devices"][0] = d
            else:
                ck["preparedClaims"][uid]["namespace"] = ".."
            with open(self.path(), "w") as f:
                json.dump(ck, f)
            self.restart()
            line = self.p.stderr_has("moved to")
            self.assertRegex(line, warning(self.path(), "has claim %s with %s" % (uid, reason),
                                              self.path(".corrupt")), what)
            self.p.send("count")
            self.p.expect(r"^count 0$")
            self.gets()
            self.assertEqual(self.prepare(ref(a)), good, what)  # from the API server, not the record
            self.assertEqual(len(self.gets()), 1, what)
            with open(self.path(".corrupt")) as f:
                self.assertEqual(json.load(f), ck)

    # ---- row 9: a namespace or name that is no Kubernetes name -----------------------------

    def test_names_that_are_not_kubernetes_names(self):
        a, _ = self.two_claims()
        uid = "aaaaaaaa-0000-0000-0000-0000000000%02d"
        names = [("..", "x", "namespace is not a DNS label"), ("default", "..", "name is not a DNS subdomain"),
                 ("..", "..", "namespace is not a DNS label"), ("default", "a..b", "name is not a DNS subdomain"),
                 ("default", ".x", "name is not a DNS subdomain"), ("default", "x-", "name is not a DNS subdomain"),
                 ("Default", "x", "namespace is not a DNS label"), ("a.b", "x", "namespace is not a DNS label"),
                 ("-a", "x", "namespace is not a DNS label"), ("n" * 64, "x", "namespace is not a DNS label"),
                 ("default", ("a" * 63 + ".") * 4, "name is not a DNS subdomain")]
        refs = ["%s/%s/%s" % (ns, name, uid % i) for i, (ns, name, _) in enumerate(names)]
        self.gets()
        res = self.prepare(*refs, ref(a))
        for i, (_, _, why) in enumerate(names):
            self.assertEqual((res[i]["uid"], res[i]["devices"]), (uid % i, []), names[i])
            self.assertTrue(res[i]["error"].startswith("error preparing devices for claim %s: %s (" % (
                uid % i, why)), (names[i], res[i]["error"]))
        self.assertNotIn("error", res[-1])
        self.assertEqual(len(self.gets()), 1)  # only the good claim's
        # The longest of each is a name.
        ok = ("n" * 63, ("a" * 63 + ".") * 3 + "a" * 61, "a.b-c.d")
        res = self.prepare("%s/%s/%s" % (ok[0], ok[1], uid % 90), "default/%s/%s" % (ok[2], uid % 91))
        for r in res:
            self.assertIn(": claim not found in the API server", r["error"])
        # Unprepare does not look at them: nothing of such a claim was prepared.
        self.assertEqual(self.call("unprepare", *refs), [{"uid": uid % i, "devices": []} for i in range(len(names))])


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_claims.py's)."""
    return unittest.TestSuite(Files(n) for n in sorted(vars(Files)) if n.startswith("test_"))


if __name__ == "__main__":
    base.PROBE, base.FAKE = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
