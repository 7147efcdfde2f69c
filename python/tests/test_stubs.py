"""The type stubs describe what the extension really has: every public name
(class or function) and method in `_warmarena.pyi` exists at run time and
vice versa, and every public callable has a docstring."""

import ast
import inspect
from pathlib import Path

import warmarena as wa
from warmarena import _warmarena

STUB = Path(wa.__file__).with_name("_warmarena.pyi")
TYPING_ONLY = {"OsStats", "ArenaStats", "Faults", "NetConfig", "GraphSpecDict",
               "GraphDescription", "_Arena", "NumpyScopeStats"}


def stub_classes():
    tree = ast.parse(STUB.read_text())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {n.name for n in node.body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            classes[node.name] = (members, bases)
    return classes


def stub_functions():
    tree = ast.parse(STUB.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_stub_names_match_the_module():
    classes = stub_classes()
    runtime = {n for n in dir(_warmarena) if not n.startswith("_")}
    assert (set(classes) - TYPING_ONLY) | stub_functions() == runtime
    assert set(wa.__all__) == runtime


def test_stub_functions_exist_and_are_documented():
    for name in stub_functions():
        f = getattr(_warmarena, name)
        assert callable(f) and not isinstance(f, type), name
        assert inspect.getdoc(f), f"{name} has no docstring"


def test_stub_members_exist_and_are_documented():
    classes = stub_classes()
    for name, (members, bases) in classes.items():
        if name in TYPING_ONLY:
            continue
        for base in bases:
            if base == "_Arena":
                members |= classes[base][0]
        cls = getattr(_warmarena, name)
        assert cls.__doc__, name
        inherited = set(dir(BaseException)) if issubclass(cls, BaseException) else set()
        public = {m for m in dir(cls) if not m.startswith("_") and m not in inherited} | (
            {m for m in vars(cls) if m.startswith(("__dlpack", "__enter__", "__exit__"))})
        declared = {m for m in members if m != "__init__"}
        assert declared == public, (name, declared ^ public)
        for m in public:
            assert inspect.getdoc(getattr(cls, m)), f"{name}.{m} has no docstring"
