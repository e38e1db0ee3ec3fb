#!/usr/bin/env bash
# The linters CI runs: shellcheck on every shell script in git, and the toolchain's
# `swift format lint` on the Swift sources, each with its configuration checked in
# (.shellcheckrc, .swift-format). Exits non-zero on any finding.
#
#   Scripts/lint.sh          # check
#   Scripts/lint.sh --fix    # rewrite the Swift sources in the checked-in format first
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"
cd "$repo"

ensure_packages shellcheck git
command -v swift >/dev/null || die "swift not found: install Swift 6.1 or newer (https://swift.org/install) and put it on PATH"

swift_dirs=()
for d in Sources Benchmarks/Sources; do [ -d "$d" ] && swift_dirs+=("$d"); done
if [ "${1:-}" = --fix ]; then
  swift format format --in-place --recursive --parallel "${swift_dirs[@]}"
fi

status=0
mapfile -t scripts < <(git ls-files '*.sh')
log "shellcheck: ${#scripts[@]} scripts"
shellcheck "${scripts[@]}" || status=1
log "swift format lint: ${swift_dirs[*]}"
swift format lint --strict --recursive --parallel "${swift_dirs[@]}" || status=1
[ "$status" -eq 0 ] || die "lint findings above: fix them (Scripts/lint.sh --fix formats the Swift sources)"
log "clean"
