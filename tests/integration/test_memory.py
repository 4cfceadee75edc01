#!/usr/bin/python3
"""The serving process's heap policy (src/core/mem.c, docs/benchmarks.md "Memory"): with
the NVML event thread and the simulator's control thread running, and after each has done
its work (an Xid read, waited on and delivered), every thread allocates from the one main
malloc arena: no second arena's 64 MiB reservation is mapped. Figures are bench-rss.py's,
not a test's. A sanitizer build replaces malloc (SKIP)."""
import harness
from harness import RESOURCE

ARENA = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: each extra arena reserves this, aligned


def mappings(pid):
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi, parts[1], parts[5] if len(parts) > 5 else ""))
    return out


def extra_arenas(maps):
    """glibc's non-main arenas: an anonymous mapping starting on a 64 MiB boundary whose
    read-write head and PROT_NONE tail together span 64 MiB."""
    found = []
    for i, (lo, hi, perms, name) in enumerate(maps):
        if lo % ARENA or name or not perms.startswith("rw"):
            continue
        end = hi
        if i + 1 < len(maps) and maps[i + 1][0] == hi and maps[i + 1][2] == "---p" \
                and not maps[i + 1][3]:
            end = maps[i + 1][1]
        if end - lo == ARENA:
            found.append("%x-%x" % (lo, end))
    return found


class Memory(harness.PluginTestCase):
    def test_one_malloc_arena(self):
        self.start_all("a100")
        maps = mappings(self.plugin.pid)
        if any("libasan" in m[3] for m in maps):
            self.skipTest("a sanitizer build replaces malloc")
        uuid = harness.load_profile("a100")[3]["uuid"]
        start = self.kubelet.events.mark()
        self.inject("xid %s 48" % uuid)

        def unhealthy(e):
            return (e.get("event") == "devices" and e.get("resource") == RESOURCE and
                    any(d["id"] == uuid and d["health"] == "Unhealthy" for d in e["devices"]))
        self.kubelet.events.wait_for(unhealthy, start, what="%s Unhealthy" % uuid)
        with open("/proc/%d/status" % self.plugin.pid) as f:
            threads = int(next(l for l in f if l.startswith("Threads:")).split()[1])
        self.assertGreaterEqual(threads, 2, "the NVML event thread is running")
        self.assertEqual(extra_arenas(mappings(self.plugin.pid)), [],
                         "a thread got a malloc arena of its own")


if __name__ == "__main__":
    harness.main()
