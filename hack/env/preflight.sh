#!/usr/bin/env bash
# Runs first, and in seconds: checks what the environment scripts need from
# the host and installs the Debian packages among them, so that a missing
# one is not found half an hour into the Kubernetes build. With --check it
# installs nothing: it lists what is missing, each with the command that
# fixes it, and exits 1 when anything is.
source "$(dirname "$0")/lib.sh"

check_only=false
[[ ${1:-} == --check ]] && check_only=true

problems=()
packages=()
need() { # need COMMAND PACKAGE: PACKAGE provides COMMAND
  command -v "$1" >/dev/null || packages+=("$2")
}
command -v apt-get >/dev/null || problems+=("apt-get: the environment needs a Debian machine (it installs Debian packages and builds a Debian sid chroot)")
command -v go >/dev/null || problems+=("go: install Go $(sed -n 's/^go //p' "$REPO_ROOT/go.mod") or newer (https://go.dev/dl/) and put it on PATH")
need make make
need dpkg-deb dpkg
need chroot coreutils
# debootstrap makes the sid chroot, once: a ready chroot needs it no more.
[[ -f $SID_DIR/.rekey-ready ]] || need debootstrap debootstrap

if ((${#packages[@]})) && [[ $(id -u) != 0 ]]; then
  problems+=("missing ${packages[*]}: sudo apt-get install -y --no-install-recommends ${packages[*]} (or run make as root, which installs them)")
  packages=()
fi
if ((${#problems[@]})) || { $check_only && ((${#packages[@]})); }; then
  for p in "${problems[@]}"; do log "preflight: $p"; done
  ((${#packages[@]})) && log "preflight: missing ${packages[*]}: apt-get install -y --no-install-recommends ${packages[*]}"
  exit 1
fi
if ((${#packages[@]})); then
  log "preflight: installing ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends "${packages[@]}" >&2 || {
    apt-get -o Acquire::Retries=5 update >&2
    apt-get -o Acquire::Retries=5 install -y --no-install-recommends "${packages[@]}" >&2
  }
fi
log "preflight: the host has what the environment needs"
