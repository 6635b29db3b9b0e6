"""Keen: progressive disclosure of MCP tools for LLM agents."""

__all__: list[str] = []
