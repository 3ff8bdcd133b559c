"""The dashboard as an admin uses it, in a real headless Chromium (Debian's chromium and chromium-driver).

`make screenshots` runs these with STELIS_SCREENSHOTS=docs/screenshots: the README's pictures are these pages.
"""

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.dashboard_helpers import GUILD, OTHER_GUILD, running_dashboard

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SHOTS = os.environ.get("STELIS_SCREENSHOTS")


@pytest.fixture
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does): "
                    "the dashboard's browser tests did not run")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1400",
                 "--disable-gpu", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)  # a driver path: nothing is downloaded
    yield Browser(driver)
    driver.quit()


class Browser:
    """Selenium blocks; the dashboard runs on this test's event loop, so every browser step runs in a thread."""

    def __init__(self, driver):
        self.driver = driver

    async def _do(self, step, *args):
        return await asyncio.to_thread(step, *args)

    async def open(self, url: str) -> str:
        await self._do(self.driver.get, url)
        return await self.text()

    async def text(self) -> str:
        return await self._do(lambda: self.driver.find_element("tag name", "body").text)

    async def click(self, css: str) -> str:
        """Follow a link or submit a form, and wait for the page it leads to."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.wait import WebDriverWait

        def follow() -> None:
            old = self.driver.find_element("tag name", "html")
            self.driver.find_element("css selector", css).click()
            # Asked while the old page is being torn down, Chromium may answer "node does not belong to the
            # document" instead of "stale": that is asked again, and the next answer is "stale".
            WebDriverWait(self.driver, 10, ignored_exceptions=(WebDriverException,)).until(
                expected_conditions.staleness_of(old))

        await self._do(follow)
        return await self.text()

    async def type_into(self, css: str, text: str) -> None:
        await self._do(lambda: self.driver.find_element("css selector", css).send_keys(text))

    async def count(self, css: str) -> int:
        return len(await self._do(lambda: self.driver.find_elements("css selector", css)))

    async def script(self, code: str) -> object:
        return await self._do(self.driver.execute_script, code)

    async def shot(self, name: str) -> None:
        if SHOTS:
            await self._do(lambda: Path(SHOTS).mkdir(parents=True, exist_ok=True)
                           or self.driver.save_screenshot(str(Path(SHOTS) / f"{name}.png")))

    @property
    def url(self) -> str:
        return self.driver.current_url


async def test_an_admin_signs_in_reads_the_timeline_pins_rolls_back_and_reads_the_chart(make_config, browser):
    async with running_dashboard(make_config) as (_engine, board, _gate, _):
        link = board.sign_in_link(GUILD, 10)
        overview = await browser.open(link)
        assert browser.url.endswith(f"/g/{GUILD}") and "token" not in browser.url  # the token left the address
        assert "#general" in overview and "staff" not in overview and "harbour" not in overview
        assert "Autonomy is off" in overview
        await browser.shot("overview")

        memory = await browser.click("a[href$='/c/100']")
        assert "v1" in memory and "lighthouse tour" in memory
        await browser.type_into("#pin-form input[name=fact]", "the tour meets at the north pier")
        after = await browser.click("#pin-form button")
        assert "Pinned." in after and "the tour meets at the north pier" in after

        regenerated = await browser.click("button[value=regenerate]")
        assert "Regenerated" in regenerated and "v2" in regenerated
        await browser.shot("memory")
        rolled = await browser.click("#v1 button[value=rollback]")
        assert "Rolled back: version 3 restores it" in rolled
        assert await browser.count("#v2.hidden") == 1  # kept in history, shown nowhere else

        request = await browser.click("nav a[href$='/context']")
        assert await browser.count("svg.chart rect") >= 3  # the token breakdown, drawn on the server
        assert "the tour meets at the north pier" in request  # the pin is in the next request
        await browser.shot("context")
        await browser.type_into("input[name=test]", "when is the lighthouse tour?")
        previewed = await browser.click("form[method=get] button")
        assert "Recall for this message" in previewed

        refused = await browser.open(f"{board.url}/g/{OTHER_GUILD}")
        assert "another server" in refused
        assert "already used" in await browser.open(link)


async def test_a_form_posted_without_its_csrf_token_changes_nothing(make_config, browser):
    async with running_dashboard(make_config) as (engine, board, _gate, _):
        await browser.open(board.sign_in_link(GUILD, 10))
        await browser.open(f"{board.url}/g/{GUILD}/c/100")
        await browser.script("document.querySelectorAll('#pin-form input[name=csrf]').forEach(e => e.remove())")
        await browser.type_into("#pin-form input[name=fact]", "forged fact")
        refused = await browser.click("#pin-form button")
        assert "did not come from a dashboard page" in refused
        from memory.records import Scope

        assert (await engine.admin.view(Scope.channel(GUILD, 100))).pins == []
