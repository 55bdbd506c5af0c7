"""Reads the symbol graphs scripts/symbol-graphs writes (shared by scripts/check-doc-comments and
scripts/api-surface)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["MerchantKit", "PaymentToken", "EMV", "OrchardCrypto"]


def extract(graphs):
    """The directory of symbol graphs to read: `graphs` when given, otherwise a fresh extraction."""
    if graphs:
        return graphs
    graphs = tempfile.mkdtemp(prefix="orchard-symbol-graphs-")
    subprocess.run([os.path.join(ROOT, "scripts", "symbol-graphs"), graphs], check=True, stdout=sys.stderr)
    return graphs


def public_symbols(graphs, module):
    """The public symbols of `module` (its own graph and its extensions of other modules' types), and the
    conformances they declare, as (symbols, conformances) where a conformance is (type path, protocol name)."""
    symbols, conformances = [], []
    paths = glob.glob(os.path.join(graphs, module + ".symbols.json")) + sorted(
        glob.glob(os.path.join(graphs, module + "@*.symbols.json")))
    if not paths:
        sys.exit(f"no symbol graph for {module} in {graphs}")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
        by_id = {s["identifier"]["precise"]: s for s in graph["symbols"]}
        symbols += [s for s in graph["symbols"] if s.get("accessLevel") == "public"]
        for rel in graph["relationships"]:
            source = by_id.get(rel["source"])
            if rel["kind"] == "conformsTo" and source is not None and source.get("accessLevel") == "public":
                target = by_id.get(rel["target"])
                name = ".".join(target["pathComponents"]) if target else rel.get("targetFallback", rel["target"])
                conformances.append((".".join(source["pathComponents"]), name))
    return symbols, conformances


def declaration(symbol):
    """The symbol's declaration as the compiler prints it, on one line."""
    return " ".join("".join(f["spelling"] for f in symbol.get("declarationFragments", [])).split())


def location(symbol):
    """FILE:LINE of the declaration, relative to the package root."""
    loc = symbol.get("location", {})
    path = loc.get("uri", "").removeprefix("file://")
    path = os.path.relpath(path, ROOT) if path else "?"
    return f"{path}:{loc.get('position', {}).get('line', 0) + 1}"
