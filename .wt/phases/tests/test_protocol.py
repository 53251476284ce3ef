"""traceattr.core.protocol (the measuring protocol and the gates as records), the command-line options
made from them (traceattr.cli.options) and the runner's progress events (traceattr.core.progress)."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import click
import pytest

from tests.helpers import cli, one_line
from traceattr.cli import load_command
from traceattr.cli.options import FIXED_FIELDS, PROTOCOL_OPTIONS, options_of, protocol_of
from traceattr.core.errors import TraceError
from traceattr.core.progress import PREFIX, Progress, parse
from traceattr.core.protocol import HOLD_ON_US, PRESETS, PROFILE, ROUND, SWEEP, Gates, Protocol
from traceattr.core.records import RunPlan


def test_protocol_and_gates_round_trip_through_json() -> None:
    p = Protocol(iters=8, warmup=2, max_noise=0.01, max_iters=40, hold_us=HOLD_ON_US, lead=False, between="none",
                 flush_bytes=300 << 20, graphs=True, seed=5, order="blocked", sensitivity=True)  # fmt: skip
    assert Protocol.from_json(json.loads(json.dumps(p.to_json()))) == p
    g = Gates(directional_limit=0.05, min_clock=0.5, parity=False, confidence=0.9, same_within=0.02)
    assert Gates.from_json(json.loads(json.dumps(g.to_json()))) == g
    assert p.to_json()["schema"] == "traceattr.protocol/1"


def test_old_headers_read_as_they_ran() -> None:
    # a receipt written while the hold was a spin length and before leads: hold on, no lead
    old = Protocol.from_json({"rounds": 3, "iters": 20, "hold_us": 50.0, "between": "flush"})
    assert old.hold and old.hold_us == 50.0 and not old.lead and old.iters == 20
    # a receipt's hold flag wins over hold_us; a sweep's header says the order in words
    assert not Protocol.from_json({"hold": False, "hold_us": 100.0}).hold
    assert Protocol.from_json({"order": "abba, arm order alternating between steps"}).order == "abba"
    assert Protocol.from_json({}) == replace(Protocol(), lead=False)
    assert Gates.from_json({"directional_limit": 0.03}) == Gates(directional_limit=0.03)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ({"iters": "20"}, "iters must be an integer, got str '20'"),
        ({"max_noise": 2}, "max_noise must lie in (0, 1)"),
        ({"iters": 20, "max_iters": 5}, "max_iters must lie in [20, 1000000], got 5"),
        ({"lead": None}, "lead must not be null"),
        ({"schema": "traceattr.protocol/9"}, "schema is 'traceattr.protocol/9'"),
    ],
)
def test_a_bad_protocol_is_one_line_naming_the_file_field_and_value(content: dict, needle: str) -> None:
    with pytest.raises(TraceError) as err:
        Protocol.from_json(content, "plan.json")
    assert str(err.value).startswith("plan.json: unreadable protocol (") and needle in str(err.value)
    with pytest.raises(TraceError, match=r"gates\.json: unreadable gates \(directional_limit must lie in"):
        Gates.from_json({"directional_limit": 0}, "gates.json")


def test_presets_keep_each_commands_defaults() -> None:
    assert (PROFILE.max_noise, PROFILE.max_iters, PROFILE.hold_us) == (None, None, 0.0)
    assert (ROUND.max_noise, ROUND.max_iters, ROUND.hold_us) == (0.005, 500, HOLD_ON_US) and SWEEP == ROUND
    # the runner's plan takes its defaults from the record
    plan = RunPlan(shapes=("s",), arms=("a",))
    assert replace(plan.protocol, flush_bytes=None) == PROFILE
    assert RunPlan.of(("s",), ("a",), ROUND, flush_bytes=1 << 20).protocol == replace(ROUND, flush_bytes=1 << 20)


def _command(name: str) -> click.Command:
    return load_command(name)  # the command as it runs (the table builds each command when it runs)


@pytest.mark.parametrize("command", sorted(PRESETS))
def test_every_protocol_field_has_its_option_and_its_default_is_the_presets(command: str) -> None:
    options = options_of(command)
    covered = {o.field for o in options if o.field and not o.gate}
    assert covered | FIXED_FIELDS[command] == {f.name for f in fields(Protocol)}
    assert not covered & FIXED_FIELDS[command]
    if command == "round":  # the round's gates are options too
        assert {o.field for o in options if o.gate} == {f.name for f in fields(Gates)}
    params = {p.name: p for p in _command(command).params}
    for option in options:
        assert params[option.param].default == option.default_value(PRESETS[command], Gates()), option.param
    # the options as given by default make the preset itself
    defaults = {o.param: params[o.param].default for o in options}
    assert protocol_of(command, defaults) == (PRESETS[command], Gates())
    assert all(isinstance(o, str) or o.param in params for o in PROTOCOL_OPTIONS[command])


def test_round_options_make_the_record() -> None:
    params = {p.name: p.default for p in _command("round").params}
    values = {**params, "max_noise": 0.0, "hold": False, "flush_mb": 300, "directional_limit": 0.05}
    protocol, gates = protocol_of("round", values)
    assert (protocol.max_noise, protocol.max_iters, protocol.hold_us) == (None, None, 0.0)
    assert protocol.flush_bytes == 300 << 20 and gates.directional_limit == 0.05
    assert protocol_of("round", {**params, "hold": False, "hold_us": 50.0})[0].hold  # the old --hold-us


def test_progress_events_read_back_as_written() -> None:
    event = Progress.timing_of("q1_ctx8k_h16_b1_bf16_p64", "2 arms × 20 calls (abba, between: flush)")
    assert event.line.startswith(PREFIX) and parse(event.line) == event
    assert parse(Progress("fa3: ok").line) == Progress("fa3: ok")
    assert parse("Generating '/tmp/nsys-report-1.qdstrm'") is None  # nsys's own line


def test_the_rounds_own_refusals_come_before_a_gates(capsys: pytest.CaptureFixture[str]) -> None:
    # the gates are made when the command asks for them: a missing --rows, or --retry with a gate, is said first
    rc, _, err = cli(capsys, "round", "--directional-limit", "0")
    one_line(rc, err, "missing --rows, --baseline, --candidate")
    rc, _, err = cli(capsys, "round", "--retry", "/nonexistent", "--directional-limit", "0")
    one_line(rc, err, "--retry takes rows, arms, protocol and gates from the receipt; drop --directional-limit")
    rc, _, err = cli(capsys, "round", "--rows", "smoke", "--baseline", "fa3", "--candidate", "fa2",
                     "--directional-limit", "0", "--dry-run")  # fmt: skip
    one_line(rc, err, "the directional-disagreement limit must be a positive number, got 0.0")
