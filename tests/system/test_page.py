"""The page of ``seq2seq serve`` in a real browser: Debian's headless Chromium driven by Selenium
through Debian's chromedriver (both named explicitly, so nothing is downloaded), against a server
process on a free loopback port with the toy run. The translation appears, the cross-attention
map has one cell per (target, source) piece pair, the self-attention maps have their shapes (the
decoder's with its causal triangle), changing the head changes the picture, hovering a cell shows
its weight, and an over-long input shows the server's error. A screenshot is saved under pytest's
temporary directory.

CI installs ``chromium`` and ``chromium-driver`` (.ci/run): there a missing browser fails the test;
elsewhere it is skipped.
"""

import pytest
from conftest import serve_process

MAX_CHARS = 40


@pytest.fixture(scope="module")
def page(browser, toy_run):
    with serve_process(toy_run, "--max-chars", str(MAX_CHARS)) as (_process, url):
        browser.get(url)
        yield browser


def _wait(driver, condition, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _cells(driver, kind: str) -> list:
    return driver.find_elements("css selector", f"#{kind}-map .cell")


def _colours(driver, kind: str) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((c) => c.style.background)", f"#{kind}-map .cell"
    )


def test_translation_and_attention_maps(page, tmp_path_factory):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select

    box = page.find_element("id", "source")
    box.clear()
    box.send_keys("我们明天去公园散步。")
    page.find_element("id", "go").click()
    _wait(page, lambda d: d.find_elements("id", "translation-0") and d.find_element("id", "translation-0").text)
    result = page.execute_script("return results[0]")  # what the server answered, as the page holds it
    assert page.find_element("id", "translation-0").text == result["translation"].strip()
    assert len(page.find_elements("css selector", "table.nbest tr")) == len(result["nbest"]) >= 2

    t, s = len(result["attention"]["target_pieces"]), len(result["attention"]["source_pieces"])
    assert len(_cells(page, "cross")) == t * s
    assert len(_cells(page, "encoder")) == s * s
    assert len(_cells(page, "decoder")) == t * t
    labels = [e.text for e in page.find_elements("css selector", "#cross-map .col")]
    assert labels == result["attention"]["source_pieces"]
    decoder = _colours(page, "decoder")
    above = [decoder[i * t + j] for i in range(t) for j in range(i + 1, t)]
    assert above and set(above) == {"rgb(242, 244, 247)"}  # the causal triangle: pale, empty cells

    mean = _colours(page, "cross")
    Select(page.find_element("css selector", "select.head[data-map=cross]")).select_by_value("0")
    head0 = _colours(page, "cross")
    assert len(head0) == t * s and head0 != mean
    Select(page.find_element("css selector", "select.head[data-map=cross]")).select_by_value("1")
    assert _colours(page, "cross") != head0

    cell = _cells(page, "cross")[0]
    ActionChains(page).move_to_element(cell).perform()
    tip = page.find_element("id", "tooltip")
    _wait(page, lambda _d: tip.is_displayed())
    weight = result["attention"]["cross"][-1][1][0][0]  # last layer, head 1, first row and column
    assert tip.text.endswith(f"{weight:.4f}") and "→" in tip.text

    shot = tmp_path_factory.mktemp("page") / "serve-page.png"
    assert page.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_an_over_long_input_shows_the_servers_error(page):
    box = page.find_element("id", "source")
    box.clear()
    box.send_keys("好" * (MAX_CHARS + 1))
    page.find_element("id", "go").click()
    error = page.find_element("id", "error")
    _wait(page, lambda _d: error.is_displayed() and error.text)
    assert error.text == f"sentence 0: {MAX_CHARS + 1} characters; at most {MAX_CHARS}"
