"""Helpers for the API client's tests: a child process spoken to by lines (kube-probe, the
fake API server), every output line kept and waited for with a generous timeout."""
import os
import queue
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402  (the tests' scratch directories; children killed before removal)

WAIT = 30.0  # generous: a line that never comes fails the test after this long

# Per-node config tests: the node label and a config of 4 time-slicing replicas per GPU.
CONFIG_LABEL = "nvidia.com/device-plugin.config"
TS_CONFIG = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
             "    - name: nvidia.com/gpu\n      replicas: 4\n")


class LineProc:
    def __init__(self, argv, **kw):
        self.p = scratch.adopt(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, text=True, bufsize=1, **kw))
        self.lines, self.errlines = queue.Queue(), []
        self.seen, self.pending = [], []
        self.threads = [
            threading.Thread(target=self._pump, args=(self.p.stdout, self.lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.p.stderr, self.errlines.append),
                             daemon=True)]
        for t in self.threads:
            t.start()

    @staticmethod
    def _pump(f, put):
        for line in f:
            put(line.rstrip("\n"))

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def expect(self, pattern, timeout=WAIT):
        """The first output line not taken yet that matches pattern. Lines skipped stay
        for later calls (an event may come before the reply that is waited for); every
        line is in self.seen."""
        rx = re.compile(pattern)
        for i, line in enumerate(self.pending):
            m = rx.search(line)
            if m:
                del self.pending[i]
                return m
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no line matching %r in %.0f s; seen: %s; stderr: %s" %
                                     (pattern, timeout, self.seen[-20:], self.errlines[-20:]))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(line)
            m = rx.search(line)
            if m:
                return m
            self.pending.append(line)

    def stderr_has(self, pattern, timeout=WAIT):
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.errlines):
                if rx.search(line):
                    return line
            time.sleep(0.05)
        raise AssertionError("no stderr line matching %r; stderr: %s" % (pattern, self.errlines[-20:]))

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        for t in self.threads:
            t.join(timeout=5)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except (BrokenPipeError, ValueError):
                pass
        return self.p.returncode


class Probe(LineProc):
    """kube-probe: requests and a watch through the real client."""
    n = 0

    def __init__(self, binary, *opts, **kw):
        super().__init__([binary, *opts], **kw)
        self.expect(r"^ready$")

    def request(self, method, path, body=None, timeout=WAIT):
        """(status, body-json-text) of one request."""
        Probe.n += 1
        rid = "r%d" % Probe.n
        self.send("req %s %s %s%s" % (rid, method, path, " " + body if body else ""))
        m = self.expect(r"^done %s (-?\d+) (.*)$" % rid, timeout)
        return int(m.group(1)), m.group(2)


def write_kubeconfig(path, server, ca=None, token=None, token_file=None, cert=None, key=None,
                     server_name=None):
    cluster = {"server": server}
    if ca:
        cluster["certificate-authority"] = ca
    if server_name:
        cluster["tls-server-name"] = server_name
    user = {}
    if token:
        user["token"] = token
    if token_file:
        user["tokenFile"] = token_file
    if cert:
        user["client-certificate"] = cert
        user["client-key"] = key
    import json
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "t",
           "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
           "clusters": [{"name": "t", "cluster": cluster}],
           "users": [{"name": "t", "user": user}]}
    with open(path, "w") as f:
        json.dump(doc, f)  # JSON is YAML
    return path


def fake_apiserver(tc, fake, configs):
    """For a plugin test with per-node config: the fake API server `fake` started in tc's
    temp dir (stopped at tc's cleanup) and a config directory holding `configs` (name ->
    text). Returns (server, kubeconfig path, config directory)."""
    d = os.path.join(tc.tmp, "apiserver")
    os.mkdir(d)
    srv = LineProc([fake, d])
    tc.addCleanup(srv.stop)
    port = int(srv.expect(r"^listening (\d+)$").group(1))
    kubeconfig = write_kubeconfig(os.path.join(d, "kubeconfig"), "https://127.0.0.1:%d" % port,
                                  ca=os.path.join(d, "ca.crt"), token="tok1")
    cdir = os.path.join(tc.tmp, "configs")
    os.mkdir(cdir)
    for name, text in configs.items():
        with open(os.path.join(cdir, name), "w") as f:
            f.write(text)
    return srv, kubeconfig, cdir


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def ctx_switches(pid):
    n = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if "ctxt_switches" in line:
                n += int(line.split()[1])
    return n


def swap_token(path, value):
    """Rotate a token file the kubelet's way: a new file renamed over the old one."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(value + "\n")
    os.rename(tmp, path)
