package webui

import (
	"crypto/tls"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		tls                         bool
		site, origin, referer, want string
	}{
		{name: "the browser says same-origin", site: "same-origin", want: "yes"},
		{name: "cross-site", site: "cross-site", origin: "http://console.test", want: "no"},
		{name: "same-site (a sibling host)", site: "same-site", origin: "http://console.test", want: "no"},
		{name: "typed by hand", site: "none", want: "no"},
		{name: "matching Origin", origin: "http://console.test", want: "yes"},
		{name: "Origin host in other case", origin: "http://CONSOLE.test", want: "yes"},
		{name: "Origin on another port", origin: "http://console.test:8080", want: "no"},
		{name: "Origin of another host", origin: "http://evil.example", want: "no"},
		{name: "Origin with the host as a suffix", origin: "http://evil.console.test", want: "no"},
		{name: "https Origin to plain http", origin: "https://console.test", want: "no"},
		{name: "http Origin to TLS", tls: true, origin: "http://console.test", want: "no"},
		{name: "https Origin to TLS", tls: true, origin: "https://console.test", want: "yes"},
		{name: "null Origin, same Referer", origin: "null", referer: "http://console.test/ui/jobs", want: "yes"},
		{name: "null Origin, other Referer", origin: "null", referer: "http://evil.example/ui/jobs", want: "no"},
		{name: "no Origin, no Referer", want: "no"},
		{name: "a relative Referer", referer: "/ui/jobs", want: "no"},
		{name: "garbage", origin: "http://[::1", want: "no"},
	} {
		r := httptest.NewRequest("POST", "http://console.test/ui/jobs", nil)
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		for k, v := range map[string]string{"Sec-Fetch-Site": tt.site, "Origin": tt.origin, "Referer": tt.referer} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		if got := sameOrigin(r); got != (tt.want == "yes") {
			t.Errorf("%s: sameOrigin = %v", tt.name, got)
		}
	}
}

// FuzzSameOrigin: whatever the headers say, a request passes only when
// the browser marked it same-origin or its origin names the request's own
// host and scheme.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range [][3]string{{"same-origin", "", ""}, {"", "http://console.test", ""}, {"", "null", "http://console.test/x"}, {"cross-site", "http://console.test", ""}, {"", "http://console.test@evil.example", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, site, origin, referer string) {
		r := httptest.NewRequest("POST", "http://console.test/ui/jobs", nil)
		r.Header["Sec-Fetch-Site"] = []string{site}
		r.Header["Origin"] = []string{origin}
		r.Header["Referer"] = []string{referer}
		if !sameOrigin(r) || site == "same-origin" {
			return
		}
		src := origin
		if src == "" || src == "null" {
			src = referer
		}
		u, err := url.Parse(src)
		if err != nil || u.Scheme != "http" || !strings.EqualFold(u.Host, "console.test") {
			t.Fatalf("passed: site %q origin %q referer %q", site, origin, referer)
		}
	})
}
