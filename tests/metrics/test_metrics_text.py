"""The registry's text, read back by Debian's python3-prometheus-client parser (written
independently of ours): every family, label value (escapes undone) and histogram sample
comes back as the C test set it. argv[1]: the test-metrics binary."""

import math
import subprocess
import sys
import unittest

from prometheus_client.parser import text_string_to_metric_families

BINARY = sys.argv.pop(1)


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


class MetricsText(unittest.TestCase):
    def setUp(self):
        self.text = subprocess.run([BINARY, "--print"], check=True, capture_output=True,
                                   text=True).stdout
        self.fams = families(self.text)

    def samples(self, family):
        return [(s.name, s.labels, s.value) for s in self.fams[family].samples]

    def test_counter_and_escaping(self):
        f = self.fams["t_requests"]  # the parser drops _total from a counter's family name
        self.assertEqual(f.type, "counter")
        self.assertEqual(f.documentation, "Requests.\nSecond line \\ backslash.")
        self.assertEqual(self.samples("t_requests"), [
            ("t_requests_total", {"resource": "nvidia.com/gpu"}, 2.0),
            ("t_requests_total", {"resource": 'we"ird\\na\nme'}, 3.0),
        ])

    def test_gauges(self):
        self.assertEqual(self.fams["t_level"].type, "gauge")
        self.assertEqual(self.samples("t_level"), [("t_level", {}, 0.25)])
        vals = {s.labels["a"]: (s.labels["b"], s.value) for s in self.fams["t_special"].samples}
        self.assertEqual(vals["inf"][0], "")
        self.assertTrue(math.isinf(vals["inf"][1]) and vals["inf"][1] > 0)
        self.assertTrue(math.isinf(vals["ninf"][1]) and vals["ninf"][1] < 0)
        self.assertEqual(vals["big"], ("y", 12345678901234.0))

    def test_histogram(self):
        f = self.fams["t_seconds"]
        self.assertEqual(f.type, "histogram")
        r1 = [(n, l.get("le"), v) for n, l, v in self.samples("t_seconds") if l["resource"] == "r1"]
        self.assertEqual(r1, [
            ("t_seconds_bucket", "0.001", 2.0), ("t_seconds_bucket", "0.01", 2.0),
            ("t_seconds_bucket", "0.1", 3.0), ("t_seconds_bucket", "+Inf", 4.0),
            ("t_seconds_sum", None, 5.0515), ("t_seconds_count", None, 4.0),
        ])
        r2 = [v for n, l, v in self.samples("t_seconds") if l["resource"] == "r2"]
        self.assertEqual(r2, [0.0] * 6)

    def test_every_family_typed_and_documented(self):
        for line in self.text.splitlines():
            self.assertFalse(line.startswith("#") and not (line.startswith("# HELP ") or
                                                          line.startswith("# TYPE ")), line)
        self.assertEqual(sorted(self.fams), ["t_collected", "t_level", "t_requests", "t_seconds",
                                             "t_special"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
