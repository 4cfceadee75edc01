#!/usr/bin/python3
"""link-order: write src/link-order.txt, the function order the release link follows.

The kernel maps a file-backed page together with the cached pages of its 64 KiB window
(fault-around), so the binary's resident code is every 64 KiB window that holds at least
one function the process ran, not the functions themselves. Linked in archive order the
serving path's functions are spread over the whole text: the API client, the label
publisher, the metrics renderer, the `list` command and mbedtls lie between them and are
mapped though never run. lld's --symbol-ordering-file puts the listed functions first, in
this order, and everything else after them (src/meson.build, option `link_order`).

The list is what callgrind sees the release binary run, in five groups, each after the
one before so that the smaller setups stay dense:
  1. serve: start on the a100 mock profile, register, ListAndWatch, Allocate,
     GetPreferredAllocation, GetDevicePluginOptions, and a SIGHUP reload;
  2. metrics: --metrics-address and a scrape of /metrics, /healthz and /readyz;
  3. api: every cluster feature against tests/kube/fake-apiserver (bench-rss.py --api);
  4. dra: serve --dra as bench-dra.py starts it (the ResourceSlices published, registered
     with the kubelet stand-in of tests/dra), then claims prepared, prepared again and
     unprepared. Without this group DRA's code lay among the code no setup runs (`list`,
     `labels`, the MPS daemon, mbedtls's unused ciphers), and serve --dra mapped every
     64 KiB window of the text;
  5. mig: serve --dra with DynamicMIG on bench-dra.py --only mig's 8 H100s, the pool
     published and 1g placements prepared and unprepared (the counters, placements and
     MIG code otherwise lay after every listed function);
  6. shares: the same host with --dra-consumable-capacity and the MPS runner
     (bench-dra-mig-shares.py): every placement and GPU published as shares, shares of a
     3g.40gb placement prepared and unprepared.
Each group's functions are followed by the named .rodata objects they address (tables,
not string literals), which lld orders within .rodata the same way. Start-up code from
crt1.o/crtbegin.o comes first. Functions are named as `nm` names them (local ones included: lld orders them too). A
function the list does not name is linked after the listed ones, so a stale list costs
memory, never correctness; regenerate it when the serving path changes:

    meson setup build-bench --buildtype=release -Dlink_order=disabled && ninja -C build-bench
    /usr/bin/python3 bench/link-order.py --build build-bench > src/link-order.txt

(Profile a build linked without the order: names do not depend on it, but an ordered
build profiles the same.) Needs valgrind. Prints nothing but the list on stdout.
"""

import argparse
import bisect
import http.client
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


br = _load("bench_rss", "bench-rss.py")
bp = br.bp
bd = _load("bench_dra", "bench-dra.py")


def executed(out, binary):
    """Names of the binary's functions callgrind saw run, without its recursion marks.

    Read from the profile itself: every function that ran has a "fn=" block, under the
    "ob=" of its object. (callgrind_annotate --threshold=100 stops once the rounded
    running total reaches 100 %, which drops the cheapest functions, a different few
    on each run.) Names and objects are compressed: "(id) name" the first time,
    "(id)" after."""
    names, obs, fns, ob = set(), {}, {}, None

    def expand(table, value):
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "")

    with open(out) as f:
        for line in f:
            if line.startswith("ob="):
                ob = expand(obs, line[3:].rstrip("\n"))
            elif line.startswith("fn="):
                name = expand(fns, line[3:].rstrip("\n"))
                if ob == binary:
                    name = re.sub(r"'\d+$", "", name)
                    if not name.startswith("0x"):
                        names.add(name)
            elif line.startswith(("cfn=", "cob=")):
                # a call's target: named here, defined (and counted) in its own fn= block;
                # the ids are shared with fn= and ob=
                table = fns if line.startswith("cfn=") else obs
                expand(table, line[4:].rstrip("\n"))
    return names


def rodata_refs(binary, groups):
    """For each group of functions, the named .rodata objects its functions address
    (RIP-relative operands in `objdump -d`): tables and constant structs, not string
    literals, which the linker merges into one section and cannot place. A reference on
    a branch never taken is included too: an upper bound of what is read."""
    sec = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"\]\s+\.rodata\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", sec)
    lo, hi = int(m.group(1), 16), int(m.group(1), 16) + int(m.group(2), 16)
    syms = []
    nm = subprocess.run(["nm", "-S", binary], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "rR":
            a = int(f[0], 16)
            if lo <= a < hi:
                syms.append((a, a + int(f[1], 16), f[3]))
    syms.sort()
    starts = [s[0] for s in syms]
    refs, fn = {}, None
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True, check=True).stdout
    for line in dis.splitlines():
        h = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if h:
            fn = h.group(1)
            continue
        c = re.search(r"# ([0-9a-f]+) <", line)
        if not c or fn is None:
            continue
        a = int(c.group(1), 16)
        if not lo <= a < hi:
            continue
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and syms[i][0] <= a < syms[i][1]:
            refs.setdefault(fn, set()).add(syms[i][2])
    out, seen = [], set()
    for _, names in groups:
        data = set()
        for n in names:
            data |= refs.get(n, set())
        data -= seen
        seen |= data
        out.append(sorted(data))
    return out


def wrap_plugin(host, setup, work):
    """Point host.plugin at a script that runs it under callgrind: (real binary, profile
    file)."""
    real = host.plugin
    out = os.path.join(work, "callgrind.%s" % setup)
    wrap = os.path.join(work, "wrap-%s.sh" % setup)
    with open(wrap, "w") as f:
        f.write("#!/bin/sh\nexec valgrind -q --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n"
                % (out, real))
    os.chmod(wrap, 0o755)
    host.plugin = wrap
    return real, out


def profile_claims(build, work, setup, profile, device=None, shares=False):
    """serve --dra under callgrind, as bench-dra.py measures it on profile (DynamicMIG when
    device names a placement, "gpu-%d-mig-..."; with shares, --dra-consumable-capacity and
    the MPS runner, each claim a share), and a few claims prepared and unprepared."""
    b = bd.Bench(build, profile, ["--dra-consumable-capacity"] if shares else [],
                 mig=device is not None, shares=shares)
    b.register_timeout = 30  # callgrind: the start's last work (8 carved GPUs) takes seconds
    close_runner = None
    try:
        if device:
            b.cmd("version v1.36.3")
            b.device = device
        if shares:
            b.share = {"memory": "8Gi", "compute": "10"}
            _, close_runner = b.start_runner()
        real, out = wrap_plugin(b.host, setup, work)
        p, kl, close = b.start_dra()
        try:
            b.prepare_round(kl, 2 if device else 4)
            time.sleep(1)
        finally:
            close()
    finally:
        if close_runner:
            close_runner()
        b.close()
    return executed(out, real)


def profile(build, setup, work):
    """Run the plugin under callgrind for one setup ("serve", "metrics", "api", "dra", "mig",
    "shares")."""
    if setup == "dra":
        return profile_claims(build, work, "dra", os.path.join(bp.DATA, "nvml-mock-profiles", "a100.yaml"))
    if setup == "mig":
        # DynamicMIG on bench-dra.py --only mig's 8 H100s, 1g placements made and destroyed
        return profile_claims(build, work, "mig", os.path.join(bd.HERE, "..", "sim", "profiles", "dynamic",
                                                                "h100-8-mig-off.yaml"),
                              device="gpu-%d-mig-1g10gb-19-0")
    if setup == "shares":
        # the same host with shares on (bench-dra-mig-shares.py): every placement and GPU
        # published as shares, shares of a 3g.40gb placement prepared through the runner
        return profile_claims(build, work, "shares", os.path.join(bd.HERE, "..", "sim", "profiles", "dynamic",
                                                                   "h100-8-mig-off.yaml"),
                              device="gpu-%d-mig-3g40gb-9-0", shares=True)
    host = bp.Host(build, os.path.join(bp.DATA, "nvml-mock-profiles", "a100.yaml"))
    real, out = wrap_plugin(host, setup, work)
    extra, srv = [], None
    if setup in ("metrics", "api"):
        extra += ["--metrics-address", "127.0.0.1:0"]
    if setup == "api":
        srv, args = br.start_api(build, tempfile.mkdtemp(prefix="link-order-", dir=work))
        extra += args
    try:
        kub, p, ch, watch = bp.serve_and_list(host, extra)
    except BaseException:
        host.cleanup()
        if srv:
            srv.stop()
        raise
    try:
        devs = sorted(watch.updates[0][1])
        stub = bp.dpapi.PluginStub(ch)
        for i in range(20):
            stub.Allocate(bp.dpapi.allocate_request([[devs[i % len(devs)]]]), timeout=30)
            stub.GetPreferredAllocation(bp.dpapi.preferred_request(
                [{"available": devs, "size": 2}]), timeout=30)
            stub.GetDevicePluginOptions(bp.pb.Empty(), timeout=30)
        if setup == "serve":
            os.kill(p.pid, signal.SIGHUP)
            p.wait_log("Reloaded configuration")
        if setup == "api":
            br.wait_api(p)
        if setup in ("metrics", "api"):
            port = bp.metrics_port(p)
            for path in ("/metrics", "/healthz", "/readyz"):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("GET", path)
                c.getresponse().read()
                c.close()
        time.sleep(1)
        watch.close()
        ch.close()
    finally:
        p.stop()
        kub.stop()
        host.cleanup()
        if srv:
            srv.stop()
    return executed(out, real)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    with bp.scratch.directory("link-order-") as work:  # removed on SIGTERM too
        seen, groups = set(), []
        for setup in ("serve", "metrics", "api", "dra", "mig", "shares"):
            names = profile(build, setup, work) - seen
            groups.append((setup, sorted(names)))
            seen |= names
    print("# Generated by bench/link-order.py (its docstring says how and why); one "
          "function per line, serve first, then metrics, then the API client, then DRA, then "
          "DynamicMIG, then shares.")
    # crt1's and crtbegin's start-up code runs in every process; callgrind reports it as
    # "(below main)", not by name.
    print("_start\nderegister_tm_clones\nregister_tm_clones\nframe_dummy\n__do_global_dtors_aux")
    data = rodata_refs(os.path.join(build, "src", "gpu-device-plugin"), groups)
    for (setup, names), objs in zip(groups, data):
        print("# %s: %d functions, then the %d .rodata objects they address"
              % (setup, len(names), len(objs)))
        for n in names + objs:
            print(n)


if __name__ == "__main__":
    sys.exit(main())
