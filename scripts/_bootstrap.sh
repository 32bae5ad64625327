# Sourced by scripts/serve, scripts/test and .ci/run: what a fresh Debian machine (as root, Python
# and nothing else) needs before `uv` can run anything.

as_root() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${_APT_UPDATED:-}" ]; then
    apt-get update -qq
    _APT_UPDATED=1
  fi
  apt-get install -y -qq "$@" >/dev/null
}

ensure_uv() {
  command -v uv >/dev/null 2>&1 && return 0
  if ! python3 -m pip --version >/dev/null 2>&1 && as_root; then
    apt_install python3-pip
  fi
  # Debian's own python3 refuses installs outside a virtual environment (PEP 668).
  python3 -m pip install --quiet uv ||
    python3 -m pip install --quiet --break-system-packages uv
}
