"""Code lines: lines that hold a token other than a comment, a docstring or whitespace (a notebook's
markdown cells are comments in its jupytext ``.py``). Issue 51's measure of the library's and the
notebooks' size; ``tests/test_layers.py`` holds both to a budget.

    python scripts/code_lines.py tunixkit notebooks/[0-9]*.py   # a total per argument, then all
"""

import ast
import io
import pathlib
import sys
import tokenize

_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}


def code_lines(source: str) -> int:
    """The code lines of one Python source.

    >>> code_lines("def f():\\n    'its docstring'\\n    # a comment\\n\\n    return (\\n        1  # one\\n    )\\n")
    4
    """
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _NOT_CODE:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docstrings)
    return len(lines)


def count(path: str | pathlib.Path) -> int:
    """The code lines of a ``.py`` file, or of every ``.py`` file under a folder."""
    path = pathlib.Path(path)
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return sum(code_lines(f.read_text()) for f in files)


if __name__ == "__main__":
    totals = {arg: count(arg) for arg in sys.argv[1:]}
    for arg, n in totals.items():
        print(f"{n:7,d}  {arg}")
    print(f"{sum(totals.values()):7,d}  in all")
