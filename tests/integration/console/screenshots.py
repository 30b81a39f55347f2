"""The console's screenshots in docs/img/, from a running console (``surveil up`` plays a
simulated floor with injected irregularities into it):

    .venv/bin/python tests/integration/console/screenshots.py http://127.0.0.1:8088 NAME PASSWORD docs/img [RULE]

Takes the alert list, the page of the newest alert of RULE (DRAW_BANKER_EXTRA by default), and
the floor, 1400 pixels wide, in Debian's headless chromium.
"""

from __future__ import annotations

import sys
from pathlib import Path

from console_run import chromium


def main(url: str, name: str, password: str, out: Path, rule: str = "DRAW_BANKER_EXTRA") -> None:
    with chromium(width=1400, height=900) as browser:
        page = browser.new_page()
        page.goto(url + "/login")
        page.fill("#name", name)
        page.fill("#password", password)
        page.click("#login button[type=submit]")
        page.wait_for_url(url + "/")
        page.wait_for_selector("#alert-rows tr")
        page.screenshot(path=str(out / "console-list.png"))
        page.goto(f"{url}/?rule={rule}")
        link = page.get_attribute("#alert-rows tr td.summary a", "href")
        page.goto(url + str(link))
        page.wait_for_selector("#handling-panel")
        page.screenshot(path=str(out / "console-alert.png"), full_page=True)
        page.goto(url + "/floor")
        page.wait_for_selector("#tiles .tile")
        page.screenshot(path=str(out / "console-floor.png"))
    print(f"wrote {out}/console-list.png, console-alert.png, console-floor.png")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), *sys.argv[5:6])
