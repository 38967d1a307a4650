"""The layout of the library (docs/ARCHITECTURE.md, "Layers"): every import goes down the layers,
packages of one layer do not import each other, nothing in ``owler`` imports the Storm adapters,
and no module imports itself back through others (imports inside functions included). Inside
``owler.warc`` the same between its four packages (format, storage, then crawl and warc2warc)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: lowest first; a name is a top-level module or package of ``owler``
LAYERS = [
    {"constants", "metadata", "wire", "outlinks"},
    {"conf"},
    {"urls", "osclient", "chain", "sched", "prometheus"},
    {"filters", "blacklist", "scheduler", "seeds", "task", "signals"},
    {"frontier"},
    {"status", "urlfrontier"},
    {"fetch", "parse"},
    {"warc", "sitemap"},
    {"run"},
    {"__main__"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "owler":  # "from owler import conf": the module, not the package
                out.add(node.module)
            # "from owler.run import report" imports the module owler.run.report
            for a in node.names:
                if (SRC / node.module.replace(".", "/") / f"{a.name}.py").exists():
                    out.add(f"{node.module}.{a.name}")
    return out


def graph() -> dict[str, set[str]]:
    g = {}
    for path in sorted(SRC.rglob("*.py")):
        name = module_name(path)
        g[name] = {m for m in imports_of(path)
                   if m.split(".")[0] in ("owler", "bolts", "spouts") and m != name}
    return g


def top(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def test_every_owler_package_has_a_layer():
    names = {top(m) for m in graph() if m.startswith("owler.")} - {"__init__"}
    assert names <= set(LAYER_OF), f"no layer for {sorted(names - set(LAYER_OF))}"


def test_imports_go_down_the_layers_only():
    wrong = []
    for mod, deps in graph().items():
        if not mod.startswith("owler."):
            continue
        for dep in deps:
            if not dep.startswith("owler."):
                wrong.append(f"{mod} imports the Storm adapter {dep}")
                continue
            a, b = top(mod), top(dep)
            if a == b or b == "__init__":
                continue
            if LAYER_OF[b] >= LAYER_OF[a]:
                wrong.append(f"{mod} (layer {LAYER_OF[a]}) imports {dep} (layer {LAYER_OF[b]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycle():
    g = graph()
    # a package's __init__ is imported with any of its modules: count that edge too
    for mod in list(g):
        parts = mod.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in g and parent != mod:
                g[mod].add(parent)
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in sorted(g.get(node, ())):
            if dep not in g:
                continue
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                # a package's __init__ re-exporting its own modules is not a cycle between modules
                if not all(c.startswith(cycle[0] + ".") or c == cycle[0] for c in cycle):
                    cycles.append(" -> ".join(cycle))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


#: the packages of ``owler.warc``, lowest first (docs/ARCHITECTURE.md, "Inside warc/"): the record
#: format, where files go, and the two pipelines that write WARC files, which never import each other
WARC_LAYERS = [{"format"}, {"storage"}, {"crawl", "warc2warc"}]
WARC_LAYER_OF = {name: i for i, names in enumerate(WARC_LAYERS) for name in names}


def warc_package(module: str) -> str | None:
    """``owler.warc.format.reader`` → ``format``; None for ``owler.warc`` itself."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else None


def warc_layer_violations(g: dict[str, set[str]]) -> list[str]:
    """The imports inside ``owler.warc`` that break its layers. A module of one of its packages
    never imports ``owler.warc`` itself: that package re-exports the writer (storage), which
    ``format`` must not reach."""
    wrong = []
    for mod, deps in g.items():
        if not mod.startswith("owler.warc."):
            continue
        a = warc_package(mod)
        if a not in WARC_LAYER_OF:
            wrong.append(f"{mod} is in none of the packages of owler.warc")
            continue
        for dep in deps:
            if dep == "owler.warc":
                wrong.append(f"{mod} imports the package owler.warc (import the module instead)")
                continue
            if not dep.startswith("owler.warc."):
                continue
            b = warc_package(dep)
            if b == a:
                continue
            if b not in WARC_LAYER_OF:
                wrong.append(f"{mod} imports {dep}, in none of the packages of owler.warc")
            elif WARC_LAYER_OF[b] >= WARC_LAYER_OF[a]:
                wrong.append(f"{mod} ({a}) imports {dep} ({b})")
    return sorted(wrong)


def test_warc_packages_import_down_only():
    """format ← storage ← crawl, warc2warc: format imports neither, storage only format, crawl
    and warc2warc both and never each other."""
    wrong = warc_layer_violations(graph())
    assert not wrong, "\n".join(wrong)


def test_every_warc_module_is_in_one_of_its_packages():
    warc = SRC / "owler" / "warc"
    flat = sorted(p.name for p in warc.glob("*.py") if p.name != "__init__.py")
    assert not flat, f"modules directly in owler/warc: {flat}"
    packages = {p.name for p in warc.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(WARC_LAYER_OF), packages ^ set(WARC_LAYER_OF)


def test_the_warc_layer_check_sees_each_forbidden_import():
    g = {"owler.warc.format.reader": {"owler.warc.storage.files"},
         "owler.warc.storage.files": {"owler.warc.format.serialize", "owler.warc.crawl.archiver"},
         "owler.warc.crawl.archiver": {"owler.warc.warc2warc.output", "owler.warc.storage.files"},
         "owler.warc.warc2warc.output": {"owler.warc.crawl", "owler.warc.format.reader"},
         "owler.warc.format.serialize": {"owler.warc"},
         "owler.warc.copy": set()}
    assert warc_layer_violations(g) == [
        "owler.warc.copy is in none of the packages of owler.warc",
        "owler.warc.crawl.archiver (crawl) imports owler.warc.warc2warc.output (warc2warc)",
        "owler.warc.format.reader (format) imports owler.warc.storage.files (storage)",
        "owler.warc.format.serialize imports the package owler.warc (import the module instead)",
        "owler.warc.storage.files (storage) imports owler.warc.crawl.archiver (crawl)",
        "owler.warc.warc2warc.output (warc2warc) imports owler.warc.crawl (crawl)",
    ]


def test_the_fetch_engine_needs_no_filters_blacklists_or_sitemap_parser():
    g = graph()
    seen, todo = set(), ["owler.fetch.engine"]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        todo.extend(g.get(mod, ()))
    assert not {m for m in seen if m.startswith(("owler.filters", "owler.blacklist",
                                                "owler.sitemap"))}, sorted(seen)


#: a configuration or metadata key as written in code: dotted lower-case words, or one of the
#: StormCrawler metadata names without a dot
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_*-]+)+$|^(isSitemap|isDiscoveredOnSitemap|"
                  r"foundSitemap|signature|depth|anchors|_redirTo|signatureOld|fetchInterval|"
                  r"discoveryDate|lastProcessedDate)$")
_NOT_KEYS = re.compile(r"\.(py|json|yaml|txt|gz|log|sqlite|xml|jar|class|pid|open|warc)$|"
                       r"^(owler|org|eu|com|bolts|spouts|tests)\.")


def key_literals(path: Path) -> set[str]:
    """The key-like string literals of a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and _KEY.match(node.value) and not _NOT_KEYS.search(node.value)}


def test_every_key_name_has_one_home():
    """A key written in two modules is a key whose spelling can drift: it lives in constants.py
    (or, read by one module only, in that module)."""
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")) + sorted((SRC.parent / "topologies").glob("*.py")):
        for key in key_literals(path):
            where.setdefault(key, []).append(str(path.relative_to(SRC.parent)))
    twice = {k: v for k, v in where.items() if len(v) > 1}
    assert not twice, "\n".join(f"{k}: {v}" for k, v in sorted(twice.items()))
