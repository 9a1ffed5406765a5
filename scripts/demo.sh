#!/usr/bin/env bash
# Set up .venv, export the bundled example model to .pt2, and lint it. Changes nothing
# outside this folder (no system package: the browser is `bash scripts/setup.sh --browser`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/export_example.py examples/build/pitfall_model.pt2
status=0
.venv/bin/coreml-lint examples/build/pitfall_model.pt2 --show-placement || status=$?
# Exit code 1 means "findings", which is what this example is for.
if [ "$status" -eq 1 ]; then echo "(coreml-lint exited 1: findings, as expected)"; exit 0; fi
exit "$status"
