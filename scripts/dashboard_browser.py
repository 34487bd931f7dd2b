#!/usr/bin/python3
"""Drive weir's dashboard in a real headless Chromium (Debian's chromium,
chromium-driver and python3-selenium) and print what it saw as JSON.

Run it where the page's URL is reachable: in the testbed, inside weir's
namespace (`scripts/testbed exec gw scripts/dashboard_browser.py ...`).

  --token-file F      the management token, typed into the page's form
  --sample S          read the page's link and class rates for S seconds and,
                      beside them, weir's counters through the API
  --class DIR/NAME    the class whose rate is sampled and set (outbound/gold)
  --set-rate RATE     type RATE into that class's row and press "set"
  --screenshot PNG    a full-page screenshot at the end
  --dwell S           let the page run (and chart) S seconds: half before the rate
                      is set, half after
Used by test/py/test_dashboard.py and scripts/dashboard_screenshot.
"""
import argparse
import json
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser(width, height):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-extensions", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--hide-scrollbars",
              f"--window-size={width},{height}", f"--user-data-dir={tempfile.mkdtemp(prefix='weir-dash-')}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def api(base, path, token):
    req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


PAGE_STATE = """
const d = window.weirDash || {};
const row = document.querySelector('tr[data-key="' + arguments[0] + '"] td.now');
return {polls: d.polls || 0, uptime: d.prev ? d.prev.uptime : null,
        link_out: document.getElementById('link-out').dataset.bps,
        link_out_text: document.getElementById('link-out').textContent,
        cls: row ? row.dataset.bps : null, cls_text: row ? row.textContent : null,
        state: document.getElementById('hdr-state').textContent,
        error: d.lastError || ''};
"""

TIMING = """
const n = performance.getEntriesByType('navigation')[0];
const d = window.weirDash || {};
return {load_ms: n.loadEventEnd, dom_ms: n.domContentLoadedEventEnd,
        first_data_ms: d.firstDataAt === undefined ? null : d.firstDataAt,
        first_rates_ms: d.firstRatesAt === undefined ? null : d.firstRatesAt,
        transfer_bytes: performance.getEntriesByType('resource').concat([n])
                          .reduce((a, e) => a + (e.transferSize || 0), 0)};
"""


def wait_live(drv, cls, timeout=20):
    WebDriverWait(drv, timeout).until(
        lambda d: (lambda s: s["state"] == "live" and s["link_out"] not in ("", None))(
            d.execute_script(PAGE_STATE, cls)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080/dashboard/")
    ap.add_argument("--token-file")
    ap.add_argument("--sample", type=float, default=0)
    ap.add_argument("--class", dest="cls", default="outbound/gold")
    ap.add_argument("--set-rate")
    ap.add_argument("--screenshot")
    ap.add_argument("--dwell", type=float, default=0,
                    help="seconds the page runs before the rate is set (half) and the screenshot (half)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1000)
    a = ap.parse_args()
    base = a.url.split("/dashboard")[0]
    token = open(a.token_file).read().strip() if a.token_file else None
    out = {}
    t0 = time.monotonic()
    drv = browser(a.width, a.height)
    out["browser_start_s"] = time.monotonic() - t0
    try:
        drv.get(a.url)
        if token:
            # The page asks for the token once; the tab keeps it (sessionStorage).
            WebDriverWait(drv, 10).until(lambda d: d.find_element(By.ID, "token-form").is_displayed())
            drv.find_element(By.ID, "token-input").send_keys(token)
            drv.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait_live(drv, a.cls)
        # What the console said before the token was given (the API's 401s) is the
        # page learning that it needs one.
        drv.get_log("browser")
        # The load a user sees once the token is given: a reload of the tab.
        drv.refresh()
        wait_live(drv, a.cls)
        out["timing"] = drv.execute_script(TIMING)
        out["url"] = drv.current_url
        out["token_in_session"] = drv.execute_script("return sessionStorage.getItem('weir.token')") == token
        if a.sample > 0:
            c0 = api(base, "/api/v1/counters", token)
            samples, last = [], None
            end = time.monotonic() + a.sample
            while time.monotonic() < end:
                s = drv.execute_script(PAGE_STATE, a.cls)
                if s["polls"] != last:
                    last = s["polls"]
                    samples.append(s)
                time.sleep(0.1)
            c1 = api(base, "/api/v1/counters", token)
            dt = c1["uptime_s"] - c0["uptime_s"]
            d, name = a.cls.split("/", 1)
            out["ref"] = {
                "seconds": dt,
                "link_out_bps": (c1["ports"]["wan"]["tx_bytes"] - c0["ports"]["wan"]["tx_bytes"]) * 8 / dt,
                "cls_bps": (c1["shaping"][d]["classes"][name]["bytes"]
                            - c0["shaping"][d]["classes"][name]["bytes"]) * 8 / dt,
            }
            out["samples"] = samples
        time.sleep(a.dwell / 2)
        if a.set_rate:
            row = f'tr[data-key="{a.cls}"]'
            drv.find_element(By.CSS_SELECTOR, row + " input.rate").send_keys(a.set_rate)
            drv.find_element(By.CSS_SELECTOR, row + " button.set").click()
            WebDriverWait(drv, 10).until(
                lambda d: d.find_element(By.ID, "class-msg").get_attribute("data-status") not in (None, "", "pending"))
            msg = drv.find_element(By.ID, "class-msg")
            out["set"] = {"status": msg.get_attribute("data-status"), "message": msg.text}
            # The page shows the new rate in the class's row once its tree is re-read.
            WebDriverWait(drv, 10).until(
                lambda d: d.find_element(By.CSS_SELECTOR, row + " td.cfg-rate").text != "")
            out["set"]["row_rate"] = drv.find_element(By.CSS_SELECTOR, row + " td.cfg-rate").text
        time.sleep(a.dwell / 2)
        if a.screenshot:
            h = drv.execute_script("return document.documentElement.scrollHeight")
            drv.set_window_size(a.width, max(a.height, h + 20))
            drv.execute_script("window.scrollTo(0, 0)")   # typing in a row scrolled it
            time.sleep(0.5)
            drv.save_screenshot(a.screenshot)
            out["screenshot"] = a.screenshot
        out["console_errors"] = [e["message"] for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
    finally:
        drv.quit()
    out["total_s"] = time.monotonic() - t0
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
