"""The 1.36 scheduler's device allocation for one node's pool, as far as DynamicMIG needs it
(../shared/reference/dra/dynamic-mig-mps-capacity.md §1.4; K8S
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating): the pool is
the slices of one driver and pool name at the newest generation; it is invalid (nothing is
allocated from it) when a counter set name is duplicated, when a device names a missing set
or a missing counter; slices are walked sorted by name and their devices in order, first
fit; a device fits when it is not allocated and, for each counter it consumes, the set's
value minus what every allocated device (and the ones picked so far) consumes stays >= 0.
Without DRAPartitionableDevices a device that consumes counters is never picked.

Consumable capacity (KEP-5075, DRAConsumableCapacity, §3.2): a device with
allowMultipleAllocations is given to many requests, each a share under its own shareID
(a UID) with its consumedCapacity: per capacity of the device, what the request asks
(capacity.requests) rounded up to the capacity's requestPolicy (the next of validValues,
min + n*step of validRange; above max or the last value: no fit), or, not asked, the
policy's default (no policy: the whole capacity); the device fits while, per capacity,
the shares it has given and this one sum to at most its value. A request asking a
capacity the device does not have does not fit it; on a device given whole, a request's
amounts must be at most its capacities. A shared device is never also given whole.

Selectors are a CEL subset: `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`, or
the short form `profile == "1g.10gb"`, `type == "gpu"`, joined with `&&`.

Used by tests/dra/test_dra_mig.py; `python3 dra_scheduler.py` runs its own unit tests."""
import re
import unittest
import uuid

DRIVER = "gpu.nvidia.com"


class PoolInvalid(Exception):
    pass


def quantity(s):
    """A resource.Quantity's value as an int (the suffixes the plugin writes, and decimal)."""
    s = str(s)
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?", s)
    if not m:
        raise ValueError("quantity %r" % s)
    mult = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
            "Ei": 1 << 60, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
            "E": 10**18}[m.group(2)]
    return int(m.group(1)) * mult


def format_quantity(n):
    """n as the API server writes a quantity: the largest binary suffix that divides it, else
    a plain integer."""
    for suffix, shift in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, suffix)
    return str(n)


def consumed(dev, asked=None):
    """The consumedCapacity of one share of dev (a device with allowMultipleAllocations) for
    the request's capacity.requests asked ({name: quantity}): {name: int} for every capacity
    of dev, or None when the request cannot be served by it (a capacity it does not have, an
    amount above the policy's max or last value)."""
    asked = {k: quantity(v) for k, v in (asked or {}).items()}
    caps = dev.get("capacity") or {}
    if any(k not in caps for k in asked):
        return None
    out = {}
    for name, cap in caps.items():
        pol = cap.get("requestPolicy")
        if name not in asked:
            out[name] = quantity(pol["default"]) if pol and "default" in pol else quantity(cap["value"])
            continue
        want = asked[name]
        if not pol:
            out[name] = want
        elif "validValues" in pol:
            vals = [quantity(v) for v in pol["validValues"]]
            up = [v for v in vals if v >= want]
            if not up:
                return None
            out[name] = min(up)
        elif "validRange" in pol:
            r = pol["validRange"]
            lo = quantity(r["min"])
            step = quantity(r["step"]) if "step" in r else None
            if want <= lo:
                want = lo
            elif step:
                want = lo + -(-(want - lo) // step) * step
            if "max" in r and want > quantity(r["max"]):
                return None
            out[name] = want
        else:
            out[name] = want
    return out


def _attr_value(a):
    for k in ("string", "int", "bool", "version"):
        if k in a:
            return a[k]
    return None


_TERM = re.compile(r'\s*(?:device\.attributes\["([^"]+)"\]\.)?([A-Za-z_][A-Za-z0-9_]*)\s*'
                   r'(==|!=)\s*(?:"([^"]*)"|(-?\d+)|(true|false))\s*$')


def selector(expr, driver=DRIVER):
    """A predicate over a device for the CEL subset above."""
    terms = []
    for t in expr.split("&&"):
        m = _TERM.match(t)
        if not m:
            raise ValueError("selector term not in the subset: %r" % t)
        domain, name, op, s, i, b = m.groups()
        want = s if s is not None else int(i) if i is not None else b == "true"
        if domain and domain != driver:
            name = domain + "/" + name
        terms.append((name, op, want))

    def pred(dev):
        attrs = dev.get("attributes", {})
        for name, op, want in terms:
            a = attrs.get(name, attrs.get(driver + "/" + name))
            have = _attr_value(a) if a is not None else None
            if (have == want) != (op == "=="):
                return False
        return True
    return pred


class Pool:
    """One pool of one driver, from its slices (objects as the API server returns them)."""

    def __init__(self, slices, driver=DRIVER, partitionable=True):
        self.partitionable = partitionable
        slices = [s for s in slices if s["spec"]["driver"] == driver]
        if not slices:
            raise PoolInvalid("no slices")
        gen = max(s["spec"]["pool"]["generation"] for s in slices)
        slices = [s for s in slices if s["spec"]["pool"]["generation"] == gen]
        want = slices[0]["spec"]["pool"]["resourceSliceCount"]
        if len(slices) != want:
            raise PoolInvalid("incomplete pool: %d of %d slices" % (len(slices), want))
        self.slices = sorted(slices, key=lambda s: s["metadata"]["name"])
        self.counters = {}
        for s in self.slices:
            for cs in s["spec"].get("sharedCounters") or []:
                if cs["name"] in self.counters:
                    raise PoolInvalid("duplicate counter set name %s" % cs["name"])
                self.counters[cs["name"]] = {k: quantity(v["value"])
                                             for k, v in cs["counters"].items()}
        self.devices = []  # in the scheduler's order
        self.by_name = {}
        for s in self.slices:
            for d in s["spec"].get("devices") or []:
                for use in d.get("consumesCounters") or []:
                    cs = self.counters.get(use["counterSet"])
                    if cs is None:
                        raise PoolInvalid("counter set %s not found" % use["counterSet"])
                    for c in use["counters"]:
                        if c not in cs:
                            raise PoolInvalid("counter %s not found in counter set %s" % (
                                c, use["counterSet"]))
                self.devices.append(d)
                self.by_name[d["name"]] = d

    @staticmethod
    def _names(allocated):
        """The device names of allocated (names, or allocation results), each once."""
        out = []
        for a in allocated:
            n = a if isinstance(a, str) else a["device"]
            if n not in out:
                out.append(n)
        return out

    def available(self, allocated):
        """Counter set -> counter -> what is left after the allocated devices (a shared
        device's counters count once, however many shares it has given)."""
        left = {n: dict(c) for n, c in self.counters.items()}
        for name in self._names(allocated):
            for use in self.by_name[name].get("consumesCounters") or []:
                for c, v in use["counters"].items():
                    left[use["counterSet"]][c] -= quantity(v["value"])
        return left

    def shared(self, name):
        return bool(self.by_name[name].get("allowMultipleAllocations"))

    def fits(self, name, allocated, asked=None):
        """Whether the device fits beside allocated (names: given whole; results with a
        shareID: shares); for a shared device, the consumedCapacity of the share (a dict),
        else True/False."""
        d = self.by_name[name]
        whole = [a for a in allocated if isinstance(a, str) or not a.get("shareID")]
        if name in self._names(whole):
            return False
        share = None
        if self.shared(name):
            share = consumed(d, asked)
            if share is None:
                return False
            for c, v in d.get("capacity", {}).items():
                used = sum(quantity(a["consumedCapacity"].get(c, "0")) for a in allocated
                           if not isinstance(a, str) and a.get("shareID") and a["device"] == name)
                if used + share[c] > quantity(v["value"]):
                    return False
        else:
            if name in self._names(allocated):
                return False
            caps = d.get("capacity") or {}
            for k, v in (asked or {}).items():
                if k not in caps or quantity(v) > quantity(caps[k]["value"]):
                    return False
        uses = d.get("consumesCounters") or []
        if uses and not self.partitionable:
            return False
        if not (share is not None and name in self._names(allocated)):  # counted once
            left = self.available(allocated)
            if not all(left[u["counterSet"]][c] - quantity(v["value"]) >= 0
                       for u in uses for c, v in u["counters"].items()):
                return False
        return share if share is not None else True

    def allocate_results(self, requests, allocated=(), share_id=lambda: str(uuid.uuid4())):
        """Allocation results for one claim's requests (one device each: a selector, as
        for allocate, or (selector, {capacity: quantity}) with capacity.requests), first
        fit in the scheduler's order beside what is already allocated in the pool (names,
        or results); None when some request finds no device. A result: {"device"}, and for
        a share {"shareID", "consumedCapacity": {name: quantity string}}."""
        picked = list(allocated)
        out = []
        for req in requests:
            sel, asked = req if isinstance(req, tuple) else (req, None)
            pred = selector(sel) if isinstance(sel, str) else sel
            for d in self.devices:
                if not pred(d):
                    continue
                got = self.fits(d["name"], picked, asked)
                if got is False:
                    continue
                r = {"device": d["name"]}
                if isinstance(got, dict):
                    r["shareID"] = share_id()
                    r["consumedCapacity"] = {k: format_quantity(v) for k, v in got.items()}
                picked.append(r if "shareID" in r else d["name"])
                out.append(r)
                break
            else:
                return None
        return out

    def allocate(self, selectors, allocated=()):
        """Device names for one claim's requests (one device each, a CEL selector subset
        string or a predicate), first fit in the scheduler's order, with what is already
        allocated in the pool; None when some request finds no device."""
        res = self.allocate_results(selectors, allocated)
        return None if res is None else [r["device"] for r in res]


# ---- its own tests: a made-up GPU of 4 memory slices


def _slices(extra_sets=(), bad_counter=False):
    def consume(start, size, sm):
        c = {"memory-slice-%d" % i: {"value": "1"} for i in range(start, start + size)}
        c["multiprocessors"] = {"value": str(sm)}
        if bad_counter:
            c["nope"] = {"value": "1"}
        return [{"counterSet": "gpu-0-counter-set", "counters": c}]

    def dev(name, typ, profile, start, size, sm):
        return {"name": name, "attributes": {"type": {"string": typ}, "profile": {"string": profile}},
                "consumesCounters": consume(start, size, sm)}
    sets = [{"name": "gpu-0-counter-set", "counters": dict(
        {"memory-slice-%d" % i: {"value": "1"} for i in range(4)}, multiprocessors={"value": "48"})}]
    sets += list(extra_sets)
    pool = {"name": "n1", "generation": 1, "resourceSliceCount": 2}
    return [
        {"metadata": {"name": "n1-b"}, "spec": {"driver": DRIVER, "pool": pool, "devices": [
            dev("gpu-0", "gpu", "", 0, 4, 48),
            dev("gpu-0-mig-1g-0", "mig", "1g", 0, 1, 12), dev("gpu-0-mig-1g-1", "mig", "1g", 1, 1, 12),
            dev("gpu-0-mig-1g-2", "mig", "1g", 2, 1, 12), dev("gpu-0-mig-1g-3", "mig", "1g", 3, 1, 12),
            dev("gpu-0-mig-2g-0", "mig", "2g", 0, 2, 25), dev("gpu-0-mig-2g-2", "mig", "2g", 2, 2, 25)]}},
        {"metadata": {"name": "n1-a"}, "spec": {"driver": DRIVER, "pool": pool, "sharedCounters": sets}},
    ]


class SchedulerTest(unittest.TestCase):
    def test_first_fit_over_counters(self):
        p = Pool(_slices())
        got = [p.allocate(['profile == "1g"'], []) for _ in range(1)]
        self.assertEqual(got, [["gpu-0-mig-1g-0"]])
        alloc = []
        for _ in range(4):
            alloc += p.allocate(['device.attributes["gpu.nvidia.com"].profile == "1g"'], alloc)
        self.assertEqual(alloc, ["gpu-0-mig-1g-%d" % i for i in range(4)])
        self.assertIsNone(p.allocate(['profile == "1g"'], alloc))
        self.assertIsNone(p.allocate(['type == "gpu"'], alloc[:1]))  # the full GPU: all or none
        self.assertEqual(p.allocate(['type == "gpu"'], []), ["gpu-0"])
        self.assertIsNone(p.allocate(['type == "mig"'], ["gpu-0"]))
        # a 2g at 0 over a 1g at 1: slices overlap; the one at 2 fits
        self.assertEqual(p.allocate(['profile == "2g"'], ["gpu-0-mig-1g-1"]), ["gpu-0-mig-2g-2"])
        # SMs: 2g (25) + 1g (12) + 1g (12) > 48 though the slices are free
        self.assertIsNone(p.allocate(['profile == "1g"'], ["gpu-0-mig-2g-0", "gpu-0-mig-1g-2"]))
        # two requests of one claim see each other
        self.assertEqual(p.allocate(['profile == "2g"', 'profile == "1g"']),
                         ["gpu-0-mig-2g-0", "gpu-0-mig-1g-2"])
        self.assertIsNone(p.allocate(['profile == "1g" && type == "gpu"']))

    def test_pool_rules(self):
        with self.assertRaisesRegex(PoolInvalid, "duplicate counter set name gpu-0-counter-set"):
            Pool(_slices(extra_sets=[{"name": "gpu-0-counter-set", "counters": {"x": {"value": "1"}}}]))
        with self.assertRaisesRegex(PoolInvalid, "counter nope not found in counter set"):
            Pool(_slices(bad_counter=True))
        s = _slices()
        s[0]["spec"]["devices"][0]["consumesCounters"][0]["counterSet"] = "gpu-9-counter-set"
        with self.assertRaisesRegex(PoolInvalid, "counter set gpu-9-counter-set not found"):
            Pool(s)
        with self.assertRaisesRegex(PoolInvalid, "incomplete pool"):
            Pool(_slices()[:1])

    def test_gate_off(self):
        self.assertIsNone(Pool(_slices(), partitionable=False).allocate(['profile == "1g"']))

    def test_consumable_capacity(self):
        gi = 1 << 30
        mem = {"value": "80Gi", "requestPolicy": {"default": "80Gi", "validRange": {
            "min": "1Gi", "max": "80Gi", "step": "1Gi"}}}
        comp = {"value": "100", "requestPolicy": {"default": "10", "validRange": {
            "min": "1", "max": "100", "step": "1"}}}
        shared = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}},
                  "capacity": {"memory": mem, "compute": comp}, "allowMultipleAllocations": True}
        plain = {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}},
                 "capacity": {"memory": {"value": "40Gi"}}}
        pool = {"name": "n1", "generation": 1, "resourceSliceCount": 1}
        p = Pool([{"metadata": {"name": "n1-a"}, "spec": {"driver": DRIVER, "pool": pool,
                                                          "devices": [shared, plain]}}])
        # the policy: rounded up to min + n*step; not asked: the default; above max: none
        self.assertEqual(consumed(shared, {"memory": "8Gi"}), {"memory": 8 * gi, "compute": 10})
        self.assertEqual(consumed(shared, {"memory": "7500Mi", "compute": "25"}),
                         {"memory": 8 * gi, "compute": 25})
        self.assertEqual(consumed(shared, {"memory": "1Mi"}), {"memory": gi, "compute": 10})
        self.assertEqual(consumed(shared), {"memory": 80 * gi, "compute": 10})
        self.assertIsNone(consumed(shared, {"memory": "81Gi"}))
        self.assertIsNone(consumed(shared, {"shares": "1"}))
        vv = {"capacity": {"m": {"value": "8", "requestPolicy": {"default": "2", "validValues": ["2", "4", "8"]}},
                           "x": {"value": "5"}}}
        self.assertEqual(consumed(vv, {"m": "3"}), {"m": 4, "x": 5})
        self.assertEqual(consumed(vv, {"m": "1", "x": "2"}), {"m": 2, "x": 2})
        self.assertIsNone(consumed(vv, {"m": "9"}))
        # ten 8Gi shares of 80Gi, each its own shareID; the eleventh does not fit
        ids = iter("share-%02d" % i for i in range(100))
        alloc = []
        for i in range(10):
            r = p.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc, lambda: next(ids))
            self.assertEqual(r, [{"device": "gpu-0", "shareID": "share-%02d" % i,
                                  "consumedCapacity": {"memory": "8Gi", "compute": "10"}}])
            alloc += r
        # the eleventh: not on gpu-0, on the plain GPU (given whole), then nowhere
        r = p.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc)
        self.assertEqual(r, [{"device": "gpu-1"}])
        self.assertIsNone(p.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc + ["gpu-1"]))
        # one share gone: it fits again; compute summed too (10 x 10 = 100)
        self.assertEqual(len(p.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc[1:])), 1)
        self.assertIsNone(p.allocate_results([('type == "gpu"', {"memory": "1Gi", "compute": "1"})],
                                             [dict(a, consumedCapacity={"memory": "1Gi", "compute": "10"})
                                              for a in alloc]))
        # two shares in one claim see each other; the third goes to the plain GPU (whole)
        two = p.allocate_results([('type == "gpu"', {"memory": "40Gi"})] * 3)
        self.assertEqual([r["device"] for r in two], ["gpu-0", "gpu-0", "gpu-1"])
        self.assertNotIn("shareID", two[2])
        # ... where 41Gi is more than the plain GPU has
        self.assertIsNone(p.allocate_results([('type == "gpu"', {"memory": "40Gi"})] * 2 +
                                             [('type == "gpu"', {"memory": "41Gi"})]))
        self.assertNotEqual(two[0]["shareID"], two[1]["shareID"])
        # a request without amounts takes the policy's defaults (all 80Gi): not beside a share
        self.assertEqual(p.allocate(['type == "gpu"'], alloc[:1]), ["gpu-1"])
        self.assertEqual(p.allocate_results(['type == "gpu"'], [], lambda: "s")[0]["consumedCapacity"],
                         {"memory": "80Gi", "compute": "10"})
        # a device given whole (a stale name in allocated) is never shared
        self.assertIsNone(p.allocate_results([('type == "gpu"', {"memory": "1Gi"})], ["gpu-0", "gpu-1"]))
        self.assertEqual(format_quantity(8 * gi), "8Gi")
        self.assertEqual(format_quantity(10), "10")
        self.assertEqual(format_quantity(1536 << 20), "1536Mi")

    def test_quantity(self):
        self.assertEqual(quantity("40192Mi"), 40192 << 20)
        self.assertEqual(quantity("98"), 98)


if __name__ == "__main__":
    unittest.main(verbosity=2)
