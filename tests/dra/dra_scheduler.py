"""The 1.36 scheduler's device allocation for one node's pool, as far as DynamicMIG needs it
(../shared/reference/dra/dynamic-mig-mps-capacity.md §1.4; K8S
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating): the pool is
the slices of one driver and pool name at the newest generation; it is invalid (nothing is
allocated from it) when a counter set name is duplicated, when a device names a missing set
or a missing counter; slices are walked sorted by name and their devices in order, first
fit; a device fits when it is not allocated and, for each counter it consumes, the set's
value minus what every allocated device (and the ones picked so far) consumes stays >= 0.
Without DRAPartitionableDevices a device that consumes counters is never picked.

Selectors are a CEL subset: `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`, or
the short form `profile == "1g.10gb"`, `type == "gpu"`, joined with `&&`.

Used by tests/dra/test_dra_mig.py; `python3 dra_scheduler.py` runs its own unit tests."""
import re
import unittest

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

    def available(self, allocated):
        """Counter set -> counter -> what is left after the allocated devices."""
        left = {n: dict(c) for n, c in self.counters.items()}
        for name in allocated:
            for use in self.by_name[name].get("consumesCounters") or []:
                for c, v in use["counters"].items():
                    left[use["counterSet"]][c] -= quantity(v["value"])
        return left

    def fits(self, name, allocated):
        d = self.by_name[name]
        if name in allocated:
            return False
        uses = d.get("consumesCounters") or []
        if uses and not self.partitionable:
            return False
        left = self.available(allocated)
        return all(left[u["counterSet"]][c] - quantity(v["value"]) >= 0
                   for u in uses for c, v in u["counters"].items())

    def allocate(self, selectors, allocated=()):
        """Device names for one claim's requests (one device each, a CEL selector subset
        string or a predicate), first fit in the scheduler's order, with what is already
        allocated in the pool; None when some request finds no device."""
        picked = list(allocated)
        out = []
        for sel in selectors:
            pred = selector(sel) if isinstance(sel, str) else sel
            for d in self.devices:
                if pred(d) and self.fits(d["name"], picked):
                    picked.append(d["name"])
                    out.append(d["name"])
                    break
            else:
                return None
        return out


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

    def test_quantity(self):
        self.assertEqual(quantity("40192Mi"), 40192 << 20)
        self.assertEqual(quantity("98"), 98)


if __name__ == "__main__":
    unittest.main(verbosity=2)
