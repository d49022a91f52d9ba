"""Real coding agents (Codex CLI, Claude Code, opencode, llm) end to end through the gateway."""
