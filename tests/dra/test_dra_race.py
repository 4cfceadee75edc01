#!/usr/bin/python3
"""Two calls about one claim UID racing (issues 31/32 hardening): the real binary's
NodePrepareResources and NodeUnprepareResources of the SAME claim sent at once on
connections of their own (Prepare with Unprepare, Prepare twice, Unprepare twice, in a
random order with a jitter of a few ms), 200 rounds, for

- MigRace: DynamicMIG placements (test_dra_mig.py's fixture: simulated H100 with MIG mode
  off, fake API server at 1.36.3) where Prepare creates the MIG device and Unprepare
  destroys it; three claims on disjoint placements and a forged one overlapping the first;
- SharesRace: GPU shares (test_dra_shares.py's fixture: --dra-consumable-capacity, the MPS
  runner `mps-control-daemon --dra` with the simulator's stand-in); four shares of 16Gi the
  scheduler stand-in placed and two forged ones, so any five fit the 80Gi and six never.

After each round (every call answered): the checkpoint's records all PrepareCompleted and
exactly one CDI spec per record (nothing staged left); each call's answer agrees with the end
state (a claim whose Prepare succeeded and no Unprepare did is prepared; the reverse is not);
errors only the documented "try again" / "unprepared while ..." / over-capacity ones. MIG:
NVML (MOCK_NVML_STATE, read by another process) has exactly the MIG devices the records name
(UUID, GI and CI ids), MIG mode on iff any, the specs' caps nodes those of the live devices,
never two overlapping claims. Shares: every checkpoint the plugin wrote during the round
(read in a loop while it runs) holds at most 80Gi and 100% of SMs, the MPS desired state and
the daemon exist iff a share is prepared. MIG shares: at most two on the placement at 0, the
full GPU's never beside a placement's, NVML has exactly one MIG device per placement a share
holds (every share's record naming its UUID and its daemon), MIG mode on iff any, an MPS
daemon per held device and no other. At the end everything unprepared: no MIG device,
MIG mode off (Hopper), no daemon; the plugin's threads and fds (/proc/<pid>/task, /fd) as
before the rounds.

The seed is printed; RACE_SEED=<n> replays a run, RACE_ROUNDS=<n> changes the count.

usage: test_dra_race.py <fake-apiserver> MigRace|SharesRace|MigSharesRace"""
import json
import os
import random
import sys
import threading
import time
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dra_mig as mig  # noqa: E402  (sets up the paths of harness, kubetest, attacklib)
import test_dra_shares as shares  # noqa: E402
import test_dra_shares_dyn as dyn  # noqa: E402
import attacklib  # noqa: E402
import harness  # noqa: E402
from dra_kubelet import DRIVER, Kubelet, ref  # noqa: E402
from dra_scheduler import Pool  # noqa: E402

ROUNDS = int(os.environ.get("RACE_ROUNDS", "200"))
SEED = int(os.environ.get("RACE_SEED", str(random.SystemRandom().randrange(1 << 32))))
# Each claim's calls in a round, all sent at once: every pair of the two verbs, and three.
SCENARIOS = ["PU", "UP", "PP", "UU", "PPU", "PUU", "UPU", "PUP"]
JITTER_S = 0.004
CONNECTIONS = 24  # at least the most calls of one round (6 claims x 3)
FOUR = "gpu-0-mig-3g40gb-9-4"  # the H100's other 3g.40gb (memory slices 4-7)

# The answers a lost race may give (dra-claims.c, dra-claims-unprepare.c): the kubelet
# retries all of them. Anything else is a failure.
PREPARE_LOST = ("unprepared while its claim was being fetched",
                "unprepared while its sharing configs were being applied",
                "its sharing configs are being applied by another prepare call; try again",
                "it is being unprepared (its GPUs reset); try again")
UNPREPARE_LOST = ("its GPUs are being reset by another unprepare call; try again",)


class RaceMixin:
    """The rounds, on the fixture of the class it is mixed into (self.kl registered)."""

    def connections(self, endpoint):
        """Kubelet stand-ins of their own connection each (grpc shares one connection
        between channels to one target unless told to keep a local subchannel pool)."""
        out = []
        for _ in range(CONNECTIONS):
            k = Kubelet(self.registrar)
            k.dra = grpc.insecure_channel("unix:" + endpoint,
                                          options=[("grpc.use_local_subchannel_pool", 1)])
            k.channels.append(k.dra)
            self.addCleanup(k.close)
            out.append(k)
        return out

    def race(self, rng, conns, plan):
        """plan: [(verb, claim)], every call sent at once, each on its own connection after a
        jitter: [(verb, uid, error ("" for success), sent, answered)] (time.monotonic())."""
        go = threading.Barrier(len(plan))
        out = [None] * len(plan)
        delays = [rng.uniform(0, JITTER_S) for _ in plan]

        def one(i, verb, o, k):
            uid = o["metadata"]["uid"]
            go.wait()
            time.sleep(delays[i])
            sent = time.monotonic()
            try:
                err = k.prepare(ref(o))[uid]["error"] if verb == "P" else k.unprepare(ref(o))[uid]
            except Exception as e:  # noqa: BLE001  (an RPC failure is the test's failure)
                err = "RPC failed: %r" % e
            out[i] = (verb, uid, err, sent, time.monotonic())
        threads = [threading.Thread(target=one, args=(i, v, o, conns[i])) for i, (v, o) in enumerate(plan)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            self.assertFalse(t.is_alive(), "a call was not answered within 60 s")
        return out

    def checkpoint(self):
        """preparedClaims of one version of the checkpoint. The plugin writes its spare file
        in place and then trades names with checkpoint.json (dra-checkpoint.c): a file
        opened just before a trade can be rewritten while it is read, so a read counts when
        the file read is still the one named checkpoint.json after it and its text parses."""
        path = os.path.join(self.plugins, DRIVER, "checkpoint.json")
        for _ in range(200):
            try:
                with open(path, "rb") as f:
                    data = f.read()
                    current = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                return {}
            try:
                ck = json.loads(data)
            except ValueError:
                continue
            if current:
                return ck.get("preparedClaims") or {}
        raise ValueError("no whole checkpoint in 200 reads: %r" % data[-200:])

    def spec_names(self):
        return sorted(os.listdir(self.cdi)) if os.path.isdir(self.cdi) else []

    def check_round(self, n, answers, before, allowed_prepare):
        """The invariants every race keeps; the prepared UIDs."""
        what = "round %d (seed %d): %s" % (n, SEED, [a[:3] for a in answers])
        for verb, uid, err, _, _ in answers:
            if err:
                lost = allowed_prepare if verb == "P" else UNPREPARE_LOST
                self.assertTrue(any(s in err for s in lost), "unexpected answer %s %s: %s\n%s" % (
                    verb, uid, err, what))
        ck = self.checkpoint()
        self.assertEqual({u: r["checkpointState"] for u, r in ck.items()},
                         {u: "PrepareCompleted" for u in ck}, what)
        prepared = set(ck)
        self.assertEqual(self.spec_names(), sorted("k8s.gpu.nvidia.com-claim_%s.yaml" % u for u in prepared),
                         "specs (and nothing staged) exactly those of the records\n" + what)
        for uid in {a[1] for a in answers}:
            ok = {v for v, u, e, _, _ in answers if u == uid and not e}
            # a call sent after every other successful one was answered came last in the
            # plugin too: its verb is the claim's state
            done = [a for a in answers if a[1] == uid and not a[2]]
            last = [a for a in done if all(b is a or b[4] < a[3] for b in done)]
            if last:
                self.assertEqual(uid in prepared, last[0][0] == "P", "the later call lost\n" + what)
            if ok == {"P"}:
                self.assertIn(uid, prepared, "a Prepare succeeded, no Unprepare did\n" + what)
            elif ok == {"U"}:
                self.assertNotIn(uid, prepared, "an Unprepare succeeded, no Prepare did\n" + what)
            elif not ok:
                self.assertEqual(uid in prepared, uid in before, "every call failed, yet it changed\n" + what)
        return prepared, ck

    def rounds(self, claims, allowed_prepare, check, monitor=None):
        """ROUNDS races over claims; check(prepared, ck, burst, what) after each. Threads and fds of
        the plugin before the first and after the last (the race's connections closed) equal;
        the counts of each answer printed."""
        rng = random.Random(SEED)
        info = self.kl.register()
        self.kl.prepare()  # the kubelet's own connection up, as at the snapshot after
        before = attacklib.Snapshot(self.plugin.pid)
        conns = self.connections(info.endpoint)
        for k in conns:
            k.prepare()
        counts, prepared, t0 = {}, set(), time.monotonic()
        for n in range(ROUNDS):
            # every fifth round every claim prepared twice at once, from nothing prepared:
            # they race each other for what they all want (a memory slice, the GPU's
            # capacity) while MIG mode switches on / the GPU's MPS daemon comes up
            burst = n % 5 == 4
            if burst:
                self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                                 {o["metadata"]["uid"]: "" for o in claims})
                prepared = set()
            plan = [(v, o) for o in claims for v in ("PP" if burst else rng.choice(SCENARIOS))]
            rng.shuffle(plan)
            if monitor:
                monitor.start()
            answers = self.race(rng, conns, plan)
            if monitor:
                monitor.stop()
            prepared, ck = self.check_round(n, answers, prepared, allowed_prepare)
            check(prepared, ck, burst, "round %d (seed %d): %s" % (n, SEED, [a[:3] for a in answers]))
            for verb, _, err, _, _ in answers:
                key = verb + ": " + (next((s for s in allowed_prepare + UNPREPARE_LOST if s in err), "ok")
                                     if err else "ok")
                counts[key] = counts.get(key, 0) + 1
        took = time.monotonic() - t0
        print("\n%d rounds in %.1f s, seed %d; answers: %s" % (ROUNDS, took, SEED, json.dumps(counts, sort_keys=True)))
        # every race lost at least once: the calls did overlap in the plugin
        self.assertTrue(any(k != "P: ok" and k.startswith("P") for k in counts), counts)
        for k in conns:
            k.close()
        after = attacklib.settled(self.plugin.pid, before)
        print("plugin before: %s\nplugin after:  %s" % (before, after))
        self.assertEqual((after.threads, after.n_fds), (before.threads, before.n_fds),
                         "threads and fds back at the start's: %s -> %s" % (before, after))
        return prepared


class MigRace(RaceMixin, mig.DraMig):
    def test_race_same_claim(self):
        self.host("h100-1-mig-off")
        self.start_dra()
        pool = self.pool()
        devs = ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-3g40gb-9-4",
                "gpu-0-mig-1g20gb-15-0"]  # the last overlaps the first (memory slice 0)
        for d in devs:
            self.assertIn(d, pool.by_name)
        claims = [self.claim(d) for d in devs]
        a, forged = claims[0]["metadata"]["uid"], claims[3]["metadata"]["uid"]
        dev_of = {o["metadata"]["uid"]: o["status"]["allocation"]["devices"]["results"][0]["device"]
                  for o in claims}

        def check(prepared, ck, burst, what):
            self.assertFalse({a, forged} <= prepared, "two claims of one memory slice\n" + what)
            if burst:  # all made but one of the two on slice 0
                self.assertEqual(len(prepared), 3, what)
            gpu = self.nvml()[0]
            self.assertEqual(gpu["mode"], 1 if prepared else 0, "MIG mode\n" + what)
            live = {(m["profileId"], m["start"]): m for m in gpu["migs"]}
            want = {}
            for uid in prepared:
                (d,) = ck[uid]["devices"]
                self.assertEqual(d["device"], dev_of[uid], what)
                _, gid, start = d["device"].rsplit("-", 2)
                want[(int(gid), int(start))] = (d["mig"]["migUUID"], d["mig"]["giId"], d["mig"]["ciId"])
                m = live.get((int(gid), int(start)))
                self.assertIsNotNone(m, "no MIG device for %s\n%s" % (d["device"], what))
                # the spec's caps nodes: those of the live device (minors from its GI/CI)
                with open(self.spec_path(uid)) as f:
                    nodes = [x["path"] for x in json.load(f)["devices"][0]["containerEdits"]["deviceNodes"]]
                self.assertEqual(nodes, ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap%d" % (3 + m["gi"] * 9),
                                         "/dev/nvidia-caps/nvidia-cap%d" % (3 + m["gi"] * 9 + 1 + m["ci"])], what)
            self.assertEqual({k: (m["uuid"], m["gi"], m["ci"]) for k, m in live.items()}, want,
                             "NVML's MIG devices exactly the records' (no orphan)\n" + what)

        lost = PREPARE_LOST + ("is already prepared for claim",)
        prepared = self.rounds(claims, lost, check)
        left = [o for o in claims if o["metadata"]["uid"] in prepared]
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        print("unprepared at the end: %d claims" % len(left))
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(self.checkpoint(), {})
        self.assertEqual(self.spec_names(), [])


class SharesRace(RaceMixin, shares.DraShares):
    def test_race_same_claim(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc, claims = [], []
        for _ in range(4):
            r = pool.allocate_results([('type == "gpu"', {"memory": "16Gi"})], alloc)
            self.assertEqual(len(r), 1, alloc)
            alloc += r
            claims.append(self.claim(r, [{"memory": "16Gi"}]))
        for _ in range(2):  # forged past the scheduler: six of 16Gi never fit 80Gi
            claims.append(self.claim([{"device": "gpu-0", "shareID": str(uuid.uuid4()),
                                       "consumedCapacity": {"memory": "16Gi", "compute": "10"}}],
                                     [{"memory": "16Gi"}]))
        cap = 80 * shares.GI
        monitor = CheckpointWatch(self, cap)

        def check(prepared, ck, burst, what):
            self.assertEqual(monitor.bad, [], "a checkpoint over the GPU's capacity\n" + what)
            if burst:  # all six tried: five fit
                self.assertEqual(len(prepared), 5, what)
            self.assertLessEqual(sum(d["share"]["memory"] for r in ck.values() for d in r["devices"]), cap)
            self.assertLessEqual(len(prepared), 5, what)
            ids = sorted(n for n in os.listdir(self.mps) if not n.startswith(".")) \
                if os.path.isdir(self.mps) else []
            self.assertEqual(ids, [shares.MPS_ID] if prepared else [], "MPS desired states\n" + what)
            desired = os.path.join(self.daemon_dir, "desired.json")
            self.assertEqual(os.path.exists(desired), bool(prepared), what)
            self.assertEqual(self.daemon_up(), bool(prepared), "the daemon runs iff a share is prepared\n" + what)

        lost = PREPARE_LOST + ("is being reset by the unprepare of claim", "cannot hold share")
        self.rounds(claims, lost, check, monitor)
        print("checkpoint versions seen during the rounds: %d, most memory held: %d Gi" % (
            monitor.reads, monitor.most // shares.GI))
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        self.assertEqual(self.checkpoint(), {})
        self.assertEqual(self.spec_names(), [])
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertFalse(self.daemon_up())


class MigSharesRace(RaceMixin, dyn.DraSharesDyn):
    def test_race_same_claim(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc, sixteen = [], {"memory": "16Gi"}
        # two shares of the 3g.40gb at 0 (its 39Gi take two of 16Gi), the scheduler's third
        # on the one at 4; forged: a third on 0 (over its memory) and one of the full GPU
        # (never beside a placement)
        claims = [self.share(pool, alloc, sixteen), self.share(pool, alloc, sixteen),
                  self.share(pool, alloc, sixteen, device=FOUR)]
        for dev in (dyn.THREE, "gpu-0"):
            claims.append(self.claim([{"device": dev, "shareID": str(uuid.uuid4()),
                                       "consumedCapacity": {"memory": "16Gi", "compute": "10"}}], [sixteen]))
        full = claims[-1]["metadata"]["uid"]
        dev_of = {o["metadata"]["uid"]: o["status"]["allocation"]["devices"]["results"][0]["device"]
                  for o in claims}

        def check(prepared, ck, burst, what):
            on = {}
            for uid in prepared:
                (d,) = ck[uid]["devices"]
                self.assertEqual(d["device"], dev_of[uid], what)
                on.setdefault(d["device"], []).append(d)
            self.assertLessEqual(len(on.get(dyn.THREE, [])), 2, "over the placement's memory\n" + what)
            self.assertFalse(full in prepared and len(on) > 1, "the full GPU beside a placement\n" + what)
            gpu = self.nvml()[0]
            live = {m["uuid"]: m for m in gpu["migs"]}
            self.assertEqual(gpu["mode"], 1 if live else 0, "MIG mode\n" + what)
            want = {}
            for dev, recs in on.items():
                if dev == "gpu-0":
                    continue
                # one MIG device per placement, whatever the number of its shares
                self.assertEqual(len({r["mig"]["migUUID"] for r in recs}), 1, what)
                m = recs[0]["mig"]
                want[m["migUUID"]] = (m["giId"], m["ciId"], int(dev.rsplit("-", 1)[1]))
                self.assertEqual({r["mpsId"] for r in recs}, {dyn.mps_id(m["migUUID"])}, what)
            self.assertEqual({u: (x["gi"], x["ci"], x["start"]) for u, x in live.items()}, want,
                             "NVML's MIG devices exactly those the shares hold (no orphan, none twice)\n" + what)
            daemons = sorted(n for n in os.listdir(self.mps) if not n.startswith(".")) \
                if os.path.isdir(self.mps) else []
            self.assertEqual(daemons, sorted([dyn.mps_id(u) for u in want] +
                                             ([shares.MPS_ID] if full in prepared else [])),
                             "an MPS daemon per held device\n" + what)

        lost = PREPARE_LOST + ("is being reset by the unprepare of claim", "cannot hold share",
                               "is already prepared for claim")
        self.rounds(claims, lost, check)
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(self.checkpoint(), {})
        self.assertEqual(self.spec_names(), [])
        self.assertEqual([n for n in os.listdir(self.mps) if not n.startswith(".")], [])


class CheckpointWatch:
    """Reads the plugin's checkpoint in a loop while a round runs: every version it saw
    (written by rename: never torn) holds at most cap bytes of shares and 100% of SMs,
    PrepareStarted records included (they hold their share while the daemon comes up)."""

    def __init__(self, tc, cap):
        self.tc, self.cap, self.bad, self.reads, self.most = tc, cap, [], 0, 0
        self.thread = None

    def start(self):
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.running = False
        self.thread.join(10)

    def loop(self):
        last = None
        while self.running:
            try:
                ck = self.tc.checkpoint()
            except ValueError as e:
                self.bad.append("unreadable: %r" % e)
                return
            if ck != last:
                last = ck
                self.reads += 1
                devs = [d["share"] for r in ck.values() for d in r["devices"]]
                mem, comp = sum(x["memory"] for x in devs), sum(x["compute"] for x in devs)
                self.most = max(self.most, mem)
                if mem > self.cap or comp > 100:
                    self.bad.append({u: r["checkpointState"] for u, r in ck.items()})
            time.sleep(0.001)


if __name__ == "__main__":
    mig.FAKE = shares.FAKE = sys.argv.pop(1)
    # The plugin's own rate limit (5 GETs a second, 10 at once) would send a round's GETs
    # one by one, and prepares that reach the API server apart seldom overlap in the plugin.
    os.environ.update(KUBE_API_QPS="1000", KUBE_API_BURST="1000")
    # only the class's own test: the fixtures' tests run under their own names
    cls = globals()[sys.argv.pop(1)]
    sys.argv[1:] = ["%s.%s" % (cls.__name__, n) for n in sorted(vars(cls)) if n.startswith("test_")]
    harness.main()
