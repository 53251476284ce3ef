"""One ``name_key`` per distinct op identity (kind, names, copy kind, graph), and its display names."""

from __future__ import annotations

import polars as pl

from traceattr.core.keys import gather_by_key
from traceattr.trace import schema as S
from traceattr.trace.loader import Trace


def name_keys(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give each distinct op identity a ``name_key`` and resolve its names once.

    Keys number the distinct identities in their sorted order (nulls last). Each identity column is
    replaced by its value's rank among the column's few distinct values, and the ranks are packed into
    one integer per op (mixed radix: packed order is the sorted order), so the distinct identities are
    the distinct integers: no hash of six columns over millions of ops, no join back to the ops.
    """
    gpu_ops = trace.gpu_ops
    levels, digits, radix = [], [], 1
    for col in _IDENT:
        values = gpu_ops[col]
        level = values.unique().drop_nulls().sort()  # a handful of names, kinds, graphs: a small hash
        nulls = values.null_count()
        if level.len() + (nulls > 0) > 1:  # else one rank for all (an unused column, one kind): digit 0
            # an Enum sorts in category order, which its physical codes follow: ranks from the codes
            ranks = level.to_physical().search_sorted(values.to_physical()).cast(pl.Int64)
            digits.append((ranks.set(values.is_null(), level.len()) if nulls else ranks) * radix)  # null: last
        levels.append((pl.concat([level, pl.Series([None], dtype=level.dtype)]), radix))
        radix *= level.len() + 1
        if radix >= 1 << 62:
            return _name_keys_joined(trace)
    packed = (
        pl.DataFrame(digits).select(pl.sum_horizontal(pl.all())).to_series()
        if digits
        else pl.zeros(gpu_ops.height, dtype=pl.Int64, eager=True)
    )
    distinct = packed.unique().sort()
    names = (
        pl.DataFrame(
            [
                level.gather((distinct // step) % level.len()).alias(col)
                for col, (level, step) in zip(_IDENT, levels, strict=True)
            ]
        )
        .with_row_index("name_key")
        .with_columns(pl.col("name_key").cast(pl.Int32))
    )
    keys = gpu_ops.select("op_id").hstack([distinct.search_sorted(packed).cast(pl.Int32).alias("name_key")])
    return keys, _resolve_names(names, trace.strings)


_IDENT = ("kind", "name_id", "short_name_id", "mangled_name_id", "copy_kind", "graph_id")


def _name_keys_joined(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """name_keys by a hash of the identity columns: for identities too varied to pack in one integer."""
    gpu_ops, ident = trace.gpu_ops, list(_IDENT)
    names = gpu_ops.select(ident).unique().sort(ident, nulls_last=True).with_row_index("name_key")
    names = names.with_columns(pl.col("name_key").cast(pl.Int32))
    keyed = gpu_ops.select("op_id", *ident).join(
        names.select("name_key", *ident), on=ident, how="left", nulls_equal=True, maintain_order="left"
    )
    return keyed.select("op_id", "name_key"), _resolve_names(names, trace.strings)


def _resolve_names(names: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """(name_key, kind, name, short_name, mangled_name) of each identity: its StringIds values looked up."""
    names = names.hstack(
        [
            gather_by_key(strings["id"], strings["value"], names[col]).alias(out)
            for col, out in (("name_id", "name"), ("short_name_id", "short_name"), ("mangled_name_id", "mangled_name"))
        ]
    )
    labels = pl.DataFrame(
        {"copy_kind": list(S.MEMCPY_LABELS), "_label": list(S.MEMCPY_LABELS.values())},
        schema={"copy_kind": pl.Int32, "_label": pl.String},
    )
    names = names.join(labels, on="copy_kind", how="left").with_columns(
        pl.when(pl.col("kind") == "memcpy")
        .then(pl.lit("[CUDA memcpy ") + pl.col("_label").fill_null("Unknown") + pl.lit("]"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("[CUDA memset]"))
        .when(pl.col("kind") == "graph")
        .then(pl.lit("[CUDA graph ") + pl.col("graph_id").cast(pl.String).fill_null("?") + pl.lit("]"))
        .otherwise(pl.col("name"))
        .alias("name")
    )
    return names.select("name_key", "kind", "name", "short_name", "mangled_name")
