"""The e2e scenarios of ordinary cluster operations the plugin must ride out (issue 18 A3,
A4), on the real API server, after cluster_scenarios.py's (they reuse its "per-node configs"
chart). Uses scenarios.py's helpers, which runs them (it is __main__).

  node-recreate  the plugin's own Node deleted and re-created 2.5 s later with the same
                 config label (what a node re-registration or `kubectl delete node` + restore
                 does): no config switch, no re-registration, the annotation back on the new
                 object
  event-outage   the API server stopped for 60 s; an Xid raised while it is down still gives
                 its GPUUnhealthy Event on the Node once it is back
"""

import json
import os
import signal
import subprocess
import time

import __main__ as h
import cluster_scenarios as cs

OUTAGE_S = 60  # the figure: an API server down for a minute
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def annotation():
    return h.kjson("get", "node", h.NODE)["metadata"].get("annotations", {}).get(
        "gpu-device-plugin.github.io/config")


def applied(log):
    return log.count("Applied per-node config ")


def s_node_recreate(ctx):
    n = ctx["ngpus"]
    h.wait_one_plugin_pod()  # node-config's chart, "per-node configs", still applied
    h.kubectl("label", "node", h.NODE, f"{CONFIG_LABEL}=ts", "--overwrite")
    h.wait_node_gpus(4 * n, 4 * n)
    h.wait("annotation config=ts", lambda: annotation() == "ts")
    node = h.kjson("get", "node", h.NODE)
    log = cs.plugin_log()
    regs, switches = cs.registrations(log), applied(log)
    # What an operator restores: the object without its server-set fields and status.
    meta = {k: v for k, v in node["metadata"].items()
            if k in ("name", "labels", "annotations")}
    meta["annotations"] = {k: v for k, v in meta.get("annotations", {}).items()
                           if not k.startswith("gpu-device-plugin.github.io/")}
    again = {"apiVersion": "v1", "kind": "Node", "metadata": meta,
             "spec": {k: v for k, v in node.get("spec", {}).items() if k != "taints"}}
    h.kubectl("delete", "node", h.NODE, "--wait=true")
    time.sleep(2.5)
    h.kubectl("create", "-f", "-", stdin=json.dumps(again))
    print(f"  Node {h.NODE} deleted and re-created 2.5 s later with {CONFIG_LABEL}=ts")
    h.wait("the applied config's annotation on the re-created Node", lambda: annotation() == "ts")
    h.wait_node_gpus(4 * n, 4 * n)
    log = cs.plugin_log()
    print(f"  after: config switches {applied(log) - switches}, registrations "
          f"{cs.registrations(log) - regs}")
    if applied(log) != switches or cs.registrations(log) != regs:
        raise h.Fail(f"Node delete + re-create: {applied(log) - switches} config switches, "
                     f"{cs.registrations(log) - regs} registrations (want 0, 0)")
    h.show_node_gpus()


def apiserver_argv():
    pid = int(open(os.path.join(h.A.state, "pids", "kube-apiserver")).read())
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return pid, [a.decode() for a in f.read().split(b"\0") if a]


def gone(pid):
    """Exited: no process, or a zombie nobody reaps (cluster.sh's shell that started it has
    exited; the machine's init may not reap)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return True


def restart_apiserver_after(pid, argv, seconds, during):
    """Stop the API server (SIGTERM, as a rolling control-plane update does; SIGKILL after
    10 s), call during()
    while it is down, start it again with the same command line after `seconds`; its pid
    file is updated so that the cluster's teardown stops the new one."""
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 10  # as cluster.sh's stop: SIGKILL after 10 s (v1.20 can
    while not gone(pid) and time.monotonic() < end:  # wait on its watches far longer)
        time.sleep(0.1)
    if not gone(pid):
        os.kill(pid, signal.SIGKILL)
    h.wait("kube-apiserver gone", lambda: gone(pid), timeout=30)
    t0 = time.monotonic()
    during()
    time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    env = {}  # cluster.sh's record of where the logs go
    with open(os.path.join(h.A.state, "env")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            env[k] = v.strip("'")
    log = open(os.path.join(env.get("LOGS") or h.A.state, "kube-apiserver.log"), "a")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
    log.close()
    with open(os.path.join(h.A.state, "pids", "kube-apiserver"), "w") as f:
        f.write(f"{p.pid}\n")
    h.wait("kube-apiserver ready again", lambda: subprocess.run(
        [h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", "--raw", "/readyz"],
        capture_output=True).returncode == 0)
    return time.monotonic()


def s_event_outage(ctx):
    n = ctx["ngpus"]
    uuid = ctx["uuids"][0]  # no Event about it yet: node-config's Xid was on uuids[1]
    h.wait_node_gpus(4 * n, 4 * n)
    pid, argv = apiserver_argv()

    def xid():
        fd = h.wait("the simulator's control FIFO open in the plugin",
                    lambda: h._open_fifo(os.path.join(h.A.state, "driver", "run", "ctl")))
        os.write(fd, f"xid {uuid} 48\n".encode())
        os.close(fd)
        print(f"  API server down; injected: xid {uuid} 48")
    back = restart_apiserver_after(pid, argv, OUTAGE_S, xid)
    print(f"  API server back after {OUTAGE_S} s")

    def unhealthy():
        ev = h.kjson("get", "events", "-n", "default", "--field-selector",
                     f"involvedObject.name={h.NODE},reason=GPUUnhealthy")["items"]
        return [e for e in ev if uuid in e.get("message", "") and "48" in e.get("message", "")]
    ev = h.wait(f"Event GPUUnhealthy for {uuid} (Xid 48 raised during the outage)", unhealthy)
    print(f"  Event {ev[0]['type']} {ev[0]['reason']} {time.monotonic() - back:.1f} s after the "
          f"API server was back: {ev[0]['message'][:160]}")
    h.wait("the node Ready again", lambda: [
        c for c in h.kjson("get", "node", h.NODE)["status"].get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"])
    h.kubectl("label", "node", h.NODE, f"{CONFIG_LABEL}-")


SCENARIOS = [("node-recreate", s_node_recreate), ("event-outage", s_event_outage)]
