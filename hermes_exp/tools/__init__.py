"""Toolsets the agent can be offered; each tool runs inside the prompt's sandbox."""
