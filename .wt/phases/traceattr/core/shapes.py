"""MLA decode problem shapes: one documented grammar, parsed and printed back.

Grammar (parts joined by ``_``, any order after an optional prefix word)::

    shape   := [prefix "_"] part ("_" part)*
    part    := "q" N          query tokens per request (spec-verify width)   required
             | ("ctx"|"kv") N cached tokens per request                      required
             | "h" N          query heads per rank                           default 16
             | "b" N          requests in the batch                          default 1
             | "p" N          KV page size in tokens                         default 64
             | "bf16"|"fp8"   KV cache dtype                                 default bf16
             | "row"|"uniform"|"ragged"  how q is laid out                   default uniform
             | "dcp" N        decode context parallelism over N ranks: the call is   default 1
                              one rank's share (ctx/N tokens, all heads) plus the
                              merge of the N ranks' partial results
             | model preset   heads per rank of a model: kimi-tp1 (96), kimi-tp4 (24),
                              kimi-tp8 (12), kimi-tp16 (6), deepseek-tp1 (128), deepseek-tp8 (16)
    N       := digits [k|m]   k = ×1000, m = ×1,000,000 ("900k", "1m"; "131k" is 131,000,
                              "131072" is 2**17)
    prefix  := a word naming where the row comes from (mtp, trace, mirror, prefill, …)

So ``q8_ctx900k`` is 8 verify tokens against 900,000 cached tokens with the
defaults H=16, b=1, bf16, page 64; the row names kernel teams publish parse
too: ``mtp_h96_b8_q4_kv342305``. ``Shape.name`` prints the canonical form,
which parses back to the same shape.

Query patterns with b > 1: ``uniform`` gives every request q tokens;
``ragged`` gives request i ``1 + (i * (q - 1)) // max(b - 1, 1)`` tokens (1 … q),
the mix of an MTP batch; ``row`` lays the q·b query rows out as b·q requests of
one token each (no folding of verify tokens into one request).

DCP (``dcp8``): ``ctx`` stays the whole context; the N ranks hold contiguous
shards of it, the first ``ctx % N`` one token longer. The measured rank is the
last one, whose shard (``ctx // N`` tokens, :meth:`Shape.rank_share`) holds the
verify tokens, so its causal mask is that of an ordinary call; after it come the
merge of the N (output, LSE) partials. ``q8_ctx900k_dcp8`` is therefore
``q8_ctx112500`` attention with all 16 heads plus an 8-way merge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from traceattr.core.errors import TraceattrError

KvDtype = Literal["bf16", "fp8"]
QueryPattern = Literal["uniform", "ragged", "row"]
LATENT_DIM = 512  # MLA compressed KV ("ckv")
ROPE_DIM = 64  # decoupled rope part ("kpe")
HEAD_DIM = LATENT_DIM + ROPE_DIM
# Sanity limits: one bf16 KV token is 576 × 2 bytes, so 2^27 tokens are 155 GB, more than one GPU holds.
MAX_CACHED_TOKENS = 1 << 27
MAX_HEADS = 4096
SOFTMAX_SCALE_DIM = 192  # DeepSeek's qk_nope (128) + qk_rope (64): sm_scale = 1/sqrt(192)

DEFAULTS = {"heads": 16, "batch": 1, "page": 64, "kv_dtype": "bf16", "pattern": "uniform", "dcp": 1}


class ShapeError(TraceattrError, ValueError):
    """A shape name that does not follow the grammar; says which part is wrong."""


@dataclass(frozen=True)
class Shape:
    q: int  # query tokens per request
    ctx: int  # cached tokens per request
    heads: int = 16
    batch: int = 1
    page: int = 64
    kv_dtype: KvDtype = "bf16"
    pattern: QueryPattern = "uniform"
    prefix: str | None = None
    dcp: int = 1  # decode context parallelism: ranks sharing the context (see the module doc)

    def __post_init__(self) -> None:
        for field, value, lo in (("q", self.q, 1), ("ctx", self.ctx, 1), ("heads", self.heads, 1),
                                 ("batch", self.batch, 1), ("page", self.page, 1), ("dcp", self.dcp, 1)):  # fmt: skip
            if value < lo:
                raise ShapeError(f"{field} must be ≥ {lo}, got {value}")
        if self.ctx < self.q:
            raise ShapeError(f"ctx ({self.ctx}) must hold at least the q ({self.q}) tokens being verified")
        if self.ctx // self.dcp < self.q:
            raise ShapeError(
                f"dcp{self.dcp}: the last rank's shard ({self.ctx // self.dcp} tokens) must hold the q ({self.q}) "
                "tokens being verified"
            )
        if self.batch * self.ctx > MAX_CACHED_TOKENS:
            raise ShapeError(
                f"batch × ctx = {self.batch * self.ctx:,} cached tokens is more than any GPU holds "
                f"(at most {MAX_CACHED_TOKENS:,}: {MAX_CACHED_TOKENS * 1152 / 1e9:.0f} GB of bf16 KV)"
            )
        if self.heads > MAX_HEADS:
            raise ShapeError(f"heads ({self.heads}) must be at most {MAX_HEADS}")

    @property
    def name(self) -> str:
        """Canonical name: every part, so it parses back to this shape."""
        parts = [self.prefix] if self.prefix else []
        parts += [f"q{self.q}", f"ctx{_count(self.ctx)}", f"h{self.heads}", f"b{self.batch}", self.kv_dtype,
                  f"p{self.page}"]  # fmt: skip
        if self.pattern != "uniform":
            parts.append(self.pattern)
        if self.dcp > 1:
            parts.append(f"dcp{self.dcp}")
        return "_".join(parts)

    @property
    def short_name(self) -> str:
        """The name with default parts left out (q8_ctx900k)."""
        return self._short(f"ctx{_count(self.ctx)}")

    @property
    def family(self) -> str:
        """The short name with the context left out (q8_ctx*): shapes that differ only in ctx."""
        return self._short("ctx*")

    def _short(self, ctx_part: str) -> str:
        parts = [self.prefix] if self.prefix else []
        parts += [f"q{self.q}", ctx_part]
        for key, text in (("heads", f"h{self.heads}"), ("batch", f"b{self.batch}"), ("kv_dtype", self.kv_dtype),
                          ("page", f"p{self.page}"), ("pattern", self.pattern), ("dcp", f"dcp{self.dcp}")):  # fmt: skip
            if getattr(self, key) != DEFAULTS[key]:
                parts.append(text)
        return "_".join(parts)

    def dcp_shards(self) -> list[int]:
        """Tokens per request held by each DCP rank, first rank first (one shard when dcp is 1)."""
        base, extra = divmod(self.ctx, self.dcp)
        return [base + (1 if r < extra else 0) for r in range(self.dcp)]

    def rank_share(self) -> Shape:
        """What the measured (last) DCP rank attends to: its shard, all heads, as an ordinary shape."""
        return replace(self, ctx=self.dcp_shards()[-1], dcp=1)

    def q_lens(self) -> list[int]:
        """Query tokens of each request, by the pattern."""
        if self.pattern == "row":
            return [1] * (self.batch * self.q)
        if self.pattern == "ragged":
            return [1 + (i * (self.q - 1)) // max(self.batch - 1, 1) for i in range(self.batch)]
        return [self.q] * self.batch

    def kv_lens(self) -> list[int]:
        """Cached tokens each request attends to ("row": every verify row sees its own prefix)."""
        if self.pattern == "row":
            return [self.ctx - self.q + 1 + j for _ in range(self.batch) for j in range(self.q)]
        return [self.ctx] * self.batch

    @property
    def kv_bytes_per_token(self) -> int:
        return HEAD_DIM * (1 if self.kv_dtype == "fp8" else 2)

    def bytes_moved(self) -> int:
        """Bytes a decode call must move at least: each request's KV read once, Q read, O written (bf16).

        With DCP, what the measured rank moves: its shard's KV, Q, O, and the merge
        reading N partial outputs (bf16) and LSEs (fp32) and writing the output.
        """
        share = self.rank_share() if self.dcp > 1 else self
        distinct_kv = self.batch * share.ctx  # row pattern re-reads, but the data is still ctx tokens per request
        q_rows = sum(self.q_lens())
        moved = distinct_kv * self.kv_bytes_per_token + q_rows * self.heads * (HEAD_DIM + LATENT_DIM) * 2
        if self.dcp > 1:
            moved += q_rows * self.heads * (self.dcp * (LATENT_DIM * 2 + 4) + LATENT_DIM * 2)
        return moved

    def with_(self, **changes: object) -> Shape:
        return replace(self, **changes)  # type: ignore[arg-type]


def _count(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


_NUMBER = r"([0-9]+)([km]?)"  # ASCII digits only: int() would also read "８"
_NUMBERED = ("q", "ctx", "kv", "h", "b", "p", "dcp")
_DTYPES = ("bf16", "fp8")
_PATTERNS = ("row", "uniform", "ragged")
_PART = re.compile(rf"^({'|'.join(_NUMBERED)}){_NUMBER}$")
_WORD = re.compile(r"^[a-z][a-z0-9-]*$")


def _value(digits: str, unit: str) -> int:
    if len(digits.lstrip("0")) > 12:  # beyond any GPU's memory; also spares int() a 5000-digit parse
        raise ShapeError(f"number {digits[:12]}… is too large for a shape")
    return int(digits) * {"": 1, "k": 1000, "m": 1_000_000}[unit]


def parse_shape(text: str) -> Shape:
    """Parse *text* by the grammar above; :class:`ShapeError` names the bad part."""
    raw = text.strip()
    if not raw:
        raise ShapeError("empty shape name")
    fields: dict[str, object] = {}
    prefix = None
    for i, part in enumerate(raw.lower().split("_")):
        m = _PART.match(part)
        if m:
            key = {"q": "q", "ctx": "ctx", "kv": "ctx", "h": "heads", "b": "batch", "p": "page", "dcp": "dcp"}[
                m.group(1)
            ]
            if key in fields:
                raise ShapeError(f"shape {text!r}: {m.group(1)} given twice ({part!r})")
            try:
                fields[key] = _value(m.group(2), m.group(3))
            except ShapeError as err:
                raise ShapeError(f"shape {text[:40] + ('…' if len(text) > 40 else '')!r}: {err}") from None
        elif part in _DTYPES:
            fields["kv_dtype"] = part
        elif part in _PATTERNS:
            fields["pattern"] = part
        elif part in HEAD_PRESETS:
            if "heads" in fields:
                raise ShapeError(f"shape {text!r}: heads given twice ({part!r})")
            fields["heads"] = HEAD_PRESETS[part]
        elif i == 0 and _WORD.match(part) and not re.match(rf"^({'|'.join(_NUMBERED)})[0-9]", part):
            prefix = part
        else:
            raise ShapeError(
                f"shape {text!r}: part {part!r} is not one of q<N>, ctx<N>|kv<N>, h<N>, b<N>, p<N>, dcp<N>, "
                f"bf16|fp8, row|uniform|ragged or a model preset ({', '.join(HEAD_PRESETS)}); N like 8, 900k, 1m"
            )
    for needed in ("q", "ctx"):
        if needed not in fields:
            hint = "q<N> (query tokens)" if needed == "q" else "ctx<N> or kv<N> (cached tokens)"
            raise ShapeError(f"shape {text!r}: missing {hint}")
    try:
        return Shape(prefix=prefix, **fields)  # type: ignore[arg-type]
    except ShapeError as err:
        raise ShapeError(f"shape {text!r}: {err}") from None


# Query heads per rank of models in the field (MLA: one KV head, 512 + 64 dims):
# Kimi-K3 has 96 heads, DeepSeek-V3 128, split over tensor-parallel ranks.
HEAD_PRESETS = {
    "kimi-tp1": 96,
    "kimi-tp4": 24,
    "kimi-tp8": 12,
    "kimi-tp16": 6,
    "deepseek-tp1": 128,
    "deepseek-tp8": 16,
}
# A run of shape parts inside a longer name (``fa3_pertoken_q8_ctx900k_3`` holds ``q8_ctx900k``), for
# call-name grouping (:mod:`traceattr.core.callnames`). The prefix word is left out: inside a name it could
# not be told from the end of a backend's name. Case-insensitive, as parse_shape; no look-arounds,
# so Python's re and polars' (Rust) regex read it alike.
SHAPE_PATTERN = "(?i:{part}(?:_{part})*)".format(
    part="(?:"
    + "|".join(
        [f"(?:{'|'.join(_NUMBERED)})\\d+[km]?", *_DTYPES, *_PATTERNS, *sorted(HEAD_PRESETS, key=len, reverse=True)]
    )
    + ")"
)
# Row names kernel teams publish, kept here so the grammar is tested against them.
PUBLISHED_ROWS = (
    "mtp_h96_b8_q4_kv342305",
    "trace_h12_b1_q1_kv76800",
    "mirror_h96_b2_q1_kv77699",
    "prefill_h12_b2_q512_kv32768",
)


def fmt_ctx(ctx: float) -> str:
    """A context length, compact: 131072 -> 131k, 1048576 -> 1.05M (exact values go in hovers)."""
    if ctx >= 1e6:
        return f"{ctx / 1e6:.3g}M"
    if ctx >= 1e3:
        return f"{ctx / 1e3:.0f}k"
    return f"{ctx:.0f}"
