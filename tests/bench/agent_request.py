"""The agent-sized request of the benchmark: what a coding agent sends on every call.

~85 kB: 28 tools (a coding agent's catalogue: files, search, shell, git, tests, the web,
a to-do list; 5 of them strict) and 40 messages (a system prompt, the task, then the agent's
tool calls and their results: file contents, grep hits, test output, diffs). Built
deterministically from fixed text, so every run and every commit send the same bytes
(``docs/decisions/0026``). The mock upstream answers the model ``...-agent`` with a call
to the strict ``edit_file`` (``AGENT_TOOL``, ``AGENT_ARGS`` in ``mock_upstream.py``), whose
arguments match the schema below.
"""

from __future__ import annotations

from typing import Any

import orjson

STRICT_TOOLS = ("read_file", "write_file", "edit_file", "bash", "grep")


def _obj(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    schema.update(extra)
    return schema


def _strict(properties: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's strict form: closed, every property required (optional ones nullable)."""
    return _obj(properties, list(properties), additionalProperties=False)


_S = {"type": "string"}
_PATH = {
    "type": "string",
    "minLength": 1,
    "maxLength": 4096,
    "description": "Path relative to the repository root; no '..' segments.",
}

# (name, description, parameters, strict)
_TOOLS: list[tuple[str, str, dict[str, Any], bool]] = [
    (
        "read_file",
        "Read a text file from the workspace. Returns the content with line numbers, starting "
        "at `offset` (1-based) for at most `limit` lines. Use it before editing a file: edits "
        "to a file you have not read are refused. Binary files are reported, not printed. "
        "Prefer reading a whole small file to several small ranges of it.",
        _strict(
            {
                "path": _PATH,
                "offset": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "description": "First line to return (null: line 1).",
                },
                "limit": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "maximum": 4000,
                    "description": "Lines to return (null: up to 2000).",
                },
            }
        ),
        True,
    ),
    (
        "write_file",
        "Create a file or replace its whole content. The parent directory must exist. For a "
        "change to part of an existing file use edit_file instead: it keeps the rest of the "
        "file byte for byte. Never write secrets, credentials or generated build output.",
        _strict(
            {
                "path": _PATH,
                "content": {
                    "type": "string",
                    "maxLength": 1048576,
                    "description": "The complete new content of the file.",
                },
                "mode": {
                    "type": "string",
                    "enum": ["create", "overwrite"],
                    "description": "create fails if the file exists.",
                },
            }
        ),
        True,
    ),
    (
        "edit_file",
        "Replace an exact string in a file. `old_string` must occur exactly once unless "
        "`replace_all` is true; include enough surrounding lines to make it unique, with the "
        "file's own indentation. The edit fails, changing nothing, if the string is not found. "
        "Read the file first.",
        _strict(
            {
                "path": _PATH,
                "old_string": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Text to replace, exactly as in the file.",
                },
                "new_string": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            }
        ),
        True,
    ),
    (
        "bash",
        "Run a shell command in the workspace (bash -lc, the repository root as working "
        "directory) and return its exit status, standard output and standard error, each cut "
        "to 30,000 characters. Commands time out after `timeout_s` seconds. Do not start "
        "servers or watchers that outlive the command; do not use it to read or edit files "
        "when read_file, edit_file or grep can do it. Quote paths with spaces.",
        _strict(
            {
                "command": {"type": "string", "minLength": 1, "maxLength": 16384},
                "timeout_s": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "maximum": 600,
                    "description": "null: 120 seconds.",
                },
                "description": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "What the command does, in a few words.",
                },
            }
        ),
        True,
    ),
    (
        "grep",
        "Search file contents with a regular expression (ripgrep syntax). Returns matching "
        "lines as path:line:text, or only the paths with `files_only`. Respects .gitignore. "
        "Use it instead of bash with grep or find.",
        _strict(
            {
                "pattern": {"type": "string", "minLength": 1, "maxLength": 1000},
                "path": {
                    "type": ["string", "null"],
                    "description": "Directory or file; null: the whole repository.",
                },
                "glob": {"type": ["string", "null"], "description": "e.g. '*.py'."},
                "case_sensitive": {"type": "boolean"},
                "files_only": {"type": "boolean"},
                "context_lines": {"type": "integer", "minimum": 0, "maximum": 20},
            }
        ),
        True,
    ),
    (
        "list_directory",
        "List the entries of a directory, directories first, with sizes.",
        _obj(
            {
                "path": _PATH,
                "show_hidden": {"type": "boolean", "default": False},
                "depth": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
            },
            ["path"],
        ),
        False,
    ),
    (
        "glob",
        "Find files whose path matches a glob pattern such as 'src/**/*.ts', newest "
        "first. Use it to locate files by name; use grep to search their content.",
        _obj(
            {"pattern": _S, "path": _PATH, "limit": {"type": "integer", "default": 200}},
            ["pattern"],
        ),
        False,
    ),
    (
        "move_file",
        "Move or rename a file or directory inside the workspace.",
        _obj(
            {
                "source": _PATH,
                "destination": _PATH,
                "overwrite": {"type": "boolean", "default": False},
            },
            ["source", "destination"],
        ),
        False,
    ),
    (
        "delete_file",
        "Delete a file. Directories are refused; the deletion cannot be undone "
        "outside version control.",
        _obj({"path": _PATH}, ["path"]),
        False,
    ),
    (
        "apply_patch",
        "Apply a unified diff to the workspace (several files at once). Fails "
        "without changing anything if a hunk does not apply.",
        _obj(
            {
                "patch": {
                    "type": "string",
                    "description": "A unified diff, paths relative to "
                    "the repository root, with a/ and b/ prefixes.",
                },
                "check_only": {"type": "boolean", "default": False},
            },
            ["patch"],
        ),
        False,
    ),
    (
        "git_status",
        "Show the working tree status: staged, unstaged and untracked files.",
        _obj({"porcelain": {"type": "boolean", "default": True}}),
        False,
    ),
    (
        "git_diff",
        "Show changes: the working tree against the index, or `base`..`head`.",
        _obj(
            {
                "base": _S,
                "head": _S,
                "paths": {"type": "array", "items": _S},
                "stat": {"type": "boolean", "default": False},
                "context": {"type": "integer", "minimum": 0, "default": 3},
            }
        ),
        False,
    ),
    (
        "git_log",
        "Show recent commits, newest first.",
        _obj(
            {
                "max_count": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20},
                "path": _S,
                "author": _S,
                "since": {"type": "string", "format": "date"},
                "oneline": {"type": "boolean", "default": True},
            }
        ),
        False,
    ),
    (
        "git_commit",
        "Commit the staged changes (or `paths`) with a message. Never amend or "
        "force-push; hooks run.",
        _obj(
            {
                "message": {"type": "string", "minLength": 1},
                "paths": {"type": "array", "items": _S},
                "all": {"type": "boolean", "default": False},
            },
            ["message"],
        ),
        False,
    ),
    (
        "run_tests",
        "Run the project's tests (pytest) and return a summary and the failures. "
        "Narrow the run with `paths` and `keyword` while iterating.",
        _obj(
            {
                "paths": {"type": "array", "items": _S},
                "keyword": _S,
                "fail_fast": {"type": "boolean", "default": False},
                "verbose": {"type": "boolean", "default": False},
                "timeout_s": {"type": "integer", "default": 600},
            }
        ),
        False,
    ),
    (
        "lint",
        "Run the linters (ruff, mypy) on paths; returns the findings.",
        _obj(
            {
                "paths": {"type": "array", "items": _S},
                "fix": {"type": "boolean", "default": False},
                "tools": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["ruff", "mypy", "eslint"]},
                },
            }
        ),
        False,
    ),
    (
        "format_code",
        "Format files in place with the project's formatter.",
        _obj({"paths": {"type": "array", "items": _S, "minItems": 1}}, ["paths"]),
        False,
    ),
    (
        "search_symbols",
        "Find definitions of classes, functions and variables by name "
        "across the workspace (language server index).",
        _obj(
            {
                "query": _S,
                "kind": {
                    "type": "string",
                    "enum": ["class", "function", "method", "variable", "any"],
                },
                "limit": {"type": "integer", "default": 50},
            },
            ["query"],
        ),
        False,
    ),
    (
        "go_to_definition",
        "Where the symbol at a position is defined.",
        _obj(
            {
                "path": _PATH,
                "line": {"type": "integer", "minimum": 1},
                "column": {"type": "integer", "minimum": 1},
            },
            ["path", "line", "column"],
        ),
        False,
    ),
    (
        "find_references",
        "Every reference to the symbol at a position.",
        _obj(
            {
                "path": _PATH,
                "line": {"type": "integer", "minimum": 1},
                "column": {"type": "integer", "minimum": 1},
                "include_declaration": {"type": "boolean", "default": False},
            },
            ["path", "line", "column"],
        ),
        False,
    ),
    (
        "web_fetch",
        "Fetch a URL and return its main text as markdown (HTML converted, "
        "scripts dropped). Only http and https; at most 5 MB.",
        _obj(
            {
                "url": {"type": "string", "format": "uri"},
                "prompt": {"type": "string", "description": "What to extract from the page."},
            },
            ["url"],
        ),
        False,
    ),
    (
        "web_search",
        "Search the web; returns titles, URLs and snippets.",
        _obj(
            {
                "query": {"type": "string", "minLength": 2},
                "allowed_domains": {"type": "array", "items": _S},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 8},
            },
            ["query"],
        ),
        False,
    ),
    (
        "todo_write",
        "Replace the task list shown to the user. Keep exactly one item "
        "in_progress while working; mark items completed as soon as they are done.",
        _obj(
            {
                "todos": {
                    "type": "array",
                    "items": _obj(
                        {
                            "id": _S,
                            "content": {"type": "string", "minLength": 1},
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                            },
                            "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                        },
                        ["id", "content", "status"],
                    ),
                }
            },
            ["todos"],
        ),
        False,
    ),
    ("todo_read", "Return the current task list.", _obj({}), False),
    (
        "ask_user",
        "Ask the user a question and wait for the answer. Only when the task "
        "cannot go on without a decision only they can make.",
        _obj(
            {"question": _S, "options": {"type": "array", "items": _S, "maxItems": 4}}, ["question"]
        ),
        False,
    ),
    (
        "task",
        "Start a sub-agent with its own context for a self-contained search or "
        "investigation; returns its final report. Give it every detail it needs: it does not "
        "see this conversation.",
        _obj(
            {
                "description": {"type": "string", "maxLength": 80},
                "prompt": _S,
                "agent": {
                    "type": "string",
                    "enum": ["general", "explore", "review"],
                    "default": "general",
                },
            },
            ["description", "prompt"],
        ),
        False,
    ),
    (
        "notebook_edit",
        "Replace, insert or delete a cell of a Jupyter notebook.",
        _obj(
            {
                "path": _PATH,
                "cell": {"type": "integer", "minimum": 0},
                "source": _S,
                "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                "action": {
                    "type": "string",
                    "enum": ["replace", "insert", "delete"],
                    "default": "replace",
                },
            },
            ["path", "cell"],
        ),
        False,
    ),
    (
        "install_package",
        "Add a dependency to the project (pip, npm) and update its lock "
        "file. Ask the user first for anything outside the standard library's domain.",
        _obj(
            {
                "manager": {"type": "string", "enum": ["pip", "npm"]},
                "name": _S,
                "version": {"type": "string", "pattern": "^[0-9A-Za-z.*<>=!~^, -]*$"},
                "dev": {"type": "boolean", "default": False},
            },
            ["manager", "name"],
        ),
        False,
    ),
]


def tools() -> list[dict[str, Any]]:
    """The 28 tools, in the Chat Completions form."""
    out = []
    for name, description, parameters, strict in _TOOLS:
        fn: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
        if strict:
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


_SYSTEM = (
    "You are a coding agent working in a Git repository on the user's machine. You read, "
    "search and edit files and run commands through the tools you are given; you never "
    "claim to have run something you did not run. Work in small verified steps: read the "
    "code before changing it, make the smallest change that solves the task, then run the "
    "narrowest tests that cover it and read their output. Keep the user informed with short "
    "updates between tool calls; do not narrate each call.\n\n"
    "# Conventions\n"
    "- Follow the style of the surrounding code: naming, typing, error handling, imports.\n"
    "- Never add a dependency without asking. Never commit unless asked.\n"
    "- Comments say why, not what. No commented-out code.\n"
    "- Tests go through the public interface and must be able to fail.\n"
    "- Paths are relative to the repository root.\n\n"
    "# Safety\n"
    "- Never print, log or commit credentials; if you meet one, tell the user.\n"
    "- Do not run destructive commands (rm -rf, git reset --hard, force pushes) without "
    "the user's explicit request in this conversation.\n"
    "- Network access is limited to the package registries; web_fetch only for "
    "documentation the user pointed to.\n\n"
    "# Output\n"
    "- When done, summarise what changed, which tests ran and their result, and what is "
    "left, in a few lines. Quote file paths and line numbers as path:line.\n"
)


def _repository_notes() -> str:
    """The project's agent instructions file, as agents append it to the system prompt."""
    areas = [
        "request parsing",
        "limits and quotas",
        "upstream calls",
        "retries",
        "the usage ledger",
        "streaming",
        "metrics",
        "configuration",
    ]
    lines = [
        "# Repository notes (AGENTS.md)",
        "",
        "Layout, one concept per module; every module has a test file beside it:",
    ]
    for i in range(32):
        area = areas[i % len(areas)]
        lines.append(
            f"- gateway/part_{i % 8}/module_{i}.py: {area}, part {i}; its tests in "
            f"tests/unit/test_module_{i}.py (run: pytest -q tests/unit/"
            f"test_module_{i}.py)"
        )
    lines += [
        "",
        "Build and check: `ruff check .`, `mypy --strict gateway`, then the tests "
        "of the modules you touched; the full suite takes ten minutes, run it last.",
    ]
    return "\n".join(lines) + "\n"


def _source(module: str, functions: int) -> str:
    """A plausible Python module: typed functions with docstrings and bodies."""
    lines = [
        f'"""{module}: request handling helpers."""',
        "",
        "from __future__ import annotations",
        "",
        "import logging",
        "from dataclasses import dataclass",
        "",
        "log = logging.getLogger(__name__)",
        "",
    ]
    for i in range(functions):
        lines += [
            "",
            f"def handle_{module}_{i}(payload: dict[str, object], limit: int = {i + 8}) -> "
            "list[str]:",
            f'    """Collect the fields of step {i} that exceed ``limit`` characters."""',
            "    found: list[str] = []",
            "    for key, value in sorted(payload.items()):",
            "        if isinstance(value, str) and len(value) > limit:",
            f"            found.append(f'{{key}}: {{len(value)}} > {{limit}} (step {i})')",
            "        elif isinstance(value, dict):",
            f"            found.extend(handle_{module}_{i}(value, limit))",
            f"    log.debug('step {i}: %d long fields', len(found))",
            "    return found",
        ]
    return "\n".join(f"{n + 1:>5}\t{text}" for n, text in enumerate(lines)) + "\n"


def _grep_hits(term: str, n: int) -> str:
    return (
        "\n".join(
            f"gateway/part_{i % 7}/module_{i}.py:{40 + 3 * i}:    if {term}(payload"
            f", limit={i}) is None:  # {term} check {i}"
            for i in range(n)
        )
        + "\n"
    )


def _test_output(passed: int, failed: int) -> str:
    rows = [f"tests/unit/test_handlers.py::test_handle_case_{i} PASSED" for i in range(passed)]
    rows += [f"tests/unit/test_handlers.py::test_limit_{i} FAILED" for i in range(failed)]
    tail = [
        "=================================== FAILURES ===================================",
        *(
            f"____ test_limit_{i} ____\n    assert handle_request_{i}({{'a': 'x' * 9}}, 8) == "
            f"['a: 9 > 8 (step {i})']\nE   AssertionError: assert [] == ['a: 9 > 8 (step {i})']"
            for i in range(failed)
        ),
        f"=========== {failed} failed, {passed} passed in 3.{passed}1s ===========",
    ]
    return "exit status 1\n" + "\n".join(rows + tail) + "\n"


def _diff(files: int) -> str:
    parts = []
    for i in range(files):
        parts.append(
            f"diff --git a/gateway/part_{i}/limits.py b/gateway/part_{i}/limits.py\n"
            f"--- a/gateway/part_{i}/limits.py\n+++ b/gateway/part_{i}/limits.py\n"
            f"@@ -{10 + i},7 +{10 + i},8 @@ def check_limit(value: str, limit: int) -> bool:\n"
            "     if not value:\n         return True\n"
            "-    return len(value) < limit\n+    # the limit is inclusive, as documented\n"
            "+    return len(value) <= limit\n"
        )
    return "".join(parts)


# The conversation after the task: (tool, arguments, result) per step, 19 steps.
def _steps() -> list[tuple[str, dict[str, Any], str]]:
    read = [f"request_{i}" for i in range(8)]
    steps: list[tuple[str, dict[str, Any], str]] = [
        (
            "todo_write",
            {
                "todos": [
                    {
                        "id": "1",
                        "content": "Find where limits are compared",
                        "status": "in_progress",
                    },
                    {"id": "2", "content": "Make the comparison inclusive", "status": "pending"},
                    {"id": "3", "content": "Run the handler tests", "status": "pending"},
                ]
            },
            "Task list updated (3 items).",
        ),
        (
            "grep",
            {
                "pattern": "len\\(value\\) [<>]",
                "path": None,
                "glob": "*.py",
                "case_sensitive": True,
                "files_only": False,
                "context_lines": 0,
            },
            _grep_hits("check_limit", 40),
        ),
        (
            "list_directory",
            {"path": "gateway/part_0"},
            "\n".join(f"module_{i}.py  {1200 + 37 * i} bytes" for i in range(30)) + "\n",
        ),
    ]
    for i, module in enumerate(read):
        steps.append(
            (
                "read_file",
                {"path": f"gateway/part_{i}/{module}.py", "offset": None, "limit": None},
                _source(module, 7),
            )
        )
        if i % 3 == 2:
            steps.append(
                (
                    "bash",
                    {
                        "command": f"git log --oneline -5 -- gateway/part_{i}",
                        "timeout_s": None,
                        "description": "recent history",
                    },
                    "exit status 0\n"
                    + "\n".join(
                        f"{(0xA1B2C3 + 977 * k):07x} limits: step {k} of part {i}" for k in range(5)
                    )
                    + "\n",
                )
            )
    steps += [
        (
            "run_tests",
            {"paths": ["tests/unit/test_handlers.py"], "fail_fast": False},
            _test_output(60, 4),
        ),
        (
            "grep",
            {
                "pattern": "def check_limit",
                "path": "gateway",
                "glob": None,
                "case_sensitive": True,
                "files_only": False,
                "context_lines": 3,
            },
            _grep_hits("check_limit", 25),
        ),
        (
            "read_file",
            {"path": "gateway/part_3/limits.py", "offset": 1, "limit": 200},
            _source("limits", 8),
        ),
        (
            "edit_file",
            {
                "path": "gateway/part_3/limits.py",
                "old_string": "    return len(value) < limit\n",
                "new_string": "    # the limit is inclusive, as documented\n"
                "    return len(value) <= limit\n",
                "replace_all": False,
            },
            "Edited gateway/part_3/limits.py: 1 replacement (lines 14-15).",
        ),
        ("git_diff", {"stat": False}, _diff(12)),
        (
            "bash",
            {
                "command": "python -m pytest -q tests/unit/test_handlers.py -k limit",
                "timeout_s": 300,
                "description": "limit tests",
            },
            _test_output(20, 4),
        ),
    ]
    return steps


def messages() -> list[dict[str, Any]]:
    """40 messages: system, the task, 19 tool calls with their results."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": _SYSTEM + "\n" + _repository_notes()},
        {
            "role": "user",
            "content": (
                "The request handlers reject values exactly at their length limit, but the docs "
                "say the limit is inclusive. Fix the comparison everywhere it is made, keep the "
                "error messages as they are, and make the handler tests pass. Don't touch the "
                "public API."
            ),
        },
    ]
    for n, (name, args, result) in enumerate(_steps()):
        call_id = f"call_{n:02d}_{name}"
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": orjson.dumps(args).decode()},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return out


def agent_payload(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages(),
        "tools": tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0.2,
    }


def agent_body(model: str) -> str:
    """The agent-sized request for ``model``, as JSON text."""
    return orjson.dumps(agent_payload(model)).decode()
