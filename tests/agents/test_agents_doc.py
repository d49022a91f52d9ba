"""docs/agents.md against what the agent tests run: every agent pinned in
scripts/agents.txt has its blocks on the page and its row in the tests' table, at the
pinned version; the gateway config the page shows loads; and the traffic check, which
every agent run relies on, tells loopback from the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import load_settings
from tests.agents import setup_doc
from tests.agents.installed import pins
from tests.agents.runner import off_loopback
from tests.agents.table import AGENTS
from tests.readme.readme_text import table_rows


def test_every_pinned_agent_is_tested_and_documented() -> None:
    pinned = pins()
    assert set(pinned) == {a.name for a in AGENTS}
    versions = table_rows(setup_doc.PAGE.read_text().split("\n## ", 1)[0])  # the first table
    for name, pin in pinned.items():
        commands = setup_doc.commands(setup_doc.run_block(name).body, {"HOME": "/h"})
        assert commands and commands[-1].argv[0] == pin.bin, name
        assert all(c.argv[0] == pin.bin for c in commands), name
        assert setup_doc.PROMPT in commands[-1].argv, name
        rows = [r for r in versions if f"`{pin.package}`" in r[0]]
        assert len(rows) == 1 and rows[0][1] == pin.version, f"{name}: {rows}"


def test_each_agent_is_pointed_at_the_pages_gateway_and_model() -> None:
    """The tests put their own gateway and model in place of the page's: each agent's
    blocks must name them exactly as the page says."""
    for name in pins():
        own = [*setup_doc.files(name), setup_doc.run_block(name)]
        text = "".join(b.body for b in own)
        assert setup_doc.GATEWAY_URL in text and setup_doc.MODEL in text, name
        for block in setup_doc.files(name):
            assert block.path and not block.path.startswith("/"), block


def test_the_strictify_example_loads(tmp_path: Path) -> None:
    [block] = [b for b in setup_doc.blocks() if b.kind == "gateway"]
    path = tmp_path / "gateway.toml"
    path.write_text(block.body)
    [model] = load_settings(path, env={}).models
    assert model.strictify and model.name == setup_doc.MODEL


def test_exports_and_assignments_reach_the_command_only_as_written() -> None:
    script = (
        'export A=1 B="$A-x"\n# a comment\nC=3 tool --k "$B" ~/f  # trailing\ntool \\\n  --second\n'
    )
    first, second = setup_doc.commands(script, {"HOME": "/h"})
    assert first.argv == ("tool", "--k", "1-x", "/h/f")
    assert first.env == {"HOME": "/h", "A": "1", "B": "1-x", "C": "3"}
    assert second.argv == ("tool", "--second") and "C" not in second.env


@pytest.mark.parametrize(
    ("line", "off"),
    [
        (
            "12 connect(7, {sa_family=AF_INET, sin_port=htons(53), "
            'sin_addr=inet_addr("10.255.255.53")}, 16) = 0',
            True,
        ),
        (
            "12 connect(7, {sa_family=AF_INET, sin_port=htons(8080), "
            'sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS',
            False,
        ),
        (
            "9 connect(3, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "2606:4700::1", &sin6_addr), sin6_scope_id=0}, 28 '
            "<unfinished ...>",
            True,
        ),
        (
            "9 connect(3, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
            False,
        ),
        ('5 connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1', False),
    ],
)
def test_traffic_off_loopback_is_found(line: str, off: bool) -> None:
    assert off_loopback(line) == ([line] if off else [])
