"""What the API client costs: RSS of kube-probe (the real client on our loop) before and after
it opens a TLS watch, and its wakeups while the watch is idle (context switches over a
minute, read from /proc/PID/status). Figures only, nothing judged.

usage: python3 bench/bench-kube.py [--real] [--idle SECONDS]
  default: against the fake API server (tests/kube/fake-apiserver, ECDSA P-256 certificates)
  --real:  against a real kube-apiserver + etcd (the kube-apiserver test suite's fixture,
           RSA 2048 certificates); needs its binaries.
Run from the source tree after `ninja -C build-test`."""
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kube"))
import kubetest as kt  # noqa: E402

BUILD = os.environ.get("GDP_BUILD_DIR", os.path.join(HERE, "..", "build-test"))
PROBE = os.path.join(BUILD, "tests", "kube", "kube-probe")


def lib_rss_kib(pid, needle):
    """Rss of the mappings whose path contains needle (/proc/PID/smaps)."""
    total, cur = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5:
                cur = len(parts) >= 6 and needle in parts[5]
            elif parts[0] == "Rss:" and cur:
                total += int(parts[1])
    return total


def measure(kubeconfig, idle):
    p = kt.Probe(PROBE, "--kubeconfig", kubeconfig)
    pid = p.p.pid
    before = kt.rss_kib(pid)
    p.send("watch /api/v1/nodes")
    p.expect(r"^event SYNCED$")
    time.sleep(0.5)  # let the watch request go out and settle
    after = kt.rss_kib(pid)
    mbed = lib_rss_kib(pid, "libmbed")
    c0 = kt.ctx_switches(pid)
    time.sleep(idle)
    c1 = kt.ctx_switches(pid)
    idle_rss = kt.rss_kib(pid)
    p.stop()
    print("RSS before the connection: %d KiB" % before)
    print("RSS with the TLS watch up: %d KiB (+%d KiB)" % (after, after - before))
    print("RSS after %d s idle:       %d KiB" % (idle, idle_rss))
    print("of which the mbedtls libraries' mappings: %d KiB" % mbed)
    print("context switches in %d s of idle watch: %d" % (idle, c1 - c0))


def main():
    idle = 60
    if "--idle" in sys.argv:
        idle = int(sys.argv[sys.argv.index("--idle") + 1])
    d = tempfile.mkdtemp(prefix="bench-kube-")
    try:
        if "--real" in sys.argv:
            import test_kube_apiserver as ta
            c = ta.Cluster(*ta.find_bins())
            try:
                c.start_etcd()
                c.start_apiserver()
                p = kt.Probe(PROBE, "--kubeconfig", kt.write_kubeconfig(
                    os.path.join(d, "kc"), "https://127.0.0.1:%d" % ta.API_PORT, ca=c.ca, token=ta.ADMIN))
                p.request("POST", "/api/v1/nodes", '{"apiVersion":"v1","kind":"Node","metadata":{"name":"bench"}}')
                p.stop()
                measure(kt.write_kubeconfig(os.path.join(d, "kc"), "https://127.0.0.1:%d" % ta.API_PORT,
                                            ca=c.ca, token=ta.ADMIN), idle)
            finally:
                c.down()
        else:
            srv = kt.LineProc([os.path.join(BUILD, "tests", "kube", "fake-apiserver"), d])
            port = int(srv.expect(r"^listening (\d+)$").group(1))
            srv.send("add n1")
            measure(kt.write_kubeconfig(os.path.join(d, "kc"), "https://127.0.0.1:%d" % port,
                                        ca=os.path.join(d, "ca.crt"), token="tok1"), idle)
            srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
