"""Decode trajectories as plain data: the seq_lens of each step (no torch).

``grow``: requests whose ctx grows from A to B as a long generation does, sampled at log-spaced steps
(a real generation visits every ctx; timing every 1k-th step of 900k would take hours, and the
kernels' time is smooth between the sampled points except where the table says it is not).
``file`` (:func:`read_seq_lens`): the batches of a serving log, one a line, read as untrusted input.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from pathlib import Path

from traceattr.core.errors import TraceattrError

Step = tuple[int, ...]


def grow(start: int, stop: int, steps: int, *, batch: int = 1) -> tuple[Step, ...]:
    """*steps* log-spaced ctx from *start* to *stop* inclusive, every request of the batch at that ctx."""
    if not 1 <= start < stop:
        raise ValueError(f"grow needs 1 ≤ start < stop, got {start} → {stop}")
    if steps < 2:
        raise ValueError(f"grow needs at least 2 steps, got {steps}")
    ratio = math.log(stop / start) / (steps - 1)
    ctx = [round(start * math.exp(ratio * i)) for i in range(steps)]
    ctx[-1] = stop
    out: list[Step] = []
    for c in ctx:
        if not out or c > out[-1][0]:
            out.append((c,) * batch)
    return tuple(out)


def mix(low: int, high: int, steps: int, *, batch: int, seed: int = 0) -> tuple[Step, ...]:
    """*steps* batches of *batch* requests, each request's ctx drawn log-uniform in [low, high] (seeded):
    ragged batches, where the rules (``max``, ``mean``) that key a batch on one ctx disagree."""
    if not 1 <= low < high:
        raise ValueError(f"mix needs 1 ≤ low < high, got {low}, {high}")
    rng = random.Random(seed)
    span = math.log(high / low)
    return tuple(tuple(round(low * math.exp(rng.random() * span)) for _ in range(batch)) for _ in range(steps))


def mixed_q(qs: Sequence[int], low: int, high: int, steps: int, *, seed: int = 0) -> tuple[Step, ...]:
    """*steps* one-request steps ``(q, ctx)``: q drawn from *qs* with equal weights, ctx log-uniform in
    [low, high] (seeded): a server whose decode steps alternate plain decode and MTP verify widths."""
    if not qs or not 1 <= low < high:
        raise ValueError(f"mixed_q needs q values and 1 ≤ low < high, got {list(qs)}, {low}, {high}")
    rng = random.Random(seed)
    span = math.log(high / low)
    return tuple((rng.choice(list(qs)), round(low * math.exp(rng.random() * span))) for _ in range(steps))


def key_ctx_of(steps: Sequence[Step]) -> list[int]:
    """The longest request per step (what a uniform trajectory's steps are labelled with)."""
    return [max(s) for s in steps]


# -- batches from a file -------------------------------------------------------------------------------
# Limits that turn a typo or a hostile file into one line instead of an hour's run or an out-of-memory GPU:
MAX_SEQ_LEN = 1 << 22  # 4,194,304 tokens: above every served MLA context (DeepSeek 128k, Kimi 256k, 1M tests)
MAX_BATCH = 256  # requests a step: one CUDA graph per batch size is captured, and every request owns a KV slot
MAX_SLOT_TOKENS = 1 << 26  # batch × longest seq_len: the slot layout's KV (576 bf16 a token: 72 GiB at the cap)
MAX_STEPS = 10_000  # each step is replayed iters × contenders times after a 256 MiB flush: ~1 h at the cap
MAX_BYTES = 16 << 20  # the file itself
_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: int() would also take '١٢', '1_000' and '+3'
_SEPARATOR = re.compile(r"[,\s]+")


def _shown(token: str) -> str:
    """A token as the error prints it: quoted, escaped (control and bidi characters too), at most 24 characters."""
    return repr(token if len(token) <= 24 else token[:24] + "…")


def parse_seq_lens(text: str, where: str) -> tuple[Step, ...]:
    """Batches of seq_lens, one batch a line: whole numbers of tokens (ASCII digits) separated by blanks or
    commas; ``#`` starts a comment, blank lines are skipped. Every batch has the first one's size (graphs are
    captured per batch size). Each problem raises :class:`TraceattrError` as ``where:line: …`` naming the value."""
    steps: list[Step] = []
    first_line = 0
    for number, raw in enumerate(text.split("\n"), 1):  # numbered as editors do (splitlines also splits at \x0c, \x85…)
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        lens = []
        for token in (t for t in _SEPARATOR.split(line) if t):
            if not _DIGITS.fullmatch(token):
                long = token.isascii() and token.isdigit()
                raise TraceattrError(f"{where}:{number}: seq_len {_shown(token)} "
                                     + ("exceeds 4,194,304 tokens" if long else
                                        "is not a whole number of tokens (digits 0-9 only)"))  # fmt: skip
            value = int(token)
            if value < 1:
                raise TraceattrError(f"{where}:{number}: seq_len {value}: a decode request attends to at least 1 token")
            if value > MAX_SEQ_LEN:
                raise TraceattrError(f"{where}:{number}: seq_len {value:,} exceeds {MAX_SEQ_LEN:,} tokens")
            lens.append(value)
        if len(lens) > MAX_BATCH:
            raise TraceattrError(f"{where}:{number}: {len(lens)} requests in one batch, more than {MAX_BATCH}")
        if steps and len(lens) != len(steps[0]):
            raise TraceattrError(f"{where}:{number}: {len(lens)} request(s), line {first_line} has {len(steps[0])}: "
                                 "one batch size a file (the graphs are captured per batch size)")  # fmt: skip
        if not steps:
            first_line = number
        steps.append(tuple(lens))
        if len(steps) > MAX_STEPS:
            raise TraceattrError(f"{where}:{number}: more than {MAX_STEPS:,} batches")
    if not steps:
        raise TraceattrError(f"{where}: no batch of seq_lens (one batch a line: whole numbers separated by blanks "
                             "or commas)")  # fmt: skip
    slot = len(steps[0]) * max(max(s) for s in steps)
    if slot > MAX_SLOT_TOKENS:
        raise TraceattrError(f"{where}: {len(steps[0])} requests × the longest seq_len {max(max(s) for s in steps):,} "
                             f"= {slot:,} tokens of KV slots, more than {MAX_SLOT_TOKENS:,}")  # fmt: skip
    return tuple(steps)


def read_seq_lens(path: str | Path) -> tuple[Step, ...]:
    """:func:`parse_seq_lens` of a file; unreadable, oversized or non-UTF-8 files refused naming it."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise TraceattrError(f"{path}: not a file")
        if size > MAX_BYTES:
            raise TraceattrError(f"{path}: {size:,} bytes, more than {MAX_BYTES:,} for a list of batches")
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)  # a file that grew since stat() is still read only this far
        text = data.decode("utf-8")
    except OSError as err:
        raise TraceattrError(f"{path}: unreadable ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise TraceattrError(f"{path}: not UTF-8 text (byte {err.start})") from None
    if len(data) > MAX_BYTES:
        raise TraceattrError(f"{path}: more than {MAX_BYTES:,} bytes for a list of batches")
    return parse_seq_lens(text, str(path))
