"""Rule 4 of docs/architecture.md: a builder reads the validated blocks, with no class that only copies their fields.

What a copy class looked like before issue 33 (ServingInput, AlertsInput, ...): a constructor called with five or more
keyword arguments, most of them an attribute read off the calling function's parameters
(``ServingInput(namespace=serving.namespace, model_id=serving.model.id, ...)``). The scan finds that shape in
``components/``; handing the block itself (``ServingArgs(serving=serving, ...)``) passes.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.conftest import PROJECT_ROOT

MIN_COPIED = 5  # fewer is a call that reads a few settings, not a copy of a block
COPIED_SHARE = 0.6  # ServingInput copied 29 of its 40 fields plainly, the rest through a function


def _reads_a_parameter(node: ast.expr, parameters: set[str]) -> bool:
    if not isinstance(node, ast.Attribute):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in parameters


def field_copies(source: str, filename: str) -> list[str]:
    """Each constructor call of ``source`` that copies at least MIN_COPIED fields off its function's parameters."""
    found = []
    for function in ast.walk(ast.parse(source, filename)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
        for call in ast.walk(function):
            if not isinstance(call, ast.Call) or not ast.unparse(call.func).split(".")[-1][:1].isupper():
                continue  # a function call passes settings on; a class built from them holds a copy
            copied = [k.arg for k in call.keywords if _reads_a_parameter(k.value, parameters)]
            if len(copied) >= MIN_COPIED and len(copied) >= COPIED_SHARE * len(call.keywords):
                found.append(f"{filename}:{call.lineno} {function.name}: {ast.unparse(call.func)}({', '.join(copied)})")
    return found


def test_no_component_builds_a_class_that_copies_a_blocks_fields():
    copies = []
    for path in sorted((PROJECT_ROOT / "components").rglob("*.py")):
        copies += field_copies(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    assert not copies, "hand the block itself to the builder instead of copying its fields:\n" + "\n".join(copies)


def test_a_copy_class_is_found_and_handing_the_block_over_is_not():
    copy = textwrap.dedent("""
        def serving_input(serving, tpu):
            return ServingInput(namespace=serving.namespace, model_id=serving.model.id, image=serving.image,
                                shape=tpu.shape, replicas=serving.decode.replicas, extra=1)
        """)
    handed_over = textwrap.dedent("""
        def args(serving, tpu, provider):
            return ServingArgs(serving=serving, tpu=tpu, provider=provider, namespace=serving.namespace)
        """)
    assert len(field_copies(copy, "copy.py")) == 1
    assert field_copies(handed_over, "handed_over.py") == []


def test_the_scan_reads_every_component_module():
    # a scan that silently read nothing would pass the first test
    assert len(list(Path(PROJECT_ROOT / "components").rglob("*.py"))) > 20
