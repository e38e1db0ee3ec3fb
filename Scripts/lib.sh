# Shared helpers for the scripts in Scripts/. Sourced, not run.
log() { echo "[$(basename "$0")] $*" >&2; }
die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# Installs the Debian packages named, if any is missing. The scripts run as root on a fresh
# machine in CI; elsewhere they say what to install.
ensure_packages() {
  local missing=()
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
    if [ ! -e /var/lib/apt/lists/partial ] || [ -z "$(ls /var/lib/apt/lists 2>/dev/null | grep -v partial | grep -v lock)" ] || [ -n "${VSYNCD_APT_UPDATE:-}" ]; then
      apt-get update -qq >&2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 || {
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
    }
  ) 8>/tmp/.vsyncd-apt.lock || die "apt-get install ${missing[*]} failed"
}
