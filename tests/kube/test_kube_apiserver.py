"""The API client (through kube-probe) against a REAL kube-apiserver (the e2e suite's: its
cached v1.20 build, or $KUBE_BIN_DIR's, any release 1.20-1.36; the flags follow the binary's
release) on Debian's etcd: only those two daemons, on ports of their own (etcd 23891/23892,
API 17443) and a state directory under $TMPDIR, RBAC on, an admin and a restricted
token. GET/PATCH/POST on nodes and events, the RBAC line on 403, a Node watch that goes on
across an API server restart, and a watch whose resourceVersion was compacted away while
the API server was down: 410, relist, DELETED for the node removed meanwhile, SYNCED.
Token rotation: in-cluster credentials from a service account volume rotated the kubelet's
way (`..data` symlink swap) from a token that may not patch nodes to one that may, under an
open watch; a kubeconfig tokenFile fixed after a 401 (picked up by the re-read on 401).
A hung API server (SIGSTOP): a request times out at its deadline and the connection is
dropped (unanswered PING, then an unanswered TLS handshake); watches outlive the hang
(default silence limit) or are dropped and asked again (shortened), and see the next
change once it is over; the probes' fds and threads do not grow.

Skips (exit 77) when kube-apiserver or etcd is missing, except under CI=true. Runs one at
a time per machine (the abstract socket @gdp-kube-apiserver.lock): the ports are fixed.

usage: test_kube_apiserver.py <kube-probe>"""
import base64
import errno
import glob
import json
import os
import re
import shutil
import signal
import socket
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
# Token rotation: one service account's token file changes from READER's token (may
# get/list/watch nodes, not patch them) to PATCHER's (may also patch nodes).
READER, PATCHER = "gdp-kube-reader-token", "gdp-kube-patcher-token"
# The client checks its token file's stat at most this often (KUBE_TOKEN_CHECK_MS).
TOKEN_CHECK_S = 1.0
# Another run of this suite (another worktree, an ASan build) may hold the ports this long.
LOCK_WAIT = 240


def find_bins():
    """kube-apiserver: the e2e suite's, $KUBE_BIN_DIR's when set (any release 1.20-1.36,
    tests/e2e/run.sh), else tests/e2e/kube-build.sh's cached build; etcd: $ETCD_BIN (a 3.5
    serves 1.34+'s streaming lists, Debian 12's 3.4.23 cannot), else Debian's."""
    etcd = os.environ.get("ETCD_BIN") or shutil.which("etcd")
    if os.environ.get("KUBE_BIN_DIR"):
        api = os.path.join(os.environ["KUBE_BIN_DIR"], "kube-apiserver")
        return (api if os.access(api, os.X_OK) else None), etcd
    api = sorted(glob.glob("/var/cache/gpu-device-plugin/e2e/*/bin/kube-apiserver"))
    return (api[-1] if api else None), etcd


def apiserver_version(path):
    """(major, minor) of a kube-apiserver binary, from its --version ("Kubernetes v1.20.2")."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    m = re.search(r"\bv(\d+)\.(\d+)", out)
    if not m:
        raise AssertionError("%s --version: no release in %r" % (path, out))
    return int(m.group(1)), int(m.group(2))


def version_flags(version):
    """The flags only some releases take: --insecure-port 0 (no plain-HTTP port) exists up
    to 1.23 and is refused from 1.24, where there is no insecure port at all."""
    return ["--insecure-port", "0"] if version < (1, 24) else []


class Cluster:
    def __init__(self, apiserver, etcd):
        self.apiserver, self.etcd = apiserver, etcd
        self.dir = kt.scratch.mkdtemp("gdp-kube-apiserver-")
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
            f.write("%s,gdp-reader,uid-reader\n" % READER)
            f.write("%s,gdp-patcher,uid-patcher\n" % PATCHER)
        self.ca = os.path.join(self.dir, "ca.crt")

    def start(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        # A session of its own (meson's kill of the test's group does not reach it):
        # adopted, so a signal that ends this test ends the daemons too.
        self.procs[name] = kt.scratch.adopt(subprocess.Popen(
            argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True))
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
            "--secure-port", str(API_PORT)] + version_flags(apiserver_version(self.apiserver)) + [
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

    def admin(self, method, path, obj):
        """Set-up calls as the admin, not through the client under test."""
        ctx = ssl.create_default_context(cafile=self.ca)
        req = urllib.request.Request("https://127.0.0.1:%d%s" % (API_PORT, path), method=method,
                                     data=json.dumps(obj).encode(),
                                     headers={"Authorization": "Bearer " + ADMIN,
                                              "Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req, timeout=10, context=ctx))

    def rbac(self):
        """gdp-reader may get/list/watch nodes, gdp-patcher may also patch them; returns once
        the authorizer (fed by an informer) says so."""
        rbac = "/apis/rbac.authorization.k8s.io/v1/"
        for user, verbs in (("gdp-reader", ["get", "list", "watch"]),
                            ("gdp-patcher", ["get", "list", "watch", "patch"])):
            self.admin("POST", rbac + "clusterroles", {
                "metadata": {"name": user},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": verbs}]})
            self.admin("POST", rbac + "clusterrolebindings", {
                "metadata": {"name": user},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": user},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": user}]})

        def allowed(user, verb):
            return self.admin("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "spec": {"user": user, "resourceAttributes": {"verb": verb, "resource": "nodes"}}
            })["status"].get("allowed", False)
        self.wait("RBAC", lambda: allowed("gdp-reader", "watch") and allowed("gdp-patcher", "patch"))

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
        kt.scratch.remove(self.dir)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def project_sa(sa, token, ca):
    """Write a service account volume the kubelet's way (its AtomicWriter): the files in a
    new timestamped directory, a `..data` symlink renamed over the old one, `token` and
    `ca.crt` symlinks into `..data`, the old directory removed."""
    os.makedirs(sa, exist_ok=True)
    new = tempfile.mkdtemp(prefix="..%s." % time.strftime("%Y_%m_%d_%H_%M_%S"), dir=sa)
    with open(os.path.join(new, "token"), "w") as f:
        f.write(token)
    shutil.copy(ca, os.path.join(new, "ca.crt"))
    data = os.path.join(sa, "..data")
    old = os.readlink(data) if os.path.lexists(data) else None
    os.symlink(os.path.basename(new), data + "_tmp")
    os.rename(data + "_tmp", data)
    for name in ("token", "ca.crt"):
        if not os.path.lexists(os.path.join(sa, name)):
            os.symlink("..data/" + name, os.path.join(sa, name))
    if old:
        shutil.rmtree(os.path.join(sa, old))


def proc_counts(pid):
    """(open fds, threads) of a process."""
    return len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))


class ApiserverFlags(unittest.TestCase):
    """The flags follow the binary's release: 1.20-1.23 take --insecure-port 0, 1.24+ refuse
    it (fake binaries that print what each release's --version prints)."""

    def test_insecure_port_only_where_taken(self):
        d = kt.scratch.mkdtemp("gdp-kube-apiserver-version-")
        self.addCleanup(kt.scratch.remove, d)
        for release, taken in (("v1.20.2", True), ("v1.23.17", True), ("v1.24.0", False),
                               ("v1.36.3", False)):
            fake = os.path.join(d, "kube-apiserver-" + release)
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'Kubernetes %s'\n" % release)
            os.chmod(fake, 0o755)
            flags = version_flags(apiserver_version(fake))
            self.assertEqual("--insecure-port" in flags, taken, release)


class RealAPIServer(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(*find_bins())
        try:
            cls.cluster.start_etcd()
            cls.cluster.start_apiserver()
            cls.cluster.rbac()
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

    def until_error_line(self, p, method, path, body, pattern):
        """Repeat a forbidden request (as a caller retries) until the client's one error line
        for it: a 403 is said as an error once it persisted 3 tries past the first 10 s of
        the connection (a restarted API server may still be syncing its authorizer)."""
        end = time.monotonic() + 40
        rx = re.compile(pattern)
        while True:
            st, out = p.request(method, path, body)
            self.assertEqual(st, 403, out)
            lines = [l for l in p.errlines if rx.search(l) and l[0] in "WE"]
            if lines:
                self.assertEqual([l[0] for l in lines], ["E"], lines)
                return lines[0]
            self.assertLess(time.monotonic(), end, p.errlines[-5:])
            time.sleep(1.5)

    def test_2_forbidden_logged(self):
        p = self.probe(RESTRICTED)
        line = self.until_error_line(p, "MERGE", "/api/v1/nodes/kt-a", "{}",
                                     r"kube: RBAC: forbidden to patch nodes")
        self.assertIn('grant verb "patch" on resource "nodes"', line)
        self.assertIn('User "gdp-restricted" cannot patch resource "nodes"', line)
        self.until_error_line(p, "GET", "/api/v1/namespaces/default/events?limit=1", None,
                              r'kube: RBAC: forbidden to list events \(/api/v1/namespaces/default/events\)')

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
        # a relist (410: 1.36's watch cache starts past us) shows the change as ADDED
        p.expect(r"^event (MODIFIED|ADDED) /kt-w \d+$", timeout=60)
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

    def test_5_streaming_list(self):
        """A list through the watch (sendInitialEvents), else page by page: the objects, then
        SYNCED, then changes either way. Without list/watch of nodes: FORBIDDEN once."""
        p = self.probe(ADMIN)
        self.node(p, "kt-s")
        p.send("watchx /api/v1/nodes metadata.name=kt-s meta stream")
        p.expect(r"^event ADDED /kt-s \d+$")
        p.expect(r"^shape kind=PartialObjectMetadata spec=no status=no bytes=\d+$")
        p.expect(r"^event SYNCED$")
        self.assertEqual(p.request("MERGE", "/api/v1/nodes/kt-s", '{"metadata":{"labels":{"step":"s"}}}')[0], 200)
        p.expect(r"^event MODIFIED /kt-s \d+$")
        _, minor = apiserver_version(self.cluster.apiserver)
        fell_back = any("listing page by page" in l for l in p.errlines)
        # served from 1.34 (1.32) where etcd tells watch progress (3.5.13+); else 422 or 500
        progress = any("RequestWatchProgress" in l for l in p.errlines)
        self.assertEqual(fell_back, minor < 34 and minor != 32 or progress, p.errlines[-5:])
        how = "paged list instead (%s)" % ("etcd without watch progress" if progress else "refused")
        print("streaming list on 1.%d: %s" % (minor, how if fell_back else "served"), file=sys.stderr)
        r = self.probe(RESTRICTED)
        r.send("watchx /api/v1/nodes metadata.name=kt-s meta stream forbidden")
        r.expect(r"^event FORBIDDEN$")
        time.sleep(2)
        self.assertEqual(sum("FORBIDDEN" in l for l in r.seen), 1)

    def test_4_in_cluster_token_rotated_by_the_kubelet(self):
        # In-cluster credentials from a service account volume laid out and rotated like
        # the kubelet's: the token changes from gdp-reader's (403 on patch) to gdp-patcher's.
        self.node(self.probe(ADMIN), "kt-r")
        sa = os.path.join(self.cluster.dir, "sa")
        project_sa(sa, READER, self.cluster.ca)
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=str(API_PORT))
        p = kt.Probe(PROBE, "--sa-dir", sa, env=env)
        self.probes.append(p)
        p.send("watch /api/v1/nodes metadata.name=kt-r")
        p.expect(r"^event ADDED /kt-r \d+$")
        p.expect(r"^event SYNCED$")
        patch = '{"metadata":{"labels":{"rotated":"yes"}}}'
        st, out = p.request("MERGE", "/api/v1/nodes/kt-r", patch)
        self.assertEqual(st, 403, out)
        self.assertIn('User "gdp-reader" cannot patch', json.loads(out)["message"])

        project_sa(sa, PATCHER, self.cluster.ca)
        # The client looks at the file at most once a second (from its last look, at the
        # 403 request, before the rotation): the first request after that interval must
        # carry the new token. Waiting it out is waiting on exactly that one value.
        time.sleep(TOKEN_CHECK_S + 0.2)
        st, out = p.request("MERGE", "/api/v1/nodes/kt-r", patch)
        self.assertEqual(st, 200, out)
        # The watch opened with the old token goes on: it sees the patch made with the new
        # one, without a relist or a retry.
        p.expect(r"^event MODIFIED /kt-r \d+$")
        self.assertEqual(sum("SYNCED" in l for l in p.seen), 1, p.seen)
        self.assertFalse([l for l in p.errlines if "retrying" in l], p.errlines)

    def test_5_token_file_fixed_after_401(self):
        # A kubeconfig tokenFile holding a token the server does not know: 401 (after the
        # client's one re-read and retry). The file is then fixed in place with its stat
        # (inode, size, mtime) unchanged, so that the client's once-a-second stat check
        # cannot notice: only the re-read on 401 can make the next request succeed.
        tf = os.path.join(self.cluster.dir, "kc-token")
        bad = PATCHER[:-5] + "wrong"
        self.assertEqual(len(bad), len(PATCHER))
        with open(tf, "w") as f:
            f.write(bad + "\n")
        cfg = kt.write_kubeconfig(os.path.join(self.cluster.dir, "kc-token-file"),
                                  "https://127.0.0.1:%d" % API_PORT, ca=self.cluster.ca,
                                  token_file=tf)
        p = kt.Probe(PROBE, "--kubeconfig", cfg)
        self.probes.append(p)
        st, out = p.request("GET", "/api/v1/nodes?limit=1")
        self.assertEqual(st, 401, out)
        before = os.stat(tf)
        with open(tf, "r+") as f:
            f.write(PATCHER + "\n")
        os.utime(tf, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(tf)
        self.assertEqual((after.st_ino, after.st_size, after.st_mtime_ns),
                         (before.st_ino, before.st_size, before.st_mtime_ns))
        st, out = p.request("GET", "/api/v1/nodes?limit=1")
        self.assertEqual(st, 200, out)

    def test_6_hanging_apiserver(self):
        # The defaults the shortened values below stand in for.
        cfg = kt.write_kubeconfig(os.path.join(self.cluster.dir, "kc-options"),
                                  "https://127.0.0.1:%d" % API_PORT, ca=self.cluster.ca, token=ADMIN)
        opts = kt.LineProc([PROBE, "--kubeconfig", cfg, "options"])
        self.assertEqual(opts.expect(r"^request_timeout_ms (\d+)$").group(1), "10000")
        self.assertEqual(opts.expect(r"^watch_timeout_s (\S+)$").group(1), "300-599")
        self.assertEqual(opts.expect(r"^watch_silence_ms (\S+)$").group(1), "timeout+60000")
        self.assertEqual(opts.stop(), 0)

        admin = self.probe(ADMIN)
        self.node(admin, "kt-h")
        # req waits on its request deadline (shortened); w watches at the defaults (the
        # stream outlives a short hang); ws waits on its watch silence limit (shortened):
        # its stream is dropped during the hang and asked again until the server is back.
        req = self.probe(ADMIN, "--timeout-ms", "1500")
        w = self.probe(ADMIN)
        ws = self.probe(ADMIN, "--watch-silence-ms", "1500")
        self.assertEqual(req.request("GET", "/api/v1/nodes/kt-h")[0], 200)
        for p in (w, ws):
            p.send("watch /api/v1/nodes metadata.name=kt-h")
            p.expect(r"^event ADDED /kt-h \d+$")
            p.expect(r"^event SYNCED$")
        counts = {p: proc_counts(p.p.pid) for p in (req, w, ws)}

        api = self.cluster.procs["kube-apiserver"]
        mark = len(ws.errlines)
        api.send_signal(signal.SIGSTOP)
        try:
            st, _ = req.request("GET", "/api/v1/nodes/kt-h")
            self.assertEqual(st, -errno.ETIMEDOUT)
            # The stopped process does not answer the PING the timeout sent either: the
            # connection is dropped. A new one is accepted by the kernel, but its TLS
            # handshake is never answered: dropped at its deadline too.
            req.stderr_has(r"no answer to a PING within 1500 ms after a request timed out")
            st, _ = req.request("GET", "/api/v1/nodes/kt-h")
            self.assertEqual(st, -errno.ETIMEDOUT)
            req.stderr_has(r"TLS handshake not done within 1500 ms")
            # Two watch restarts after the stop: the stream of the first was dropped
            # (silent) while the server was stopped.
            end = time.monotonic() + kt.WAIT
            while sum("kube: watch /api/v1/nodes: from resourceVersion" in l
                      for l in ws.errlines[mark:]) < 2:
                self.assertLess(time.monotonic(), end, ws.errlines[-10:])
                time.sleep(0.05)
        finally:
            api.send_signal(signal.SIGCONT)

        st, out = req.request("GET", "/api/v1/nodes/kt-h")  # on a new connection
        self.assertEqual(st, 200, out)
        st, out = admin.request("MERGE", "/api/v1/nodes/kt-h", '{"metadata":{"labels":{"hang":"over"}}}')
        self.assertEqual(st, 200, out)
        for p in (w, ws):
            p.expect(r"^event MODIFIED /kt-h \d+$")
            self.assertEqual(sum("SYNCED" in l for l in p.seen), 1, p.seen)
        self.assertFalse([l for l in w.errlines if "retrying" in l], w.errlines)
        for p, c in counts.items():
            self.assertEqual(proc_counts(p.p.pid), c)

    def test_7_node_watch_on_metadata_only(self):
        """Issue 18 item 8: a metadata-only watch gets PartialObjectMetadata from the list and
        the watch; a kubelet-like status write (images, ~10 KiB) reaches it as a small event
        without spec or status, where a whole-object watch gets all of it."""
        p = self.probe(ADMIN)
        self.node(p, "kt-m")
        meta, full = self.probe(ADMIN), self.probe(ADMIN)
        meta.send("watchx /api/v1/nodes metadata.name=kt-m meta")
        full.send("watchx /api/v1/nodes metadata.name=kt-m full")
        meta.expect(r"^event ADDED /kt-m \d+$")
        m = meta.expect(r"^shape (.*)$")
        self.assertEqual(m.group(1).split()[:3], ["kind=PartialObjectMetadata", "spec=no", "status=no"])
        full.expect(r"^event ADDED /kt-m \d+$")
        full.expect(r"^shape ")
        for w in (meta, full):
            w.expect(r"^event SYNCED$")
        sizes = {"meta": [], "full": []}
        for i in range(3):
            images = [{"names": ["registry.example/team/image-%d:v%d@sha256:%064x" % (j, i, j)],
                       "sizeBytes": (j + 1) << 20} for j in range(60)]
            conditions = [{"type": t, "status": "False", "reason": "KubeletHasNo" + t,
                           "message": "kubelet has no %s (write %d)" % (t, i)}
                          for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
            st, out = p.request("STRATEGIC", "/api/v1/nodes/kt-m/status",
                                json.dumps({"status": {"images": images, "conditions": conditions}}))
            self.assertEqual(st, 200, out)
            for name, w in (("meta", meta), ("full", full)):
                w.expect(r"^event MODIFIED /kt-m \d+$")
                m = w.expect(r"^shape kind=(\S+) spec=(\S+) status=(\S+) bytes=(\d+)$")
                sizes[name].append(int(m.group(4)))
                if name == "meta":
                    self.assertEqual(m.groups()[:3], ("PartialObjectMetadata", "no", "no"))
                else:
                    self.assertEqual(m.groups()[1:3], ("yes", "yes"))
        print("bytes per status write: metadata watch %s, whole-object watch %s" %
              (sizes["meta"], sizes["full"]), file=sys.stderr)
        self.assertGreater(min(sizes["full"]), 9000)
        self.assertLess(max(sizes["meta"]), 2500)


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
    # The ports are fixed: one run per machine at a time (other worktrees run this suite
    # too). The lock is an abstract Unix socket: like the ports it belongs to the network
    # namespace, it goes with the process, and it leaves no file behind.
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    end = time.monotonic() + LOCK_WAIT
    while True:
        try:
            lock.bind("\0gdp-kube-apiserver.lock")
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            if time.monotonic() > end:
                print("kube-apiserver suite: @gdp-kube-apiserver.lock still held by another run after %d s" % LOCK_WAIT,
                      file=sys.stderr)
                sys.exit(1)
            time.sleep(0.2)
    sys.argv[1:] = ["-v"]
    unittest.main()
