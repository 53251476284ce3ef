"""The dispatch-table reader: the H200 table loads into typed records; every mutation names its field and value."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from traceattr.runtime.dispatcher import TableModeRefused, family_for
from traceattr.runtime.table import (
    DispatchTableError,
    FamilyKey,
    FamilyTable,
    Segment,
    parse_table,
    read_table,
    table_doc,
)

H200 = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "h200_27shapes_graphs_dispatch.json"
Q8 = FamilyKey(q=8, heads=16, batch=1)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return json.loads(H200.read_text(encoding="utf-8"))


def test_the_h200_graphs_table_loads(doc: dict[str, Any]) -> None:
    table = read_table(H200)
    assert table.mode == "unknown"  # the document does not say; its README does
    assert [f.family for f in table.families] == ["q1_ctx*", "q4_ctx*", "q8_ctx*"]
    q8 = table.get(Q8)
    assert q8.key == FamilyKey(8, 16, 1, "bf16", 64, "uniform", 1)
    assert q8.segments == (Segment(None, 385048, "fa3"), Segment(385048, None, "flashmla"))
    assert q8.arms == ("fa3", "flashmla")
    assert q8.measured_ctx == (8000, 16000, 32000, 64000, 131000, 200000, 262000, 512000, 900000)
    assert (q8.arm_for(385047), q8.arm_for(385048), q8.arm_for(1), q8.arm_for(10**7)) == (
        "fa3",
        "flashmla",
        "fa3",
        "flashmla",
    )
    assert table.get(FamilyKey(1, 16, 1)).segments == (Segment(None, None, "fa3"),)
    assert parse_table(doc, mode="graphs").mode == "graphs"


def test_lookup_agrees_with_the_reference_reader(doc: dict[str, Any]) -> None:
    pytest.importorskip("polars")
    from traceattr.present.dispatch import backend_for

    q8 = read_table(H200).get(Q8)
    for ctx in (8000, 200_000, 385_047, 385_048, 385_049, 512_000, 900_000):
        assert q8.arm_for(ctx) == backend_for(doc, f"q8_ctx{ctx}")


def _mutate(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()
MUTATIONS = [
    (("schema",), "traceattr.dispatch/1", "schema", "'traceattr.dispatch/1'"),
    (("families",), {"q8": 1}, "families", "{'q8': 1}"),
    (("families", 2, "q"), "8", "families[2].q", "'8'"),
    (("families", 2, "heads"), 0, "families[2].heads", "0"),
    (("families", 2, "batch"), _DELETE, "families[2].batch", "None"),
    (("families", 2, "batch"), True, "families[2].batch", "True"),
    (("families", 2, "kv_dtype"), "fp4", "families[2].kv_dtype", "'fp4'"),
    (("families", 2, "dispatch"), [], "families[2].dispatch", "[]"),
    (("families", 2, "dispatch"), None, "families[2].dispatch", "None"),
    (("families", 2, "dispatch", 0, "backend"), 3, "families[2].dispatch[0].backend", "3"),
    (("families", 2, "dispatch", 0, "backend"), "fa3 [x]", "families[2].dispatch[0].backend", "'fa3 [x]'"),
    (("families", 2, "dispatch", 1, "ctx_from"), 300000, "families[2].dispatch[1].ctx_from", "300000"),
    (("families", 2, "dispatch", 0, "ctx_from"), 5, "families[2].dispatch[0].ctx_from", "5"),
    (("families", 2, "dispatch", 1, "ctx_to"), 1000000, "families[2].dispatch[1].ctx_to", "1000000"),
    (("families", 2, "dispatch", 0, "ctx_to"), "385048", "families[2].dispatch[0].ctx_to", "'385048'"),
    (("families", 2, "dispatch", 0), "fa3", "families[2].dispatch[0]", "'fa3'"),
    (("families", 1, "q"), 8, "families[2]", "'q8_ctx*'"),  # two families with one key
    (("mode",), "cuda", "mode", "'cuda'"),
]


@pytest.mark.parametrize(("path", "value", "field", "shown"), MUTATIONS, ids=[m[2] + "=" + m[3] for m in MUTATIONS])
def test_a_bad_document_names_the_field_and_the_value(doc: dict[str, Any], path: tuple[Any, ...], value: Any,
                                                     field: str, shown: str) -> None:  # fmt: skip
    with pytest.raises(DispatchTableError) as err:
        parse_table(_mutate(doc, path, value))
    assert err.value.field == field
    assert f"{field} = {shown}" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_not_an_object_and_not_json(tmp_path: Path) -> None:
    with pytest.raises(DispatchTableError, match=r"\$ = \[\]: expected an object"):
        parse_table([])
    bad = tmp_path / "t.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(DispatchTableError, match="not JSON"):
        read_table(bad)


def test_a_key_the_table_lacks_lists_what_it_has() -> None:
    with pytest.raises(DispatchTableError, match=r"no family has this key \(the table has: q1_ctx\*"):
        read_table(H200).get(FamilyKey(8, 16, 4))


def test_modes_stated_inferred_overridden_and_refused(doc: dict[str, Any]) -> None:
    eager = parse_table({**doc, "mode": "eager"})
    assert eager.mode == "eager"
    with pytest.raises(TableModeRefused, match="measured eager, the dispatcher runs graphs"):
        family_for(eager, Q8, mode="graphs")
    assert family_for(eager, Q8, mode="graphs", allow_other_mode=True).key == Q8
    assert family_for(eager, Q8, mode="eager").key == Q8
    with pytest.raises(DispatchTableError, match="the document says eager, the caller says graphs"):
        parse_table({**doc, "mode": "eager"}, mode="graphs")
    tagged = copy.deepcopy(doc)
    for fam in tagged["families"]:
        for seg in fam["dispatch"]:
            seg["backend"] += "[graphs]"
    assert parse_table(tagged).mode == "graphs"
    assert family_for(parse_table(doc), Q8).key == Q8  # unknown loads


def test_a_derived_table_round_trips() -> None:
    fam = FamilyTable(
        "q1_ctx*",
        FamilyKey(1, 16, 1),
        (Segment(None, 50_000, "fa3[splits=4]"), Segment(50_000, None, "fa3")),
        (8000, 900000),
    )
    back = parse_table(json.loads(json.dumps(table_doc("grid", "graphs", [fam]))))
    assert back.mode == "graphs" and back.families == (fam,)
