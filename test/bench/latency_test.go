package bench

import (
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// latencyProxies put a fixed round trip between the operator and each
// instance: production instances sit on other nodes, and loopback hides
// what sequential work costs. (The kernel's netem is not available here.)
type latencyProxies struct {
	server  *toxiproxy.ApiServer
	proxies []*toxiproxy.Proxy
}

func newLatencyProxies() *latencyProxies {
	return &latencyProxies{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
}

// add proxies upstream with rtt/2 each way and returns the proxy's address.
func (l *latencyProxies) add(upstream string, rtt time.Duration) (string, error) {
	p := toxiproxy.NewProxy(l.server, fmt.Sprintf("p%d", len(l.proxies)), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", err
	}
	l.proxies = append(l.proxies, p)
	half := rtt.Milliseconds() / 2
	for _, stream := range []string{"upstream", "downstream"} {
		body := fmt.Sprintf(`{"name":"lat-%s","type":"latency","stream":%q,"attributes":{"latency":%d}}`, stream, stream, half)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return "", err
		}
	}
	return p.Listen, nil
}

func (l *latencyProxies) stop() {
	for _, p := range l.proxies {
		p.Stop()
	}
}
