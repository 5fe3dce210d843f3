"""A real browser for the web console's tests: Debian's headless Chromium driven
through chromium-driver by Selenium (both installed by scripts/test).

`ConsoleBrowser` opens console pages of one broker, waits for what a user would
see, and takes screenshots: into the test's own folder always, and into
docs/console/ (the user's guide shows them) when WEIR_CONSOLE_SCREENSHOTS=1.
Each test asserts that the page's scripts logged no error (`assert_no_script_errors`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS_SCREENSHOTS = REPO_ROOT / "docs" / "console"
WAIT_S = 15.0
LAPTOP_SIZE = (1366, 900)
PHONE_SIZE = (390, 844)


def chromium_paths() -> tuple[str, str]:
    """Debian's chromium and chromedriver; scripts/test installs both."""
    browser = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    for path in (browser, driver):
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing: run scripts/test (it installs chromium)")
    return browser, driver


def new_driver(download_dir: Path) -> webdriver.Chrome:
    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests may run as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--window-size={LAPTOP_SIZE[0]},{LAPTOP_SIZE[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(download_dir), "download.prompt_for_download": False},
    )
    # The service's own path: Selenium Manager must not look for a driver online.
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


class ConsoleBrowser:
    """One Chromium window on one broker's console."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, artifacts: Path) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/")
        self.artifacts = artifacts
        self.download_dir = artifacts / "downloads"

    # -- navigation ---------------------------------------------------------------

    def open(self, path: str) -> None:
        """Loads `path` (e.g. "/console/topics") of this browser's broker."""
        self.driver.get(self.base_url + path)

    def use_broker(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def login(self, user: str, password: str) -> None:
        self.open("/console/login")
        self.type_into("#login-user", user)
        self.type_into("#login-password", password)
        self.click("#login-submit")
        self.wait_until(lambda: "/console/login" not in self.driver.current_url, "login")

    def logout(self) -> None:
        self.driver.execute_script("sessionStorage.clear()")

    # -- finding and acting ---------------------------------------------------------

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_for(self, css: str, timeout_s: float = WAIT_S) -> WebElement:
        """The first visible element matching `css`, once there is one."""

        def visible() -> WebElement | None:
            for element in self.find_all(css):
                try:
                    if element.is_displayed():
                        return element
                except StaleElementReferenceException:
                    continue
            return None

        return self.wait_until(visible, f"a visible {css}", timeout_s)

    def wait_text(self, css: str, text: str, timeout_s: float = WAIT_S) -> WebElement:
        """The first visible element matching `css` whose text contains `text`."""

        def containing() -> WebElement | None:
            for element in self.find_all(css):
                try:
                    if element.is_displayed() and text in element.text:
                        return element
                except StaleElementReferenceException:
                    continue
            return None

        return self.wait_until(containing, f"{css} showing {text!r}", timeout_s)

    def wait_gone(self, css: str, timeout_s: float = WAIT_S) -> None:
        def gone() -> bool:
            try:
                return not any(e.is_displayed() for e in self.find_all(css))
            except StaleElementReferenceException:
                return False

        self.wait_until(gone, f"no visible {css}", timeout_s)

    def wait_until(self, condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
        deadline_s = time.monotonic() + timeout_s
        while True:
            try:
                result = condition()
            except (NoSuchElementException, StaleElementReferenceException):
                result = None
            if result:
                return result
            if time.monotonic() > deadline_s:
                self.save_screenshot("timeout")
                raise TimeoutException(
                    f"waited {timeout_s} s for {what} on {self.driver.current_url}; "
                    f"script log: {self.script_log()}"
                )
            time.sleep(0.1)

    def click(self, css: str) -> None:
        self.wait_for(css).click()

    def type_into(self, css: str, text: str, clear: bool = True) -> None:
        element = self.wait_for(css)
        if clear:
            element.clear()
        element.send_keys(text)

    def select(self, css: str, visible_text: str | None = None, value: str | None = None) -> None:
        choice = Select(self.wait_for(css))
        if value is not None:
            choice.select_by_value(value)
        else:
            assert visible_text is not None
            choice.select_by_visible_text(visible_text)

    def accept_confirm(self) -> None:
        """Accepts the window.confirm() a destructive action asks."""
        alert = self.wait_until(lambda: _alert(self.driver), "a confirmation dialog")
        alert.accept()

    def texts(self, css: str) -> list[str]:
        return [e.text for e in self.find_all(css)]

    # -- evidence -----------------------------------------------------------------

    def script_log(self) -> list[str]:
        return [entry["message"] for entry in self.driver.get_log("browser")]

    def assert_no_script_errors(self, allowed: tuple[str, ...] = ()) -> None:
        """No SEVERE entry in the page's console log but network errors of the
        broker's own answers (a 4xx/5xx the page shows as a message) and `allowed`."""
        severe = [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE"
            and "Failed to load resource" not in entry["message"]
            and not any(text in entry["message"] for text in allowed)
        ]
        assert not severe, severe

    def save_screenshot(self, name: str) -> Path:
        path = self.artifacts / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def screenshot_for_docs(self, name: str) -> Path:
        """A screenshot kept beside the test; copied into docs/console/ when
        WEIR_CONSOLE_SCREENSHOTS=1 (how docs/console.md's images are made)."""
        path = self.save_screenshot(name)
        if os.environ.get("WEIR_CONSOLE_SCREENSHOTS") == "1":
            DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_SCREENSHOTS / f"{name}.png")
        return path

    @contextmanager
    def window_size(self, width: int, height: int) -> Iterator[None]:
        self.driver.set_window_size(width, height)
        try:
            yield
        finally:
            self.driver.set_window_size(*LAPTOP_SIZE)


def _alert(driver: webdriver.Chrome) -> Any:
    try:
        alert = driver.switch_to.alert
        _ = alert.text
        return alert
    except Exception:  # noqa: BLE001 - no alert open yet
        return None


@contextmanager
def console_browser(base_url: str, artifacts: Path) -> Iterator[ConsoleBrowser]:
    """A fresh Chromium on `base_url` (e.g. "http://127.0.0.1:8080"), closed after."""
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "downloads").mkdir(exist_ok=True)
    driver = new_driver(artifacts / "downloads")
    try:
        yield ConsoleBrowser(driver, base_url, artifacts)
    finally:
        driver.quit()
