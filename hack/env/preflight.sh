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
need git git # go build stamps the clone's commit; without git it refuses
need dpkg-deb dpkg
need chroot coreutils
# debootstrap makes the sid chroot, once: a ready chroot needs it no more.
[[ -f $SID_DIR/.rekey-ready ]] || need debootstrap debootstrap

install="apt-get install -y --no-install-recommends ${packages[*]}"
# Root is not optional: the scripts install Debian packages and make the
# chroot, and every test that starts mysqld or ceph-mon runs it in that
# chroot (chroot(2) needs root). sudo's own PATH often lacks Go's.
if [[ $(id -u) != 0 ]]; then
  problems+=("not root: the environment installs Debian packages and the tests run mysqld and ceph-mon in a chroot; run as root, e.g. sudo env PATH=\"\$PATH\" make demo")
  ((${#packages[@]})) && problems+=("missing ${packages[*]}: sudo $install (or run make as root, which installs them)")
  packages=()
fi
if ((${#problems[@]})) || { $check_only && ((${#packages[@]})); }; then
  for p in "${problems[@]}"; do log "preflight: $p"; done
  ((${#packages[@]})) && log "preflight: missing ${packages[*]}: $install"
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
