"""nsys recipe: traceattr's attribution over many traces (``nsys recipe traceattr_attribution``).

Written in the framework's own form (metadata.json beside one Recipe class).
The per-trace work is :func:`traceattr.jobs.many.attribute_trace`, a function of
the installed traceattr package rather than of this file, so that Dask
workers, which do not see ``NSYS_RECIPE_PATH``, can unpickle it; the
reduction is :func:`traceattr.jobs.many.combine` and
:func:`traceattr.jobs.many.write_combined`, the same code ``traceattr attribute``
runs, so both give the same tables.
"""

from __future__ import annotations

import argparse
import re
import shutil
from datetime import datetime
from pathlib import Path

from nsys_recipe.lib import exceptions, recipe
from nsys_recipe.lib.args import Option
from nsys_recipe.log import logger

from traceattr.attribution.engine import MODES
from traceattr.core.errors import TraceattrError
from traceattr.jobs import many
from traceattr.jobs.many_inputs import expand_inputs

_FIRST_N = re.compile(r"(?P<folder>.+):(?P<n>\d+)")  # the framework's DIR:N, its first N traces


class _Traces(argparse.Action):
    """``--input``: what ``traceattr attribute`` takes (exports ``.sqlite`` and Arrow folders, reports
    ``.nsys-rep``, run folders, folders of these, quoted glob patterns), not only the framework's ``.nsys-rep``
    files and folders of them, so ``--input ranks/`` reads a folder of exports; ``DIR:N`` takes a folder's first N
    traces, as the framework's own recipes do."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[no-untyped-def]
        found: list[str] = []
        try:
            for value in values:
                first = _FIRST_N.fullmatch(value)
                if first is not None and Path(first["folder"]).is_dir() and not Path(value).exists():
                    found.extend(str(p) for p in expand_inputs([first["folder"]])[: int(first["n"])])
                else:
                    found.extend(str(p) for p in expand_inputs([value]))
        except TraceattrError as err:
            raise argparse.ArgumentError(self, str(err)) from None
        setattr(namespace, self.dest, list(dict.fromkeys(found)))


class TraceattrAttribution(recipe.Recipe):
    @staticmethod
    def settings(parsed_args) -> many.Settings:  # type: ignore[no-untyped-def]
        rules = str(parsed_args.rules) if parsed_args.rules else None
        return many.Settings(
            mode=parsed_args.attribution, domain=parsed_args.domain, match=parsed_args.match, rules=rules
        )

    @staticmethod
    def check(context, settings: many.Settings) -> None:  # type: ignore[no-untyped-def]
        """A bad rules file or regex stops the recipe once, not once per trace.

        Checked where the traces will be read (context.launch): polars must not
        run in this process before a concurrent context forks its workers.
        """
        reason = context.wait(context.launch(many.check_settings, settings))
        if reason is not None:
            raise exceptions.ValueError(reason)

    def mapper_func(self, context, parts: Path) -> list[many.TraceResult]:  # type: ignore[no-untyped-def]
        inputs = [str(p) for p in self._parsed_args.input]
        settings = self.settings(self._parsed_args)
        self.check(context, settings)
        return context.wait(
            context.map(
                many.attribute_trace,
                inputs,
                many.trace_names(inputs),
                range(len(inputs)),
                settings=settings,
                parts=str(parts),
            )
        )

    def reducer_func(self, results: list[many.TraceResult], out: Path) -> None:
        combined = many.combine(results)
        for reason in combined.failures:  # a damaged trace fails alone; the others are written
            logger.error(reason)
        if len(combined.failures) == len(results):
            raise exceptions.ValueError(f"none of the {len(results)} traces could be read")
        fmt = "csv" if self._parsed_args.csv else "parquet"
        for path in many.write_combined(combined, out, fmt):
            self._output_files[path.name] = fmt.capitalize()
        self._analysis_dict["FailedInputs"] = list(combined.failures)

    def save_analysis_file(self) -> None:
        self._analysis_dict.update(
            {"EndTime": str(datetime.now()), "InputFiles": self._parsed_args.input, "Outputs": self._output_files}
        )
        self.create_analysis_file()

    def run(self, context) -> None:  # type: ignore[no-untyped-def]
        super().run(context)
        out = Path(self.get_output_dir())
        parts = out / ".parts"  # the workers' per-op tables, streamed into kernels.parquet
        parts.mkdir()
        try:
            self.reducer_func(self.mapper_func(context, parts), out)
        finally:
            shutil.rmtree(parts, ignore_errors=True)
        self.save_analysis_file()

    @classmethod
    def get_argument_parser(cls):  # type: ignore[no-untyped-def]
        parser = super().get_argument_parser()
        parser.add_recipe_argument(
            "--input",
            nargs="+",
            required=True,
            action=_Traces,
            help="Traces: nsys exports (.sqlite, Arrow folders), reports (.nsys-rep), traceattr run folders, folders "
            "of these (DIR:N: the first N) or quoted glob patterns.",
        )
        parser.add_recipe_argument(Option.OUTPUT)
        parser.add_recipe_argument(Option.FORCE_OVERWRITE)
        parser.add_recipe_argument(Option.CSV)
        parser.add_recipe_argument(
            "--attribution",
            choices=MODES,
            default="nsys",
            help="nsys: every enclosing range gets an op (as nvtx_gpu_proj_trace); innermost: each op once, in its deepest range.",
        )
        parser.add_recipe_argument("--domain", help="Only ranges of this NVTX domain.")
        parser.add_recipe_argument("--match", help="Only ranges whose name (domain:message) matches this regex.")
        parser.add_recipe_argument("--rules", type=Path, help="TOML kernel-role rules tried before traceattr's own.")
        return parser
