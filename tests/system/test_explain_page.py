"""The page of ``seq2seq explain`` in a real browser (headless Chromium, as tests/system/test_page.py
drives it): the report file opened from disk and ``seq2seq serve``'s /explain both draw every
section — one map cell per weight, one mask cell per (query, key), one row per decoding step — and a
screenshot of each is saved under the test's temporary directory.

CI installs ``chromium`` and ``chromium-driver`` (.ci/run): there a missing browser fails the test;
elsewhere it is skipped.
"""

import urllib.parse

import torch
from conftest import serve_process

from seq2seq.decode.loader import load_translator
from seq2seq.explain.page import render_page
from seq2seq.explain.report import explain

SENTENCE, REF = "今天天气很好。", "The weather is nice today."
SECTION_IDS = ("tokens", "attention-head", "multi-head", "masks", "add-norm", "training-vs-inference")


def _wait_rendered(driver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    def all_drawn(d) -> bool:
        states = d.execute_script(
            "return arguments[0].map((id) => document.getElementById(id).dataset.rendered || null)", SECTION_IDS
        )
        assert "error" not in states, states
        return states == ["true"] * len(SECTION_IDS)

    WebDriverWait(driver, 60).until(all_drawn)


def _submit_and_wait(driver) -> None:
    """Submit the form and wait for the page it loads: until that page replaces this one, this one's
    sections still read as drawn."""
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import WebDriverWait

    old_page = driver.find_element("tag name", "html")
    driver.find_element("css selector", "#ask button").click()
    WebDriverWait(driver, 60).until(staleness_of(old_page))
    _wait_rendered(driver)


def _count(driver, selector: str) -> int:
    return len(driver.find_elements("css selector", selector))


def _check_drawn(driver, report: dict) -> None:
    """Every section drew what its numbers call for."""
    heads, s = report["model"]["heads"], len(report["source_pieces"])
    t = len(report["decoder_input_pieces"])
    assert _count(driver, "#multi-head svg rect.cell") == heads * s * s + heads * t * s
    assert _count(driver, "#attention-head svg rect.cell") == 4 * s * s + 3 * s * min(8, report["model"]["head_dim"])
    masks = report["masks"]
    b_s, b_t = len(masks["source_pieces"][0]), len(masks["decoder_input_pieces"][0])
    assert _count(driver, "#masks svg rect.cell") == 2 * (b_s * b_s + b_t * b_t + b_t * b_s)
    assert _count(driver, "#tokens svg rect.cell") == s * s
    assert _count(driver, "#add-norm tr") == 1 + len(report["add_norm"]["rows"])
    forcing = report["training_vs_inference"]
    steps = len(forcing["greedy"]) + (len(forcing["teacher_forced"]) if forcing["teacher_forced"] else 0)
    assert _count(driver, "#training-vs-inference tr") == steps + (2 if forcing["teacher_forced"] else 1)
    shown = driver.find_element("id", "translation").text  # HTML collapses runs of spaces
    assert shown.split() == ["translation", "(greedy):", *report["translation"]["text"].split()]


def _screenshot(driver, path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(height, 8000))
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    print(f"screenshot: {path}")


def test_the_report_file_draws_every_section(browser, toy_run, tmp_path):
    translator = load_translator([toy_run], torch.device("cpu"), precision="float32")
    report = explain(translator, SENTENCE, REF)
    page = tmp_path / "explain.html"
    page.write_text(render_page(report), encoding="utf-8")
    browser.get(page.as_uri())
    _wait_rendered(browser)
    _check_drawn(browser, report)
    assert not browser.find_element("id", "ask").is_displayed()  # no server behind a file: no form
    _screenshot(browser, tmp_path / "explain-file.png")


def test_serve_explain_draws_every_section(browser, toy_run, tmp_path):
    with serve_process(toy_run) as (_process, url):
        query = urllib.parse.urlencode({"text": SENTENCE, "ref": REF, "layer": 1, "head": 3})
        browser.get(f"{url}/explain?{query}")
        _wait_rendered(browser)
        report = browser.execute_script("return DATA.report")
        assert (report["attention_head"]["layer"], report["attention_head"]["head"]) == (1, 3)
        _check_drawn(browser, report)
        assert browser.find_element("id", "text").get_attribute("value") == SENTENCE
        _screenshot(browser, tmp_path / "explain-serve.png")

        box = browser.find_element("id", "text")  # the form asks the server for another sentence
        box.clear()
        box.send_keys("我想喝一杯咖啡。")
        browser.find_element("id", "ref").clear()
        _submit_and_wait(browser)
        again = browser.execute_script("return DATA.report")
        assert again["sentence"] == "我想喝一杯咖啡。" and again["training_vs_inference"]["teacher_forced"] is None
