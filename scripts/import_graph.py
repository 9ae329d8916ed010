#!/usr/bin/env python3
"""The file-level import graph of forge/src, and the cycles in it.

Usage:
    python3 scripts/import_graph.py            # cycles only (exit 1 if any)
    python3 scripts/import_graph.py --edges    # every edge, then the cycles
    python3 scripts/import_graph.py --dot      # Graphviz source of the graph

The same reading as the Rust test tests/misc/import_cycles.rs (keep the two
in step):

- The module tree comes from the `mod` declarations, starting at lib.rs
  (`#[path = "..."]` is followed; inline `mod name { ... }` blocks are
  modules of the file that holds them).
- Comments, strings and char literals are blanked; every path that starts
  with `crate`, `super`, `self` or the name of a child module of the
  module it is written in is an import: in `use` trees (braces expanded) and
  in code (`super::im2col::build_chunks(...)`).
- A path resolves to the file of its longest module prefix. When the next
  name is one that file binds with a `use` (a re-export, or an import its
  children reach through `super::`), the path follows that `use` to where
  the name comes from, so `use crate::cpu::Storage` is an edge to
  cpu/memory/storage.rs, not to cpu/mod.rs. A name that resolves outside
  the crate gives no edge.
- `mod` declarations are not imports. An edge from a file to itself is
  dropped. A cycle is a strongly connected set of two or more files.

Python 3 standard library only.
"""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "forge", "src")

PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')


def strip(text):
    """Blank comments, string and char literals; keep `#[path]` strings."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 130]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            keep = re.search(r"#\[path\s*=\s*$", text[max(0, i - 40):i])
            out.append(text[i:j + 1] if keep else '""')
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:i + 16])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r'"[^"]*"|[A-Za-z0-9_]+|::|\S')


def tokens(code):
    return TOKEN.findall(code)


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names below the crate root
        self.file = file  # relative file name
        self.children = {}  # name -> Module
        self.bindings = {}  # name -> (context module, path tuple) of a `use`
        self.refs = []  # (context module, path tuple): every path written here


def parse_use_tree(toks, i, prefix, out):
    """Parse a use tree at toks[i]; append (path, bound name) pairs; return the index after it."""
    path = list(prefix)
    while i < len(toks):
        t = toks[i]
        if t == "{":
            i += 1
            while toks[i] != "}":
                i = parse_use_tree(toks, i, path, out)
                if toks[i] == ",":
                    i += 1
            return i + 1
        if t == "*":
            out.append((tuple(path), "*"))
            return i + 1
        if t == "::":
            i += 1
            continue
        if re.match(r"[A-Za-z_]", t):
            path.append(t)
            i += 1
            if i < len(toks) and toks[i] == "::":
                continue
            name = t
            if i + 1 < len(toks) and toks[i] == "as":
                name = toks[i + 1]
                i += 2
            if path[-1] == "self":
                path.pop()
                if name == "self":
                    name = path[-1] if path else "self"
            out.append((tuple(path), name))
            return i
        return i + 1
    return i


def parse_file(module, modules, rel):
    """Read one file into `module`: its child modules, `use` bindings and paths."""
    full = os.path.join(SRC, rel)
    with open(full, encoding="utf-8") as f:
        code = strip(f.read())
    toks = tokens(code)
    base_dir = os.path.dirname(rel)
    # where child files of this file's module live
    stem = os.path.splitext(os.path.basename(rel))[0]
    child_dir = base_dir if stem in ("lib", "mod") else os.path.join(base_dir, stem)
    stack = [(module, 0)]  # (module, brace depth at which it opened)
    depth = 0
    i = 0
    pending_path = None
    while i < len(toks):
        t = toks[i]
        cur = stack[-1][0]
        if t == "#" and i + 4 < len(toks) and toks[i + 1] == "[" and toks[i + 2] == "path":
            pending_path = toks[i + 4].strip('"')
            i += 5
            continue
        if t == "mod" and i + 2 < len(toks) and re.match(r"[A-Za-z_]", toks[i + 1]) and toks[i + 2] in (";", "{"):
            name = toks[i + 1]
            child = Module(cur.path + (name,), None)
            cur.children[name] = child
            if toks[i + 2] == ";":
                if len(stack) > 1:
                    inner = os.path.join(child_dir, *[m.path[-1] for m, _ in stack[1:]])
                else:
                    inner = child_dir
                if pending_path is not None:
                    crel = os.path.normpath(os.path.join(base_dir, pending_path))
                else:
                    crel = os.path.join(inner, name + ".rs")
                    if not os.path.exists(os.path.join(SRC, crel)):
                        crel = os.path.join(inner, name, "mod.rs")
                child.file = crel
                modules[child.path] = child
                parse_file(child, modules, crel)
                i += 3
            else:
                child.file = rel
                modules[child.path] = child
                depth += 1
                stack.append((child, depth))
                i += 3
            pending_path = None
            continue
        if t == "use":
            pairs = []
            i = parse_use_tree(toks, i + 1, [], pairs)
            for path, name in pairs:
                cur.refs.append((cur, path))
                if name != "*":
                    cur.bindings[name] = (cur, path)
            continue
        if t == "{":
            depth += 1
        elif t == "}":
            if len(stack) > 1 and stack[-1][1] == depth:
                stack.pop()
            depth -= 1
        elif re.match(r"[A-Za-z_]", t) and i + 2 < len(toks) and toks[i + 1] == "::" and (i == 0 or toks[i - 1] != "::"):
            path = [t]
            j = i + 1
            while j + 1 < len(toks) and toks[j] == "::" and re.match(r"[A-Za-z_]", toks[j + 1]):
                path.append(toks[j + 1])
                j += 2
            cur.refs.append((cur, tuple(path)))
            i = j
            continue
        i += 1


def absolute(ctx, path, modules):
    """The path from the crate root, or None when it starts outside the crate."""
    if not path:
        return None
    head = path[0]
    if head == "crate":
        return path[1:]
    if head in ("super", "self"):
        base = list(ctx.path)
        k = 0
        while k < len(path) and path[k] in ("super", "self"):
            if path[k] == "super":
                if not base:
                    return None
                base.pop()
            k += 1
        return tuple(base) + path[k:]
    if head in ctx.children:
        return ctx.path + path
    return None


def resolve(ctx, path, modules, seen=0):
    """The file a path written in module `ctx` points to, or None."""
    absp = absolute(ctx, path, modules)
    if absp is None or seen > 16:
        return None
    k = 0
    while k < len(absp) and absp[: k + 1] in modules:
        k += 1
    mod = modules[absp[:k]]
    if k < len(absp) and absp[k] in mod.bindings:
        bctx, bpath = mod.bindings[absp[k]]
        return resolve(bctx, bpath + absp[k + 1:], modules, seen + 1)
    return mod.file


def graph():
    modules = {}
    root = Module((), "lib.rs")
    modules[()] = root
    parse_file(root, modules, "lib.rs")
    edges = {}
    for mod in modules.values():
        ancestors = {modules[mod.path[:k]].file for k in range(len(mod.path))}
        for ctx, path in mod.refs:
            target = resolve(ctx, path, modules)
            if target is not None and target != mod.file and target not in ancestors:
                edges.setdefault(mod.file, set()).add(target)
    files = sorted({m.file for m in modules.values()})
    return files, edges


def cycles(files, edges):
    """Strongly connected sets of two or more files (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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

    for f in files:
        if f not in index:
            visit(f)
    return sorted(out)


def main():
    files, edges = graph()
    if "--dot" in sys.argv:
        print("digraph forge {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
    found = cycles(files, edges)
    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(files)} files, {n_edges} edges, {len(found)} cycles")
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    print(f"    {a} -> {b}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
