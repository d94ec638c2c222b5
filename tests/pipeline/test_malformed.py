"""Each graph in malformed/ fails with the exact line, part (step, input …) and message its first
line announces: `# expect: LINE | CONTEXT | REASON-PREFIX`. Errors found while building (shapes,
dtypes and index ranges the API checks) count too: nothing runs in either case."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyfuel.pipeline import GraphError, build, load_graph

from .conftest import MALFORMED

CASES = sorted(MALFORMED.glob("*.yaml"))


def _expected(path: Path) -> tuple[int, str, str]:
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("# expect:"), f"{path.name} lacks its '# expect:' line"
    line, context, reason = (part.strip() for part in header.split(":", 1)[1].split("|", 2))
    return int(line), context, reason


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 12


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_malformed_graph_names_its_line_and_step(path: Path):
    line, context, reason = _expected(path)
    with pytest.raises(GraphError) as caught:
        build(load_graph(path), write_stores=False)
    err = caught.value
    assert (err.line, err.context) == (line, context), str(err)
    assert err.reason.startswith(reason), str(err)
    assert str(err) == f"{path}:{line}: {context + ': ' if context else ''}{err.reason}"
    if context.startswith("step "):
        assert err.step == context[len("step '"):-1]
    assert "\n" not in str(err)
