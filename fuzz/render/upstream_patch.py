"""The fixed pass as a patch TVM can merge: a unified diff against TVM's own files (for
TVM alone: it imports TVM).

:func:`upstream_patch` writes two file diffs, with the paths they have in TVM's repository:

- ``python/tvm/relax/transform/fold_batch_norm_to_conv2d_for_inference.py``, upstream's
  pass as the installed TVM ships it, replaced by :mod:`fuzz.backends.tvm.fold_batchnorm` under TVM's
  license header (the file is kept in TVM's code style: ``make lint`` checks it with TVM's
  ruff settings, ``tools/tvm-ruff.toml``);
- ``tests/python/relax/test_transform_fold_batch_norm_to_conv2d.py``, TVM's test of the pass
  (a copy in ``fuzz/backends/tvm/upstream/``), with ``training=False`` added to the batch_norm its
  existing tests build, and one test per corpus entry appended in TVM's test style: the
  entry's module as a TVMScript ``Before``, what the fold must make of it as ``Expected``
  (the fixed pass's output, or ``Before`` itself where a correct fold keeps the
  batch_norm), compared with ``tvm.ir.assert_structural_equal``.

Why the existing test changes: it builds its batch_norm with the op's default,
``training=True``, compares the folded program with ``DecomposeOpsForInference`` of the
unfolded one (which ignores ``training``) and asserts that no batch_norm is left. A
training-mode batch_norm normalises with the statistics of the batch, so folding it with
the moving statistics changes the result (``LegalizeOps`` lowers it so); a correct pass
keeps it, and fails that test as written. The test means an inference-mode batch_norm.

Key idea: the ``Expected`` modules are written from the modules themselves, constants
inline, and parsed back before they are written, so a test can only say what the pass
really does; the tests fail on upstream's pass for every defect class the corpus holds.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.backends.tvm.build import build_module
from fuzz.backends.tvm.compat import Constant, constant_value, structural_equal
from fuzz.backends.tvm.passes import resolve_pass
from fuzz.errors import BnfuzzError
from fuzz.model.attributes import ATTRIBUTE_DEFAULTS, classify
from fuzz.model.decline_reasons import block_reasons
from fuzz.render.causes import cause_of
from fuzz.store.corpus import Entry, load_entry

__all__ = [
    "PASS_PATH",
    "TEST_PATH",
    "TVM_RUFF_CONFIG",
    "TVM_TEST_FILE",
    "GeneratedTest",
    "PatchError",
    "generated_tests",
    "patched_pass_source",
    "patched_test_source",
    "tvm_formatted",
    "tvmscript",
    "upstream_patch",
    "upstream_source",
]

#: Where the pass and its test live in TVM's repository.
PASS_PATH = "python/tvm/relax/transform/fold_batch_norm_to_conv2d_for_inference.py"
TEST_PATH = "tests/python/relax/test_transform_fold_batch_norm_to_conv2d.py"
#: The installed pass (the pinned release's file) and the fixed one.
UPSTREAM_MODULE = "tvm.relax.transform.fold_batch_norm_to_conv2d_for_inference"
#: Where the TVM backend keeps the fixed pass and copies of TVM's files.
TVM_BACKEND = Path(__file__).resolve().parent.parent / "backends" / "tvm"
FIXED_FILE = TVM_BACKEND / "fold_batchnorm.py"
#: TVM's test of the pass, as in TVM's repository at commit 5d4dc87 (whose pass file is the
#: one apache-tvm 0.27.0.post1 ships).
TVM_TEST_FILE = TVM_BACKEND / "upstream" / "test_transform_fold_batch_norm_to_conv2d.py.orig"
CORPUS = Path(__file__).resolve().parents[2] / "corpus"

#: The line of TVM's existing test that builds its batch_norm, and what it becomes.
_OLD_BN = "R.nn.batch_norm(output, gamma, beta, mean, variance, axis=1, epsilon=1e-5)[0]"
_NEW_BN = (
    "# inference mode: a training-mode batch_norm (the default) must not be folded\n"
    "                    R.nn.batch_norm(\n"
    "                        output, gamma, beta, mean, variance, axis=1, epsilon=1e-5, training=False\n"
    "                    )[0]"
)
_MAIN = 'if __name__ == "__main__":'


class PatchError(BnfuzzError, RuntimeError):
    """The patch cannot be made here (TVM's files are not what it expects)."""


def _license_header() -> str:
    """The Apache license header of upstream's pass file, comments up to the first code."""
    spec = importlib.util.find_spec(UPSTREAM_MODULE)
    if spec is None or spec.origin is None:
        raise PatchError(f"cannot find {UPSTREAM_MODULE} in the installed TVM")
    lines = Path(spec.origin).read_text().splitlines(keepends=True)
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line)
    return "".join(header)


def upstream_source() -> str:
    """Upstream's pass file as the installed TVM ships it."""
    spec = importlib.util.find_spec(UPSTREAM_MODULE)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).read_text()


def patched_pass_source() -> str:
    """The fixed pass as TVM's file: its license header, then :mod:`fuzz.backends.tvm.fold_batchnorm`."""
    return _license_header() + FIXED_FILE.read_text()


# ---------------------------------------------------------------------------
# TVM-style tests, one per corpus entry


@dataclass(frozen=True)
class GeneratedTest:
    """One generated test: its name, what it checks, and the two modules as TVMScript."""

    name: str
    doc: str
    before: str
    expected: str | None  # None: the fold must leave ``Before`` as it is


def _literal(value: float) -> str:
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(float(value))


def _constant(array: np.ndarray[Any, Any]) -> str:
    """``array`` as a TVMScript constant, its values exact."""
    dtype = str(array.dtype)
    values = ", ".join(_literal(v) for v in array.astype(np.float64).ravel())
    as_dtype = "ml_dtypes.bfloat16" if dtype == "bfloat16" else f'"{dtype}"'
    shape = tuple(int(d) for d in array.shape)
    # the dtype again for R.const, which would make a float64 array float32 without it
    return f'R.const(np.array([{values}], dtype={as_dtype}).reshape({shape}), "{dtype}")'


def _constants(mod: Any) -> list[Any]:
    """The module's constants in the order TVMScript's printer numbers them (first use)."""
    from tvm import relax

    found: list[Any] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, Constant) and not any(expr.same_as(c) for c in found):
            found.append(expr)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


#: How TVMScript's printer names a constant it leaves out: ``metadata["KIND"][INDEX]``
#: (a format of the printer's output, which is what is parsed here).
_METADATA = re.compile(r'metadata\["[^"]+"\]\[(\d+)\]')


def tvmscript(mod: Any, name: str) -> str:
    """``mod`` as a TVMScript class called ``name``, every constant inline; parsed back and
    compared with ``mod`` before it is returned."""
    import tvm

    values = [constant_value(c) for c in _constants(mod)]
    text = mod.script()
    body = text[text.index("@I.ir_module") :]
    body = body.split("\n# Metadata omitted", 1)[0].rstrip() + "\n"  # the printer's footer
    body = body.replace("class Module:", f"class {name}:", 1)
    body = _METADATA.sub(lambda m: _constant(values[int(m.group(1))]), body)
    import ml_dtypes

    parsed = tvm.script.from_source(
        body, extra_vars={"np": np, "ml_dtypes": ml_dtypes, "I": tvm.script.ir, "R": tvm.script.relax}
    )
    tvm.ir.assert_structural_equal(parsed, mod, map_free_vars=True)
    return body


def _test_name(entry: Entry, shared: set[str], taken: set[str]) -> str:
    """``test_<cause>`` (with the entry's attributes where several entries share the cause),
    or ``test_keeps_batch_norm_<reason>`` for a decline."""
    if entry.declined:
        reasons = sorted({d.reason.name.lower() for block in block_reasons(entry.case) for d in block})
        base = "test_keeps_batch_norm_" + "_".join(reasons)
    else:
        cause = cause_of(entry)
        key = cause.key if cause is not None else entry.symptom_name
        base = "test_" + key
        if key in shared:
            attrs = classify(entry.case)
            base += "".join(f"_{k}_{v}" for k, v in attrs.items() if ATTRIBUTE_DEFAULTS[k] != v)
    name = re.sub(r"[^a-z0-9_]", "_", base.lower())  # a Python identifier
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _doc(entry: Entry) -> str:
    reasons = "; ".join(dict.fromkeys(str(d) for block in block_reasons(entry.case) for d in block))
    if entry.declined:
        return f"A correct fold keeps this batch_norm: {reasons}."
    cause = cause_of(entry)
    attrs = ", ".join(f"{k}={v}" for k, v in classify(entry.case).items() if ATTRIBUTE_DEFAULTS[k] != v)
    what = cause.headline if cause is not None else f"showed {entry.symptom_name}"
    keep = f"; a correct fold keeps it: {reasons}" if reasons else ""
    return f"Before this fix the pass {what}" + (f" ({attrs})" if attrs else "") + keep + "."


def generated_tests(entries: Sequence[Entry] | None = None) -> list[GeneratedTest]:
    """A test per entry found against TVM's pass alone (default: the shipped corpus's upstream
    defect classes and its declines), the expected module being the fixed pass's output."""
    if entries is None:
        paths = sorted(CORPUS.glob("*.json")) + sorted((CORPUS / "declines").glob("*.json"))
        entries = [load_entry(p) for p in paths]
    fixed = resolve_pass("fixed")
    entries = [e for e in entries if e.pipeline is None and not e.isolated]
    keys = [cause.key for cause in map(cause_of, entries) if cause is not None]
    shared = {key for key in keys if keys.count(key) > 1}
    cases: list[GeneratedTest] = []
    taken: set[str] = set()
    for entry in entries:
        before = build_module(entry.case)
        after = fixed()(before)
        unchanged = structural_equal(after, before)
        cases.append(
            GeneratedTest(
                name=_test_name(entry, shared, taken),
                doc=_doc(entry),
                before=tvmscript(before, "Before"),
                expected=None if unchanged else tvmscript(after, "Expected"),
            )
        )
    return cases


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _test_function(case: GeneratedTest) -> str:
    doc = textwrap.wrap(case.doc, width=88)
    doc[0] = '"""' + doc[0]
    doc[-1] += '"""'
    lines = [
        f"def {case.name}():",
        *(f"    {line}" for line in doc),
        "",
        _indent(case.before, 4).rstrip("\n"),
        "",
    ]
    if case.expected is None:
        lines += [
            "    after = relax.transform.FoldBatchnormToConv2D()(Before)",
            "    tvm.ir.assert_structural_equal(after, Before)",
        ]
    else:
        lines += [
            _indent(case.expected, 4).rstrip("\n"),
            "",
            "    after = relax.transform.FoldBatchnormToConv2D()(Before)",
            "    tvm.ir.assert_structural_equal(after, Expected)",
        ]
    return "\n".join(lines) + "\n"


def patched_test_source(cases: Sequence[GeneratedTest] | None = None) -> str:
    """TVM's test of the pass with ``training=False`` in its batch_norm and the generated
    tests appended before its ``__main__`` block."""
    original = TVM_TEST_FILE.read_text()
    if original.count(_OLD_BN) != 1 or original.count(_MAIN) != 1:
        raise PatchError(f"{TVM_TEST_FILE} is not the test file this patch is written for")
    source = original.replace(_OLD_BN, _NEW_BN)
    if "import ml_dtypes" not in source:
        source = source.replace("import numpy as np\n", "import ml_dtypes\nimport numpy as np\n", 1)
    tests = "\n\n".join(_test_function(c) for c in (generated_tests() if cases is None else cases))
    head, tail = source.split(_MAIN, 1)  # TVM's test file: tests go before its __main__ block
    return head.rstrip("\n") + "\n\n\n" + tests + "\n\n" + _MAIN + tail


#: TVM's ruff settings, for the generated tests (and ``make lint`` of the fixed pass).
TVM_RUFF_CONFIG = TVM_BACKEND / "upstream" / "tvm-ruff.toml"


def tvm_formatted(source: str, name: str = "test.py") -> str:
    """``source`` formatted as TVM formats its Python (ruff with TVM's settings); ruff comes
    with the test extras (``make setup``)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        raise PatchError("writing TVM's code style needs ruff: install it (`make setup` does)")
    args = ["--config", str(TVM_RUFF_CONFIG), "--stdin-filename", name, "-"]
    fixed = subprocess.run(
        [ruff, "check", "--fix-only", "--select", "I", *args], input=source, capture_output=True, text=True
    )
    formatted = subprocess.run([ruff, "format", *args], input=fixed.stdout, capture_output=True, text=True)
    if fixed.returncode != 0 or formatted.returncode != 0:
        raise PatchError(f"ruff could not format the generated {name}: {fixed.stderr}{formatted.stderr}")
    return formatted.stdout


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(lines)


def upstream_patch() -> str:
    """The unified diff of both files, to apply at the root of TVM's repository."""
    tests = tvm_formatted(patched_test_source(), Path(TEST_PATH).name)
    return _diff(PASS_PATH, upstream_source(), patched_pass_source()) + _diff(
        TEST_PATH, TVM_TEST_FILE.read_text(), tests
    )
