"""Keen: progressive disclosure of MCP tools for LLM agents."""

__version__ = "0.1.0"

__all__ = ["__version__"]
