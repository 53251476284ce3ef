"""Kernel roles from ordered TOML rules (first match wins).

Rules are data: the default file ships in the package
(``traceattr/attribution/kernel_roles.toml``); a user file is tried before it.
Matching is vectorised: name conditions run once per distinct name triple,
range conditions once per distinct range, never once per op in Python.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import polars as pl

from traceattr.core.errors import RulesError
from traceattr.core.keys import rows_at
from traceattr.core.textfile import read_user_text
from traceattr.trace.schema import OP_KINDS

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Role = Literal["attention", "reduce", "schedule", "flush", "copy", "other"]
ROLES: tuple[str, ...] = get_args(Role)
RoleEnum = pl.Enum(list(ROLES))
NAME_LEVELS = ("name", "mangled_name", "short_name")  # tried in this order


@dataclass(frozen=True)
class RoleRule:
    role: str
    family: str
    pattern: str | None  # regex on the op's name; None = any name
    kinds: frozenset[str]  # empty = every kind
    range: str | None  # regex on the innermost range's name; None = any
    origin: str  # "file.toml rule 3", for messages


@dataclass(frozen=True)
class RoleRules:
    rules: tuple[RoleRule, ...]

    @classmethod
    def default(cls) -> RoleRules:
        return cls(_builtin())

    @classmethod
    def load(cls, user_file: str | Path | None = None) -> RoleRules:
        """The built-in rules, preceded by *user_file*'s when one is given."""
        builtin = cls.default().rules
        if user_file is None:
            return cls(builtin)
        path = Path(user_file)
        try:
            text = read_user_text(path)
        except OSError as err:
            raise RulesError(f"{path}: cannot read rules file ({err.strerror})") from None
        except UnicodeDecodeError as err:
            raise RulesError(f"{path}: not UTF-8 text (byte {err.start}); a TOML rules file is UTF-8") from None
        return cls(tuple(_parse(text, str(path))) + builtin)

    def classify(self, ops: pl.DataFrame, names: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
        """Add ``role`` and ``family`` to *ops* (``name_key``, ``range_id``).

        *names*: one row per ``name_key`` with ``kind`` and the three name
        levels; *ranges*: ``range_id, range_name``. Regexes run over these
        small distinct tables; ops only take part in integer joins.
        """
        return self.decider(names).classify(ops, ranges)

    def decider(self, names: pl.DataFrame) -> RoleDecider:
        """The rules run over *names* once: :meth:`RoleDecider.classify` then decides ops of those names
        (a window of a trace at a time) with only their ranges' conditions left to evaluate."""
        n = len(self.rules)
        ranged = [i for i, r in enumerate(self.rules) if r.range is not None]
        name_exprs = []
        for level in NAME_LEVELS:
            name_exprs.append(_first_rule(self.rules, level).alias(f"_first_{level}"))
            name_exprs += [_name_cond(self.rules[i], level).alias(f"_r{i}_{level}") for i in ranged]
        names = names.select("name_key", *name_exprs)
        # At each name level the lowest matching rule index; the first level that matched wins.
        per_level = []
        for level in NAME_LEVELS:
            candidates = [pl.col(f"_first_{level}")] + [
                pl.when(pl.col(f"_r{i}_{level}") & pl.col(f"_rr{i}").fill_null(False)).then(pl.lit(i, pl.Int32))
                for i in ranged
            ]
            per_level.append(pl.min_horizontal(candidates))
        decide = pl.coalesce(per_level).fill_null(n).cast(pl.Int32)
        table = pl.DataFrame(
            {
                "role": pl.Series([r.role for r in self.rules] + ["other"], dtype=RoleEnum),
                "family": pl.Series([r.family for r in self.rules] + [None], dtype=pl.String),
            }
        )  # row i is rule i, row n "no rule"
        rules = [self.rules[i] for i in ranged]
        if len(ranged) <= _GRID_BITS:
            return RoleDecider(table, rules, ranged, grid=_grid(names, ranged, decide))
        return RoleDecider(table, rules, ranged, names=names, decide=decide)

    def classify_names(self, names: Sequence[str], kind: str = "kernel", range_name: str | None = None) -> list[str]:
        """Role of each kernel name (for tests, docs and quick checks)."""
        return self._classify_names(names, kind, range_name)["role"].cast(pl.String).to_list()

    def classify_names_families(self, names: Sequence[str], kind: str = "kernel") -> list[tuple[str, str | None]]:
        """(role, family) of each kernel name; family None for ``other`` names no rule matched."""
        out = self._classify_names(names, kind, None)
        return list(zip(out["role"].cast(pl.String).to_list(), out["family"].to_list(), strict=True))

    def _classify_names(self, names: Sequence[str], kind: str, range_name: str | None) -> pl.DataFrame:
        keys = list(range(len(names)))
        table = pl.DataFrame(
            {
                "name_key": keys,
                "kind": pl.Series([kind] * len(names), dtype=pl.Enum(list(OP_KINDS))),
                "name": pl.Series(list(names), dtype=pl.String),
                "mangled_name": pl.Series([None] * len(names), dtype=pl.String),
                "short_name": pl.Series([None] * len(names), dtype=pl.String),
            }
        )
        ops = pl.DataFrame({"name_key": keys, "range_id": [0] * len(names)})
        ranges = pl.DataFrame({"range_id": [0], "range_name": pl.Series([range_name], dtype=pl.String)})
        return self.classify(ops, table, ranges)


@functools.cache
def _builtin() -> tuple[RoleRule, ...]:
    """The shipped rules, parsed once per process (every attribution uses them)."""
    text = resources.files("traceattr.attribution").joinpath("kernel_roles.toml").read_text(encoding="utf-8")
    # the shipped patterns are compiled by tests/test_roles.py, not in every process (~10 ms of polars calls)
    return tuple(_parse(text, "kernel_roles.toml (built in)", check=False))


_GRID_BITS = 6  # range rules up to which a rule is decided per (name, range conditions met) pair


@dataclass(frozen=True)
class RoleDecider:
    """Rules decided over the names of a trace: each op's role from its name key and its range's name."""

    table: pl.DataFrame  # role and family of rule i at row i, "other" at the last row
    rules: list[RoleRule]  # the rules with a range condition
    ranged: list[int]  # their indices among all rules
    grid: pl.DataFrame | None = None  # the rule per (name key, range conditions met): see _grid
    names: pl.DataFrame | None = None  # else per name: its conditions, decided per op by *decide*
    decide: pl.Expr | None = None

    def classify(self, ops: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
        """Add ``role`` and ``family`` to *ops* (``name_key``, ``range_id``); *ranges*: ``range_id,
        range_name`` of their ranges."""
        if self.grid is not None:
            rule = _rule_by_grid(ops, ranges, self.rules, self.grid)
        else:  # many range rules: per-op columns by binary search over the small tables, in ops' order
            assert self.names is not None and self.decide is not None
            looked = [rows_at(self.names, "name_key", ops["name_key"])]
            conds = ranges.select(
                "range_id", *[_range_cond(r).alias(f"_rr{i}") for i, r in zip(self.ranged, self.rules, strict=True)]
            )
            looked.append(rows_at(conds, "range_id", ops["range_id"]))
            rule = ops.hstack([c for f in looked for c in f.get_columns()]).select(self.decide).to_series()
        return ops.hstack(self.table[rule].get_columns())


def _grid(names: pl.DataFrame, ranged: list[int], decide: pl.Expr) -> pl.DataFrame:
    """The rule index per (name, which range conditions hold) pair, keyed ``name_key × 2**k + bits``.

    An op's rule depends only on its name key and on which range rules' conditions its innermost range
    meets (k bits), so the rule expression runs over names × 2**k rows instead of over every op, and an
    op only gathers its range's bits and one rule index.
    """
    combos = 1 << len(ranged)
    bits = pl.DataFrame({"_bits": pl.int_range(combos, dtype=pl.Int64, eager=True)})
    grid = names.join(bits, how="cross").with_columns(
        ((pl.col("_bits") // (1 << j)) % 2 == 1).alias(f"_rr{i}") for j, i in enumerate(ranged)
    )
    return grid.select((pl.col("name_key").cast(pl.Int64) * combos + pl.col("_bits")).alias("_code"), decide)


def _rule_by_grid(ops: pl.DataFrame, ranges: pl.DataFrame, rules: list[RoleRule], grid: pl.DataFrame) -> pl.Series:
    """Each op's rule index: its name key and its range's conditions met, looked up in the grid."""
    code = ops["name_key"].cast(pl.Int64) * (1 << len(rules))
    if rules:
        met = ranges.select(
            "range_id",
            pl.sum_horizontal([_range_cond(r).cast(pl.Int64) * (1 << j) for j, r in enumerate(rules)]).alias("_bits"),
        )
        code = code + rows_at(met, "range_id", ops["range_id"]).to_series().fill_null(0)  # no range: none met
    return rows_at(grid, "_code", code).to_series()


def _name_cond(rule: RoleRule, level: str) -> pl.Expr:
    cond = pl.lit(True)
    if rule.kinds:
        cond = cond & pl.col("kind").cast(pl.String).is_in(sorted(rule.kinds))
    if rule.pattern is not None:
        cond = cond & pl.col(level).str.contains(rule.pattern).fill_null(False)
    elif level != NAME_LEVELS[0]:
        cond = pl.lit(False)  # a name-less rule is decided at the first level
    return cond


def _range_cond(rule: RoleRule) -> pl.Expr:
    assert rule.range is not None
    return pl.col("range_name").str.contains(rule.range).fill_null(False)


def _first_rule(rules: Sequence[RoleRule], level: str) -> pl.Expr:
    """Index of the first rule without a range condition that accepts the name."""
    chain: Then | ChainedThen | None = None
    for i, rule in enumerate(rules):
        if rule.range is not None:
            continue
        cond = _name_cond(rule, level)
        chain = pl.when(cond).then(pl.lit(i, pl.Int32)) if chain is None else chain.when(cond).then(pl.lit(i, pl.Int32))
    return chain.otherwise(pl.lit(None, pl.Int32)) if chain is not None else pl.lit(None, pl.Int32)


_RULE_KEYS = {"role", "family", "pattern", "kinds", "range"}


def _parse(text: str, origin: str, *, check: bool = True) -> list[RoleRule]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise RulesError(f"{origin}: not valid TOML ({err})") from None
    raw = data.get("rule", [])
    if not isinstance(raw, list) or not raw:
        raise RulesError(f"{origin}: expected one or more [[rule]] tables")
    rules = []
    for n, item in enumerate(raw, 1):
        where = f"{origin} rule {n}"
        if not isinstance(item, dict):
            raise RulesError(f"{where}: expected a [[rule]] table, got {item!r}")
        unknown = set(item) - _RULE_KEYS
        if unknown:
            raise RulesError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}")
        role = item.get("role")
        if role not in ROLES:
            raise RulesError(f"{where}: role must be one of {list(ROLES)}, got {role!r}")
        kinds = item.get("kinds", [])
        if not isinstance(kinds, list) or not all(isinstance(k, str) and k in OP_KINDS for k in kinds):
            raise RulesError(f"{where}: kinds must be a list drawn from {list(OP_KINDS)}, got {kinds!r}")
        pattern, rng = item.get("pattern"), item.get("range")
        if pattern is None and rng is None and not kinds:
            raise RulesError(f"{where}: needs at least one of pattern, range, kinds")
        for key, value in (("pattern", pattern), ("range", rng)):
            if value is not None and check:
                _check_regex(value, f"{where} {key}")
        rules.append(RoleRule(role, str(item.get("family", role)), pattern, frozenset(kinds), rng, where))
    return rules


def _check_regex(pattern: object, where: str) -> None:
    if not isinstance(pattern, str):
        raise RulesError(f"{where}: must be a string, got {pattern!r}")
    try:
        pl.Series([""]).str.contains(pattern)
    except pl.exceptions.PolarsError as err:
        first = str(err).strip().splitlines()[0]
        raise RulesError(f"{where}: invalid regular expression {pattern!r} ({first})") from None
