#!/usr/bin/env bash
# Installs Debian's rabbitmq-server (with its management plugin) on the host
# without letting the package start a system-wide node: tests start private
# nodes on their own loopback ports.
source "$(dirname "$0")/lib.sh"

if [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]]; then
  log "rabbitmq-server present: $(dpkg-query -W -f='${Version}' rabbitmq-server)"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then log "installing rabbitmq-server needs root"; exit 1; fi
guard=/usr/sbin/policy-rc.d
created=""
if [[ ! -e $guard ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$guard"; chmod +x "$guard"; created=1
fi
trap '[[ -n $created ]] && rm -f "$guard"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get -o Acquire::Retries=5 install -y --no-install-recommends rabbitmq-server >&2 || {
  apt-get -o Acquire::Retries=5 update >&2
  apt-get -o Acquire::Retries=5 install -y --no-install-recommends rabbitmq-server >&2
}
log "rabbitmq-server installed: $(dpkg-query -W -f='${Version}' rabbitmq-server)"
