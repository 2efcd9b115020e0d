"""Every function of the copilot's package stays under a cyclomatic complexity of 25 (radon).

A function past that holds several decisions a reader must keep apart at
once (``_compact`` reached 32 before it was split into its dict, list and
shared-part steps). radon is pinned in requirements-dev.txt.
"""

from __future__ import annotations

import pathlib

from radon.complexity import cc_visit

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "hybridhpc_copilot"
LIMIT = 25


def _sources() -> list[pathlib.Path]:
    # _vendor is the collection's plugins/module_utils, copied by tools/vendor.sh (never committed):
    # measured at its source, not here.
    return sorted(path for path in PACKAGE.rglob("*.py") if "_vendor" not in path.relative_to(PACKAGE).parts)


def _functions(blocks):
    """Every function and method radon measured, nested ones too. radon lists each method beside its class
    (whose own score is only its methods' mean), and a nested function under the one that holds it."""
    for block in blocks:
        if not hasattr(block, "methods"):
            yield block
            yield from _functions(block.closures)


def test_every_function_of_the_copilot_stays_under_a_complexity_of_25():
    sources = _sources()
    assert len(sources) > 10 and PACKAGE.joinpath("core.py") in sources
    over = ["%s:%d %s (%d)" % (path.name, function.lineno, function.fullname, function.complexity)
            for path in sources for function in _functions(cc_visit(path.read_text())) if function.complexity >= LIMIT]
    assert not over, "split these (cyclomatic complexity %d or more): %s" % (LIMIT, ", ".join(over))
