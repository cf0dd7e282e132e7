#!/usr/bin/env bash
# Creates, once, a Debian unstable chroot holding MySQL 9.7 and Ceph 20.2
# (neither is in the host's Debian release). Tests run the servers inside it
# with chroot(2) on loopback. Does nothing when the chroot is ready and its
# versions match the pins in lib.sh.
source "$(dirname "$0")/lib.sh"

ready=$SID_DIR/.rekey-ready
if [[ -f $ready ]] && grep -q "^mysqld $MYSQL_SERIES" "$ready" && grep -q "^ceph $CEPH_SERIES" "$ready"; then
  log "sid chroot present: $(tr '\n' ' ' <"$ready")"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  log "creating the chroot needs root (debootstrap, chroot)"; exit 1
fi
command -v debootstrap >/dev/null || { log "debootstrap missing: apt-get install debootstrap"; exit 1; }

if [[ ! -x $SID_DIR/usr/bin/apt-get ]]; then
  log "debootstrap sid into $SID_DIR (about 2 minutes)"
  rm -rf "$SID_DIR.tmp"
  debootstrap --variant=minbase sid "$SID_DIR.tmp" "$SID_MIRROR" >&2
  rm -rf "$SID_DIR" && mv "$SID_DIR.tmp" "$SID_DIR"
fi

log "installing $SID_PACKAGES in the chroot"
# The reachable unstable mirror may be a snapshot whose Release file has
# expired; without Check-Valid-Until=false nothing installs.
chroot "$SID_DIR" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive /bin/sh -ec "
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Retries=5 update
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends $SID_PACKAGES || true
  apt-get clean
" >&2
# ceph-mon's postinst fails without systemd; the binaries are installed and
# work, which is all the tests need. Check that instead of apt's exit status.
mysqld_v=$(chroot "$SID_DIR" /usr/sbin/mysqld --version | grep -o 'Ver [0-9.]*' | cut -d' ' -f2)
ceph_v=$(chroot "$SID_DIR" /usr/bin/ceph --version | awk '{print $3}')
for b in /usr/bin/ceph-mon /usr/bin/ceph-authtool /usr/bin/mysql; do
  [[ -x $SID_DIR$b ]] || { log "missing $b in the chroot"; exit 1; }
done
[[ $mysqld_v == "$MYSQL_SERIES"* ]] || { log "mysqld $mysqld_v is not the pinned $MYSQL_SERIES*: update MYSQL_SERIES or the mirror"; exit 1; }
[[ $ceph_v == "$CEPH_SERIES"* ]] || { log "ceph $ceph_v is not the pinned $CEPH_SERIES*: update CEPH_SERIES or the mirror"; exit 1; }
printf 'mysqld %s\nceph %s\n' "$mysqld_v" "$ceph_v" >"$ready"
log "sid chroot ready: mysqld $mysqld_v, ceph $ceph_v"
