"""The agent: a model client and the turn loop between model and tools."""
