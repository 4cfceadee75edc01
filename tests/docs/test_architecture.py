#!/usr/bin/python3
"""docs/architecture.md against the code: the layer list names every folder of src/, the
include-edge list is exactly the edges the `#include "..."` lines of src/ make between
layers, and every such edge points down the layer list; the module map has a row for
every folder of src/ and names every entry file (src/main.c, src/cmd_*.c).

usage: test_architecture.py                 run the checks (GDP_SOURCE_DIR: the source tree)
       test_architecture.py --print-edges   print the edge paragraph the doc should have"""
import os
import re
import sys
import unittest

SOURCE = os.environ.get("GDP_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(SOURCE, "src")
DOC = os.path.join(SOURCE, "docs", "architecture.md")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    """src/<layer>/...; the files directly in src/ (main.c, cmd_*.c) are the cmd layer."""
    return rel.split("/")[0] if "/" in rel else "cmd"


def generated(inc):
    """Headers the build makes: from a src/*.in template (version.h) or protoc-c."""
    return os.path.exists(os.path.join(SRC, inc + ".in")) or inc.endswith(".pb-c.h")


def code_edges():
    """({layer: {layers it includes}}, [unresolved includes]) from every .c/.h of src/."""
    edges, unresolved = {}, []
    for root, _, files in os.walk(SRC):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, SRC)
            src_layer = layer_of(rel)
            edges.setdefault(src_layer, set())
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                # As the compiler looks: next to the includer, then from src/.
                for cand in (os.path.join(root, inc), os.path.join(SRC, inc)):
                    if os.path.isfile(cand):
                        dst = layer_of(os.path.relpath(os.path.normpath(cand), SRC))
                        if dst != src_layer:
                            edges[src_layer].add(dst)
                        break
                else:
                    if not generated(inc):
                        unresolved.append(f"src/{rel}: #include \"{inc}\"")
    return edges, unresolved


def doc_layers(text):
    """The layer names of the diagram, top to bottom (lines ` <layer>   src/...`)."""
    return re.findall(r"^ (\w+) +src/", text, re.M)


def doc_edges(text):
    """{layer: {layers}} from the paragraph that starts with "Include edges"."""
    m = re.search(r"^Include edges.*?(?=\n\s*\n)", text, re.M | re.S)
    if not m:
        return None
    para = " ".join(m.group(0).split())
    body = para.split("):", 1)[1] if "):" in para else para.split(":", 1)[1]
    edges = {}
    for part in body.split(";"):
        part = part.strip().rstrip(".")
        if not part:
            continue
        src, _, dsts = part.partition("→")
        edges[src.strip()] = {d.strip() for d in dsts.split(",") if d.strip()}
    return edges


def map_names(text):
    """The backquoted names of the module map's first column (`src/core/fs.[ch]`, `cmd_gfd.c`)."""
    names = set()
    for cell in re.findall(r"^\| (.+?) \| ", text, re.M):
        names.update(re.findall(r"`([^`]+)`", cell))
    return names


def unmapped(text, folders, entries):
    """Folders of src/ without a row, and entry files (directly in src/) no row names."""
    names = map_names(text)
    out = [f"src/{d}/: no row in the module map" for d in sorted(folders)
           if not any(n.startswith(f"src/{d}/") for n in names)]
    out += [f"src/{e}: not named in the module map" for e in sorted(entries)
            if f"src/{e}" not in names and e not in names]
    return out


def src_folders_and_entries():
    folders = {d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))}
    entries = {f for f in os.listdir(SRC) if f.endswith(".c")}
    return folders, entries


def differences(code, doc):
    """Lines naming every edge the doc misses or invents."""
    out = []
    for layer in sorted(set(code) | set(doc)):
        have, said = code.get(layer, set()), doc.get(layer, set())
        for d in sorted(have - said):
            out.append(f"{layer} → {d}: in the code, missing from docs/architecture.md")
        for d in sorted(said - have):
            out.append(f"{layer} → {d}: in docs/architecture.md, not in the code")
    return out


def edge_paragraph(code, order):
    rank = {l: i for i, l in enumerate(order)}
    parts = []
    for layer in sorted((l for l in code if code[l]), key=lambda l: rank.get(l, len(rank))):
        dsts = sorted(code[layer], key=lambda l: rank.get(l, len(rank)))
        parts.append(f"{layer} → {', '.join(dsts)}")
    return "; ".join(parts) + "."


class ArchitectureDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOC, encoding="utf-8") as f:
            cls.text = f.read()
        cls.code, cls.unresolved = code_edges()
        cls.layers = doc_layers(cls.text)
        cls.edges = doc_edges(cls.text)

    def test_includes_resolve(self):
        # An include this test cannot place would hide an edge.
        self.assertEqual(self.unresolved, [])

    def test_every_folder_is_a_layer(self):
        folders = {d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))}
        self.assertEqual(sorted((folders | {"cmd"}) - set(self.layers)), [],
                         "folders of src/ missing from the layer diagram")
        self.assertEqual(sorted(set(self.layers) - folders - {"cmd"}), [],
                         "layers in the diagram that src/ does not have")

    def test_module_map_covers_src(self):
        folders, entries = src_folders_and_entries()
        self.assertEqual(unmapped(self.text, folders, entries), [])
        # And it would say so: a folder and an entry file the map does not name.
        self.assertEqual(unmapped("| `src/a/x.c` | `a_` | x |\n| `src/main.c`, `cmd_b.c` | `cmd_` | y |\n",
                                  {"a", "z"}, {"main.c", "cmd_b.c", "cmd_c.c"}),
                         ["src/z/: no row in the module map", "src/cmd_c.c: not named in the module map"])

    def test_edge_list_is_the_code(self):
        self.assertIsNotNone(self.edges, "no 'Include edges' paragraph in docs/architecture.md")
        diff = differences(self.code, self.edges)
        self.assertEqual(diff, [], "\n".join(diff) + "\nwant: " + edge_paragraph(self.code, self.layers))

    def test_edges_point_down(self):
        rank = {l: i for i, l in enumerate(self.layers)}
        up = [f"{s} → {d}" for s, ds in sorted(self.code.items()) for d in sorted(ds)
              if s in rank and d in rank and rank[d] <= rank[s]]
        self.assertEqual(up, [], "include edges pointing up the layer list")

    def test_a_missing_edge_is_caught(self):
        # The comparison itself: drop one real edge from the doc's list and it must be named.
        layer = next(l for l in sorted(self.code) if self.code[l])
        dst = sorted(self.code[layer])[0]
        doc = {l: set(ds) for l, ds in self.code.items()}
        doc[layer].discard(dst)
        self.assertEqual(differences(self.code, doc),
                         [f"{layer} → {dst}: in the code, missing from docs/architecture.md"])
        # And the parser reads what edge_paragraph writes.
        para = "Include edges (x): " + edge_paragraph(self.code, self.layers) + "\n\n"
        self.assertEqual(differences(self.code, doc_edges(para)), [])


if __name__ == "__main__":
    if sys.argv[1:] == ["--print-edges"]:
        with open(DOC, encoding="utf-8") as f:
            order = doc_layers(f.read())
        print(edge_paragraph(code_edges()[0], order))
        sys.exit(0)
    unittest.main()
