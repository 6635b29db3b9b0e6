"""A server's resource templates cannot make Keen parse without end.

The SDK's ``UriTemplate.parse`` costs about 10 µs a variable; a template may have 256 and a
server may list 10,000 of them. Keen parsed every one at each catalog build (for the
variables a summary names) and ``keen serve`` parsed every one of the server's templates at
each read it checked (is the URI one of the server's?), on the event loop: half a minute in
which no host's call of any server was answered. A summary now reads the variables of a
template of more than 16 from the expressions as written (one of fewer is parsed, so one the
SDK refuses offers no arguments; one over the SDK's length limit is not read), and a read's matching skips the templates whose literal start
the URI lacks and stops at a time budget.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
from mcp.shared import uri_template

from keen.capabilities.describe import item_capability
from keen.serve.passthrough import Listing

VARIABLES = 200


def _heavy(tail: str) -> str:
    """A template of VARIABLES path segments and a literal ``tail`` at its end."""
    return "".join(f"/{{v{i}}}" for i in range(VARIABLES)) + f"/{tail}"


def _stepping(step: float) -> Any:
    """A clock that moves ``step`` seconds at each look."""
    ticks = itertools.count(0.0, step)
    return lambda: next(ticks)


def test_a_read_stops_matching_a_servers_templates_at_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    templates = [{"uriTemplate": _heavy(f"n{k}"), "name": f"t{k}"} for k in range(50)]
    listing = Listing.build({"evil": ([], templates, [])})
    uri = "/x" * VARIABLES + "/n49"  # only the last template matches it
    assert listing.readable("evil", uri, clock=_stepping(0.005))  # 0.005 s a template: in time
    caplog.set_level(logging.WARNING, logger="keen.serve")
    assert not listing.readable("evil", uri, clock=_stepping(0.1))  # 0.1 s a template: out of time
    assert [r.getMessage() for r in caplog.records] == [
        "a read of evil was refused: its templates could not all be matched within 0.5 s"
    ]


def test_templates_whose_literal_start_the_uri_lacks_cost_no_time() -> None:
    # 10,000 templates; each look at the clock costs 0.3 s of a 0.5 s budget, so the URI is
    # read only when the one template it begins like is the only one tried.
    templates = [{"uriTemplate": f"t{k}://{{id}}", "name": f"t{k}"} for k in range(10_000)]
    listing = Listing.build({"many": ([], templates, [])})
    assert listing.readable("many", "t9999://x", clock=_stepping(0.3))
    assert not listing.readable("many", "t9999:/x", clock=_stepping(0.3))


def test_a_catalog_summary_names_a_templates_variables_without_parsing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    real = uri_template.UriTemplate.parse

    def counted(template: str, **limits: Any) -> uri_template.UriTemplate:
        parsed.append(template)
        return real(template, **limits)

    monkeypatch.setattr(uri_template.UriTemplate, "parse", staticmethod(counted))
    caps = [
        item_capability("resource", "evil", {"uriTemplate": _heavy(str(k)), "name": "n"}) for k in range(100)
    ]
    assert parsed == []
    first = next(c for c in caps if c is not None)
    shown = first.summary.removeprefix("URI template; read it with arguments ")
    assert shown.startswith('{"v0": "...", "v1": "...", "v2": "..."')
    # Above 16 variables, every way the SDK reads a variable written: operators, explode, several
    # in one expression; the names are the SDK's own, in its order.
    template = "a" + "".join(f"/{{v{i}}}" for i in range(12)) + "/x{/q*}/{;w}x{.y}{?r,s}{&t}"
    cap = item_capability("resource", "s", {"uriTemplate": template, "name": "n"})
    assert cap is not None and parsed == []
    sdk = json.dumps(dict.fromkeys(real(template).variable_names, "..."))
    shown = cap.summary.removeprefix("URI template; read it with arguments ")
    assert shown[:150] == sdk[:150]


@pytest.mark.parametrize(
    ("template", "refusal"),
    [
        ("x://{a}/{a}", "appears more than once"),
        ("x://{=a}", "Invalid variable name"),
        ("x://{a}{b}", "adjacent"),
        ("x://{a:3}", "Prefix modifier"),
    ],
)
def test_a_template_of_few_variables_the_sdk_refuses_offers_no_arguments(template: str, refusal: str) -> None:
    # A read of it is refused (the SDK's parse, keen.harness.executors), so the model is shown
    # the template, not told to read it with arguments.
    with pytest.raises(uri_template.InvalidUriTemplate, match=refusal):
        uri_template.UriTemplate.parse(template)
    cap = item_capability("resource", "s", {"uriTemplate": template, "name": "n"})
    assert cap is not None
    assert cap.summary == f"URI template; read it with arguments {template}. n"
    valid = item_capability("resource", "s", {"uriTemplate": "x://{a}/{b}", "name": "n"})
    assert valid is not None
    assert valid.summary == 'URI template; read it with arguments {"a": "...", "b": "..."}. n'


def test_a_template_longer_than_the_sdk_reads_is_shown_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    # 7.9 MB of expressions was read whole for its variables; the SDK refuses any template
    # over its length limit, so the summary shows the template's head and nothing is read.
    parsed: list[str] = []
    monkeypatch.setattr(uri_template.UriTemplate, "parse", staticmethod(parsed.append))
    template = "x://" + "".join(f"/{{v{i}}}" for i in range(uri_template.DEFAULT_MAX_TEMPLATE_LENGTH // 4))
    assert len(template) > uri_template.DEFAULT_MAX_TEMPLATE_LENGTH
    cap = item_capability("resource", "s", {"uriTemplate": template, "name": "n"})
    assert cap is not None and parsed == []
    assert cap.summary.startswith("URI template; read it with arguments x:///{v0}/{v1}")
    assert '"v0": "..."' not in cap.summary
