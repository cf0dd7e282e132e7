"""Parses transport_urls the way an OpenStack service does, with the real
oslo.messaging: reads a JSON list of URLs on stdin and prints, for each, what
oslo_messaging.TransportURL.parse made of it and what its rabbit driver hands
to kombu (impl_rabbit's per-host URL, parsed back by kombu's url_to_parts),
as a JSON list. The caller compares; it keeps this output to itself.
"""
import json
import sys

from kombu.utils.url import url_to_parts
from oslo_config import cfg
import oslo_messaging as om
from oslo_messaging._drivers import impl_rabbit


class _Host(object):
    # impl_rabbit.Connection._transform_transport_url needs only this.
    _parse_url_hostname = impl_rabbit.Connection._parse_url_hostname


def main():
    conf = cfg.ConfigOpts()
    out = []
    for u in json.load(sys.stdin):
        url = om.TransportURL.parse(conf, u)
        hosts, kombu = [], []
        for h in url.hosts:
            hosts.append({'host': h.hostname, 'port': h.port,
                          'username': h.username, 'password': h.password})
            try:
                k = url_to_parts(impl_rabbit.Connection._transform_transport_url(_Host(), url, h))
                kombu.append({'host': k.hostname, 'port': k.port, 'username': k.username,
                              'password': k.password, 'vhost': k.path or '/'})
            except ValueError as e:  # kombu could not parse what the driver built
                kombu.append({'error': type(e).__name__})
        out.append({'transport': url.transport, 'vhost': url.virtual_host,
                    'query': url.query, 'hosts': hosts, 'kombu': kombu})
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
