#!/usr/bin/python3
"""Drop-in compatibility matrix for one simulator profile (argv[1]).

For every MIG strategy × sharing mode the reference accepts on this profile, one plugin
run checks the registered resources, the exact device ID sets and full Allocate
responses against compat.py's model of the reference; device-list strategies
(envvar, volume-mounts, cdi-annotations, cdi-cri and two combinations), ID strategies
and device specs (with a rendered --dev-root, and the plain host root) are spread over
those runs so that every value is covered on this profile. Every distinct refusal of the
reference (e.g. MPS + mixed, single on a mixed layout) is asserted once: exit 1 with its
message, nothing registered.
"""
import collections
import itertools
import os
import sys
import unittest

import compat

MIGS = ("none", "single", "mixed")
SHARINGS = (None,
            {"kind": "ts", "replicas": 2, "rename": False},
            {"kind": "ts", "replicas": 3, "rename": True},
            {"kind": "mps", "replicas": 4, "rename": False})
LISTS = (("envvar",), ("volume-mounts",), ("cdi-annotations",), ("cdi-cri",),
         ("envvar", "cdi-annotations"), ("volume-mounts", "envvar", "cdi-cri"))
IDS = ("uuid", "index")
SPECS = ("devroot", None, "plain")


def classify(profile, mig, sharing):
    """None if the reference accepts (mig, sharing) here, else its message."""
    gpus = compat.load_node(profile)
    minors = collections.defaultdict(int)
    sh = dict(sharing, names=["nvidia.com/gpu"]) if sharing else None
    try:
        base = compat.expected_resources(gpus, minors, mig, "uuid", None)
        if sh:
            names = sorted(base)
            sh["names"] = names[:-1] if len(names) > 2 else names
        compat.expected_resources(gpus, minors, mig, "uuid", sh)
    except compat.ExpectedFailure as e:
        return str(e)
    return None


def matrix(profile):
    valid, refused, seen = [], [], set()
    for mig, sharing in itertools.product(MIGS, SHARINGS):
        msg = classify(profile, mig, sharing)
        if msg is None:
            valid.append((mig, sharing))
        elif msg not in seen:
            seen.add(msg)
            refused.append((mig, sharing))
    cases = []
    # Per MIG strategy, at least one run per list strategy (MIG devices need the CDI and
    # volume-mount names as much as full GPUs), cycling through the accepted sharing
    # modes; ID strategy and device specs rotate alongside.
    for mig in MIGS:
        pairs = [p for p in valid if p[0] == mig]
        for k in range(max(len(pairs), len(LISTS)) if pairs else 0):
            sharing = pairs[k % len(pairs)][1]
            cases.append(compat.Case(profile, mig, LISTS[k % len(LISTS)], IDS[(k // 2) % 2],
                                     dict(sharing) if sharing else None, SPECS[k % len(SPECS)]))
    for mig, sharing in refused:
        cases.append(compat.Case(profile, mig, ("envvar",), "uuid", dict(sharing) if sharing else None))
    return cases


class Matrix(unittest.TestCase):
    profile = None

    def test_matrix(self):
        if not os.path.exists(compat.harness.PLUGIN) or not os.path.exists(compat.harness.SIM_RENDER):
            self.skipTest("plugin or simulator not built")
        cases = matrix(self.profile)
        for c in cases:
            print("case:", c, flush=True)
        failures = compat.run_cases(cases)
        self.assertEqual(failures, [], "\n\n".join(failures))


if __name__ == "__main__":
    Matrix.profile = sys.argv.pop(1)
    compat.harness.main()
