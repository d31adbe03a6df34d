"""The memory console in a real browser: Debian's Chromium (Playwright) against a real
``deermem console`` subprocess over a JSON-file storage, every change checked through the
``deermem`` CLI in another process.

One console serves the module; each test works on its own user, so they pass in any order.
Screenshots of the main screens go to ``$DEERMEM_ARTIFACTS`` (default ``artifacts/console``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.console.operators import add_operator
from tests.helpers import write
from tests.integration_tests.console_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    RunningConsole,
    cli,
    console_process,
    document,
    fact,
    require_browser,
    screenshot,
    section,
    seed,
    served,
    stored,
    stored_facts,
)

pytestmark = pytest.mark.slow

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
LINK = "[click](javascript:window.__pwned=1)"
HOSTILE_USER = '<img src=x onerror="window.__pwned=2">'
LONG_USER = "customer-" + "0123456789" * 10
UNBROKEN = "Wrote" + "x" * 380 + "!"

DOCUMENTS: dict[tuple[str, str | None], dict[str, Any]] = {
    ("alice", None): document(
        [
            fact(
                "f_python",
                "Prefers Python for data work",
                category="preference",
                confidence=0.95,
                confirmations=3,
                injections=7,
                lastInjectedAt="2026-03-02T08:00:00Z",
                updatedAt="2026-02-20T10:00:00Z",
            ),
            fact("f_berlin", "Lives in Berlin", confidence=0.8, updatedAt="2026-02-10T10:00:00Z"),
            fact(
                "f_tea",
                "Drinks green tea every morning",
                category="behavior",
                confidence=0.6,
                updatedAt="2026-02-15T10:00:00Z",
            ),
            fact(
                "f_paris",
                "Lives in Paris",
                confidence=0.7,
                status="superseded",
                supersededBy="f_berlin",
            ),
            fact(
                "f_lisbon",
                "Went to Lisbon",
                category="knowledge",
                status="archived",
                eventAt="2025-05",
            ),
        ],
        workContext=section("Data engineer at a logistics company; works in Python and SQL."),
        topOfMind=section("Planning a move to a bigger flat in Berlin."),
    ),
    ("alice", "coder"): document([fact("f_vim", "Uses vim keybindings")]),
    ("carol", None): document(
        [
            fact("f_dog", "Has a dog named Rex", category="knowledge"),
            fact("f_chess", "Plays chess on Sundays", category="behavior"),
        ]
    ),
    ("dave", None): document([fact("f_shift", "Works night shifts", category="context")]),
    ("erin", None): document([fact("f_erin", "Speaks Finnish")]),
    ("erin", "coder"): document([fact("f_erin2", "Writes Go")]),
    ("mallory", None): document(
        [
            fact("x_script", SCRIPT),
            fact("x_img", IMG, category=IMG),
            fact("x_link", LINK),
        ],
        workContext=section(SCRIPT + " " + IMG),
    ),
    (HOSTILE_USER, None): document([fact("x_user", "A user whose id is markup")]),
    (LONG_USER, None): document(
        [fact("f_long", UNBROKEN), fact("f_short", "Short fact")],
        personalContext=section("y" * 500),
    ),
}


@dataclass
class Setup:
    config: Path
    console: RunningConsole
    editor: str
    """sam's bearer token (edit role)."""
    reader: str
    """rita's bearer token (read role)."""

    @property
    def base(self) -> str:
        return self.console.base


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    require_browser()
    tmp = tmp_path_factory.mktemp("console")
    config = write(
        tmp / "config.yaml",
        f"memory:\n  storage_path: {tmp / 'memory'}\n  embeddings: none\n",
    )
    seed(config, DOCUMENTS)
    operators = tmp / "operators.yaml"
    editor, _ = add_operator(operators, "sam", "edit")
    reader, _ = add_operator(operators, "rita", "read")
    args = ("--operators", str(operators), "--login-as", "sam")
    with console_process(config, *args, log=tmp / "console.log") as running:
        yield Setup(config, running, editor, reader)


@pytest.fixture(scope="module")
def browser(setup: Setup) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def new_page(browser: Any, problems: list[str], **options: Any) -> Any:
    """A page in a fresh context (no cookie) that records script errors and CSP refusals."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, **options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def console_message(message: Any) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            problems.append(f"CSP: {message.text}")

    page.on("console", console_message)
    return page


@pytest.fixture
def problems() -> Iterator[list[str]]:
    """Script errors and CSP violations of the test's pages: there must be none."""
    found: list[str] = []
    yield found
    assert not found, found


@pytest.fixture
def page(browser: Any, problems: list[str]) -> Iterator[Any]:
    page = new_page(browser, problems)
    yield page
    page.context.close()


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def log_in(page: Any, base: str, token: str) -> None:
    """Paste a token into the login page and press Enter."""
    page.goto(base)
    field = page.get_by_label("Access token")
    field.fill(token)
    field.press("Enter")
    expect(page.get_by_test_id("operator-name")).to_be_visible()
    page.wait_for_selector("body.ready")


def choose_user(page: Any, user: str, search: str | None = None) -> None:
    """Find ``user`` with the search box (Enter) and pick them; waits for their facts."""
    box = page.get_by_test_id("user-q")
    if not box.is_visible():
        page.get_by_test_id("change-user").click()
    box.fill(search if search is not None else user)
    box.press("Enter")
    item = page.get_by_test_id("user-item").filter(has=page.get_by_text(user, exact=True))
    item.click()
    expect(page.get_by_test_id("current-user")).to_have_text(user)
    page.get_by_test_id("tab-facts").click()
    expect(page.get_by_test_id("fact-summary")).to_contain_text("Facts")


def card(page: Any, fact_id: str) -> Any:
    return page.locator(f'[data-testid="fact"][data-fact-id="{fact_id}"]')


def contents(page: Any) -> list[str]:
    texts: list[str] = page.get_by_test_id("fact-content").all_text_contents()
    return texts


def no_horizontal_scroll(page: Any, width: int) -> None:
    scroll = page.evaluate("document.scrollingElement.scrollWidth")
    assert scroll <= width + 1, f"the page is {scroll}px wide on a {width}px screen"


# -- logging in -----------------------------------------------------------------------------------


def test_the_one_time_link_logs_in_and_is_refused_the_second_time(
    setup: Setup, browser: Any, problems: list[str]
) -> None:
    page = new_page(browser, problems)
    page.goto(setup.console.link)
    assert page.url == setup.base  # redirected to the page, the secret gone from the bar
    expect(page.get_by_test_id("operator-name")).to_have_text("sam")
    expect(page.get_by_test_id("operator-role")).to_have_text("can edit")
    expect(page.get_by_test_id("user-list")).to_contain_text("alice")
    page.get_by_test_id("logout").click()  # a POST with the CSRF token; back to the login page
    expect(page.get_by_label("Access token")).to_be_visible()
    assert page.context.request.get(f"{setup.base}api/users").status == 401
    page.context.close()

    again = new_page(browser, problems)
    answer = again.goto(setup.console.link)
    assert answer is not None and answer.status == 401
    expect(again.get_by_role("alert")).to_contain_text("already used")
    expect(again.get_by_label("Access token")).to_be_visible()
    assert again.context.cookies() == []
    screenshot(again, "login-link-used")
    again.context.close()


def test_nothing_without_a_credential(setup: Setup, browser: Any, problems: list[str]) -> None:
    page = new_page(browser, problems)
    page.goto(setup.base)
    expect(page.get_by_role("heading", name="Memory console")).to_be_visible()
    expect(page.get_by_label("Access token")).to_be_visible()
    assert page.locator("script").count() == 0  # the login page runs nothing
    screenshot(page, "login")
    request = page.context.request
    assert request.get(f"{setup.base}api/users").status == 401
    assert request.get(f"{setup.base}api/facts?user=alice").status == 401
    assert request.get(f"{setup.base}app.js").status == 401
    assert request.get(f"{setup.base}app.css").status == 200

    page.get_by_label("Access token").fill("not-a-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not known")
    assert page.context.cookies() == []
    page.context.close()


# -- reading --------------------------------------------------------------------------------------


def test_profile_and_facts_are_shown(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "alice", search="ali")
    expect(page.get_by_test_id("agent-select")).to_have_value("__default__")
    summary = page.get_by_test_id("fact-summary")
    expect(summary).to_have_text("Facts 1–5 of 5.")
    python = card(page, "f_python")
    expect(python.get_by_test_id("fact-content")).to_have_text("Prefers Python for data work")
    expect(python.get_by_test_id("fact-category")).to_have_text("preference")
    expect(python.get_by_test_id("fact-confidence")).to_have_text("95%")
    expect(python.get_by_test_id("fact-status")).to_have_text("active")
    expect(python.get_by_test_id("fact-confirmations")).to_have_text("3 times")
    expect(python.get_by_test_id("fact-injections")).to_have_text("7 times")
    expect(python.get_by_test_id("fact-created")).to_have_text("2026-02-01 10:00 UTC")
    expect(python.get_by_test_id("fact-score")).to_have_text(re.compile(r"^\d+%$"))
    expect(card(page, "f_paris").get_by_test_id("fact-status")).to_have_text("superseded")
    assert contents(page)[0] == "Prefers Python for data work"  # most recently changed first
    shown = page.get_by_test_id("fact-list").inner_text()
    assert not re.search(r"\bnull\b|\bundefined\b|\bNaN\b|\[object Object\]", shown), shown
    screenshot(page, "facts")

    page.get_by_test_id("tab-profile").click()
    work = page.get_by_test_id("profile-workContext")
    expect(work).to_contain_text("Data engineer at a logistics company")
    expect(page.get_by_test_id("profile-personalContext")).to_contain_text("Nothing yet.")
    expect(page.get_by_test_id("profile-counts")).to_contain_text(
        "5 facts: 3 active, 1 superseded, 1 archived"
    )
    screenshot(page, "profile")

    # the other agent's memory of the same user
    page.get_by_test_id("agent-select").select_option("coder")
    page.get_by_test_id("tab-facts").click()
    expect(page.get_by_test_id("fact-summary")).to_have_text("Facts 1–1 of 1.")
    assert contents(page) == ["Uses vim keybindings"]
    assert "agent=coder" in page.url and "tab=facts" in page.url
    page.reload()  # the address keeps the place
    page.wait_for_selector("body.ready")
    expect(page.get_by_test_id("current-user")).to_have_text("alice")
    expect(page.get_by_test_id("agent-select")).to_have_value("coder")
    expect(page.get_by_test_id("fact-content")).to_have_text(["Uses vim keybindings"])


def test_search_filter_and_sort(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "alice")
    search = page.get_by_test_id("fact-search")
    search.fill("TEA")
    search.press("Enter")
    expect(page.get_by_test_id("fact-content")).to_have_text(["Drinks green tea every morning"])
    expect(page.get_by_test_id("fact-summary")).to_have_text("Facts 1–1 of 1 matching the filters.")
    search.fill("no such words")
    search.press("Enter")
    expect(page.get_by_test_id("fact-summary")).to_have_text("No fact matches the filters.")
    search.fill("")
    search.press("Enter")
    expect(page.get_by_test_id("fact")).to_have_count(5)

    page.get_by_test_id("filter-status").select_option("superseded")
    expect(page.get_by_test_id("fact-content")).to_have_text(["Lives in Paris"])
    page.get_by_test_id("filter-status").select_option("all")
    page.get_by_test_id("filter-category").select_option("behavior")
    expect(page.get_by_test_id("fact-content")).to_have_text(["Drinks green tea every morning"])
    page.get_by_test_id("filter-category").select_option("")
    page.get_by_test_id("filter-sort").select_option("confidence")
    expect(page.get_by_test_id("fact-content").first).to_have_text("Prefers Python for data work")
    expect(page.get_by_test_id("fact-content").last).to_have_text("Drinks green tea every morning")


# -- changing -------------------------------------------------------------------------------------


def test_add_edit_and_delete_show_in_the_cli_and_the_history(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "carol")

    # add (the form submits with Enter)
    page.get_by_test_id("add-fact-open").click()
    page.get_by_test_id("add-category").select_option("knowledge")
    page.get_by_test_id("add-confidence").fill("90")
    page.get_by_test_id("add-content").fill("Is allergic to peanuts")
    page.get_by_test_id("add-content").press("Enter")
    expect(page.get_by_test_id("notice")).to_have_text("The fact was added.")
    expect(page.get_by_test_id("add-fact-form")).to_be_hidden()
    expect(page.get_by_test_id("fact-content").first).to_have_text("Is allergic to peanuts")
    added = [f for f in stored_facts(setup.config, "carol").values() if "peanuts" in f["content"]]
    assert len(added) == 1
    assert (added[0]["category"], added[0]["confidence"], added[0]["manual"]) == (
        "knowledge",
        0.9,
        True,
    )

    # an API refusal is shown in the alert region: the same fact twice
    page.get_by_test_id("add-fact-open").click()
    page.get_by_test_id("add-content").fill("Is allergic to peanuts")
    page.get_by_test_id("add-save").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("an equal fact exists")
    expect(alert).to_be_visible()
    page.get_by_test_id("add-cancel").click()
    expect(page.get_by_test_id("fact")).to_have_count(3)

    # edit (Escape leaves the form without saving)
    dog = card(page, "f_dog")
    dog.get_by_test_id("fact-edit").click()
    dog.get_by_test_id("edit-content").fill("Has a cat")
    page.keyboard.press("Escape")
    expect(dog.get_by_test_id("fact-edit-form")).to_have_count(0)
    expect(dog.get_by_test_id("fact-content")).to_have_text("Has a dog named Rex")
    dog.get_by_test_id("fact-edit").click()
    dog.get_by_test_id("edit-content").fill("Has a dog named Max")
    dog.get_by_test_id("edit-confidence").fill("75")
    dog.get_by_test_id("edit-save").click()
    expect(page.get_by_test_id("notice")).to_have_text("The fact was saved.")
    expect(dog.get_by_test_id("fact-content")).to_have_text("Has a dog named Max")
    expect(dog.get_by_test_id("fact-confidence")).to_have_text("75%")
    expect(dog.get_by_test_id("fact-manual")).to_be_visible()
    edited = stored_facts(setup.config, "carol")["f_dog"]
    assert (edited["content"], edited["confidence"], edited["category"]) == (
        "Has a dog named Max",
        0.75,
        "knowledge",
    )

    # delete: Escape closes the confirmation and keeps the fact; Delete removes it
    chess = card(page, "f_chess")
    chess.get_by_test_id("fact-delete").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Plays chess on Sundays")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(chess).to_be_visible()
    chess.get_by_test_id("fact-delete").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("notice")).to_have_text("The fact was deleted.")
    expect(chess).to_have_count(0)
    assert "f_chess" not in stored_facts(setup.config, "carol")

    # the history: who, when, what, before → after
    page.get_by_test_id("tab-history").click()
    entries = page.get_by_test_id("audit-entry")
    expect(entries).to_have_count(3)
    expect(entries.get_by_test_id("audit-action")).to_have_text(
        ["deleted a fact", "edited a fact", "added a fact"]
    )
    expect(entries.get_by_test_id("audit-operator")).to_have_text(["sam", "sam", "sam"])
    edit = entries.nth(1)
    expect(edit.get_by_test_id("audit-before").first).to_have_text("Has a dog named Rex")
    expect(edit.get_by_test_id("audit-after").first).to_have_text("Has a dog named Max")
    expect(edit).to_contain_text("80%")  # the confidence before
    expect(entries.nth(0)).to_contain_text("Plays chess on Sundays")
    expect(entries.nth(0).get_by_test_id("audit-at")).to_have_text(re.compile(r"UTC$"))
    screenshot(page, "history")


def test_a_concurrent_change_gets_a_clear_409_and_is_not_overwritten(
    setup: Setup, page: Any
) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "dave")
    shift = card(page, "f_shift")
    shift.get_by_test_id("fact-edit").click()
    shift.get_by_test_id("edit-content").fill("Works early shifts")

    # meanwhile, someone else changes the fact (the CLI, another process)
    cli(
        "fact", "edit", "f_shift",
        "--text", "Works weekend shifts",
        "--config", str(setup.config),
        "--user", "dave",
    )  # fmt: skip

    shift.get_by_test_id("edit-save").click()
    conflict = shift.get_by_test_id("conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_have_attribute("role", "alert")
    expect(conflict.get_by_test_id("conflict-explanation")).to_contain_text(
        "This fact was changed by an agent or another person since you loaded it."
    )
    expect(conflict.get_by_test_id("conflict-current")).to_have_text("Works weekend shifts")
    expect(conflict.get_by_test_id("conflict-yours")).to_have_text("Works early shifts")
    expect(shift.get_by_test_id("fact-content")).to_have_text("Works weekend shifts")
    screenshot(page, "edit-409")
    assert stored_facts(setup.config, "dave")["f_shift"]["content"] == "Works weekend shifts"

    # start again from the current version: now it saves
    conflict.get_by_test_id("conflict-reload").click()
    expect(shift.get_by_test_id("edit-content")).to_have_value("Works weekend shifts")
    shift.get_by_test_id("edit-content").fill("Works weekend and early shifts")
    shift.get_by_test_id("edit-content").press("Enter")
    expect(page.get_by_test_id("notice")).to_have_text("The fact was saved.")
    expect(shift.get_by_test_id("fact-content")).to_have_text("Works weekend and early shifts")
    facts = stored_facts(setup.config, "dave")
    assert facts["f_shift"]["content"] == "Works weekend and early shifts"


def test_forget_needs_the_user_id_typed_and_leaves_nothing(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "erin")
    page.get_by_test_id("tab-forget").click()
    button = page.get_by_test_id("forget-run")
    confirm = page.get_by_test_id("forget-confirm")
    expect(button).to_be_disabled()
    confirm.fill("eri")
    expect(button).to_be_disabled()
    confirm.press("Enter")  # Enter with the wrong id forgets nothing
    confirm.fill("Erin")
    expect(button).to_be_disabled()
    confirm.fill("erin")
    expect(button).to_be_enabled()
    screenshot(page, "forget")
    button.click()

    receipt = page.get_by_test_id("forget-receipt")
    expect(receipt).to_be_visible()
    expect(receipt).to_contain_text("Everything the memory held about erin was erased.")
    lines = page.get_by_test_id("receipt-line")
    expect(lines.first).to_be_visible()
    assert any("document" in line for line in lines.all_text_contents())
    expect(page.get_by_test_id("user-list")).not_to_contain_text("erin")
    screenshot(page, "forget-receipt")
    for agent in (None, "coder"):
        doc = stored(setup.config, "erin", agent)
        assert (doc["revision"], doc["facts"]) == (0, [])


# -- safety ---------------------------------------------------------------------------------------


def test_hostile_texts_are_shown_as_text(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.editor)
    choose_user(page, "mallory")
    facts = page.get_by_test_id("fact-list")
    for fact_id, text in (("x_script", SCRIPT), ("x_img", IMG), ("x_link", LINK)):
        shown = card(page, fact_id).get_by_test_id("fact-content")
        expect(shown).to_have_text(text)
        expect(shown).to_be_visible()
    expect(card(page, "x_img").get_by_test_id("fact-category")).to_have_text(IMG)
    assert facts.locator("img, script, a").count() == 0
    page.get_by_test_id("tab-profile").click()
    expect(page.get_by_test_id("profile-workContext")).to_contain_text(SCRIPT + " " + IMG)
    page.get_by_test_id("tab-explain").click()
    page.get_by_test_id("explain-message").fill("click the image script")
    page.get_by_test_id("explain-run").click()
    expect(page.get_by_test_id("explain-summary")).to_be_visible()
    expect(page.get_by_test_id("explain-result")).to_contain_text(SCRIPT)

    # a user id that is markup, in the list and the heading
    choose_user(page, HOSTILE_USER, search="<img")
    expect(page.get_by_test_id("fact-content")).to_have_text(["A user whose id is markup"])

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("main img, main script").count() == 0


def test_a_read_only_operator_gets_no_edit_controls_and_a_403(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.reader)
    expect(page.get_by_test_id("operator-role")).to_have_text("read only")
    choose_user(page, "alice")
    expect(page.get_by_test_id("fact")).to_have_count(5)
    for control in ("fact-edit", "fact-delete", "add-fact-open", "add-fact-form", "tab-forget"):
        assert page.get_by_test_id(control).count() == 0, control
    assert page.get_by_test_id("panel-forget").count() == 0

    forced = page.evaluate(
        """async () => {
            const session = await (await fetch('api/session')).json();
            const answer = await fetch('api/facts', {
                method: 'POST',
                headers: {'Content-Type': 'application/json', 'X-CSRF-Token': session.csrf},
                body: JSON.stringify({user: 'alice', content: 'Forced in by a reader'}),
            });
            return {csrf: Boolean(session.csrf), status: answer.status, body: await answer.json()};
        }"""
    )
    assert forced["csrf"] and forced["status"] == 403, forced
    assert "read role" in forced["body"]["error"]
    assert "Forced" not in str(stored_facts(setup.config, "alice"))


def test_the_page_works_mounted_under_a_prefix(
    tmp_path: Path, browser: Any, problems: list[str]
) -> None:
    """Relative URLs only: the console mounted at /memory of a host app logs in, lists and
    saves, and its cookie stays on /memory."""
    from fastapi import FastAPI

    from deermem_middleware import MemoryConfig
    from deermem_middleware.console import create_console_app
    from deermem_middleware.memory.manual import add_fact
    from deermem_middleware.runtime.service import MemoryService

    service = MemoryService(
        MemoryConfig(storage_path=str(tmp_path / "memory"), enabled=False, embeddings="none")
    )
    service.change(
        service.scope("alice"),
        lambda m: add_fact(m, "Prefers Python", fact_id="f1", now="2026-01-01T00:00:00Z"),
    )
    host = FastAPI()
    host.mount("/memory", create_console_app(service, tokens={"mounted-token": ("sam", "edit")}))
    try:
        with served(host) as root:
            page = new_page(browser, problems)
            log_in(page, f"{root}/memory/", "mounted-token")
            choose_user(page, "alice")
            fact_card = card(page, "f1")
            fact_card.get_by_test_id("fact-edit").click()
            fact_card.get_by_test_id("edit-content").fill("Prefers Rust")
            fact_card.get_by_test_id("edit-save").click()
            expect(page.get_by_test_id("notice")).to_have_text("The fact was saved.")
            assert page.url.startswith(f"{root}/memory/")
            assert [c["path"] for c in page.context.cookies()] == ["/memory"]
            page.context.close()
        doc = service.load(service.scope("alice")).memory
        assert [f.content for f in doc.facts] == ["Prefers Rust"]
    finally:
        service.close(timeout=5.0)


# -- layout and explain ---------------------------------------------------------------------------


def test_a_phone_sized_screen_needs_no_horizontal_scrolling(
    setup: Setup, browser: Any, problems: list[str]
) -> None:
    page = new_page(browser, problems)
    page.set_viewport_size({"width": 375, "height": 812})
    log_in(page, setup.base, setup.editor)
    page.get_by_test_id("user-q").fill("customer-")
    page.get_by_test_id("user-q").press("Enter")
    expect(page.get_by_test_id("user-item")).to_have_count(1)
    no_horizontal_scroll(page, 375)
    choose_user(page, "alice")
    no_horizontal_scroll(page, 375)
    screenshot(page, "phone-facts")
    card(page, "f_python").get_by_test_id("fact-edit").click()
    no_horizontal_scroll(page, 375)
    card(page, "f_python").get_by_test_id("edit-cancel").click()

    choose_user(page, LONG_USER, search="customer-")
    expect(page.get_by_test_id("fact-content").get_by_text(UNBROKEN)).to_be_visible()
    no_horizontal_scroll(page, 375)
    for tab in ("profile", "explain", "history", "forget"):
        page.get_by_test_id(f"tab-{tab}").click()
        expect(page.get_by_test_id(f"panel-{tab}")).to_be_visible()
        if tab == "explain":
            page.get_by_test_id("explain-message").fill("What did I write?")
            page.get_by_test_id("explain-run").click()
            expect(page.get_by_test_id("explain-summary")).to_be_visible()
        no_horizontal_scroll(page, 375)
    page.get_by_test_id("tab-profile").click()
    screenshot(page, "phone-profile")
    page.context.close()


def test_the_explain_panel_says_what_would_be_injected_and_why(setup: Setup, page: Any) -> None:
    log_in(page, setup.base, setup.reader)  # reading is enough to ask
    choose_user(page, "alice")
    page.get_by_test_id("tab-explain").click()
    message = page.get_by_test_id("explain-message")
    message.fill("What should I drink in the morning?")
    message.press("Enter")
    result = page.get_by_test_id("explain-result")
    expect(result).to_be_visible()
    expect(page.get_by_test_id("explain-summary")).to_contain_text("would be injected")
    tea = page.get_by_test_id("explain-injected").locator('[data-fact-id="f_tea"]')
    expect(tea).to_contain_text("Drinks green tea every morning")
    expect(tea.get_by_test_id("explain-reason")).to_contain_text("in the block")
    expect(tea).to_contain_text("found by lexical")  # the routes that found it
    paris = page.get_by_test_id("explain-others").locator('[data-fact-id="f_paris"]')
    expect(paris.get_by_test_id("explain-reason")).to_contain_text("only active facts are injected")
    expect(page.get_by_test_id("explain-formula")).to_contain_text("score =")
    expect(page.get_by_test_id("explain-block")).to_contain_text("Drinks green tea every morning")
    screenshot(page, "explain")
