"""The console in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, Selenium).

Logs in with an admin key, creates a key, makes a request with it, finds it in the overview
and the request list, revokes the key, and checks a non-strict schema in the playground
(issue path highlighted, strictify projection shown). Screenshots of every page go to
``test-artifacts/console/*.png``. Skipped, with the reason, when the browser is absent:

    apt-get install -y chromium chromium-driver && pip install selenium
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway_proc import GatewayProcess, model_table, start_gateway
from tests.support.scripted_upstream import Call, Reply, ScriptedUpstream

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    if os.environ.get("SYNTIC_REQUIRE_BROWSER") == "1":  # CI must not skip these
        pytest.fail("SYNTIC_REQUIRE_BROWSER=1 but chromium/chromedriver are missing", pytrace=False)
    pytest.skip(
        "headless browser tests need Debian's chromium and chromium-driver "
        "(apt-get install -y chromium chromium-driver)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount_pence": {"type": "integer", "minimum": 1}},
    "required": ["amount_pence"],
    "additionalProperties": False,
}
TOOL = {"type": "function", "function": {"name": "refund", "strict": True, "parameters": SCHEMA}}
NON_STRICT_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "note": {"type": "object", "properties": {"text": {"type": "string"}}},
            },
            "required": ["order_id", "note"],
            "additionalProperties": False,
        },
    },
}
NOTE = "tools[0].function.parameters.properties.note"


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, str]]:
    proc = start_gateway(
        tmp_path_factory.mktemp("console"),
        [model_table("console-model", scripted_upstream_server.base_url)],
        key_name="customer",
    )
    try:
        out = proc.syntic("keys", "create", "--name", "console-admin", "--admin")
        yield proc, out.stdout.strip().splitlines()[-1].strip()
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1500",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    # An explicit driver path: Selenium Manager never runs, so nothing is downloaded.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, timeout: float = 10.0) -> Any:
    # The console re-renders tables on every load; an element found a moment ago may be
    # replaced, so conditions are re-evaluated rather than failing on a stale element.
    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,))


def shot(driver: Any, name: str) -> None:
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def clear(driver: Any, css: str) -> None:
    """Empty a rendered region, so a wait below can only match what is rendered next."""
    driver.execute_script(f"document.querySelector({json.dumps(css)}).replaceChildren()")


def text_of(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def test_console_end_to_end(
    gw: tuple[GatewayProcess, str], browser: Any, upstream: ScriptedUpstream
) -> None:
    proc, admin_key = gw
    d = browser
    d.get(proc.base_url + "/console")
    wait(d).until(ec.visibility_of_element_located((By.ID, "login-key")))
    shot(d, "login")

    # A customer key is refused with a clear message; nothing is kept.
    d.find_element(By.ID, "login-key").send_keys(proc.api_key)
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait(d).until(lambda _: "customer key" in text_of(d, "#login-error"))
    assert d.execute_script("return sessionStorage.length") == 0

    d.find_element(By.ID, "login-key").send_keys(admin_key)
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait(d).until(ec.visibility_of_element_located((By.ID, "page-overview")))
    assert admin_key not in d.page_source and admin_key not in d.current_url
    assert d.execute_script("return Object.values(sessionStorage)") == [admin_key]

    # Keys: create one; the secret is shown once, with a copy button.
    d.get(proc.base_url + "/console#keys")
    wait(d).until(ec.visibility_of_element_located((By.ID, "key-form")))
    d.find_element(By.ID, "key-name").send_keys("browser-key")
    d.find_element(By.ID, "key-rpm").send_keys("120")
    d.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait(d).until(ec.visibility_of_element_located((By.ID, "key-secret")))
    secret = text_of(d, "#key-secret-value")
    assert secret.startswith("sk_live_")
    d.find_element(By.ID, "key-copy").click()
    wait(d).until(lambda _: text_of(d, "#key-copied") != "")
    xpath = "//tr[td[2]='browser-key']"
    key_id, row_text = wait(d).until(
        lambda _: ((row := d.find_element(By.XPATH, xpath)).get_attribute("data-key-id"), row.text)
    )
    assert key_id and "120" in row_text and "active" in row_text
    shot(d, "keys")

    # A request with the new key: one schema correction (so correction tokens show).
    upstream.queue(
        Reply(tool_calls=[Call("refund", '{"amount_pence": "5"}')], usage=(20, 6)),
        Reply(tool_calls=[Call("refund", '{"amount_pence": 5}')], usage=(40, 9)),
    )
    res = httpx.post(
        proc.base_url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={
            "model": "console-model",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [TOOL],
        },
        timeout=20,
    )
    assert res.status_code == 200 and res.headers["x-syntic-schema-retries"] == "1"
    request_id = res.headers["x-request-id"]
    deadline = time.monotonic() + 10
    while not httpx.get(
        proc.base_url + "/admin/requests",
        params={"key_id": key_id},
        headers={"authorization": f"Bearer {admin_key}"},
        timeout=5,
    ).json()["data"]:
        assert time.monotonic() < deadline, f"no ledger row for {key_id}:\n{proc.log()[-2000:]}"
        time.sleep(0.1)

    # Overview, split per key: the new key is in the charts and the table.
    d.get(proc.base_url + "/console#overview")
    wait(d).until(ec.visibility_of_element_located((By.ID, "ov-split")))
    clear(d, "#ov-charts")
    Select(d.find_element(By.ID, "ov-split")).select_by_value("key")
    label = f"browser-key · {key_id}"
    css = f"[data-chart='correction-tokens'] polyline[data-series='{label}']"
    wait(d).until(lambda _: d.find_elements(By.CSS_SELECTOR, css))
    assert label in text_of(d, "#ov-by-key")
    tiles = text_of(d, "#ov-tiles")
    assert "tokens on corrections" in tiles and "49" in tiles  # 40 + 9 correction tokens
    shot(d, "overview")

    # Requests: filter by the key; the request is listed (no prompt text in the page).
    d.get(proc.base_url + "/console#requests")
    row_css = f"tr[data-request-id='{request_id}']"
    wait(d).until(lambda _: d.find_elements(By.CSS_SELECTOR, row_css))  # unfiltered list
    Select(d.find_element(By.ID, "req-key")).select_by_value(key_id)
    clear(d, "#req-table")
    d.find_element(By.CSS_SELECTOR, "#req-form button").click()
    row_text = wait(d).until(lambda _: d.find_element(By.CSS_SELECTOR, row_css).text)
    assert "console-model" in row_text and "200" in row_text
    assert len(d.find_elements(By.CSS_SELECTOR, "#req-table tbody tr")) == 1
    shot(d, "requests")

    # Playground: a non-strict schema; the issue path is highlighted, the projection shown.
    d.get(proc.base_url + "/console#playground")
    area = wait(d).until(ec.visibility_of_element_located((By.ID, "pg-input")))
    d.execute_script("arguments[0].value = arguments[1]", area, json.dumps(NON_STRICT_TOOL))
    d.find_element(By.ID, "pg-check").click()
    wait(d).until(lambda _: d.find_elements(By.CSS_SELECTOR, "pre[data-pane='projection']"))
    original = d.find_element(By.CSS_SELECTOR, "pre[data-pane='original']")
    marked = original.find_elements(By.CSS_SELECTOR, ".hl")
    assert NOTE in [m.get_attribute("data-path") for m in marked]
    issue = d.find_element(By.CSS_SELECTOR, f"#pg-results li[data-param='{NOTE}']")
    assert "additionalProperties" in issue.text
    issue.click()
    assert original.find_element(By.CSS_SELECTOR, ".focus").get_attribute("data-path") == NOTE
    projection = d.find_element(By.CSS_SELECTOR, "pre[data-pane='projection']")
    note = projection.find_element(By.CSS_SELECTOR, f"[data-path='{NOTE}']")
    assert '"additionalProperties": false' in note.text
    assert d.find_elements(By.CSS_SELECTOR, "tr[data-limit='properties']")
    shot(d, "playground")

    # Revoke from the Keys page (two clicks), then the key is refused.
    clear(d, "#keys-table")
    d.get(proc.base_url + "/console#keys")
    revoke_css = f"tr[data-key-id='{key_id}'] button.danger"
    wait(d).until(lambda _: d.find_element(By.CSS_SELECTOR, revoke_css).click() or True)
    wait(d).until(lambda _: "Confirm" in d.find_element(By.CSS_SELECTOR, revoke_css).text)
    d.find_element(By.CSS_SELECTOR, revoke_css).click()
    wait(d).until(
        lambda _: (
            "revoked"
            in (
                d.find_element(By.CSS_SELECTOR, f"tr[data-key-id='{key_id}']").get_attribute(
                    "class"
                )
                or ""
            )
        )
    )
    refused = httpx.post(
        proc.base_url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "console-model", "messages": []},
        timeout=10,
    )
    assert refused.status_code == 401
    assert secret not in d.page_source or d.find_element(By.ID, "key-secret").is_displayed()
    logs = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert not [e for e in logs if "Content Security Policy" in e["message"]], logs
