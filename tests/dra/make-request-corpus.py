"""Regenerate corpus-request/ (seed inputs for fuzz-dra-request): the kubelet's own
NodePrepareResources / NodeUnprepareResources requests (v1, v1beta1) from
tests/data/dra/wire/, and hand-made ones for each check of src/dra/dra-request.c.
And tests/data/dra/kubelet-requests/: requests as kubelets send them, which the replay
(fuzz-dra-request-kubelet) must accept whole, no claim refused.
usage: /usr/bin/python3 make-request-corpus.py   (run from anywhere)"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
WIRE = os.path.join(HERE, "..", "data", "dra", "wire")
OUT = os.path.join(HERE, "corpus-request")
KUBELET = os.path.join(HERE, "..", "data", "dra", "kubelet-requests")


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def claim(ns, uid, name):
    return field(1, field(1, ns.encode()) + field(2, uid.encode()) + field(3, name.encode()))


def uid(i):
    return "3f2a6c1e-8b4d-4e7a-9c15-%012x" % i


# What kubelets send on the v1beta1 (1.32, 1.33) and v1 (1.34 on) paths: Claim {namespace
# = 1, uid = 2, name = 3}, unchanged since; before 1.32 the kubelet called other services
# (v1alpha3/v1alpha4), which a plugin that offers only v1 and v1beta1 never gets. The
# 1.34.9 bytes are the wire fixtures themselves; the rest is encoded here as gogo (1.32 to
# 1.34) and google.golang.org/protobuf (1.35 on) both encode it: fields in number order,
# empty strings left out.
kubelet = {
    "one-claim": claim("default", uid(1), "gpu-claim"),  # a pod with one claim
    "pod-with-32-claims": b"".join(claim("ml-team", uid(i), "pod-gpu-%d" % i) for i in range(32)),
    "longest-names": claim("n" * 63, uid(2), "c" * 253),  # a DNS label, a DNS subdomain
    "generated-names": claim("kube-system", uid(3), "infer-pod-gpu-7xk2q-0123456789abcdef"),
    "no-claims": b"",  # the request of NVIDIA's driver's health probe, and of an empty call
    # Any encoder may order fields differently, and a later kubelet may add one (decoders
    # skip what they do not know, as the 1.34 kubelet does with Device.share_id).
    "claim-fields-reordered": field(1, field(3, b"c") + field(2, uid(4).encode()) + field(1, b"ns")),
    "claim-field-from-a-later-kubelet": field(1, field(1, b"ns") + field(2, uid(5).encode()) +
                                              field(3, b"c") + field(4, b"future")),
    "request-field-from-a-later-kubelet": claim("ns", uid(6), "c") + varint(2 << 3 | 0) + varint(1),
}


cases = {
    "empty": b"",  # NVIDIA's health probe: no claims
    "one": claim("default", "0a1b2c3d-0000-4000-8000-000000000001", "gpu-claim"),
    "two": claim("a", "u-1", "c1") + claim("b", "u-2", "c2"),
    "uid-empty": claim("default", "", "c"),
    "uid-too-long": claim("default", "u" * 129, "c"),
    "uid-twice": claim("a", "u-1", "c1") + claim("b", "u-1", "c2"),
    # found by libFuzzer: a UID with a newline, twice (once echoed in the refusal)
    "uid-newline-twice": claim("a", "u-c\n\r", "c1") + claim("b", "u-c\n\r", "c2"),
    "uid-control": claim("a", "u-\x01", "c"),
    "uid-high-bytes": claim("a", "u-\xc3\xa9", "c"),
    # protobuf-c cuts a string at a NUL: refused, never prepared as "u-1" (issue 30)
    "uid-nul": claim("a", "u-1\x00../x", "c"),
    "name-nul": claim("a", "u-1", "c\x00x"),
    "name-too-long": claim("default", "u-1", "n" * 254) + claim("default", "u-2", "ok"),
    "namespace-too-long": claim("n" * 254, "u-1", "c"),
    "too-many": b"".join(claim("a", "u-%d" % i, "c") for i in range(257)),
    "truncated": claim("default", "u-1", "gpu-claim")[:-3],
    "unknown-field": claim("a", "u-1", "c") + varint(2 << 3 | 0) + varint(7),
}

os.makedirs(OUT, exist_ok=True)
for f in os.listdir(OUT):
    os.unlink(os.path.join(OUT, f))
for f in sorted(os.listdir(WIRE)):
    if f.startswith("dra-v1") and f.endswith("Request.bin"):
        shutil.copyfile(os.path.join(WIRE, f), os.path.join(OUT, "kubelet-" + f[:-4]))
for name, data in cases.items():
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(data)

os.makedirs(KUBELET, exist_ok=True)
for f in os.listdir(KUBELET):
    os.unlink(os.path.join(KUBELET, f))
for f in sorted(os.listdir(WIRE)):
    if f.startswith("dra-v1") and f.endswith("Request.bin"):
        shutil.copyfile(os.path.join(WIRE, f), os.path.join(KUBELET, "k8s-1.34.9-" + f[:-4]))
for name, data in kubelet.items():
    with open(os.path.join(KUBELET, name), "wb") as fh:
        fh.write(data)
