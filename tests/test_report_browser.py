"""The report in a real browser: headless Chromium opens it from disk and nothing goes wrong.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so the
test needs no websocket library, no free port and no browser download, only
Debian's ``chromium``. It fails on any console error or warning-level
browser log, uncaught exception, JavaScript dialog (an injected
``alert``), or request for anything but the file itself; it checks that every
plot drew marks into its SVG, and that the page's controls work.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import traceattr
from tests.helpers import EXAMPLE, PLOTS, flashmla_export
from traceattr.core.records import SweepRecord
from traceattr.present.report import write_report
from traceattr.present.report.sweep import write_sweep_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Skipped where Chromium is missing, unless TRACEATTR_REQUIRE_BROWSER=1 (CI, next to its apt-get install):
# then a missing browser fails instead of passing quietly.
REQUIRE = os.environ.get("TRACEATTR_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.browser
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-dev-shm-usage", "--window-size=1400,1000", "--remote-debugging-pipe",
)  # fmt: skip
TIMEOUT_S = 30.0


class Browser:
    """A headless Chromium and one page, spoken to over the DevTools pipe; records what the page reports."""

    def __init__(self, profile: Path, log: Path) -> None:
        to_chrome_r, self._out = os.pipe()
        self._in, from_chrome_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        actions = [
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
            (os.POSIX_SPAWN_DUP2, to_chrome_r, 3),  # chromium reads commands on fd 3 …
            (os.POSIX_SPAWN_DUP2, from_chrome_w, 4),  # … and writes answers and events on fd 4
        ]
        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"]
        self.pid = os.posix_spawn(CHROMIUM, argv, os.environ, file_actions=actions)
        for fd in (to_chrome_r, from_chrome_w, devnull):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=True)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        reply = self._wait(lambda m: m.get("id") == self._next_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        return self._wait(lambda m: m.get("method") == method)

    def _wait(self, done: Any) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if done(message):
                    return message
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raise TimeoutError("no answer from chromium")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)  # fmt: skip
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, browser log errors, dialogs, non-local requests."""
        self.evaluate("0")  # a round trip: every event the page sent before it is read
        out = []
        for e in self.events:
            method, p = e["method"], e.get("params", {})
            if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p['args']]}")
            elif method == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('exception', {}).get('description')}")
            elif method == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']} {p['entry'].get('url', '')}")
            elif method == "Page.javascriptDialogOpening":
                out.append(f"dialog: {p.get('message')}")
            elif method == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith(("file:", "data:", "blob:", "about:")):
                    out.append(f"request: {url}")
        return out

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):  # it may be gone already
            self.send("Browser.close")
        for _ in range(50):
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self._in)
        os.close(self._out)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        (pytest.fail if REQUIRE else pytest.skip)("needs headless Chromium: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="traceattr-chromium-") as tmp:
        b = Browser(Path(tmp) / "profile", Path(tmp) / "chromium.log")
        try:
            yield b
        finally:
            b.close()


# Per plot div: whether plotly drew it, and what it drew (SVG marks inside the plot area).
RENDERED = """
Array.from(document.querySelectorAll('div.plotly-graph-div')).map(function (gd) {
  var svg = gd.querySelector('svg.main-svg'), box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return {id: gd.id, laidOut: !!gd._fullLayout, width: box.width, height: box.height,
          traces: gd.querySelectorAll('svg.main-svg .trace').length,
          marks: gd.querySelectorAll('svg.main-svg .trace path').length};
})
"""


def _open_report(browser: Browser, page: Path) -> list[dict[str, Any]]:
    browser.events.clear()
    browser.open(page.as_uri())
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # figures draw after the load event: wait until every one has marks
        plots = browser.evaluate(RENDERED)
        if all(p["marks"] > 0 for p in plots) or time.monotonic() > deadline:
            return plots
        time.sleep(0.1)


@pytest.mark.slow
def test_example_report_renders_without_errors(browser: Browser, tmp_path: Path) -> None:
    page = write_report(traceattr.open(EXAMPLE).attribute(), tmp_path / "report.html").path
    plots = _open_report(browser, page)
    assert [p["id"] for p in plots] == list(PLOTS)
    for p in plots:
        assert p["laidOut"] and p["width"] > 300 and p["height"] > 200 and p["traces"] > 0 and p["marks"] > 0, p
    assert browser.problems() == []

    # the timeline picker switches views: other traces, other title, no error
    before = browser.evaluate("document.getElementById('fig-timeline').layout.title.text")
    switched = browser.evaluate("""
      (function () {
        var sel = document.querySelector('select[data-views="fig-timeline"]');
        sel.value = String(sel.options.length - 1);
        sel.dispatchEvent(new Event('change'));
        var gd = document.getElementById('fig-timeline');
        return {title: gd.layout.title.text, visible: gd.data.filter(function (t) { return t.visible === true; }).length,
                marks: gd.querySelectorAll('svg.main-svg .trace path').length,
                divHeight: gd.style.height, height: gd.layout.height};
      })()
    """)
    assert switched["title"] != before and switched["visible"] >= 1 and switched["marks"] > 0, switched
    assert switched["divHeight"] == f"{switched['height']}px"  # the page makes room for the view's lanes
    # the table sorts: ascending median puts the fastest call (fa3 at q1_ctx131072, 80.45 µs) first
    first = browser.evaluate("""
      (function () {
        var th = document.querySelector('table.numbers th[data-key="median"]');
        th.click();
        return document.querySelector('table.numbers tbody tr td:nth-child(4)').textContent;
      })()
    """)
    assert first == "80.45"
    # the attribution opens in µs; its toggle shows shares
    assert browser.evaluate("document.getElementById('fig-attribution').layout.yaxis.title.text") == (
        "µs of the median call"
    )
    title = browser.evaluate("""
      new Promise(function (done) {
        var gd = document.getElementById('fig-attribution');
        var button = gd.querySelectorAll('.updatemenu-button')[1];
        button.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        setTimeout(function () { done(gd.layout.yaxis.title.text); }, 300);
      })
    """)
    assert title == "% of the median call"
    assert browser.problems() == []


SWEEP = EXAMPLE.with_name("h200_mla_sweep.sqlite")
RULE = "fa3 below ≈238k ctx, flashmla above"


@pytest.mark.slow
def test_report_opens_on_the_decision(browser: Browser, tmp_path: Path) -> None:
    """The shipped sweep's report states its rule and winners on the first screen; metadata waits, folded."""
    page = write_report(traceattr.open(SWEEP).attribute(), tmp_path / "sweep.html").path
    _open_report(browser, page)
    seen = browser.evaluate(
        "var RULE = "
        + json.dumps(RULE)
        + ";"
        + """
      (function () {
        var text = document.body.innerText, rule = document.querySelector('#decision ul.rules li');
        var ctx = document.getElementById('fig-context'), names = Array.from(
          ctx.querySelectorAll('svg.main-svg .textpoint text')).map(function (t) { return t.textContent; });
        var ys = ctx.data.filter(function (t) { return t.meta === 'ratio'; })
          .reduce(function (m, t) { return Math.max(m, Math.max.apply(null, t.y)); }, 0);
        return {at: text.indexOf(RULE), ruleBottom: rule.getBoundingClientRect().bottom, screen: window.innerHeight,
                winners: document.querySelectorAll('#decision table.winners tbody tr').length,
                table: document.querySelector('table.numbers').scrollWidth, names: names, maxRatio: ys,
                yTop: Math.pow(10, ctx._fullLayout.yaxis.range[1]), yType: ctx._fullLayout.yaxis.type,
                runFolded: !document.querySelector('#run details').open,
                metadataAt: text.indexOf('Nsight Systems'), noteAt: text.indexOf('NVTX names longer')};
      })()
    """
    )
    assert 0 <= seen["at"] < 1500, seen  # within the first ~1,500 characters of the visible text …
    assert seen["ruleBottom"] < seen["screen"], seen  # … and above the fold
    assert seen["winners"] == 5  # one line per shape
    assert seen["table"] <= 1600, seen
    # the decision chart: log ratio axis reaching the slowest backend, every backend named on the chart
    assert seen["yType"] == "log" and seen["yTop"] >= seen["maxRatio"], seen
    assert {"fa3", "fa3-per-token", "fa2", "flashmla"} <= set(seen["names"]), seen
    # run metadata and loader notes: at the end, folded (not in the visible text)
    assert seen["runFolded"] and seen["metadataAt"] == -1 and seen["noteAt"] == -1, seen
    assert browser.problems() == []


SWEEP_RECORD = Path(__file__).parents[1] / "examples" / "sweeps" / "h200_q8_fa3_flashmla_eager.json"
ANSWER = "q8_ctx* (eager): the step budget ran out (6 captures); the crossover lies in 138k–170k (154k ±10.4%)"


@pytest.mark.slow
def test_sweep_report_opens_on_the_answer_then_the_bisection(browser: Browser, tmp_path: Path) -> None:
    """A sweep's page (the H200 eager search): the answer above the fold, every step on the chart, the
    refused one a cross whose hover names its gate, the bracket shaded, the regret table, metadata folded."""
    page = write_sweep_report(SweepRecord.read(SWEEP_RECORD), tmp_path / "sweep.html", "sweep")
    plots = _open_report(browser, page)
    assert [p["id"] for p in plots] == ["fig-sweep"]
    (plot,) = plots
    assert plot["laidOut"] and plot["width"] > 300 and plot["height"] > 300 and plot["marks"] > 0, plot
    seen = browser.evaluate(
        "var ANSWER = "
        + json.dumps(ANSWER)
        + ";"
        + """
      new Promise(function (done) {
        var text = document.body.innerText, answer = document.querySelector('#answer ul.rules li');
        var gd = document.getElementById('fig-sweep');
        var refused = gd.data.findIndex(function (t) { return t.meta === 'refused'; });
        var labels = Array.from(gd.querySelectorAll('svg.main-svg .textpoint text')).map(function (t) {
          return t.textContent; });
        var points = gd.data.map(function (t) { return [t.meta, t.x.length]; });
        var bracket = gd._fullLayout.shapes.filter(function (s) { return s.fillcolor === 'rgba(26,127,55,0.12)'; })
          .map(function (s) { return [Math.round(s.x0), Math.round(s.x1)]; });
        Plotly.Fx.hover(gd, [{curveNumber: refused, pointNumber: 0}]);
        setTimeout(function () {
          var hover = gd.querySelector('.hoverlayer');
          done({at: text.indexOf(ANSWER), answerBottom: answer.getBoundingClientRect().bottom,
                screen: window.innerHeight, labels: labels, points: points, bracket: bracket,
                hover: hover ? hover.textContent : '', regretRows: document.querySelectorAll(
                  '#dispatch table.regret tbody tr').length,
                folded: !document.querySelector('#metadata details').open,
                metadataAt: text.indexOf('directional_limit')});
        }, 300);
      })
    """
    )
    assert 0 <= seen["at"] < 600 and seen["answerBottom"] < seen["screen"], seen
    assert sorted(seen["labels"]) == ["1", "1", "2", "3", "4", "5", "6"], seen  # every step drawn, numbered
    assert dict(seen["points"]) == {"below": 4, "above": 2, "refused": 1}
    assert seen["bracket"] == [[138000, 170000]]
    assert "refused: directional 0.0234 > 0.02" in seen["hover"], seen
    assert seen["regretRows"] == 4  # the table, leave-one-out, always fa3, always flashmla
    assert seen["folded"] and seen["metadataAt"] == -1
    assert browser.problems() == []


DECODE = Path(__file__).parents[1] / "examples" / "decode" / "q8_grow.json"


@pytest.mark.slow
def test_decode_report_opens_on_the_answer_then_the_trajectory(browser: Browser, tmp_path: Path) -> None:
    """A decode receipt's page (H200 q8 grow): the answer above the fold, the trajectory drawn, nothing wrong."""
    from traceattr.jobs.decode import result_from_json
    from traceattr.jobs.decode_report import write_decode_report

    result = result_from_json(json.loads(DECODE.read_text(encoding="utf-8")))
    page = write_decode_report(result, tmp_path / "decode.html", "decode")
    plots = _open_report(browser, page)
    assert [p["id"] for p in plots] == ["fig-trajectory"]
    (plot,) = plots
    assert plot["laidOut"] and plot["width"] > 300 and plot["height"] > 300 and plot["marks"] > 0, plot
    seen = browser.evaluate("""
      (function () {
        var text = document.body.innerText, answer = document.querySelector('#answer ul.rules li');
        var gd = document.getElementById('fig-trajectory');
        return {at: text.indexOf('Dispatcher 4,593.4'), answerBottom: answer.getBoundingClientRect().bottom,
                screen: window.innerHeight, traces: gd.data.map(function (t) { return [t.meta, t.x.length]; })};
      })()
    """)  # fmt: skip
    assert 0 <= seen["at"] < 600 and seen["answerBottom"] < seen["screen"], seen
    assert seen["traces"] == [["fa3", 40], ["flashmla", 40], ["dispatch", 40]]
    assert browser.problems() == []
    # with the run's nsys export (q8_nsys): the timeline of a few steps draws, and its picker switches steps
    import lzma

    nsys = DECODE.with_name("q8_nsys.json")
    trace = tmp_path / "q8_nsys.sqlite"
    trace.write_bytes(lzma.decompress(nsys.with_name("q8_nsys.sqlite.xz").read_bytes()))
    page = write_decode_report(result_from_json(json.loads(nsys.read_text(encoding="utf-8"))),
                               tmp_path / "nsys.html", "nsys", trace)  # fmt: skip
    plots = _open_report(browser, page)
    assert [p["id"] for p in plots] == ["fig-trajectory", "fig-timeline"] and all(p["marks"] > 0 for p in plots)
    title = browser.evaluate("""
      new Promise(function (done) {
        var sel = document.querySelector('select[data-views="fig-timeline"]');
        sel.value = String(sel.options.length - 1);
        sel.dispatchEvent(new Event('change'));
        setTimeout(function () { done(document.getElementById('fig-timeline').layout.title.text); }, 300);
      })
    """)  # fmt: skip
    assert title.startswith("Steps (iteration 0) — step 7: ctx 900,000"), title
    assert browser.problems() == []


@pytest.mark.slow
def test_hostile_names_stay_text_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    att = traceattr.open(flashmla_export(tmp_path / "flashmla.sqlite")).attribute()
    page = write_report(att, tmp_path / "report.html").path
    plots = _open_report(browser, page)
    assert all(p["marks"] > 0 for p in plots), plots
    # no element was made from a name: the only <script> elements are the page's own
    scripts = browser.evaluate("document.querySelectorAll('script').length")
    assert scripts == 1 + len(PLOTS) + 1  # plotly.js, one per figure, the page's controls
    # show the hostile call and hover its kernel: the name is text in the hover label
    hover = browser.evaluate("""
      new Promise(function (done) {
        var sel = document.querySelector('select[data-views="fig-timeline"]');
        var opt = Array.from(sel.options).find(function (o) {
          return o.parentNode.label === 'q8_ctx128k · flashmla' && o.textContent.indexOf('iter 0 ') >= 0; });
        sel.value = opt.value;
        sel.dispatchEvent(new Event('change'));
        var gd = document.getElementById('fig-timeline');
        var evil = gd.data.findIndex(function (t) { return t.visible === true && t.name === 'other'; });
        Plotly.Fx.hover(gd, [{curveNumber: evil, pointNumber: 0}]);
        setTimeout(function () {
          var label = gd.querySelector('.hoverlayer');
          done({text: label ? label.textContent : '', scripts: document.querySelectorAll('script').length});
        }, 300);
      })
    """)
    assert "void evil<script>alert(1)</script>()" in hover["text"], hover
    assert hover["scripts"] == scripts
    assert browser.problems() == []


@pytest.mark.slow
def test_a_round_with_stamps_draws_inside_the_kernel(browser: Browser, tmp_path: Path) -> None:
    """A stamped round's page: which phase moved in the receipt, the phase figures drawn, the CTA picker works."""
    from tests.synth.stamped import stamped_round

    folder = stamped_round(tmp_path / "round", captures=2)
    plots = {p["id"]: p for p in _open_report(browser, folder / "report.html")}
    for name in ("fig-phases", "fig-cta"):
        assert plots[name]["laidOut"] and plots[name]["marks"] > 0 and plots[name]["width"] <= 1400, plots[name]
    assert browser.evaluate("document.querySelector('#round').innerText.indexOf('Which phase moved') > 0")
    switched = browser.evaluate("""
      (function () {
        var sel = document.querySelector('select[data-views="fig-cta"]');
        sel.value = String(sel.options.length - 1);
        sel.dispatchEvent(new Event('change'));
        var gd = document.getElementById('fig-cta');
        return {lanes: gd.layout.yaxis.categoryarray.length, height: gd.layout.height, divHeight: gd.style.height,
                visible: gd.data.filter(function (t) { return t.visible === true; }).map(function (t) { return t.meta; })};
      })()
    """)
    assert set(switched["visible"]) == {3} and switched["lanes"] == 2 + 32 + 4  # two nsys kernels, 32 + 4 CTAs
    assert switched["divHeight"] == f"{switched['height']}px"
    assert browser.problems() == []


@pytest.mark.slow
def test_the_harness_sees_problems(browser: Browser, tmp_path: Path) -> None:
    """The checks above can fail: a page that logs an error, throws and fetches is caught on each count."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>"
        "console.error('broken'); fetch('http://127.0.0.1:9/nothing').catch(function () {});"
        "setTimeout(function () { null.x; }, 0);"
        "</script></body></html>",
        encoding="utf-8",
    )
    browser.events.clear()
    browser.open(page.as_uri())
    time.sleep(0.5)
    found = "\n".join(browser.problems())
    assert "console.error: ['broken']" in found
    assert "exception: TypeError" in found
    assert "request: http://127.0.0.1:9/nothing" in found


ROUND = Path(__file__).parents[1] / "examples" / "rounds" / "h200_smoke_fa2_vs_fa3"


@pytest.mark.slow
def test_round_page_fits_1400_px_and_states_the_receipt(browser: Browser, tmp_path: Path) -> None:
    """The shipped round's page in a 1,400 px window: no table scrolls or is cut (the evidence table ran past it,
    its host-bound column hidden), and its decision section is the receipt's (the refused row with its gate)."""
    from traceattr.jobs.round import read_receipt, write_round_report

    page = write_round_report(read_receipt(ROUND), ROUND, tmp_path / "round.html")
    _open_report(browser, page)
    seen = browser.evaluate("""
      (function () {
        var wraps = Array.from(document.querySelectorAll('.table-wrap'));
        return {tables: wraps.length, cut: wraps.filter(function (w) { return w.scrollWidth > w.clientWidth + 1; })
                  .map(function (w) { return w.closest('section').id + ' ' + w.scrollWidth + '>' + w.clientWidth; }),
                decision: document.querySelector('#decision').innerText, width: window.innerWidth};
      })()
    """)
    assert seen["width"] == 1400 and seen["tables"] >= 3 and seen["cut"] == [], seen
    assert "q1_ctx8k_h16_b1_bf16_p64: directional 0.0201 > 0.02" in seen["decision"], seen["decision"]
    assert "(first capture)" not in seen["decision"].splitlines()[0]
    assert browser.problems() == []
