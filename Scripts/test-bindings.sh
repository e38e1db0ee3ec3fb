#!/usr/bin/env bash
# libvsync's Rust crate and Python package, each against a real vsyncd on the timer source:
# `cargo test --offline` in bindings/rust, then a fresh virtualenv, `pip install ./bindings/python`
# and pytest. Uses the debug build (`swift build` first); VSYNCD_BIN, LIBVSYNC_DIR and VSYNC_LIB
# override where the daemon and the library come from.
#
#   Scripts/test-bindings.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"
cd "$repo"

bin=$(swift build --show-bin-path)
export VSYNCD_BIN=${VSYNCD_BIN:-$bin/vsyncd} LIBVSYNC_DIR=${LIBVSYNC_DIR:-$bin}
export VSYNC_LIB=${VSYNC_LIB:-$LIBVSYNC_DIR/libvsync.so}
for f in "$VSYNCD_BIN" "$VSYNC_LIB"; do
  [ -e "$f" ] || die "$f missing: run 'swift build' first"
done
command -v cargo >/dev/null || die "cargo not found: install Rust (rustup, or Debian's cargo)"

log "Rust: cargo test --offline (bindings/rust)"
(cd bindings/rust && cargo test --offline)

log "Python: a fresh virtualenv, pip install ./bindings/python, pytest"
work=$(mktemp -d /tmp/vsync-python.XXXXXX)
trap 'rm -rf "$work"' EXIT
# pytest from the system (Debian's python3-pytest) if it has one, else from PyPI.
if python3 -c 'import pytest' 2>/dev/null; then
  python3 -m venv --system-site-packages "$work/venv"
else
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet pytest
fi
"$work/venv/bin/pip" install --quiet ./bindings/python
# From the work directory: the tests import the installed package, not the checkout's src/.
(cd "$work" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/bindings/python/tests")
log "bindings: all passed"
