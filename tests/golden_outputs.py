"""Before/after harness: every output of the commands the protocol work touches, written to a folder.

Run it on two checkouts and diff the folders (``diff -r``)::

    PYTHONPATH=/tmp/base python tests/golden_outputs.py /tmp/golden/before   # at 427b1f4 (git archive)
    python tests/golden_outputs.py /tmp/golden/after                          # this checkout
    diff -r /tmp/golden/before /tmp/golden/after

What it runs, all on CPU: the ``--dry-run`` of ``round`` (new and ``--retry``), ``profile`` and
``sweep`` with default and changed options and their one-line refusals (as subprocesses); whole
``round`` and ``sweep`` commands in this process with the capture (``traceattr.jobs.profile.execute``)
replaced by the synthetic captures the tests build (``tests.helpers``), so every plan.json sent to the
runner, every receipt file, sweep.json and report.html are kept; ``report`` of a round folder and
of the shipped sweep records (``examples/sweeps/*.json``); receipts rendered from records the tests
build (``tests.helpers.captures``). Not covered: runner.json as the runner writes it (needs a GPU).

Masked before writing, since they differ between any two runs: folder time stamps
(``YYYYmmdd-HHMMSS``), the report's generation date, the traceattr version, rich's elapsed
time (``0:00:01``), sweep.json's per-step ``seconds`` (the clock also stands still during the sweeps)
and the checkout's path.
Everything else is compared byte for byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/tmp/traceattr_golden_work")  # the same path for both checkouts: outputs name it
BASE, CAND = "fa3", "fa3[splits=4]"
SMOKE = ["--rows", "smoke", "--baseline", BASE, "--candidate", CAND]
SWEEP = ["-s", "q8_ctx*", "-b", "fa3", "-b", "flashmla", "--ctx-range", "8k:1m"]

DRY_RUNS: dict[str, list[str]] = {
    "round_help": ["round", "--help"],
    "profile_help": ["profile", "--help"],
    "sweep_help": ["sweep", "--help"],
    "round_default": ["round", *SMOKE, "--dry-run"],
    "round_changed": ["round", *SMOKE, "--no-hold", "--no-lead", "--max-noise", "0", "--iters", "10", "--warmup",
                      "2", "--graphs", "--between", "flush+fa2", "--flush-mb", "300", "--sensitivity", "--captures",
                      "4", "--seed", "7", "--directional-limit", "0.03", "--min-clock", "0.5", "--no-parity",
                      "--same-within", "0.02", "--confidence", "0.9", "--dry-run"],
    "round_noise": ["round", "--rows", "decode-h200", "--baseline", BASE, "--candidate", "s4=fa3[splits=4]",
                    "--max-noise", "0.01", "--max-iters", "200", "--between", "none", "--dry-run"],
    "round_hold_us_0": ["round", *SMOKE, "--hold-us", "0", "--dry-run"],
    "round_hold_us_50": ["round", *SMOKE, "--hold-us", "50", "--no-hold", "--dry-run"],
    "round_err_iters": ["round", *SMOKE, "--iters", "1", "--dry-run"],
    "round_err_noise": ["round", *SMOKE, "--max-noise", "2", "--dry-run"],
    "round_err_max_iters": ["round", *SMOKE, "--max-iters", "5", "--dry-run"],
    "round_err_between": ["round", *SMOKE, "--between", "bogus", "--dry-run"],
    "round_err_directional": ["round", *SMOKE, "--directional-limit", "0", "--dry-run"],
    "round_err_clock": ["round", *SMOKE, "--min-clock", "2", "--dry-run"],
    "round_err_rounds": ["round", *SMOKE, "--captures", "0", "--dry-run"],
    "round_err_warmup": ["round", *SMOKE, "--warmup", "0", "--dry-run"],
    "round_err_flush": ["round", *SMOKE, "--flush-mb", "-1", "--dry-run"],
    "round_err_missing": ["round", "--rows", "smoke", "--dry-run"],
    "round_err_missing_and_gate": ["round", "--directional-limit", "0", "--dry-run"],
    "round_err_retry_and_gate": ["round", "--retry", "/nonexistent", "--directional-limit", "0", "--dry-run"],
    "round_err_same": ["round", "--rows", "smoke", "--baseline", BASE, "--candidate", BASE, "--dry-run"],
    "profile_default": ["profile", "--shape", "q8_ctx900k", "--dry-run"],
    "profile_changed": ["profile", "-s", "q1_ctx8k", "-s", "q8_ctx32k", "-b", BASE, "-b", CAND, "--iters", "10",
                        "--warmup", "2", "--max-noise", "0.01", "--max-iters", "100", "--hold-us", "50", "--no-lead",
                        "--graphs", "--shuffle-pages", "--seed", "3", "--no-validate", "--flush-mb", "300",
                        "--between", "flush+fa2", "--order", "blocked", "--dry-run"],
    "profile_ranks": ["profile", "--shape", "q8_ctx1m_dcp2", "--ranks", "2", "--iters", "5", "--dry-run"],
    "profile_err_ranks": ["profile", "--shape", "q8_ctx1m_dcp2", "--ranks", "2", "--graphs", "--dry-run"],
    "profile_err_order": ["profile", "--shape", "q8_ctx900k", "--order", "bogus", "--dry-run"],
    "profile_err_hold": ["profile", "--shape", "q8_ctx900k", "--hold-us", "20000", "--dry-run"],
    "profile_err_iters": ["profile", "--shape", "q8_ctx900k", "--iters", "0", "--dry-run"],
    "profile_err_noise": ["profile", "--shape", "q8_ctx900k", "--max-noise", "1", "--dry-run"],
    "profile_err_max_iters": ["profile", "--shape", "q8_ctx900k", "--max-noise", "0.01", "--max-iters", "3",
                              "--dry-run"],
    "profile_err_flush": ["profile", "--shape", "q8_ctx900k", "--flush-mb", "0", "--dry-run"],
    "sweep_default": ["sweep", *SWEEP, "--dry-run"],
    "sweep_changed": ["sweep", *SWEEP, "--width", "0.2", "--max-steps", "6", "--graphs", "--iters", "10", "--warmup",
                      "2", "--max-noise", "0", "--hold-us", "0", "--between", "none", "--seed", "2", "--dry-run"],
    "sweep_noise": ["sweep", *SWEEP, "--max-noise", "0.01", "--max-iters", "80", "--between", "flush+fa2",
                    "--dry-run"],
    "sweep_err_width": ["sweep", *SWEEP, "--width", "2", "--dry-run"],
    "sweep_err_noise": ["sweep", *SWEEP, "--max-noise", "3", "--dry-run"],
    "sweep_err_steps": ["sweep", *SWEEP, "--max-steps", "1", "--dry-run"],
    "sweep_err_hold": ["sweep", *SWEEP, "--hold-us", "-1", "--dry-run"],
}  # fmt: skip


def masks() -> list[tuple[re.Pattern[str], str]]:
    from traceattr import __version__

    return [
        (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [+-]\d{4}"), "<DATE>"),
        (re.compile(r"\d{8}-\d{6}"), "<STAMP>"),
        (re.compile(r"\b\d+:\d\d:\d\d\b"), "<ELAPSED>"),
        (re.compile(r'"seconds": [0-9.]+'), '"seconds": <S>'),
        (re.compile(re.escape(__version__)), "<VERSION>"),
        (re.compile(re.escape(sys.executable)), "<PYTHON>"),
        (re.compile(re.escape(str(ROOT))), "<ROOT>"),  # the checkout: shipped examples are read from it
    ]


def masked(text: str) -> str:
    for pattern, replacement in masks():
        text = pattern.sub(replacement, text)
    return text


def keep(out: Path, name: str, content: str | bytes) -> None:
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    path.write_text(masked(text), encoding="utf-8")


def keep_folder(out: Path, name: str, folder: Path) -> None:
    """Every text file under *folder* (sqlite traces left out: they are the synthetic inputs)."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in (".json", ".md", ".csv", ".html", ".txt"):
            rel = path.relative_to(folder)
            keep(out, f"{name}/{masked(str(rel))}", path.read_bytes())


def dry_runs(out: Path) -> None:
    env = {**os.environ, "COLUMNS": "200", "TRACEATTR_NSYS": "/nonexistent/nsys", "PYTHONPATH": str(ROOT)}
    for name, args in DRY_RUNS.items():
        done = subprocess.run([sys.executable, "-m", "traceattr", *args, "--out-root", str(WORK / name)],
                              capture_output=True, text=True, env=env, check=False, cwd=WORK)  # fmt: skip
        keep(out, f"dry/{name}.txt", f"rc {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}")


@contextlib.contextmanager
def replaced(name: str, fake: Callable[..., Any]) -> Iterator[None]:
    """``traceattr.jobs.profile.<name>`` replaced by *fake* wherever a traceattr module bound it."""
    import traceattr.jobs.profile as profile

    original = getattr(profile, name)
    bound = [(m, attr) for m in list(sys.modules.values()) if (getattr(m, "__name__", "") or "").startswith("traceattr")
             for attr, v in list(vars(m).items()) if v is original]  # fmt: skip
    for module, attr in bound:
        setattr(module, attr, fake)
    try:
        yield
    finally:
        for module, attr in bound:
            setattr(module, attr, original)


def cli(*args: str) -> str:
    from traceattr.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    return f"rc {code or 0}\n--- stdout\n{stdout.getvalue()}--- stderr\n{stderr.getvalue()}"


def import_commands() -> None:
    from traceattr.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(["--help"])  # registers every command (and imports their modules)


def rounds(out: Path) -> None:
    """Whole rounds through the CLI, the captures synthetic; then a retry and ``report`` of the folder."""
    import polars as pl

    import traceattr.jobs.profile as profile
    from tests.helpers import synth_capture, timing

    plans: list[dict[str, Any]] = []

    def fake_execute(plan: Any, on_line: Any = None, *, report: bool = True) -> Any:
        plans.append(plan.run.to_json())
        plan.folder.mkdir(parents=True)
        for shape in plan.run.shapes:
            on_line(f"[traceattr] timing {shape}: 2 arms × {plan.run.iters} calls")
        index = len(plans) - 1
        ratio = 0.9 if len(plans) < 100 else 1.0
        cap = synth_capture(plan.folder, index, plan.backends, timing(ratio, seed=index, first_bias=bias[0]),
                            order=plan.run.order, name="trace.sqlite")  # fmt: skip
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())

    bias = [0.0]
    cases = {
        "default": [*SMOKE],
        "changed": [*SMOKE, "--iters", "8", "--sensitivity", "--between", "flush+fa2", "--no-lead", "--no-hold",
                    "--max-noise", "0.01", "--max-iters", "40", "--flush-mb", "300", "--captures", "2", "--seed", "5",
                    "--graphs", "--directional-limit", "0.05", "--min-clock", "0.6"],
        "biased": [*SMOKE, "--iters", "8", "--sensitivity"],
    }  # fmt: skip
    with replaced("execute", fake_execute), replaced("require_runnable", lambda *a, **k: None):
        for name, args in cases.items():
            bias[0] = 0.05 if name == "biased" else 0.0
            plans.clear()
            root = WORK / f"round_{name}"
            keep(out, f"round/{name}/stdout.txt", cli("round", *args, "--out-root", str(root)))
            keep(out, f"round/{name}/plans.json", json.dumps(plans, indent=1, default=str))
            (folder,) = root.iterdir()
            keep_folder(out, f"round/{name}/folder", folder)
            keep(out, f"round/{name}/report_cmd.txt", cli("report", str(folder), "-o", str(WORK / f"{name}.html")))
            keep(out, f"round/{name}/report_cmd.html", (WORK / f"{name}.html").read_bytes())
            retry = WORK / f"retry_{name}"
            keep(out, f"round/{name}/retry_dry.txt", cli("round", "--retry", str(folder), "--dry-run", "--out-root",
                                                         str(retry)))  # fmt: skip
            keep(out, f"round/{name}/retry_dry5.txt", cli("round", "--retry", str(folder / "receipt.json"),
                                                          "--captures", "5", "--dry-run", "--out-root", str(retry)))  # fmt: skip
            keep(out, f"round/{name}/retry_err.txt", cli("round", "--retry", str(folder), "--iters", "5"))
            bias[0] = 0.0
            plans.clear()
            keep(out, f"round/{name}/retry_run.txt", cli("round", "--retry", str(folder), "--out-root", str(retry)))
            keep(out, f"round/{name}/retry_plans.json", json.dumps(plans, indent=1, default=str))
            if retry.exists():
                for sub in sorted(retry.iterdir()):
                    keep_folder(out, f"round/{name}/retry_folder", sub)


def sweeps(out: Path) -> None:
    """Whole sweeps through the CLI with synthetic captures; ``report`` of every shipped sweep record."""
    import polars as pl

    import traceattr.jobs.profile as profile
    from tests.helpers import linear_time, sweep_capture

    plans: list[dict[str, Any]] = []

    def fake_execute(plan: Any, on_line: Any = None, *, report: bool = True) -> Any:
        plans.append(plan.run.to_json())
        plan.folder.mkdir(parents=True)
        n = len(plans) - 1  # the capture's number: `index` since receipt/2, `round` before
        request = SimpleNamespace(shapes=plan.run.shapes, arms=plan.backends, index=n, round=n)
        cap = sweep_capture(plan.folder, request, linear_time, 12, len(plans))
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())

    cases = {
        "default": [*SWEEP],
        "changed": [*SWEEP, "--width", "0.2", "--max-steps", "6", "--graphs", "--iters", "10", "--max-noise", "0",
                    "--hold-us", "0", "--between", "none", "--seed", "2"],
    }  # fmt: skip
    import time

    # a step's seconds are shown (sweep.json, the page): the clock stands still while the fakes run
    clock = time.time
    time.time = lambda: 1_800_000_000.0  # type: ignore[assignment]
    with replaced("execute", fake_execute), replaced("require_runnable", lambda *a, **k: None):
        for name, args in cases.items():
            plans.clear()
            root = WORK / f"sweep_{name}"
            keep(out, f"sweep/{name}/stdout.txt", cli("sweep", *args, "--out-root", str(root)))
            keep(out, f"sweep/{name}/plans.json", json.dumps(plans, indent=1, default=str))
            (folder,) = root.iterdir()
            keep_folder(out, f"sweep/{name}/folder", folder)
            keep(out, f"sweep/{name}/report_cmd.txt", cli("report", str(folder), "-o", str(WORK / f"s{name}.html")))
            keep(out, f"sweep/{name}/report_cmd.html", (WORK / f"s{name}.html").read_bytes())
    time.time = clock  # type: ignore[assignment]
    for record in sorted((ROOT / "examples" / "sweeps").glob("*.json")):
        target = WORK / f"{record.stem}.html"
        keep(out, f"sweep/examples/{record.stem}.txt", cli("report", str(record), "-o", str(target)))
        keep(out, f"sweep/examples/{record.stem}.html", target.read_bytes() if target.exists() else "(none)")


def round_plan(**kw: Any) -> Any:
    """A RoundPlan from the keywords both versions know: the protocol's fields loose (427b1f4) or in a record."""
    from dataclasses import fields, replace

    from traceattr.jobs.round import RoundPlan

    names = {f.name for f in fields(RoundPlan)}
    if "captures" in names and "rounds" in kw:  # the field's name since receipt/2
        kw = dict(kw)
        kw["captures"] = kw.pop("rounds")
    if "protocol" not in names:
        return RoundPlan(**kw)
    own = {k: v for k, v in kw.items() if k in names}
    protocol = replace(RoundPlan(**{**own, "rows_source": ""}).protocol,
                       **{k: v for k, v in kw.items() if k not in names and k != "hold"})  # fmt: skip
    return RoundPlan(**own, protocol=protocol.held(kw.get("hold", protocol.hold)))


def receipts(out: Path) -> None:
    """Receipts from the records the tests build: markdown, csv, json and protocol text of each."""
    from tests.helpers import BASE, CAND, ROWS, US, FakeExecutor, captures, synth_capture, timing
    from traceattr.analysis.rounds import Gates, Receipt, round_rows
    from traceattr.jobs.round import run_round
    from traceattr.present.receipt import markdown, protocol_text, with_causes

    tmp = WORK / "receipts"
    tight = Gates(directional_limit=1e-6)

    def write(name: str, receipt: Receipt) -> None:
        keep(out, f"receipts/{name}.md", markdown(receipt))
        keep(out, f"receipts/{name}.csv", receipt.csv_frame().write_csv())
        keep(out, f"receipts/{name}.json", json.dumps(receipt.to_json(), indent=1, default=str))
        keep(out, f"receipts/{name}.protocol.txt", protocol_text(receipt.header))

    plans = {
        "plain": {},
        "noise": {"max_noise": 0.005, "max_iters": 500},
        "nohold": {"hold": False, "lead": False, "between": "none", "graphs": True, "seed": 4},
        "flush": {"flush_bytes": 300 << 20, "between": "flush+fa2", "sensitivity": True, "rounds": 5},
    }
    for name, kw in plans.items():
        folder = tmp / name
        folder.mkdir(parents=True)
        header = round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=folder / "r", **kw).header()
        keep(out, f"receipts/header_{name}.json", json.dumps(header, indent=1, default=str))
        write(f"header_{name}", Receipt(header, round_rows(ROWS, captures(folder, timing(0.9), count=3), BASE, CAND)))
    scenarios: dict[str, dict[str, Any]] = {
        "biased": {"t": timing(0.9, first_bias=0.05), "sensitivity": True},
        "same": {"t": timing(1.0)},
        "slower": {"t": timing(1.1, noise=0.01), "max_noise": 0.004, "max_iters": 300},
        "hostbound": {"t": timing(1.0), "gaps": lambda _s, arm, _i: 40 * US if arm == CAND else 0},
        "lowclock": {"t": timing(0.9), "fraction": 0.5},
        "parity": {"t": timing(0.9), "sha": ("ab" * 32, "cd" * 32)},
        "unavailable": {"t": timing(0.9), "skip": {CAND}},
    }
    for name, kw in scenarios.items():
        t = kw.pop("t")
        runner = {k: kw.pop(k) for k in ("gaps", "fraction", "sha", "skip") if k in kw}
        fake = FakeExecutor(tmp / f"x_{name}", t, **runner)
        (tmp / f"x_{name}").mkdir(parents=True)
        plan = round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp / f"run_{name}", rows_source="smoke",
                          **kw)  # fmt: skip
        seen: list[str] = []
        receipt = run_round(plan, fake, on_progress=seen.append, on_line=seen.append)
        keep(out, f"receipts/run_{name}.progress.txt", "\n".join(seen))
        write(f"run_{name}", receipt)
        keep_folder(out, f"receipts/run_{name}.folder", plan.folder)
    (tmp / "tight").mkdir(parents=True)
    caps = captures(tmp / "tight", timing(1.0), count=3)
    header = {"baseline": BASE, "candidate": CAND, "gates": {"directional_limit": 0.02, "min_clock": 0.7},
              "protocol": {"lead": True}}  # fmt: skip
    write("tight", with_causes(Receipt(header, round_rows(ROWS, caps, BASE, CAND, tight))))
    late = tmp / "late"
    late.mkdir()
    gaps = captures(late, timing(1.0), count=2, gaps=lambda _s, arm, _i: 40 * US if arm == CAND else 0,
                    hold={"groups": 8, "timeouts": 1, "gpu_wait_us": {"median": 3.0, "max": 9.0}})  # fmt: skip
    write("late", with_causes(Receipt(header, round_rows(ROWS, gaps, BASE, CAND, tight))))
    one = synth_capture(late, 9, (BASE, CAND), timing(0.9))
    write("bare_header", Receipt({"baseline": BASE, "candidate": CAND}, round_rows(ROWS, [one], BASE, CAND)))
    for name, h in {
        "old_hold_us": {"protocol": {"captures": 3, "iters": 20, "hold_us": 100.0, "between": "flush"}},
        "old_no_lead": {"protocol": {"captures": 2, "iters": 20, "hold_us": 0.0, "max_noise": 0.005, "max_iters": 100}},
        "empty": {},
    }.items():
        keep(out, f"receipts/protocol_{name}.txt", protocol_text(h))


def main(argv: list[str]) -> None:
    out = Path(argv[0]).resolve()
    sys.argv = ["golden_outputs.py"]  # headers record argv: the same for both checkouts
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    os.chdir(WORK)
    sys.path.insert(0, str(ROOT))  # this checkout's traceattr and tests.helpers, before any installed one
    os.environ["COLUMNS"] = "200"
    os.environ["TRACEATTR_NSYS"] = "/nonexistent/nsys"
    import traceattr

    print(f"traceattr from {Path(traceattr.__file__).parent}", file=sys.stderr)
    dry_runs(out)
    import_commands()
    receipts(out)
    rounds(out)
    sweeps(out)


if __name__ == "__main__":
    main(sys.argv[1:])
