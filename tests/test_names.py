"""traceattr.attribution.names: one name_key per distinct op identity, numbered in sorted order (nulls last),
and each identity's display names resolved once."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl

from traceattr.attribution.names import _name_keys_joined, name_keys
from traceattr.trace import schema as S

STRINGS = pl.DataFrame({"id": [0, 1, 2], "value": ["attn_kernel<64>", "attn", "_Z4attnv"]})


def trace(rows: list[tuple]) -> SimpleNamespace:
    """(kind, name_id, short_name_id, mangled_name_id, copy_kind, graph_id) per op."""
    ident = ("kind", "name_id", "short_name_id", "mangled_name_id", "copy_kind", "graph_id")
    ops = pl.DataFrame(rows, schema={"kind": S.OpKind, **dict.fromkeys(ident[1:], pl.Int32)}, orient="row")
    return SimpleNamespace(gpu_ops=ops.with_row_index("op_id"), strings=STRINGS)


KERNEL = ("kernel", 0, 1, 2, None, None)
OPS = [KERNEL, ("memcpy", None, None, None, 1, None), KERNEL, ("memset", None, None, None, None, None),
       ("memcpy", None, None, None, 2, None), ("graph", None, None, None, None, 7), ("memcpy", None, None, None, 1, None)]  # fmt: skip


def test_ops_of_one_identity_share_a_key_and_names_resolve() -> None:
    keys, names = name_keys(trace(OPS))  # type: ignore[arg-type]
    key = keys["name_key"].to_list()
    assert key[0] == key[2] and key[1] == key[6] and len(set(key)) == 5  # 7 ops, 5 identities
    assert names["name_key"].to_list() == list(range(5))
    by_key = {r["name_key"]: r for r in names.iter_rows(named=True)}
    assert by_key[key[0]]["name"] == "attn_kernel<64>" and by_key[key[0]]["short_name"] == "attn"
    assert by_key[key[0]]["mangled_name"] == "_Z4attnv"
    assert [by_key[key[i]]["name"] for i in (1, 3, 4, 5)] == [
        "[CUDA memcpy Host-to-Device]", "[CUDA memset]", "[CUDA memcpy Device-to-Host]", "[CUDA graph 7]",
    ]  # fmt: skip


def test_the_packed_and_the_joined_keys_give_each_op_the_same_names() -> None:
    """The packed keys and the hash-joined fallback (identities too varied to pack) name every op alike.

    (Their numbering differs: packing makes the last identity column the most significant digit, the join
    sorts by the first. Nothing may depend on which identity is key 0.)"""
    t = trace(OPS)

    def names_per_op(keys: pl.DataFrame, names: pl.DataFrame) -> list[tuple]:
        return keys.join(names, on="name_key", maintain_order="left").drop("op_id", "name_key").rows()

    packed, joined = names_per_op(*name_keys(t)), names_per_op(*_name_keys_joined(t))  # type: ignore[arg-type]
    assert packed == joined and len(set(packed)) == 5


def test_one_identity_is_key_zero() -> None:
    keys, names = name_keys(trace([KERNEL] * 3))  # type: ignore[arg-type]
    assert keys["name_key"].to_list() == [0, 0, 0] and names.height == 1
