"""Backends from outside traceattr: ``package.module:Class`` specs and the ``traceattr.backends`` entry points.

A plug-in implements the same small interface as the built-in backends
(:class:`~traceattr.backends.base.Backend`): a ``caps`` attribute holding
:class:`~traceattr.backends.base.Capabilities`, ``plan(shape) -> CallPlan`` and
``prepare(shape, inputs) -> Call``. A spec names a class (instantiated with no
arguments) or an instance. Installed packages can register theirs::

    [project.entry-points."traceattr.backends"]
    my-mla = "my_pkg.my_mod:MyBackend"

Loading imports the plug-in's module, nothing else: a module that imports torch
at the top needs torch where the plan is made. Every problem is one
:class:`~traceattr.core.errors.TraceattrError` line naming the spec.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from typing import Any

from traceattr.backends.base import Backend, Capabilities
from traceattr.core.errors import TraceattrError

ENTRY_POINT_GROUP = "traceattr.backends"
SPEC = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_][\w.]*)$")


def is_spec(text: str) -> bool:
    """Whether *text* names a plug-in (``package.module:Class``) rather than a registry name."""
    return SPEC.match(text) is not None


def load_spec(spec: str) -> Backend:
    """The backend *spec* names, checked against the interface."""
    m = SPEC.match(spec)
    if m is None:
        raise TraceattrError(f"plug-in {spec!r}: expected package.module:Class")
    try:
        module = importlib.import_module(m["module"])
    except Exception as err:  # a plug-in's own import error is the user's to see, in one line
        raise TraceattrError(f"plug-in {spec!r}: cannot import {m['module']}: {type(err).__name__}: {err}") from None
    target: Any = module
    for part in m["attr"].split("."):
        if not hasattr(target, part):
            raise TraceattrError(f"plug-in {spec!r}: module {m['module']} has no attribute {m['attr']!r}")
        target = getattr(target, part)
    return as_backend(target, f"plug-in {spec!r}")


def as_backend(target: Any, what: str) -> Backend:
    """*target* (a backend class or instance) as a backend instance, or a one-line error saying what is missing."""
    if isinstance(target, type):
        try:
            target = target()
        except Exception as err:
            raise TraceattrError(f"{what}: {target.__name__}() failed: {type(err).__name__}: {err}") from None
    caps = getattr(target, "caps", None)
    if not isinstance(caps, Capabilities):
        raise TraceattrError(
            f"{what}: not a traceattr backend: its caps must be a traceattr.backends.base.Capabilities, "
            f"got {type(caps).__name__}"
        )
    missing = [m for m in ("plan", "prepare") if not callable(getattr(target, m, None))]
    if missing:
        raise TraceattrError(f"{what}: not a traceattr backend: no {' or '.join(missing)} method")
    return target  # type: ignore[no-any-return]


def entry_point_backends() -> dict[str, Backend]:
    """Backends installed packages register under the ``traceattr.backends`` entry-point group, by name."""
    found: dict[str, Backend] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = ep.load()
        except Exception as err:
            raise TraceattrError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP}: cannot load: "
                f"{type(err).__name__}: {err}"
            ) from None
        found[ep.name] = as_backend(target, f"entry point {ep.name!r} ({ep.value})")
    return found
