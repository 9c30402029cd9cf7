"""A minimal headless-Chromium driver for the report browser check.

It speaks the W3C WebDriver protocol to Debian's ``chromedriver`` over HTTP with the standard
library only (no Selenium), and takes full-page screenshots through chromedriver's DevTools
passthrough.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1300,1000",
)


def find_chromium() -> tuple[str, str] | None:
    """(chromium binary, chromedriver) when both are installed."""
    driver = shutil.which("chromedriver")
    for name in ("chromium", "chromium-browser"):
        binary = shutil.which(name)
        if binary and driver:
            real = Path("/usr/lib/chromium/chromium")
            return (str(real) if real.exists() else binary), driver
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebDriverError(RuntimeError):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error


class Browser:
    """One chromedriver process and one Chromium session with its own profile folder."""

    def __init__(self, profile_dir: Path, log_path: Path) -> None:
        found = find_chromium()
        if found is None:
            raise RuntimeError("chromium and chromedriver are required")
        binary, driver = found
        self._port = _free_port()
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(
            [driver, f"--port={self._port}"], stdout=self._log, stderr=subprocess.STDOUT
        )
        self._base = f"http://127.0.0.1:{self._port}"
        self._wait_ready()
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": binary,
                "args": [*CHROMIUM_ARGS, f"--user-data-dir={profile_dir}"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        reply = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self._session = reply["sessionId"]

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self._base + "/status", timeout=1) as r:
                    if json.load(r)["value"].get("ready"):
                        return
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        raise RuntimeError("chromedriver did not start")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self._base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as exc:
            value = json.load(exc).get("value", {})
            raise WebDriverError(
                value.get("error", str(exc.code)), value.get("message", "")
            ) from None

    def _s(self, path: str) -> str:
        return f"/session/{self._session}{path}"

    def open(self, path: Path) -> None:
        self._call("POST", self._s("/url"), {"url": path.resolve().as_uri()})

    def run(self, script: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": script, "args": list(args)})

    def wait_for(self, script: str, timeout_s: float = 60.0) -> Any:
        """Polls ``script`` (a function body returning a value) until it returns truthy."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.run(script)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.2)

    def alert_text(self) -> str | None:
        try:
            return self._call("GET", self._s("/alert/text"))
        except WebDriverError as exc:
            if exc.error == "no such alert":
                return None
            raise

    def console_errors(self) -> list[str]:
        entries = self._call("POST", self._s("/se/log"), {"type": "browser"})
        return [e["message"] for e in entries if e.get("level") == "SEVERE"]

    def screenshot(self, path: Path, width: int = 1300) -> None:
        """A PNG of the whole page (not just the viewport)."""
        height = int(self.run("return document.documentElement.scrollHeight;"))
        self._call(
            "POST",
            self._s("/goog/cdp/execute"),
            {
                "cmd": "Emulation.setDeviceMetricsOverride",
                "params": {
                    "width": width,
                    "height": height,
                    "deviceScaleFactor": 1,
                    "mobile": False,
                },
            },
        )
        shot = self._call(
            "POST",
            self._s("/goog/cdp/execute"),
            {
                "cmd": "Page.captureScreenshot",
                "params": {"format": "png", "captureBeyondViewport": True},
            },
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self._call("DELETE", self._s(""))
        except (WebDriverError, OSError):
            pass
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._log.close()
