"""Skills: discovery, the enable/disable config, the prompt catalog, slash activation.

Knows nothing of MCP (docs/architecture.md "Package map"): a generated MCP skill is an ordinary skill whose
directory holds a ``.keen-generated-mcp.json`` marker (``Skill.managed``). Skills follow
the Agent Skills format (https://agentskills.io/specification); see also docs/architecture.md.
"""

from __future__ import annotations

from keen.skills.activate import activate, activation_message, split_arguments, substitute
from keen.skills.catalog import (
    DEFAULT_MIN_DESCRIPTION_CHARS,
    catalog_line,
    omitted_line,
    render_catalog,
    render_skills_section,
    section_header,
    shorten,
)
from keen.skills.config import SkillsConfig
from keen.skills.discover import (
    MANAGED_BY,
    MARKER_FILE,
    SKILL_FILE,
    Discovery,
    Skill,
    SkillProblem,
    discover,
    load_skill,
    read_marker,
    split_frontmatter,
    valid_skill_name,
)

__all__ = [
    "DEFAULT_MIN_DESCRIPTION_CHARS",
    "MANAGED_BY",
    "MARKER_FILE",
    "SKILL_FILE",
    "Discovery",
    "Skill",
    "SkillProblem",
    "SkillsConfig",
    "activate",
    "activation_message",
    "catalog_line",
    "discover",
    "load_skill",
    "omitted_line",
    "read_marker",
    "render_catalog",
    "render_skills_section",
    "section_header",
    "shorten",
    "split_arguments",
    "split_frontmatter",
    "substitute",
    "valid_skill_name",
]
