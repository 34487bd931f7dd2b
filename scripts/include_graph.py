#!/usr/bin/env python3
"""Print the include graph's circles and the arrows that run back up.

A module is a file's stem: x.c and x.h are one module (x.c includes x.h
and its callers include x.h, so a circle through either is a circle
between the modules), and so is x_int.h, x's private header. An arrow a -> b means a file of module a includes
b.h (quoted includes only; system headers are not ours).

lib/ is layered by folder, lowest first (LIB_LAYERS): a block may include
its own folder and the folders below it; an arrow from a folder to one
above it is a back-arrow. app/ directories are checked for circles only.

Each directory is also counted by family, as the stop check counts it: x.c, x.h
and every x_*.* one module, and an include of any y_*.h (from any directory) an
arrow to family y when the directory has one. Files named after a mode but holding
a shared service then show up as circles: name a service for itself.

Usage: scripts/include_graph.py [REPO]   (exit status 1 if any circle or back-arrow)
"""
import re
import sys
from pathlib import Path

LIB_LAYERS = ["net", "flow", "sched", "classify", "modes", "observe", "worker"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    """{stem: [paths]} of the .c/.h files under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.suffix in (".c", ".h") and p.is_file():
            out.setdefault(p.stem, []).append(p)
    return out


def owner(stem, mods):
    """The module a header belongs to: x_int.h is x's when x exists."""
    if stem.endswith("_int") and stem[:-4] in mods:
        return stem[:-4]
    return stem


def graph(mods):
    """{stem: set of stems it includes}, within mods."""
    g = {m: set() for m in mods if owner(m, mods) == m}
    for m, paths in mods.items():
        for p in paths:
            for inc in INCLUDE.findall(p.read_text(errors="replace")):
                stem = Path(inc).stem
                if stem in mods and owner(stem, mods) != owner(m, mods):
                    g[owner(m, mods)].add(owner(stem, mods))
    return g


def family(stem):
    return stem.split("_")[0]


def family_graph(mods):
    """{family: set of families it includes}: x.c, x.h, x_*.* one module."""
    fams = {family(m) for m in mods}
    g = {f: set() for f in fams}
    for m, paths in mods.items():
        for p in paths:
            for inc in INCLUDE.findall(p.read_text(errors="replace")):
                b = family(Path(inc).stem)
                if b in fams and b != family(m):
                    g[family(m)].add(b)
    return g


def circles(g):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def layer_of(path, lib):
    rel = path.relative_to(lib).parts
    return LIB_LAYERS.index(rel[0]) if len(rel) > 1 and rel[0] in LIB_LAYERS else None


def back_arrows(mods, g, lib):
    out = []
    for a in sorted(g):
        la = layer_of(mods[a][0], lib)
        for b in sorted(g[a]):
            lb = layer_of(mods[b][0], lib)
            if la is not None and lb is not None and lb > la:
                out.append("%s/%s -> %s/%s" % (LIB_LAYERS[la], a, LIB_LAYERS[lb], b))
    return out


def main():
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    bad = 0
    lib = repo / "lib"
    for name, root in [("lib", lib)] + [("app/" + d.name, d) for d in sorted((repo / "app").iterdir())
                                        if d.is_dir()]:
        mods = modules(root)
        g = graph(mods)
        cs = circles(g)
        print("%s: %d modules, %d arrows, %d circle(s)" % (name, len(g), sum(map(len, g.values())),
                                                          len(cs)))
        for c in cs:
            print("  circle: " + " ".join(c))
        bad += len(cs)
        fcs = circles(family_graph(mods))
        print("  by family (x_*.* one module): %d circle(s)" % len(fcs))
        for c in fcs:
            print("  family circle: " + " ".join(c))
        bad += len(fcs)
        if root == lib:
            backs = back_arrows(mods, g, lib)
            print("  %d back-arrow(s) between folders (%s, lowest first)" % (len(backs),
                                                                         " < ".join(LIB_LAYERS)))
            for b in backs:
                print("  back: " + b)
            bad += len(backs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
