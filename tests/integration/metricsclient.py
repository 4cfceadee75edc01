"""Client side of the plugin's metrics listener for the tests: HTTP GETs with a timeout,
the scrape parsed by python3-prometheus-client (an independent parser), and the port the
plugin logged it bound."""

import http.client
import re

from prometheus_client.parser import text_string_to_metric_families

PORT_LINE = re.compile(r"Serving metrics and probes on \S+ \(port (\d+)\)")
TIMEOUT = 20.0


def logged_port(plugin, start=0):
    """The port of a plugin started with --metrics-address ...:0."""
    _, line = plugin.wait_log("Serving metrics and probes on", start)
    return int(PORT_LINE.search(line).group(1))


def read_all(sock, timeout=TIMEOUT):
    """Everything a raw connection sends until the listener closes (or resets) it."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    return data


def get(port, path, method="GET", host="127.0.0.1", headers=None):
    """(status, headers dict with lower-case keys, body text) of one request."""
    c = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        body = r.read().decode("utf-8")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


class Scrape:
    """One /metrics scrape: families by name and sample lookup by name and labels."""

    def __init__(self, text):
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def value(self, name, **labels):
        """The value of the one sample with this name and these labels (a subset), or
        None when there is none."""
        found = [s.value for s in self.samples
                 if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
        if len(found) > 1:
            raise AssertionError("%d samples %s %s" % (len(found), name, labels))
        return found[0] if found else None

    def matching(self, name, **labels):
        return [s for s in self.samples
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def scrape(port, host="127.0.0.1"):
    status, headers, body = get(port, "/metrics", host=host)
    if status != 200:
        raise AssertionError("/metrics answered %d: %s" % (status, body))
    if not headers.get("content-type", "").startswith("text/plain; version=0.0.4"):
        raise AssertionError("/metrics content type %r" % headers.get("content-type"))
    return Scrape(body)
