package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Jaeger checks that the test Jaeger (scripts/ci/start-jaeger.sh) answers and
// returns its query API base URL ($HERMES_TEST_JAEGER_URL, default
// http://127.0.0.1:16686) and its OTLP/HTTP endpoint ($HERMES_TEST_OTLP_ENDPOINT,
// default http://127.0.0.1:4318), ready for OTEL_EXPORTER_OTLP_ENDPOINT.
// Traces land in memory; look them up with GET {queryURL}/api/traces/{traceID}.
func Jaeger(t testing.TB) (queryURL, otlpEndpoint string) {
	t.Helper()
	queryURL = envOr(EnvJaegerURL, DefaultJaegerURL)
	otlpEndpoint = envOr(EnvOTLPEndpoint, DefaultOTLPEndpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := httpOK(ctx, queryURL+"/api/services"); err != nil {
		unavailable(t, "jaeger", "query API: %v (start it with scripts/ci/start-jaeger.sh)", err)
	}
	if err := tcpOpen(ctx, otlpEndpoint); err != nil {
		unavailable(t, "jaeger", "OTLP endpoint: %v", err)
	}
	return queryURL, otlpEndpoint
}

func httpOK(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

// tcpOpen checks that something accepts connections at an http(s) URL's host.
func tcpOpen(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("parse %q: %w", rawURL, err)
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("dial %s: %w", host, err)
	}
	return conn.Close()
}
