#!/usr/bin/env bash
# Installs Debian's PostgreSQL server programs on the host without letting
# the package start (or create) a system-wide cluster: tests initialise a
# private primary and replica on their own loopback ports, as the postgres
# user the package creates.
source "$(dirname "$0")/lib.sh"

if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
  log "postgresql present: $(dpkg-query -W -f='${Version}' postgresql-15)"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then log "installing postgresql needs root"; exit 1; fi
guard=/usr/sbin/policy-rc.d
created=""
if [[ ! -e $guard ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$guard"; chmod +x "$guard"; created=1
fi
trap '[[ -n $created ]] && rm -f "$guard"' EXIT
# No "main" cluster: nothing on the host should listen on 5432 for the tests.
mkdir -p /etc/postgresql-common
conf=/etc/postgresql-common/createcluster.conf
if [[ ! -e $conf ]]; then echo 'create_main_cluster = false' >"$conf"; fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o Acquire::Retries=5 install -y --no-install-recommends postgresql-15 postgresql-client-15 >&2 || {
  apt-get -o Acquire::Retries=5 update >&2
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends postgresql-15 postgresql-client-15 >&2
}
log "postgresql installed: $(dpkg-query -W -f='${Version}' postgresql-15)"
