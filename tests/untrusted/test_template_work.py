"""A server's resource templates cannot make Keen parse without end.

The SDK's ``UriTemplate.parse`` costs about 10 µs a variable; a template may have 256 and a
server may list 10,000 of them. Keen parsed every one at each catalog build (for the
variables a summary names) and ``keen serve`` parsed every one of the server's templates at
each read it checked (is the URI one of the server's?), on the event loop: half a minute in
which no host's call of any server was answered. A summary now reads the variables from
the expressions as written, and a read's matching skips the templates whose literal start
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
    # Every way a variable is written: operators, explode, prefix, several in one expression.
    cap = item_capability("resource", "s", {"uriTemplate": "a{+p}{/q*}{?r,s:3}{#p}", "name": "n"})
    assert cap is not None
    assert cap.summary.startswith(
        "URI template; read it with arguments " + json.dumps(dict.fromkeys("pqrs", "..."))
    )
