"""A screenshot of the page of ``seq2seq serve`` (docs/serve.png): Debian's headless Chromium
through Debian's chromedriver (nothing downloaded), against a server on a free loopback port.

    python scripts/docs/screenshot_page.py --model runs/zh-en --text "我想喝一杯咖啡。" --out docs/serve.png
"""

import argparse
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # benchlib: what the scripts share
from benchlib import REPORTS, free_port, start_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", default="我想喝一杯咖啡。")
    parser.add_argument("--out", default=str(REPORTS / "serve.png"), help="PNG to write (default: %(default)s)")
    parser.add_argument("--size", default="1400,1500", help="window width,height in CSS pixels")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    port = free_port()
    server = start_server(args.model, port, ["--device", "cpu"])
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={args.size}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=options)
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        box = driver.find_element("id", "source")
        box.clear()
        box.send_keys(args.text)
        driver.find_element("id", "go").click()
        WebDriverWait(driver, 120).until(lambda d: d.find_elements("css selector", "#cross-map .cell"))
        driver.save_screenshot(args.out)
        print(f"saved {args.out}")
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
