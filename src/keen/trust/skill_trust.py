"""A generated skill's read-only claims judged offline, as ``keen chat`` judges a live tool.

``Catalog.from_skills_dir(annotations_trusted=...)`` asks, of each schema file claiming
``readOnlyHint``, whether that claim counts (README "Annotations only from servers you
trust for them"): :func:`configured_annotations_trusted` answers by configs.json's
``trust_annotations`` and ``pinning`` and the pins :func:`keen.trust.pins.trust` wrote,
through :func:`skill_annotations_trusted` (docs/architecture.md, the skill marker's
``fingerprints``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from keen.errors import ConfigError
from keen.trust.pinstore import PinStore

if TYPE_CHECKING:
    from pathlib import Path

    from keen.trust.pinstore import ToolPin

__all__ = ["configured_annotations_trusted", "skill_annotations_trusted"]


_SKILL_FIELDS = ("name", "title", "description", "inputSchema", "annotations")
"""The definition fields a generated skill's schema file holds (no ``outputSchema``)."""


def skill_annotations_trusted(
    trusting: Iterable[str] = (), store: PinStore | None = None, *, unpinned: Iterable[str] = ()
) -> Callable[[str, dict[str, Any]], bool]:
    """For ``Catalog.from_skills_dir``: whether a generated skill's schema file (``server``,
    wire shape) has its annotations taken as true, as :func:`keen.trust.pins.pinned_view`
    judges a live tool: its server is one of ``trusting`` (``"trust_annotations"`` in
    configs.json), or ``keen mcp trust`` pinned the tool (``ToolPin.reviewed``) and the skill
    shows that very definition, unless the server is one of ``unpinned`` (``"pinning":
    "off"``: :meth:`keen.trust.pins.PinGuard.view` compares no pins then). The definition is
    the whole one, ``outputSchema`` included, by the ``fingerprint`` the catalog sets from the
    skill's marker (the schema file leaves ``outputSchema`` out), compared with the pin's as
    :func:`keen.trust.pins.compare` compares a live tool's; the fields the file holds must
    equal the pin's as well (a file edited by hand is not what was reviewed). A skill whose
    marker records none (a marker from before Keen recorded them: ``fingerprint`` empty or
    missing) is not trusted until the next sync records them: its fields alone cannot say
    which definition it shows. A broken pin file trusts nothing. Pin files are read once each,
    when first asked."""
    trusted_servers = frozenset(trusting)
    off = frozenset(unpinned)
    pin_store = store or PinStore()
    reviewed: dict[str, dict[str, ToolPin]] = {}

    def check(server: str, data: dict[str, Any]) -> bool:
        if server in trusted_servers:
            return True
        if server in off:
            return False
        if server not in reviewed:
            try:
                pins = pin_store.load(server)
            except ConfigError:
                pins = None
            tools = pins.tools.items() if pins is not None else ()
            reviewed[server] = {name: pin for name, pin in tools if pin.reviewed}
        pin = reviewed[server].get(str(data.get("name")))
        if pin is None:
            return False
        pinned = pin.definition
        # The file's own fields too: a schema file edited by hand (a new description or
        # inputSchema, readOnlyHint kept) is not what was reviewed, whatever the marker says.
        same_fields = all(pinned.get(f) == data.get(f) for f in _SKILL_FIELDS)
        shown = data.get("fingerprint")
        return same_fields and isinstance(shown, str) and shown == pin.fingerprint

    return check


def configured_annotations_trusted(
    config_path: Path | None = None, store: PinStore | None = None
) -> Callable[[str, dict[str, Any]], bool]:
    """For ``Catalog.from_skills_dir(annotations_trusted=...)``: whose ``readOnlyHint`` counts,
    by the rules ``keen chat`` and ``keen serve`` apply to a live tool (README "Annotations
    only from servers you trust for them"): :func:`skill_annotations_trusted` over
    configs.json's ``trust_annotations`` and ``pinning``. A tool whose definition changed
    since ``keen mcp trust`` only in its ``outputSchema`` (which no schema file holds) is
    not trusted, as ``keen chat`` trusts it not: the skill's marker records the fingerprint
    of each definition it shows. Until the next ``keen mcp sync``, a skill shows the
    definitions of its last one.

    Args:
        config_path: configs.json; default ``$KEEN_HOME/mcp/configs.json``.
        store: the pin files; default ``$KEEN_HOME/mcp/pins``.

    Returns:
        ``check(server, schema)``. configs.json and the pins are read when a tool first
        claims ``readOnlyHint``, not before; a configs.json that cannot be used grants
        nothing.
    """
    made: list[Callable[[str, dict[str, Any]], bool]] = []

    def check(server: str, data: dict[str, Any]) -> bool:
        if not made:
            settings = _trust_settings(config_path)
            made.append(
                skill_annotations_trusted(
                    [name for name, (trusting, _) in settings.items() if trusting],
                    store,
                    unpinned=[name for name, (_, pinning) in settings.items() if pinning == "off"],
                )
            )
        return made[0](server, data)

    return check


def _trust_settings(config_path: Path | None) -> dict[str, tuple[bool, str | None]]:
    """Each server's ``trust_annotations`` and ``pinning``, as keen chat reads them: without
    the validation models (about 0.25 s) when the text validated before
    (:func:`keen.mcp.config.validated.trust_settings`), else validated now (and recorded
    valid when it is); a file that cannot be used grants nothing."""
    from keen import paths
    from keen.mcp.config.validated import trust_settings

    path = config_path or paths.mcp_config_path()
    settings = trust_settings(path)
    if settings is not None:
        return settings
    from keen.mcp.config import load_config, remember_valid

    try:
        config = load_config(path, strict=False)
    except ConfigError:
        return {}
    # Recorded as keen chat records it: the next reader takes the same text without the models.
    remember_valid(path, config)
    return {name: (entry.trust_annotations, entry.pinning) for name, entry in config.servers.items()}
