package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis returns the URL of the shared test Redis ($HERMES_TEST_REDIS_URL, or
// redis://127.0.0.1:6390/0 as started by scripts/ci/start-redis.sh) after
// checking it answers PING.
//
// The server is shared by every test package, which go test runs in parallel:
// use keys unique to the test (a t.Name()-derived or random prefix) and never
// FLUSHDB. Tests that stop, restart or flush Redis want RedisServer instead.
func Redis(t testing.TB) string {
	t.Helper()
	u := envOr(EnvRedisURL, DefaultRedisURL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := redisDo(ctx, u, "PING"); err != nil {
		unavailable(t, "redis", "%s: %v (start it with scripts/ci/start-redis.sh)", u, err)
	}
	return u
}

// DeleteRedisKeys deletes every key of the shared test Redis whose name
// starts with prefix and returns how many there were: what a Redis restarted
// without persistence, or flushed, leaves of one test's keys (FLUSHDB would
// take other tests' keys too).
func DeleteRedisKeys(t testing.TB, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// One script: KEYS and DEL in batches (unpack has a stack limit).
	const script = `local k = redis.call('KEYS', ARGV[1])
for i = 1, #k, 1000 do redis.call('DEL', unpack(k, i, math.min(i + 999, #k))) end
return #k`
	n, err := redisDo(ctx, Redis(t), "EVAL", script, "0", prefix+"*")
	if err != nil {
		t.Fatalf("delete redis keys %s*: %v", prefix, err)
	}
	count, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("delete redis keys %s*: reply %q", prefix, n)
	}
	return count
}

// redisDo sends one command to the Redis at rawURL on a fresh connection and
// returns its reply line (without the type byte for simple strings and errors,
// or the bulk string's contents; a nil bulk string is "(nil)"). Enough RESP to
// probe a server without a client library.
func redisDo(ctx context.Context, rawURL string, args ...string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("parse redis url: %w", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "6379")
	}
	var d net.Dialer
	var conn net.Conn
	switch u.Scheme {
	case "redis":
		conn, err = d.DialContext(ctx, "tcp", host)
	case "rediss":
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname()}}
		conn, err = td.DialContext(ctx, "tcp", host)
	default:
		return "", fmt.Errorf("redis url %q: scheme must be redis or rediss", rawURL)
	}
	if err != nil {
		return "", fmt.Errorf("dial redis %s: %w", host, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	rd := bufio.NewReader(conn)
	if pw, ok := u.User.Password(); ok {
		auth := []string{"AUTH", pw}
		if name := u.User.Username(); name != "" {
			auth = []string{"AUTH", name, pw}
		}
		if _, err := roundTrip(conn, rd, auth); err != nil {
			return "", fmt.Errorf("redis auth: %w", err)
		}
	}
	return roundTrip(conn, rd, args)
}

func roundTrip(conn net.Conn, rd *bufio.Reader, args []string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", fmt.Errorf("write %s: %w", args[0], err)
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read %s reply: %w", args[0], err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis error: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q: %w", line, err)
		}
		if n < 0 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", fmt.Errorf("read bulk: %w", err)
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
