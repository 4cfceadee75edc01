#!/usr/bin/python3
"""Writes the seed corpus of fuzz-dp (tests/fuzz/fuzz-dp.c describes the format):
[setup][resource][health mask] then records [op][len lo][len hi][body]. One session per
setup and resource that calls every method, plus requests with real device IDs and the
edge cases the kubelet or a hostile peer may send. Run once; the files are checked in
(libFuzzer finds go in beside them, named by their hash)."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "test-kubelet"))
import dpapi  # noqa: E402

pb = dpapi.pb
OUT = os.path.join(HERE, "corpus", "dp")
GPU = ["GPU-a1000000-0000-0000-0000-%012d" % i for i in range(8)]

(OPTIONS, LAW, PREFERRED, ALLOCATE, PRESTART, STATUS, HEALTH, UNKNOWN, ALLOCATE_PICK,
 PREFERRED_PICK) = range(10)
# dp-node.c: name -> number of resources it serves
SETUPS = [("a100", 1), ("a100-index-every-output", 1), ("mig-mixed", 3),
          ("mig-single-index", 1), ("time-slicing", 1), ("time-slicing-rename-subset", 2),
          ("mps", 1), ("t4-renamed-no-topology", 1), ("h100-mig-shared-cdi", 3),
          ("h100-24-heuristic", 1)]


def rec(op, body=b""):
    if not isinstance(body, bytes):
        body = body.SerializeToString()
    return struct.pack("<BH", op, len(body)) + body


def write(name, setup, resource, mask, *records):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([setup, resource, mask]) + b"".join(records))


def alloc(*containers):
    return pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=list(c)) for c in containers])


def pref(avail, must, size):
    return pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=avail,
                                               must_include_deviceIDs=must,
                                               allocation_size=size)])


def pick_pref(size, must, avail):
    return bytes([size, len(must)] + must + avail)


os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    if not old.startswith("crash-") and "-" in old:
        os.unlink(os.path.join(OUT, old))

for s, (name, n_res) in enumerate(SETUPS):
    for r in range(n_res):
        write("session-%s-%d" % (name, r), s, r, 0x00,
              rec(OPTIONS), rec(LAW), rec(STATUS),
              rec(ALLOCATE_PICK, bytes([0])),
              rec(ALLOCATE_PICK, bytes([0, 1, 0xff, 2])),
              rec(PREFERRED_PICK, pick_pref(2, [1], list(range(8)))),
              rec(HEALTH, bytes([0x05])), rec(STATUS),
              rec(PRESTART, pb.PreStartContainerRequest(devices_ids=["x"])),
              rec(UNKNOWN), rec(HEALTH))
    write("pick-all-%s" % name, s, 0, 0xff,
          rec(ALLOCATE_PICK, bytes(range(16))),
          rec(PREFERRED_PICK, pick_pref(4, [], list(range(24)))),
          rec(PREFERRED_PICK, pick_pref(3, [2, 5], list(range(24)))))

write("alloc-uuid", 0, 0, 0, rec(ALLOCATE, alloc([GPU[0]])))
write("alloc-uuid-two-containers", 0, 0, 0, rec(ALLOCATE, alloc(GPU[:3], [GPU[7]])))
write("alloc-unknown", 0, 0, 0, rec(ALLOCATE, alloc(["GPU-nope"])))
write("alloc-log-injection", 0, 0, 0, rec(ALLOCATE, alloc(["GPU-0\nE0101 forged"])))
write("alloc-dup", 0, 0, 0, rec(ALLOCATE, alloc([GPU[1], GPU[1]])))
write("alloc-empty", 0, 0, 0, rec(ALLOCATE, alloc([])), rec(ALLOCATE))
write("alloc-garbage", 0, 0, 0, rec(ALLOCATE, b"\xff\xff\xff"), rec(PREFERRED, b"\x0a\x05ab"),
      rec(PRESTART, b"\x80"))
write("alloc-replicas", 4, 0, 0, rec(ALLOCATE, alloc([GPU[0] + "::0", GPU[0] + "::3"])))
write("alloc-replica-bad", 4, 0, 0, rec(ALLOCATE, alloc([GPU[0] + "::9"])))
write("alloc-shared-gt1", 5, 0, 0, rec(ALLOCATE_PICK, bytes([0, 1])))
write("alloc-mps-gt1", 6, 0, 0, rec(ALLOCATE_PICK, bytes([0, 1])))
write("pref-4-must", 0, 0, 0, rec(PREFERRED, pref(GPU, [GPU[5]], 4)))
write("pref-size-0", 0, 0, 0, rec(PREFERRED, pref(GPU, [], 0)))
write("pref-too-big", 0, 0, 0, rec(PREFERRED, pref(GPU[:2], [], 3)))
write("pref-unknown", 0, 0, 0, rec(PREFERRED, pref(GPU[:2] + ["x"], [], 2)))
write("pref-unknown-must", 0, 0, 0, rec(PREFERRED, pref(GPU[:2], ["x"], 2)))
write("pref-dup", 0, 0, 0, rec(PREFERRED, pref([GPU[0], GPU[0], GPU[1]], [], 2)))
write("pref-negative", 0, 0, 0, rec(PREFERRED_PICK, pick_pref(0xfe, [], [0, 1])))
write("pref-huge-size", 0, 0, 0, rec(PREFERRED_PICK, pick_pref(0xff, [], [0, 1])))
write("pref-huge-size-replicas", 4, 0, 0, rec(PREFERRED_PICK, pick_pref(0xff, [], [0, 1])))
write("pref-huge-size-no-topology", 7, 0, 0, rec(PREFERRED_PICK, pick_pref(0xff, [], [0, 1])))
write("pref-replicas", 4, 0, 0,
      rec(PREFERRED, pref([g + "::%d" % k for g in GPU[:3] for k in range(4)],
                          [GPU[0] + "::1"], 5)))
write("pref-replicas-pick", 4, 0, 0, rec(PREFERRED_PICK, pick_pref(5, [1], list(range(32)))))
write("law-many-changes", 2, 1, 0x0f, rec(LAW), rec(LAW), rec(HEALTH, b"\x01"),
      rec(HEALTH, b"\xf0"), rec(HEALTH), rec(STATUS))
write("register-bytes", 0, 0, 0,
      rec(PRESTART, pb.RegisterRequest(version="v1beta1", endpoint="nvidia-gpu.sock",
                                       resource_name="nvidia.com/gpu")))
