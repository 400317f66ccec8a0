"""The transformations name ops by class, never by type-name string: a typo or a missing class
then fails when the module is imported, instead of quietly matching nothing."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import netpass

PACKAGE = Path(netpass.__file__).parent
# Where ops are matched, built and tested for their kind (the legacy stage works on layer types,
# which are names, not op classes).
CHECKED = ["ngraph_passes", "prepost", "passes", "pattern"]
BUILDERS = {"make", "wrap_type", "optional", "op_types", "is_op"}


def _is_name_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_name_literal(e) for e in node.elts)
    return False


def _op_names(node: ast.AST) -> bool:
    """A literal of op type names (capitalised: element type names such as "f32" are not)."""
    return _is_name_literal(node) and all(
        c.value[:1].isupper() for c in ast.walk(node) if isinstance(c, ast.Constant))


def _names_types(assign: ast.Assign) -> bool:
    """``X_TYPES = ("Concat", ...)``, alone or in a tuple assignment."""
    for target in assign.targets:
        pairs = [(target, assign.value)]
        if isinstance(target, ast.Tuple) and isinstance(assign.value, ast.Tuple):
            pairs = list(zip(target.elts, assign.value.elts))
        if any(isinstance(t, ast.Name) and t.id.endswith("TYPES") and _op_names(v)
               for t, v in pairs):
            return True
    return False


def string_op_references(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comparison of ``.type_name`` with a string, each op builder called
    with a type name, and each ``*TYPES`` table of type names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "type_name" for s in sides) and \
                    any(_is_name_literal(s) for s in sides):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Assign) and _names_types(node):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", None)
            if name in BUILDERS and node.args and _is_name_literal(node.args[0]):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_check_finds_string_references():
    src = ('a = n.type_name == "Relu"\nb = m.type_name in ("Add", "Sub")\n'
           'c = make("Reshape", [x])\nd = wrap_type(["Relu"])\ne = isinstance(n, Relu)\n'
           'f = n.type_name == other.type_name\nTYPES = ("Concat",)\n'
           'TYPES, INDICES = ("Split", "VariadicSplit"), (0,)\nTYPES = (Concat,)\n')
    assert [line for line, _ in string_op_references(src)] == [1, 2, 3, 4, 7, 8]


@pytest.mark.parametrize("area", CHECKED)
def test_no_op_named_by_string(area):
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {text}"
                 for path in sorted((PACKAGE / area).rglob("*.py"))
                 for line, text in string_op_references(path.read_text())]
    assert not offenders, "ops named by type-name string:\n" + "\n".join(offenders)
