#!/usr/bin/env bash
# Install Debian's chromium for the HTML report tests (tests/test_html_report.py open the
# report from disk in headless Chromium). Nothing is downloaded by test tools themselves:
# the browser comes from the distribution's mirror, and only when it is missing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "installing the system packages chromium and fonts-dejavu-core with ${SUDO:+sudo }apt-get (the HTML report's browser tests)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --version
