"""The API client (through kube-probe) against a REAL kube-apiserver (v1.20, the e2e suite's
cached build) on Debian's etcd: only those two daemons, on ports of their own (etcd 23891/
23892, API 17443) and a state directory under /tmp, RBAC on, an admin and a restricted
token. GET/PATCH/POST on nodes and events, the RBAC line on 403, a Node watch that goes on
across an API server restart, and a watch whose resourceVersion was compacted away while
the API server was down: 410, relist, DELETED for the node removed meanwhile, SYNCED.

Skips (exit 77) when kube-apiserver or etcd is missing, except under CI=true.

usage: test_kube_apiserver.py <kube-probe>"""
import base64
import glob
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import kubetest as kt

PROBE = None
ETCD_PORT, ETCD_PEER, API_PORT = 23891, 23892, 17443
ADMIN, RESTRICTED = "gdp-kube-admin-token", "gdp-kube-restricted-token"


def find_bins():
    api = sorted(glob.glob("/var/cache/gpu-device-plugin/e2e/*/bin/kube-apiserver"))
    etcd = shutil.which("etcd")
    return (api[-1] if api else None), etcd


class Cluster:
    def __init__(self, apiserver, etcd):
        self.apiserver, self.etcd = apiserver, etcd
        self.dir = tempfile.mkdtemp(prefix="gdp-kube-apiserver-", dir="/tmp")
        self.procs = {}
        self.certs()

    def sh(self, *argv):
        subprocess.run(argv, cwd=self.dir, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def certs(self):
        self.sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                "-out", "ca.crt", "-days", "2", "-subj", "/CN=gdp-kube-test-ca")
        with open(os.path.join(self.dir, "san.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        self.sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "api.key", "-out",
                "api.csr", "-subj", "/CN=kube-apiserver")
        self.sh("openssl", "x509", "-req", "-in", "api.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", "api.crt", "-days", "2", "-extfile", "san.ext")
        self.sh("openssl", "genrsa", "-out", "sa.key", "2048")
        self.sh("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        with open(os.path.join(self.dir, "tokens.csv"), "w") as f:
            f.write("%s,gdp-admin,uid-admin,system:masters\n" % ADMIN)
            f.write("%s,gdp-restricted,uid-restricted\n" % RESTRICTED)
        self.ca = os.path.join(self.dir, "ca.crt")

    def start(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        log.close()

    def stop(self, name):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            print("%s stopped in %.1f s" % (name, time.monotonic() - t0), file=sys.stderr)

    def start_etcd(self):
        self.start("etcd", [self.etcd, "--name", "gdp-kube", "--data-dir", os.path.join(self.dir, "etcd"),
                            "--listen-client-urls", "http://127.0.0.1:%d" % ETCD_PORT,
                            "--advertise-client-urls", "http://127.0.0.1:%d" % ETCD_PORT,
                            "--listen-peer-urls", "http://127.0.0.1:%d" % ETCD_PEER,
                            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % ETCD_PEER,
                            "--initial-cluster", "gdp-kube=http://127.0.0.1:%d" % ETCD_PEER])
        self.wait("etcd", lambda: self.etcd_call("/v3/maintenance/status", {}))

    def start_apiserver(self):
        d = self.dir
        self.start("kube-apiserver", [
            self.apiserver, "--etcd-servers", "http://127.0.0.1:%d" % ETCD_PORT,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(API_PORT), "--insecure-port", "0",
            "--tls-cert-file", d + "/api.crt", "--tls-private-key-file", d + "/api.key",
            "--client-ca-file", d + "/ca.crt", "--token-auth-file", d + "/tokens.csv",
            "--authorization-mode", "RBAC",
            "--service-account-key-file", d + "/sa.pub", "--service-account-signing-key-file", d + "/sa.key",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", "10.0.0.0/24", "--endpoint-reconciler-type", "none"])
        self.wait("kube-apiserver", self.ready, 120)

    def ready(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        req = urllib.request.Request("https://127.0.0.1:%d/readyz" % API_PORT,
                                     headers={"Authorization": "Bearer " + ADMIN})
        return urllib.request.urlopen(req, timeout=2, context=ctx).read() == b"ok"

    def wait(self, what, fn, secs=60):
        t0 = time.monotonic()
        end = t0 + secs
        while time.monotonic() < end:
            try:
                if fn():
                    print("%s up in %.1f s" % (what, time.monotonic() - t0), file=sys.stderr)
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise AssertionError("%s not up after %d s; log: %s" % (what, secs, self.log_tail(what)))

    def log_tail(self, name):
        try:
            with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
                return "".join(f.readlines()[-15:])
        except OSError:
            return ""

    def etcd_call(self, path, body):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (ETCD_PORT, path),
                                     data=json.dumps(body).encode(), method="POST")
        return json.load(urllib.request.urlopen(req, timeout=5))

    def down(self):
        self.stop("kube-apiserver")
        self.stop("etcd")
        shutil.rmtree(self.dir, ignore_errors=True)


def b64(s):
    return base64.b64encode(s.encode()).decode()


class RealAPIServer(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(*find_bins())
        try:
            cls.cluster.start_etcd()
            cls.cluster.start_apiserver()
        except BaseException:
            cls.cluster.down()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.down()

    def setUp(self):
        self.probes = []

    def tearDown(self):
        # The probe exits 0 only if it shut down cleanly (and, in a sanitizer build,
        # without a leak or memory error).
        codes = [p.stop() for p in self.probes]
        self.assertEqual(codes, [0] * len(codes), [p.errlines[-5:] for p in self.probes])

    def probe(self, token, *opts):
        cfg = kt.write_kubeconfig(os.path.join(self.cluster.dir, "kc-%s" % token),
                                  "https://127.0.0.1:%d" % API_PORT, ca=self.cluster.ca, token=token)
        p = kt.Probe(PROBE, "--kubeconfig", cfg, *opts)
        self.probes.append(p)
        return p

    def node(self, p, name):
        body = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        st, out = p.request("POST", "/api/v1/nodes", body)
        self.assertEqual(st, 201, out)
        return json.loads(out)

    def test_1_get_patch_post(self):
        p = self.probe(ADMIN)
        self.node(p, "kt-a")
        st, out = p.request("GET", "/api/v1/nodes/kt-a")
        self.assertEqual(st, 200, out)
        st, out = p.request("MERGE", "/api/v1/nodes/kt-a", '{"metadata":{"labels":{"gdp/x":"1"}}}')
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out)["metadata"]["labels"]["gdp/x"], "1")
        st, out = p.request("STRATEGIC", "/api/v1/nodes/kt-a/status",
                            '{"status":{"capacity":{"example.com/gpu":"2"}}}')
        self.assertEqual(st, 200, out)
        ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "kt-a.1", "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": "kt-a"}, "reason": "Test", "message": "hello",
              "type": "Normal"}
        st, out = p.request("POST", "/api/v1/namespaces/default/events", json.dumps(ev))
        self.assertEqual(st, 201, out)
        st, out = p.request("GET", "/api/v1/nodes/absent")
        self.assertEqual(st, 404)
        self.assertIn('"reason":"NotFound"', out)

    def test_2_forbidden_logged(self):
        p = self.probe(RESTRICTED)
        st, out = p.request("MERGE", "/api/v1/nodes/kt-a", "{}")
        self.assertEqual(st, 403, out)
        line = p.stderr_has(r"kube: RBAC: forbidden to patch nodes")
        self.assertIn('grant verb "patch" on resource "nodes"', line)
        self.assertIn('User "gdp-restricted" cannot patch resource "nodes"', line)
        st, _ = p.request("GET", "/api/v1/namespaces/default/events?limit=1")
        self.assertEqual(st, 403)
        p.stderr_has(r'kube: RBAC: forbidden to list events \(/api/v1/namespaces/default/events\)')

    def test_3_watch_across_restart_and_compaction(self):
        p = self.probe(ADMIN)
        self.node(p, "kt-w")
        self.node(p, "kt-gone")
        p.send("watch /api/v1/nodes metadata.name=kt-w")
        p.expect(r"^event ADDED /kt-w \d+$")
        p.expect(r"^event SYNCED$")
        st, _ = p.request("MERGE", "/api/v1/nodes/kt-w", '{"metadata":{"labels":{"step":"1"}}}')
        self.assertEqual(st, 200)
        p.expect(r"^event MODIFIED /kt-w \d+$")

        # Restart: the watch goes on (resumed, or relisted if the new watch cache starts
        # past our resourceVersion) and sees the next change.
        self.cluster.stop("kube-apiserver")
        self.cluster.start_apiserver()
        st, _ = p.request("MERGE", "/api/v1/nodes/kt-w", '{"metadata":{"labels":{"step":"2"}}}')
        self.assertEqual(st, 200)
        p.expect(r"^event MODIFIED /kt-w \d+$", timeout=60)
        print("watch after the restart: %s" % ("relisted" if sum("SYNCED" in l for l in p.seen) > 1
                                               else "resumed"), file=sys.stderr)

        # While the API server is down: the watched node is deleted and etcd compacted
        # past every revision the client has seen. Coming back, the server answers the
        # resume with 410: the client relists, reports the node gone, then SYNCED.
        w2 = self.probe(ADMIN)
        w2.send("watch /api/v1/nodes metadata.name=kt-gone")
        w2.expect(r"^event ADDED /kt-gone \d+$")
        w2.expect(r"^event SYNCED$")
        self.cluster.stop("kube-apiserver")
        self.cluster.etcd_call("/v3/kv/deleterange", {"key": b64("/registry/minions/kt-gone")})
        rev = int(self.cluster.etcd_call("/v3/kv/put", {"key": b64("/gdp-test/bump"),
                                                         "value": b64("x")})["header"]["revision"])
        self.cluster.etcd_call("/v3/kv/compaction", {"revision": rev, "physical": True})
        self.cluster.start_apiserver()
        w2.expect(r"^event DELETED /kt-gone \d+$", timeout=60)
        w2.expect(r"^event SYNCED$")
        self.assertTrue(any("410" in l or "too old" in l for l in w2.errlines), w2.errlines[-10:])


if __name__ == "__main__":
    PROBE = sys.argv[1]
    api, etcd = find_bins()
    if not api or not etcd:
        msg = "kube-apiserver suite: %s missing (tests/e2e/kube-build.sh builds kube-apiserver; scripts/deps.sh installs etcd-server)" % (
            "kube-apiserver" if not api else "etcd")
        if os.environ.get("CI") == "true":
            print(msg + ": failing under CI=true", file=sys.stderr)
            sys.exit(1)
        print(msg + ": skipped", file=sys.stderr)
        sys.exit(77)
    sys.argv[1:] = ["-v"]
    unittest.main()
