#!/usr/bin/env python3
# Structure check (issue 28 item 6): a CI gate on how the crates' source files depend on each other.
#
# Why: two files that import each other are a sign that something lives in the wrong place; a
# circle of files cannot be understood, tested or moved one file at a time.
#
# What it checks, per workspace member with a src/ folder (only src/ is read, never tests/):
#   1. The module tree from src/lib.rs, src/main.rs and src/bin/*.rs, following `mod x;` to x.rs or
#      x/mod.rs (and `#[path = "..."]`). Modules declared under #[cfg(test)] are test-only files.
#   2. File-level imports: `use crate::/super::/self::` trees (grouped, multi-line, pub use) and
#      inline paths such as `crate::foo::bar(`, each resolved to the file that defines the item,
#      following `use`/`pub use` re-exports (lib.rs, mod.rs) one or more levels. Not counted:
#      `mod` declarations, anything under #[cfg(test)], test-only files, and a module's `pub use`
#      re-export of its own descendant (a facade, like a `mod` declaration).
#   3. Circles: strongly connected components (Tarjan) of two or more files; any circle fails.
#   4. Functions longer than --max-fn-lines (from the `fn` line to its closing brace; strings,
#      chars, raw strings and comments are skipped), non-test code only. Reported; they fail the
#      check only with --max-long-fns K, when more than K exceed the limit.
#
# Output: `structure-check: <crate>: N files, M imports, no circle` (N non-test files, M distinct
# file-to-file import edges) or the circles, then the long functions as `path:line name lines`.
#
# Usage: python3 scripts/structure-check.py [--root DIR] [--max-fn-lines 100] [--max-long-fns K]
#        python3 scripts/structure-check.py --self-test
# Python 3 standard library only. Exit status: 0 fine, 1 a circle (or too many long functions).
import argparse
import contextlib
import io
import re
import sys
import tempfile
import tomllib
from pathlib import Path

ID = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
RAW_STR = re.compile(r'r(#*)"')
MOD_DECL = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\s*\([^)]*\))?\s+)?\bmod\s+(" + ID + r")\s*;")
INLINE_MOD = re.compile(r"\bmod\s+(" + ID + r")\s*\{")
USE_DECL = re.compile(r"(?<![\w$])(?:(pub)(?:\s*\([^)]*\))?\s+)?use\s+([\w{:*][^;]*);")
CODE_PATH = re.compile(r"(?<![\w$:])(?:crate|super|self)(?:\s*::\s*" + ID + r")+")
DEF = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+(" + ID + r")|macro_rules!\s*(" + ID + r")")
FN = re.compile(r"\bfn\s+(" + ID + r")")
CFG_TEST = re.compile(r"#\[cfg\(\s*(?:all\(\s*)?test\b[^\]]*\]")


def word_start(src, i):
    """True when src[i] does not continue an identifier (a `b` prefix, as in br"..", is allowed)."""
    prev = src[i - 1] if i else " "
    return not (prev.isalnum() or prev == "_") or (prev == "b" and word_start(src, i - 1))


def literal(src, i):
    """(end, blank_from, blank_to) for a comment or a string/char literal at i, else None."""
    n, two = len(src), src[i:i + 2]
    if two == "//":
        j = src.find("\n", i)
        return (n, i, n) if j < 0 else (j, i, j)
    if two == "/*":
        j, depth = i + 2, 1
        while j < n and depth:
            step = src[j:j + 2]
            depth += 1 if step == "/*" else -1 if step == "*/" else 0
            j += 2 if step in ("/*", "*/") else 1
        return j, i, j
    raw = RAW_STR.match(src, i) if two[0] == "r" and word_start(src, i) else None
    if raw:
        close = '"' + raw.group(1)
        j = src.find(close, raw.end())
        j = n if j < 0 else j
        return j + len(close), raw.end(), j
    if two[0] == '"':
        j = i + 1
        while j < n and src[j] != '"':
            j += 2 if src[j] == "\\" else 1
        return j + 1, i + 1, j
    if two == "'\\" or (two[:1] == "'" and src[i + 2:i + 3] == "'"):  # a char, not a lifetime
        j = src.find("'", i + 3) if two == "'\\" else i + 2
        return j + 1, i + 1, j
    return None


def mask(src):
    """The source with comments and the insides of string/char literals blanked (same offsets)."""
    out, i = list(src), 0
    while i < len(src):
        hit = literal(src, i)
        if hit is None:
            i += 1
            continue
        i, a, b = hit
        out[a:b] = [c if c == "\n" else " " for c in src[a:b]]
    return "".join(out)


def block_end(code, start):
    """Offset of the `;` or matching `}` that ends the item (or body) beginning at start."""
    depth, i = 0, start
    while i < len(code):
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth <= 0 and c == ";":
            return i
        elif depth <= 0 and c == "{":
            return brace_match(code, i)
        i += 1
    return len(code)


def brace_match(code, i):
    level = 0
    for j in range(i, len(code)):
        level += 1 if code[j] == "{" else -1 if code[j] == "}" else 0
        if level == 0:
            return j
    return len(code)


class Mod:
    def __init__(self, path, file, child_dir, test, span=None):
        self.path, self.file, self.child_dir, self.test = path, file, child_dir, test
        self.span = span or (0, 10**12)
        self.children, self.defs, self.uses = {}, set(), []  # uses: (bound, target, pub, glob, off)


class Source:
    """One file: its masked text, #[cfg(test)] spans and inline module spans."""

    def __init__(self, file):
        self.text = file.read_text(encoding="utf-8", errors="replace")
        self.code = mask(self.text)
        self.tests = [(m.start(), block_end(self.code, m.end())) for m in CFG_TEST.finditer(self.code)]
        if re.match(r"\s*#!\[cfg\(test\)\]", self.code):
            self.tests.append((0, len(self.code)))

    def in_test(self, off):
        return any(a <= off <= b for a, b in self.tests)

    def line(self, off):
        return self.text.count("\n", 0, off) + 1


def owner(node, off):
    """The innermost inline module of the file node that contains off."""
    for child in node.children.values():
        if child.file == node.file and child.span[0] <= off <= child.span[1]:
            return owner(child, off)
    return node


def load_file(file, path, child_dir, test, sources):
    src = sources[file] = sources.get(file) or Source(file)
    root = Mod(path, file, child_dir, test)
    for m in INLINE_MOD.finditer(src.code):
        parent = owner(root, m.start())
        name = m.group(1).removeprefix("r#")
        span = (m.start(), block_end(src.code, m.end() - 1))
        parent.children[name] = Mod(parent.path + [name], file, parent.child_dir / name,
                                    parent.test or src.in_test(m.start()), span)
    for m in MOD_DECL.finditer(src.code):
        parent, name = owner(root, m.start(2)), m.group(2).removeprefix("r#")
        attr = re.search(r'#\[path\s*=\s*"', m.group(1))
        if attr:
            a = m.start(1) + attr.end()
            rel = src.text[a:src.text.index('"', a)]
            base = file.parent if parent is root else parent.child_dir
            target, modrs = base / rel, True
        else:
            target = parent.child_dir / (name + ".rs")
            modrs = not target.is_file()
            target = parent.child_dir / name / "mod.rs" if modrs else target
        if target.is_file():
            sub_dir = target.parent if modrs else target.parent / target.stem
            parent.children[name] = load_file(target, parent.path + [name], sub_dir,
                                              parent.test or src.in_test(m.start(2)), sources)
    return root


def parse_use(toks, i, prefix, out):
    path = list(prefix)
    while i < len(toks):
        t = toks[i]
        if t == "::":
            i += 1
            continue
        if t == "{":
            i += 1
            while i < len(toks) and toks[i] != "}":
                i = parse_use(toks, i, path, out)
                i += 1 if i < len(toks) and toks[i] == "," else 0
            return i + 1
        if t == "*":
            out.append((path, "*"))
            return i + 1
        if t in ",}":
            return i
        path.append(t.removeprefix("r#"))
        i += 1
        if i < len(toks) and toks[i] == "::":
            continue
        if path[-1] == "self":
            path.pop()
        bound = path[-1] if path else ""
        if i + 1 < len(toks) and toks[i] == "as":
            bound, i = toks[i + 1], i + 2
        out.append((path, bound))
        return i
    return i


def absolute(node, segs):
    """A use path made absolute from the crate root, or None for other crates and std."""
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    base, k = list(node.path), 0
    while k < len(segs) and segs[k] in ("super", "self"):
        base = base[:-1] if segs[k] == "super" else base
        k += 1
    if k == 0 and segs[0] not in node.children:
        return None
    return base + segs[k:]


def walk(node):
    yield node
    for child in node.children.values():
        yield from walk(child)


def file_nodes(root):
    """Each file's outermost module node (inline modules share their file)."""
    nodes = {}
    for node in walk(root):
        nodes.setdefault(node.file, node)
    return nodes


def read_items(root, sources):
    tops = file_nodes(root)
    for node in walk(root):
        code, top = sources[node.file].code, tops[node.file]
        for m in DEF.finditer(code):
            if owner(top, m.start()) is node:
                node.defs.add((m.group(1) or m.group(2)).removeprefix("r#"))
        for m in USE_DECL.finditer(code):
            if owner(top, m.start()) is not node:
                continue
            out = []
            parse_use(re.findall(r"::|[{},*]|" + ID, m.group(2)), 0, [], out)
            for segs, bound in out:
                target = absolute(node, segs)
                if target is not None:
                    node.uses.append((bound, target, bool(m.group(1)), bound == "*", m.start()))


def find(root, path):
    node = root
    for seg in path:
        node = node and node.children.get(seg)
    return node


def resolve(root, segs, depth=0):
    """The module node whose file defines what the absolute path segs names."""
    node = root
    for seg in segs:
        if seg in node.children:
            node = node.children[seg]
            continue
        if seg in node.defs or depth > 10:
            return node
        for bound, target, _pub, glob, _off in node.uses:
            if not glob and bound == seg:
                return resolve(root, target, depth + 1)
        for bound, target, _pub, glob, _off in node.uses:
            sub = find(root, target) if glob else None
            if sub and (seg in sub.defs or seg in sub.children or any(u[0] == seg for u in sub.uses)):
                return resolve(root, target + [seg], depth + 1)
        return node
    return node


def imports(root, sources):
    """File-level import edges (from, to) of one module tree, test code left out."""
    edges, tops = set(), file_nodes(root)
    for node in walk(root):
        if node.test:
            continue
        src = sources[node.file]
        refs = [(t, p, o) for _b, t, p, _g, o in node.uses]
        spans = [(m.start(), m.end()) for m in USE_DECL.finditer(src.code)]
        for m in CODE_PATH.finditer(src.code):
            if owner(tops[node.file], m.start()) is node and not any(a <= m.start() < b for a, b in spans):
                segs = absolute(node, re.split(r"\s*::\s*", m.group(0)))
                refs.append((segs, False, m.start()))
        for segs, pub, off in refs:
            if segs is None or src.in_test(off):
                continue
            target = resolve(root, segs)
            facade = pub and target.path[:len(node.path)] == node.path  # re-export of a descendant
            if target.file != node.file and not target.test and not facade:
                edges.add((node.file, target.file))
    return edges


def tarjan(nodes, edges):
    succ = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = stack[stack.index(v):]
            del stack[stack.index(v):]
            on.difference_update(comp)
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return comps


def long_fns(file, src, limit):
    found = []
    for m in FN.finditer(src.code):
        if src.in_test(m.start()):
            continue
        end = block_end(src.code, m.end())
        if end < len(src.code) and src.code[end] == "}":
            lines = src.line(end) - src.line(m.start()) + 1
            if lines > limit:
                found.append((lines, file, src.line(m.start()), m.group(1)))
    return found


def crate_roots(crate):
    src = crate / "src"
    roots = [src / "lib.rs", src / "main.rs"] + sorted((src / "bin").glob("*.rs"))
    roots += sorted((src / "bin").glob("*/main.rs"))
    return [r for r in roots if r.is_file()]


def check_crate(crate, limit):
    sources, nodes, edges, paths = {}, set(), set(), {}
    for entry in crate_roots(crate):
        root = load_file(entry, [], entry.parent, False, sources)
        read_items(root, sources)
        edges |= imports(root, sources)
        nodes |= {n.file for n in walk(root) if not n.test}
        paths.update((f, n.path) for f, n in file_nodes(root).items())
    longs = [f for file in sorted(nodes) for f in long_fns(file, sources[file], limit)]
    return {"files": nodes, "edges": edges, "circles": tarjan(nodes, edges), "longs": longs,
            "paths": paths}


def members(root):
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    names = manifest.get("workspace", {}).get("members", ["."])
    expand = lambda pat: sorted(root.glob(pat)) if set(pat) & set("*?[") else [root / pat]
    crates = [c for pat in names for c in expand(pat)]
    return [c for c in crates if (c / "Cargo.toml").is_file() and (c / "src").is_dir()]


def check_workspace(root, limit):
    name = lambda c: c.relative_to(root).as_posix() if c != root else c.name
    return {name(c): check_crate(c, limit) for c in members(root)}


def report(root, results, limit, max_long):
    rel = lambda p: str(p.relative_to(root))
    for name, r in results.items():
        head = f"structure-check: {name}: {len(r['files'])} files, {len(r['edges'])} imports"
        circles = r["circles"]
        print(head + (f", {len(circles)} circle(s)" if circles else ", no circle"))
        for comp in circles:
            kin = [r["paths"][f] for f in comp]
            family = len(comp) == 2 and (kin[0] == kin[1][:-1] or kin[1] == kin[0][:-1])
            print(f"  circle of {len(comp)} files" + (" (a module and its own child)" if family else "") + ":")
            for f in comp:
                into = sorted(rel(b) for a, b in r["edges"] if a == f and b in comp)
                print(f"    {rel(f)} -> {', '.join(into)}")
    longs = sorted((f for r in results.values() for f in r["longs"]), key=lambda f: (-f[0], str(f[1])))
    print(f"structure-check: {len(longs)} functions over {limit} lines")
    for lines, file, line, fn in longs:
        print(f"  {rel(file)}:{line} {fn} {lines}")
    failed = any(r["circles"] for r in results.values())
    if max_long is not None and len(longs) > max_long:
        print(f"structure-check: {len(longs)} long functions, more than the {max_long} allowed")
        failed = True
    return 1 if failed else 0


TRICKY = ['"}}"', "'{'", 'r#"} " }"#', "'\\''", '"\\"{"', "b'}'", "'\\u{7d}'", "1; // }",
          "2 /* { /* } */ { */", "{ let r: &'static str = \"{\"; r }"]
BIG_FN = "pub fn big() {\n" + "".join(f"    let s{i} = {TRICKY[i % len(TRICKY)]};\n" for i in range(118)) + "}\n"
FAKE = {
    "clean": {"lib.rs": "mod a;\nmod b;\npub use a::A;\n", "a.rs": "use crate::b::B;\npub struct A(B);\n",
              "b.rs": "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::a::A;\n}\n"
                      "#[cfg(test)]\n#[path = \"b_more.rs\"]\nmod more;\n",
              "b_more.rs": "use crate::a::A;\n"},
    "two": {"lib.rs": "mod a;\nmod b;\n", "a.rs": "pub struct X;\npub fn f() { crate::b::g(); }\n",
            "b.rs": "use crate::a::X;\npub fn g() {}\n"},
    "three": {"lib.rs": "mod a;\nmod b;\nmod c;\npub use c::C;\n", "a.rs": "use crate::b::B;\npub struct A;\n",
              "b.rs": "use crate::C;\npub struct B;\n", "c.rs": "use crate::a::A;\npub struct C;\n"},
    "parent": {"lib.rs": "mod p;\n", "p.rs": "mod q;\npub use q::Q;\npub struct P;\n",
               "p/q.rs": "use super::P;\npub struct Q;\n"},
    "grouped": {"lib.rs": "mod w;\nmod x;\nmod y;\n", "w.rs": "pub struct W;\n", "y.rs": "pub mod z;\npub struct Y;\n",
                "x.rs": "use crate::{\n    w,\n    y::{z::Z, Y},\n};\npub struct X;\n",
                "y/z.rs": "use crate::x::X;\npub struct Z;\n"},
    "family": {"lib.rs": "mod p;\n", "p.rs": "mod q;\nuse q::Q;\npub struct P(Q);\n",
               "p/q.rs": "use super::P;\npub struct Q;\n"},
    "long": {"lib.rs": "mod f;\n", "f.rs": BIG_FN + "fn small() {}\n#[cfg(test)]\nmod tests {\n" + BIG_FN + "}\n"},
}


def verdict(root, results, crates, max_long):
    with contextlib.redirect_stdout(io.StringIO()):
        return report(root, {c: results[c] for c in crates}, 100, max_long)


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "Cargo.toml").write_text(f"[workspace]\nmembers = {sorted(FAKE)!r}\n".replace("'", '"'))
        for crate, files in FAKE.items():
            (root / crate / "Cargo.toml").parent.mkdir()
            (root / crate / "Cargo.toml").write_text(f'[package]\nname = "{crate}"\n')
            for name, body in files.items():
                (root / crate / "src" / name).parent.mkdir(parents=True, exist_ok=True)
                (root / crate / "src" / name).write_text(body)
        res = check_workspace(root, 100)
        names = lambda c: [[str(f.relative_to(root / c / "src")) for f in comp] for comp in res[c]["circles"]]
        checks = [
            ("clean: no circle", names("clean"), []),
            ("clean: test-only file left out", len(res["clean"]["files"]), 3),
            ("two: a.rs <-> b.rs", names("two"), [["a.rs", "b.rs"]]),
            ("three: circle through lib.rs re-export", names("three"), [["a.rs", "b.rs", "c.rs"]]),
            ("parent: super:: and facade pub use", names("parent"), []),
            ("grouped: multi-line use crate::{..}", names("grouped"), [["x.rs", "y/z.rs"]]),
            ("grouped: edges", len(res["grouped"]["edges"]), 4),
            ("family: parent and child using each other", names("family"), [["p/q.rs", "p.rs"]]),
            ("long: one 120-line fn", [(f[0], f[3]) for f in res["long"]["longs"]], [(120, "big")]),
            ("exit 0: no circle", verdict(root, res, ["clean", "parent"], None), 0),
            ("exit 1: a circle", verdict(root, res, ["clean", "two"], None), 1),
            ("exit 1: --max-long-fns 0", verdict(root, res, ["long"], 0), 1),
            ("exit 0: --max-long-fns 1", verdict(root, res, ["long"], 1), 0),
        ]
        failed = [(what, got, want) for what, got, want in checks if got != want]
        for what, got, want in failed:
            print(f"self-test FAILED: {what}: got {got!r}, want {want!r}")
        print(f"self-test: {len(checks) - len(failed)}/{len(checks)} checks passed")
        return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description="Circles of file imports and long functions, per crate.")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--max-fn-lines", type=int, default=100)
    ap.add_argument("--max-long-fns", type=int, default=None)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    root = Path(args.root).resolve()
    return report(root, check_workspace(root, args.max_fn_lines), args.max_fn_lines, args.max_long_fns)


if __name__ == "__main__":
    sys.exit(main())
