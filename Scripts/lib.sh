# shellcheck shell=bash
# Shared helpers for the scripts in Scripts/. Sourced, not run.
# Each line says how long its script has run (bash counts SECONDS), so a slow step shows in a log.
log() { echo "[$(basename "$0") ${SECONDS}s] $*" >&2; }
die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# Whether apt's package lists offer every package named (a candidate version for each). On a
# fresh machine the lists are missing, or hold only apt's own files (auxfiles, lock, partial), or
# are older than the archive: then an install only says "Unable to locate package".
apt_knows() {
  local p
  for p in "$@"; do
    apt-cache policy "$p" 2>/dev/null | grep -q '^  Candidate: [^(]' || return 1
  done
}

# Installs the Debian packages named, if any is missing. The scripts run as root on a fresh
# machine in CI; elsewhere they say what to install. The lists are updated first when they do
# not know a package (or VSYNCD_APT_UPDATE is set), so the first attempt is the one that works;
# lists that know every package but are stale (a version the mirror no longer has) get one
# update and a second attempt, with the first attempt's errors kept back unless that fails too.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing packages: ${missing[*]}: run 'sudo apt-get install ${missing[*]}'"
  fi
  log "installing ${missing[*]}"
  # apt's lock is shared with any other script installing at the same moment.
  (
    flock 8
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; }
    if [ -n "${VSYNCD_APT_UPDATE:-}" ] || ! apt_knows "${missing[@]}"; then
      # A failed update shows its own errors; the install then says which package is missing.
      apt-get update -qq >&2
      apt_install >&2
      exit
    fi
    first=$(apt_install 2>&1) && { [ -z "$first" ] || printf '%s\n' "$first" >&2; exit 0; }
    apt-get update -qq >&2
    apt_install >&2
  ) 8>/tmp/.vsyncd-apt.lock \
    || die "could not install ${missing[*]} (apt's reason above): check this machine's apt sources and network, then run 'apt-get install ${missing[*]}'"
}
