#!/usr/bin/python3
"""Writes the seed corpus of fuzz-dp: a type byte (0/1 Allocate on plain/replica
resources, 2/3 preferred on plain/replicas, 4 other messages) + a protobuf message.
Run once; the files are checked in."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "test-kubelet"))
import dpapi  # noqa: E402

pb = dpapi.pb
OUT = os.path.join(HERE, "corpus", "dp")
GPU = ["GPU-a1000000-0000-0000-0000-%012d" % i for i in range(8)]


def write(name, kind, msg):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([kind]) + msg.SerializeToString())


def alloc(*containers):
    return pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=list(c)) for c in containers])


def pref(avail, must, size):
    return pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=avail,
                                               must_include_deviceIDs=must,
                                               allocation_size=size)])


os.makedirs(OUT, exist_ok=True)
write("alloc-one", 0, alloc([GPU[0]]))
write("alloc-two-containers", 0, alloc(GPU[:3], [GPU[7]]))
write("alloc-unknown", 0, alloc(["GPU-nope"]))
write("alloc-dup", 0, alloc([GPU[1], GPU[1]]))
write("alloc-replicas", 1, alloc([GPU[0] + "::0", GPU[0] + "::3"]))
write("alloc-replica-bad", 1, alloc([GPU[0] + "::9"]))
write("pref-4-must", 2, pref(GPU, [GPU[5]], 4))
write("pref-size-0", 2, pref(GPU, [], 0))
write("pref-too-big", 2, pref(GPU[:2], [], 3))
write("pref-unknown", 2, pref(GPU[:2] + ["x"], [], 2))
write("pref-replicas", 3, pref([g + "::%d" % k for g in GPU[:3] for k in range(4)],
                               [GPU[0] + "::1"], 5))
write("register", 4, pb.RegisterRequest(version="v1beta1", endpoint="nvidia-gpu.sock",
                                        resource_name="nvidia.com/gpu"))
