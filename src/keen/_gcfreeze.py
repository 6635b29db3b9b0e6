"""The cyclic collector in the ``keen`` command's process: what imports made, frozen once
where asked, and the collector paused while a chat's first model request is built.

Connecting many servers allocates enough for the collector's full collection to run, and
that collection walks every tracked object: about 100,000 of them once the MCP SDK and
Keen are imported, 60-70 ms of CPU in one step of the event loop, the longest step of a
sync (``bench/idle.py``; twice at 292 servers). :func:`gc.freeze` moves the objects alive
at that moment to a permanent generation that collections skip.

It acts on the whole process: a cycle among the frozen objects that becomes garbage later is
never collected (reference counting still frees everything else). Among them are the first
connection object of each server configured at that start: one that a reload or a removal
replaces stays in memory if it sits in a cycle (at most one per server). So a library must
not do it behind its host's back: Keen freezes only when asked, once, when the first
:class:`~keen.mcp.Manager` starts (its configuration loaded, its connections built). The
``keen`` command asks (the process is Keen's own, and its imported modules live as long as
it, as do most of its configured connections); a host application that connects many servers
may ask too, by calling :func:`freeze_at_first_start` before it opens the runtime.

:func:`pause_collection` stops the collector while ``keen chat -p`` builds its first model
request, until :func:`resume_collection` once that request is out (``keen.cli._chat``). What
is made meanwhile is modules, classes, the configuration, the skills and the prompt, which
live as long as the process, and small acyclic values that reference counting frees: the
collector's walks over them (about 20 young collections and 2 older ones from the command's
start at 292 skills, 4-5 ms of CPU) free next to nothing and only delay the request. The
young objects are walked once when it resumes, behind the request. A plain ``keen prompt``
and ``keen skills list`` and ``show``, run without typer, pause it for their whole run, for the same
reason (``keen.cli._prompt``, ``keen.cli._skills``). Only the ``keen`` command pauses: a
library caller's process is its host's.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_at_first_start", "freeze_if_asked", "pause_collection", "resume_collection"]

_asked = False
_frozen = False
_paused = False


def freeze_at_first_start() -> None:
    """Ask for :func:`gc.freeze` when the first Manager of this process starts.

    Process-wide, and once: see the module docstring for what it costs a host.
    """
    global _asked
    _asked = True


def freeze_if_asked() -> None:
    """Run :func:`gc.freeze` if :func:`freeze_at_first_start` was called and it has not run yet."""
    global _frozen
    if _asked and not _frozen:
        _frozen = True
        gc.freeze()


def pause_collection() -> None:
    """Stop the cyclic collector until :func:`resume_collection` (module doc); nothing when
    it is already off (a caller's ``gc.disable``, or paused already)."""
    global _paused
    if not _paused and gc.isenabled():
        gc.disable()
        _paused = True


def resume_collection() -> None:
    """Start the collector again if :func:`pause_collection` stopped it; else nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()
