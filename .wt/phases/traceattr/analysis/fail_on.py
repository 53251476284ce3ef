"""``--fail-on``: conditions on a decision that a CI job fails on, each named once and checked here.

A condition is a word, or a word and an arm (``loses:fa3``). :func:`failures` lists, for a decision, every
condition met, one sentence each (what the command prints before it exits with its own status, so a CI
log says why). Nothing here decides a verdict: it reads the :class:`~traceattr.analysis.decision.Decision`
every surface shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from traceattr.analysis.decision import Decision
from traceattr.core.errors import TraceattrError

# word -> what it fails on (the option's help lists these)
CONDITIONS = {
    "undecided": "a compared shape without a winner (a tie, or one backend), or a family switch within noise",
    "tie": "a compared shape whose fastest backends tie within noise",
    "loses": "loses:ARM: ARM is really slower than the winner at some shape where it was measured",
    "refused": "a round's gates refused a row (a round folder, or one of its captures)",
}


@dataclass(frozen=True)
class Condition:
    word: str
    arm: str | None = None

    @classmethod
    def parse(cls, text: str) -> Condition:
        word, _, arm = text.partition(":")
        if word not in CONDITIONS:
            raise TraceattrError(f"--fail-on {text!r}: not a condition (one of {', '.join(sorted(CONDITIONS))})")
        if (word == "loses") != bool(arm):
            form = "loses:ARM" if word == "loses" else word
            raise TraceattrError(f"--fail-on {text!r}: write it as {form}")
        return cls(word, arm or None)

    def __str__(self) -> str:
        return self.word if self.arm is None else f"{self.word}:{self.arm}"


def parse_conditions(texts: Iterable[str]) -> tuple[Condition, ...]:
    return tuple(Condition.parse(t) for t in texts)


DIFF_CONDITIONS = {
    "slower": "a kernel, role or range name whose time per call is really slower after (several captures a side)",
}


def diff_failures(diff: pl.DataFrame, conditions: Sequence[str]) -> list[str]:
    """One sentence per ``diff --fail-on`` condition met by *diff* (:func:`traceattr.analysis.diff.diff_tallies`)."""
    out = []
    for c in conditions:
        if c not in DIFF_CONDITIONS:
            raise TraceattrError(f"--fail-on {c!r}: not a diff condition (one of {', '.join(sorted(DIFF_CONDITIONS))})")
        if diff.height and diff["per_call_verdict"].null_count() == diff.height:
            raise TraceattrError("--fail-on slower needs two or more captures a side: one capture a side has no "
                                 "interval (diff a1 a2 vs b1 b2)")  # fmt: skip
        slow = diff.filter(pl.col("per_call_verdict") == "slower")
        if slow.height:
            names = ", ".join(f"{r['level']} {r['name']} ({r['per_call_pct']:+.1f}%)" for r in slow.head(5).to_dicts())
            more = f" and {slow.height - 5} more" if slow.height > 5 else ""
            out.append(f"--fail-on slower: slower per call after: {names}{more}")
    return out


def failures(decision: Decision, conditions: Sequence[Condition]) -> list[str]:
    """One sentence per condition met by *decision* (empty: the CI gate passes)."""
    out = []
    for c in conditions:
        if c.word in ("undecided", "tie"):
            kinds = ("tie",) if c.word == "tie" else ("tie", "alone")
            shapes = [v.shape for v in decision.shapes if v.outcome in kinds]
            switches = [f.family for f in decision.families if c.word == "undecided" and f.ties]
            if shapes or switches:
                what = [f"{len(shapes)} shape(s) without a winner ({', '.join(shapes)})"] if shapes else []
                what += [f"a switch within noise in {', '.join(switches)}"] if switches else []
                out.append(f"--fail-on {c}: {'; '.join(what)}")
        elif c.word == "refused":
            if decision.refused:
                out.append(f"--fail-on refused: the round refused {', '.join(sorted(decision.refused))}")
        elif c.word == "loses":
            mine = [v for v in decision.shapes if c.arm in v.medians_us and c.arm not in dict(v.same_program)]
            lost = [v.shape for v in mine if v.outcome == "winner" and v.backend != c.arm]
            lost += [v.shape for v in mine if v.outcome == "tie" and c.arm not in v.tied]
            if lost:
                out.append(f"--fail-on {c}: {c.arm} is really slower than the winner at {', '.join(sorted(lost))}")
    return out
