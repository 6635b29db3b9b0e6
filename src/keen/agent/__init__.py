"""``keen chat``'s engine: model providers, the system prompt, the turn loop, compaction.

- :mod:`keen.agent.models`: the streaming :class:`Model` interface, neutral
  :class:`Message` history, and the :class:`ModelError` tree.
- :mod:`keen.agent.providers`: :func:`open_model` for ``openai:``, ``anthropic:`` and
  ``scripted:`` models (the SDKs are optional extras, imported on use).
- :mod:`keen.agent.loop`: :class:`Agent`, the turn loop on the harness.
- :mod:`keen.agent.elicitation`: answering servers' ``elicitation/create`` requests.
- :mod:`keen.agent.settings`: ``$KEEN_HOME/config.toml`` defaults.

Names load on first use (PEP 562): ``keen chat -p`` builds its first request from
``system_prompt``, ``models`` and ``providers`` before the turn loop, the harness and the
runtime are imported (docs/chat.md "Startup").

Imports only go down the package map (docs/architecture.md): runtime, harness,
capabilities, skills, mcp; never the CLI or ``keen.serve``.
"""

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.agent.compaction import CallRecord, compact_turn
    from keen.agent.elicitation import ElicitAnswer, ElicitationCallback, accept_defaults, decline, defaults
    from keen.agent.loop import Agent, ApprovalAnswer, ApprovalPrompt, TurnResult, TurnView
    from keen.agent.models import (
        Message,
        Model,
        ModelAuthFailed,
        ModelDone,
        ModelError,
        ModelEvent,
        ModelNotConfigured,
        ModelRateLimited,
        ModelUnreachable,
        ScriptExhausted,
        StopReason,
        TextDelta,
        ToolCall,
    )
    from keen.agent.providers import open_model
    from keen.agent.settings import ChatSettings, SettingsError, load_settings, settings_path
    from keen.agent.system_prompt import build_system_prompt

__all__ = [
    "Agent",
    "ApprovalAnswer",
    "ApprovalPrompt",
    "CallRecord",
    "ChatSettings",
    "ElicitAnswer",
    "ElicitationCallback",
    "Message",
    "Model",
    "ModelAuthFailed",
    "ModelDone",
    "ModelError",
    "ModelEvent",
    "ModelNotConfigured",
    "ModelRateLimited",
    "ModelUnreachable",
    "ScriptExhausted",
    "SettingsError",
    "StopReason",
    "TextDelta",
    "ToolCall",
    "TurnResult",
    "TurnView",
    "accept_defaults",
    "build_system_prompt",
    "compact_turn",
    "decline",
    "defaults",
    "load_settings",
    "open_model",
    "settings_path",
]

_EXPORTS = {
    **exports_from("keen.agent.compaction", ("CallRecord", "compact_turn")),
    **exports_from(
        "keen.agent.elicitation",
        ("ElicitAnswer", "ElicitationCallback", "accept_defaults", "decline", "defaults"),
    ),
    **exports_from(
        "keen.agent.loop", ("Agent", "ApprovalAnswer", "ApprovalPrompt", "TurnResult", "TurnView")
    ),
    **exports_from(
        "keen.agent.models",
        (
            "Message",
            "Model",
            "ModelAuthFailed",
            "ModelDone",
            "ModelError",
            "ModelEvent",
            "ModelNotConfigured",
            "ModelRateLimited",
            "ModelUnreachable",
            "ScriptExhausted",
            "StopReason",
            "TextDelta",
            "ToolCall",
        ),
    ),
    **exports_from("keen.agent.providers", ("open_model",)),
    **exports_from(
        "keen.agent.settings", ("ChatSettings", "SettingsError", "load_settings", "settings_path")
    ),
    **exports_from("keen.agent.system_prompt", ("build_system_prompt",)),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
