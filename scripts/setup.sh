#!/usr/bin/env bash
# Create .venv with everything coreml-lint's tests and demo need.
# torch is pinned and installed first: an unpinned torch pulls a multi-GB CUDA build.
# --browser also installs a system package, Debian's chromium (sudo apt-get), for the HTML
# report's browser tests; without it nothing outside this folder changes.
set -euo pipefail
cd "$(dirname "$0")/.."
browser=0
for arg in "$@"; do
    case "$arg" in
        --browser) browser=1 ;;
        *) echo "usage: bash scripts/setup.sh [--browser]" >&2; exit 2 ;;
    esac
done
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[lower,dev,sweep,coreai]" "torch==2.13.0"
if [ "$browser" -eq 1 ]; then
    # Headless Chromium renders the HTML report in its tests (skipped with a message where
    # it cannot be installed, and those tests then say why they skip).
    bash scripts/setup_browser.sh || echo "note: chromium not installed; the HTML report's browser tests will be skipped"
fi
