package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestInCI(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{
		{"", false},
		{"true", true},
		{"1", true},
		{"yes", true}, // not a bool: any other non-empty value counts as CI
		{"false", false},
		{"0", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("CI=%q", tc.value), func(t *testing.T) {
			t.Setenv("CI", tc.value)
			if got := InCI(); got != tc.want {
				t.Errorf("InCI() = %v, want %v", got, tc.want)
			}
		})
	}
}

func do(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return redisDo(ctx, url, args...)
}

func TestRedisServerStopStart(t *testing.T) {
	r := RedisServer(t)
	addr := r.Addr()
	key := "testenv:" + t.Name()
	if _, err := do(t, r.URL(), "SET", key, "v1"); err != nil {
		t.Fatalf("SET on fresh server: %v", err)
	}

	stops := []struct {
		name string
		stop func() error
	}{
		{"stop", r.Stop},
		{"kill", r.Kill},
	}
	for _, s := range stops {
		if err := s.stop(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if _, err := do(t, r.URL(), "PING"); err == nil {
			t.Fatalf("after %s: PING answered, want connection error", s.name)
		}
		if err := s.stop(); err != nil {
			t.Fatalf("%s twice: %v", s.name, err)
		}
		if err := r.Start(); err != nil {
			t.Fatalf("start after %s: %v", s.name, err)
		}
		if r.Addr() != addr {
			t.Fatalf("after %s: address %s, want the same %s", s.name, r.Addr(), addr)
		}
		got, err := do(t, r.URL(), "GET", key)
		if err != nil {
			t.Fatalf("GET after %s+start: %v", s.name, err)
		}
		if got != "(nil)" {
			t.Fatalf("GET after %s+start = %q, want (nil): no persistence", s.name, got)
		}
		if _, err := do(t, r.URL(), "SET", key, "v2"); err != nil {
			t.Fatalf("SET after %s+start: %v", s.name, err)
		}
	}
	if err := r.Start(); err != nil {
		t.Fatalf("Start on a running server: %v", err)
	}
}

func TestRedis(t *testing.T) {
	u := Redis(t)
	key := "testenv:" + t.Name() + ":" + randHex(t, 8)
	if _, err := do(t, u, "SET", key, "x", "EX", "60"); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := do(t, u, "GET", key); err != nil || got != "x" {
		t.Fatalf("GET = %q, %v; want x", got, err)
	}
}

func TestDocker(t *testing.T) {
	image := Docker(t)
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Logf("no docker CLI (%v); engine and image checked through the API only", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "run", "--rm", "--network", "none", image,
		"sh", "-c", "echo hello; cat /etc/passwd >/dev/null && sleep 0 && env | grep -c PATH").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", image, err, out)
	}
	if got := string(out); got != "hello\n1\n" {
		t.Fatalf("docker run output %q, want %q", got, "hello\n1\n")
	}
}

func TestJaeger(t *testing.T) {
	queryURL, otlp := Jaeger(t)
	traceID, spanID := randHex(t, 16), randHex(t, 8)
	now := time.Now()
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[
		{"key":"service.name","value":{"stringValue":"hermes-testenv"}}]},
		"scopeSpans":[{"spans":[{"traceId":%q,"spanId":%q,"name":"testenv-probe","kind":1,
		"startTimeUnixNano":"%d","endTimeUnixNano":"%d"}]}]}]}`,
		traceID, spanID, now.UnixNano(), now.Add(time.Millisecond).UnixNano())
	resp, err := http.Post(otlp+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("OTLP export: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP export: %s: %s", resp.Status, b)
	}

	// The collector batches spans; poll until the trace is queryable.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(queryURL + "/api/traces/" + traceID)
		if err == nil {
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte("testenv-probe")) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not found in jaeger: %v %s", traceID, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
