"""Arms: what ``profile`` and ``round`` time. An arm is a backend plus options, under a label.

Grammar (no whitespace anywhere)::

    arm      := [label "="] backend ["[" option ("," option)* "]"]
    backend  := a registry name (fa3, fa2, flashmla, …, or an installed
                ``traceattr.backends`` entry point) | a plug-in "package.module:Class"
    option   := name ["=" value]
    label    := letters, digits and _ . + # - (default: the canonical backend[options] text)

Options every backend takes (the runner applies them):

* ``graphs`` — capture the call as a CUDA graph once and time its replays.
* ``page=N`` — the same KV tokens in a cache of N-token pages (a separate copy).
* ``kv=bf16|fp8`` — the KV cache in that dtype (fp8: e4m3 with a per-tensor scale).

Backends declare their own in their capabilities (``fa3[splits=4]``: the KV split
into 4 requests per request, then flashinfer's separate merge kernel). So
``fa3``, ``fa3[splits=4]``, ``fa3[graphs]``, ``flashmla[page=64]``,
``s4=fa3[splits=4]`` and ``cand=my_pkg.my_mod:MyBackend`` are arms. Options are
written back sorted (``fa3[graphs,splits=4]``), so equal arms get equal labels.

The label names the arm everywhere after the plan: the ``backend=`` word of
each call's NVTX name (:mod:`traceattr.core.callnames`), runner.json, summaries and
reports. ``program`` identifies what the arm computes: the backend and its
options except those that do not change the numbers (``graphs``); two arms
with the same program must produce bitwise-equal outputs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from traceattr.backends import BACKENDS, Backend, CallPlan, Device, OptionSpec, get_backend, registry
from traceattr.backends.base import rejection_reason
from traceattr.core.errors import BackendUnsupported, TraceattrError
from traceattr.core.shapes import Shape, ShapeError, parse_shape

GRAPHS = OptionSpec("graphs", "replay the call as a captured CUDA graph", kind="flag", program=False)
PAGE = OptionSpec("page", "KV page size in tokens (the same tokens, re-paged into a separate cache)", minimum=1)
KV = OptionSpec("kv", "KV cache dtype (fp8: e4m3 with a per-tensor scale)", kind="choice", choices=("bf16", "fp8"))
GENERIC_OPTIONS = (GRAPHS, PAGE, KV)

_ARM = re.compile(r"^(?:(?P<label>[^=\[\],]+)=)?(?P<backend>[^=\[\],]+)(?:\[(?P<options>[^\[\]]*)\])?$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+#-]*$")
_OPTION = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)(?:=(?P<value>[^=]+))?$")

OptionValue = int | str | bool


@dataclass(frozen=True)
class Arm:
    """One validated arm (use :func:`parse_arm`): label, backend name or plug-in spec, options, program."""

    label: str
    backend: str
    options: tuple[tuple[str, OptionValue], ...] = ()  # sorted by name
    program: str = ""

    @property
    def spec(self) -> str:
        """The backend and options, canonical: ``fa3[graphs,splits=4]``."""
        if not self.options:
            return self.backend
        words = [name if value is True else f"{name}={value}" for name, value in self.options]
        return f"{self.backend}[{','.join(words)}]"

    @property
    def text(self) -> str:
        """What :func:`parse_arm` reads back into this arm."""
        return self.spec if self.label == self.spec else f"{self.label}={self.spec}"

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    @property
    def graphs(self) -> bool:
        return bool(self.get("graphs", False))

    def data_shape(self, shape: Shape) -> Shape:
        """The shape with this arm's page size and KV dtype: the cache this arm reads."""
        return shape.with_(page=self.get("page", shape.page), kv_dtype=self.get("kv", shape.kv_dtype))

    def call_shape(self, shape: Shape) -> Shape:
        """The shape the backend's call sees: :meth:`data_shape`, and one rank's share on a DCP row."""
        data = self.data_shape(shape)
        return data.rank_share() if data.dcp > 1 else data

    def identity(self) -> dict[str, Any]:
        """runner.json's ``arms[label]``: backend, options, program."""
        return {"backend": self.backend, "options": dict(self.options), "program": self.program}


def split_spec(text: str) -> tuple[str, str] | None:
    """(backend, options text) of ``[label=]backend[options]`` by the grammar's syntax alone.

    Nothing is imported or validated, so analysis can read arm labels found in any
    trace (a plug-in need not be installed); None when *text* is not an arm.
    """
    m = _ARM.match(text.strip())
    return (m["backend"], m["options"] or "") if m else None


def option_specs(backend: Backend) -> dict[str, OptionSpec]:
    """The options *backend* accepts: the generic ones, then its own."""
    specs = {o.name: o for o in GENERIC_OPTIONS}
    for o in backend.caps.options:
        if o.name in specs:
            raise TraceattrError(f"backend {backend.caps.name}: option {o.name!r} shadows a generic option")
        specs[o.name] = o
    return specs


def parse_arm(text: str) -> Arm:
    """Parse and validate *text* by the grammar above; one-line :class:`TraceattrError` otherwise.

    The backend is looked up (a plug-in is imported) so its options can be checked;
    nothing touches a GPU.
    """
    raw = text.strip()
    if not raw or any(c.isspace() for c in raw):
        raise TraceattrError(f"arm {text!r}: empty or contains whitespace (write fa3[splits=4], cand=pkg.mod:Class)")
    m = _ARM.match(raw)
    if m is None:
        raise TraceattrError(f"arm {text!r}: expected [label=]backend[option,option=value] (e.g. fa3[splits=4])")
    if m["label"] is not None and not _LABEL.match(m["label"]):
        raise TraceattrError(f"arm {text!r}: label {m['label']!r} may hold only letters, digits and _ . + # -")
    backend = get_backend(m["backend"])
    specs = option_specs(backend)
    options: dict[str, OptionValue] = {}
    for word in (m["options"] or "").split(",") if m["options"] is not None else ():
        om = _OPTION.match(word)
        if om is None:
            raise TraceattrError(f"arm {text!r}: option {word!r} is not name or name=value")
        name, value = om["name"], om["value"]
        if name not in specs:
            raise TraceattrError(f"arm {text!r}: {_unknown_option(m['backend'], backend, name, specs)}")
        if name in options:
            raise TraceattrError(f"arm {text!r}: option {name} given twice")
        options[name] = _option_value(text, specs[name], value)
    if options.get("graphs") and not backend.caps.supports_graphs:
        raise TraceattrError(f"arm {text!r}: {backend.caps.name} cannot be replayed as a CUDA graph")
    ordered = tuple(sorted(options.items()))
    program_opts = [(k, v) for k, v in ordered if specs[k].program]
    program = Arm("", m["backend"], tuple(program_opts)).spec
    arm = Arm("", m["backend"], ordered, program)
    return dataclasses.replace(arm, label=m["label"] or arm.spec)


def _unknown_option(name: str, backend: Backend, option: str, specs: dict[str, OptionSpec]) -> str:
    others = [n for n, b in registry().items() if any(o.name == option for o in b.caps.options)]
    where = f"; {option} is an option of {', '.join(others)}" if others else ""
    return f"{name} has no option {option!r} (its options: {', '.join(specs)}){where}"


def _option_value(text: str, spec: OptionSpec, value: str | None) -> OptionValue:
    if spec.kind == "flag":
        if value is not None:
            raise TraceattrError(f"arm {text!r}: {spec.name} is a flag, written without a value")
        return True
    if value is None:
        example = spec.choices[0] if spec.choices else spec.minimum
        raise TraceattrError(f"arm {text!r}: {spec.name} needs a value ({spec.name}={example})")
    if spec.kind == "choice":
        if value not in spec.choices:
            raise TraceattrError(f"arm {text!r}: {spec.name} must be one of {', '.join(spec.choices)}, got {value!r}")
        return value
    if not value.isdigit() or int(value) < spec.minimum:
        raise TraceattrError(f"arm {text!r}: {spec.name} must be an integer ≥ {spec.minimum}, got {value!r}")
    return int(value)


def parse_arms(texts: Iterable[str]) -> tuple[Arm, ...]:
    """Several arms; labels must differ (an A/A comparison names its arms apart: ``a=fa3 b=fa3``)."""
    arms = tuple(parse_arm(t) for t in texts)
    seen: set[str] = set()
    for arm in arms:
        if arm.label in seen:
            raise TraceattrError(
                f"arm label {arm.label!r} given twice; label them apart, e.g. a={arm.spec} b={arm.spec}"
            )
        seen.add(arm.label)
    return arms


def default_arms() -> tuple[Arm, ...]:
    """One arm per backend in the registry (built-ins, then installed entry points), no options."""
    return tuple(Arm(name, name, (), name) for name in registry())


def arm_backend(arm: Arm) -> Backend:
    """The arm's backend with its backend-specific options set (``splits=4`` → ``splits`` field)."""
    backend = get_backend(arm.backend)
    fields = {spec.field: arm.get(spec.name) for spec in backend.caps.options if spec.field and arm.get(spec.name)}
    if not fields:
        return backend
    if dataclasses.is_dataclass(backend):
        return dataclasses.replace(backend, **fields)  # type: ignore[type-var]
    with_options = getattr(backend, "with_options", None)
    if with_options is None:
        raise TraceattrError(f"backend {arm.backend}: declares options but is no dataclass and has no with_options()")
    return with_options(**fields)  # type: ignore[no-any-return]


def check_arm(arm: Arm, shape: Shape, device: Device | None, *, packages: bool = True) -> CallPlan:
    """The plan of *arm*'s call on *shape*, or :class:`BackendUnsupported` saying why it cannot run."""
    backend = arm_backend(arm)
    if shape.dcp > 1 and backend.caps.dcp_refusal:
        raise BackendUnsupported(f"{arm.label}: {backend.caps.dcp_refusal}")
    if shape.dcp > 1 and not backend.caps.lse:
        raise BackendUnsupported(
            f"{arm.label}: a DCP row merges each rank's output by its LSE; {backend.caps.name} does not return one"
        )
    call_shape = arm.call_shape(shape)
    reason = rejection_reason(call_shape, backend.caps, device, packages=packages)
    if reason:
        raise BackendUnsupported(f"{arm.label}: {reason}")
    try:
        return backend.plan(call_shape)
    except BackendUnsupported as err:
        raise BackendUnsupported(f"{arm.label}: {str(err).split(': ', 1)[-1]}") from None


def labels(arms: Sequence[Arm]) -> tuple[str, ...]:
    return tuple(a.label for a in arms)


def same_program(arm_a: str, arm_b: str, shape: Shape | str) -> bool:
    """Whether two arms run the same GPU program on *shape*, so that no timing difference between them means anything.

    An arm is the same program as itself (an A/A comparison); otherwise a backend declares it
    (``Capabilities.same_program_as``), in either direction, and arms ``backend[options]`` need the
    same options. Arms or shapes traceattr does not know are different programs.
    """
    if arm_a == arm_b:
        return True
    # arms with the same options on backends that declare it (fa3[splits=4] and fa3-per-token[splits=4] at q = 1)
    split_a, split_b = split_spec(arm_a), split_spec(arm_b)
    if split_a is None or split_b is None:
        return False
    (arm_a, opts_a), (arm_b, opts_b) = split_a, split_b
    if opts_a != opts_b:
        return False
    if isinstance(shape, str):
        try:
            shape = parse_shape(shape)
        except ShapeError:
            return False
    for a, b in ((arm_a, arm_b), (arm_b, arm_a)):
        backend = BACKENDS.get(a)
        when = backend.caps.same_program_as.get(b) if backend is not None else None
        if when is not None and when(shape):
            return True
    return False
