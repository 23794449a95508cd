# examples/browser_cdp.py: a standalone browser driven over CDP; `with` stops it at the end.
import os

import httpx

from agent_task_service import AgentTaskService

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")

client = AgentTaskService()

with client.browsers.create(timeout_minutes=10) as browser:
    print("browser", browser.id, browser.status, f"{browser.screen_width}x{browser.screen_height}")
    print("watch it live:", browser.live_view_url)

    # cdp_url is a WebSocket URL (None once the browser is stopped); the DevTools HTTP endpoints answer beside it.
    assert browser.cdp_url is not None
    devtools = httpx.URL(browser.cdp_url)
    version = httpx.get(devtools.copy_with(scheme="http", path=devtools.path + "/json/version")).json()
    print("CDP speaks for", version["Browser"].split("/")[0])

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("(pip install playwright to drive it with Playwright)")
    else:
        with sync_playwright() as p:
            chromium = p.chromium.connect_over_cdp(browser.cdp_url)
            page = chromium.contexts[0].pages[0] if chromium.contexts[0].pages else chromium.contexts[0].new_page()
            page.goto(SITE)
            print("page title:", page.title())

print("after the with block:", client.browsers.get(browser.id).status)
