"""A screenshot of the page of ``seq2seq explain`` (docs/explain.png): the report of one sentence
written as the command writes it, opened from disk in Debian's headless Chromium through Debian's
chromedriver (nothing downloaded), the whole page down to ``--max-height`` pixels.

    python scripts/docs/screenshot_explain.py --model runs/zh-en --out docs/explain.png
"""

import argparse
import tempfile
from pathlib import Path

import torch
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from seq2seq.decode.loader import load_translator
from seq2seq.explain.page import render_page
from seq2seq.explain.report import explain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", default="今天天气很好。")
    parser.add_argument("--ref", default="The weather is nice today.")
    parser.add_argument("--out", default="runs/bench/explain.png", help="PNG to write (default: %(default)s)")
    parser.add_argument("--width", type=int, default=1400, help="window width in CSS pixels")
    parser.add_argument("--max-height", type=int, default=7000, help="cut the page here (pixels)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    translator = load_translator([args.model], torch.device("cpu"), precision="float32")
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={args.width},1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=options)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "explain.html"
        page.write_text(render_page(explain(translator, args.text, args.ref or None)), encoding="utf-8")
        try:
            driver.get(page.as_uri())
            WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return document.querySelectorAll('[data-rendered=true]').length") == 6
            )
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(args.width, min(height, args.max_height))
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(args.out)
            print(f"saved {args.out}")
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
