"""Reading README.md the way the README tests need: sections, code, commands, tables."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
# A code span may wrap onto the next line, never across a blank line (a new paragraph).
_SPAN = re.compile(r"(?<!`)`((?:[^`\n]|\n(?![ \t]*\n))+)`(?!`)")
# Where a command stops: a comment, a pipe/and/or/sequence, a redirect, a closing bracket.
_STOP = re.compile(r"\s#|&&|\|\||[;|)<>]")


@dataclass(frozen=True, slots=True)
class CodeBlock:
    lang: str
    body: str


def sections(text: str) -> dict[str, str]:
    """``## Heading`` -> the text under it, up to the next ``## `` heading (headings inside
    fenced blocks do not count)."""
    blanked = _without_fences(text)
    heads = list(re.finditer(r"^## +(.+?)[ \t]*$", blanked, flags=re.MULTILINE))
    out: dict[str, str] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[head.group(1)] = text[head.end() : end]
    return out


def _without_fences(text: str) -> str:
    """``text`` with fenced blocks blanked out, same length (offsets stay valid)."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def code_blocks(text: str) -> list[CodeBlock]:
    return [CodeBlock(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def inline_code(text: str) -> list[str]:
    """Every single-backtick code span outside fenced blocks, wrapped lines joined."""
    return [" ".join(span.split()) for span in _SPAN.findall(_without_fences(text))]


def code_lines(text: str) -> list[str]:
    """Every line of every fenced block, then every inline code span."""
    lines = [line for block in code_blocks(text) for line in block.body.splitlines()]
    return lines + inline_code(text)


def quickstart_commands(text: str) -> list[str]:
    """The commands of the first fenced block under ``## Quick start`` (comments and blank
    lines dropped, a trailing ``# comment`` cut)."""
    section = sections(text).get("Quick start")
    assert section is not None, "README has no '## Quick start' section"
    blocks = code_blocks(section)
    assert blocks, "the Quick start section has no code block"
    commands = []
    for line in blocks[0].body.splitlines():
        command = re.split(r"\s#", line, maxsplit=1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def invocations(text: str, program: str) -> list[list[str]]:
    """Argument lists of every ``program ...`` written in code: ``program`` as a word (also
    after a path, e.g. ``.venv/bin/syntic``), up to the end of the command."""
    found: list[list[str]] = []
    pattern = re.compile(rf"(?:^|[\s/(`$]){re.escape(program)}(?=\s|$)")
    for line in code_lines(text):
        for match in pattern.finditer(line):
            rest = line[match.end() :]
            stop = _STOP.search(rest)
            command = rest[: stop.start()] if stop else rest
            try:
                found.append(shlex.split(command))
            except ValueError:  # an unbalanced quote, e.g. a command inside a Python string
                found.append(command.split())
    return found


def table_rows(section: str) -> list[list[str]]:
    """Cells of every Markdown table row in ``section`` (header and rule rows dropped)."""
    lines = [line.strip() for line in section.splitlines()]
    rule = re.compile(r"\|[\s:|-]+\|")
    rows = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or rule.fullmatch(line):
            continue
        if i + 1 < len(lines) and rule.fullmatch(lines[i + 1]):
            continue  # a header row
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows
