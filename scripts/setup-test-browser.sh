#!/bin/sh
# The browser test of the reports (tests/reports/test_browser.py) drives Debian's Chromium through
# chromedriver. Install both when either is missing; do nothing when both are there.
set -eu
if command -v chromedriver >/dev/null 2>&1 \
    && { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root="sudo -n"
else
    echo "setup-test-browser: the browser test needs chromium and chromium-driver; run as root:" \
         "apt-get install chromium chromium-driver" >&2
    exit 1
fi
echo "setup-test-browser: installing chromium and chromium-driver (apt-get)" >&2
$as_root apt-get update -qq >/dev/null
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
