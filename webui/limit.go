package webui

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Login attempts per client: a burst, then one every loginEvery. A token is
// long enough that guessing it is hopeless anyway; the limit keeps a
// client with many connections from trying at the speed of the server
// (17 guesses a second with 100 connections, before it).
const (
	loginBurst = 5
	loginEvery = 5 * time.Second
	// maxLoginClients bounds the clients remembered; past it the one
	// remembered longest ago is forgotten.
	maxLoginClients = 10_000
)

// loginLimiter is a token bucket per client address.
type loginLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	clients map[string]*loginBucket
}

type loginBucket struct {
	tokens float64
	at     time.Time
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{now: time.Now, clients: map[string]*loginBucket{}}
}

// allow takes a token for r's client, or says how long to wait for one.
func (l *loginLimiter) allow(r *http.Request) (bool, time.Duration) {
	key := clientOf(r)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[key]
	if !ok {
		if len(l.clients) >= maxLoginClients {
			l.forgetOldest()
		}
		b = &loginBucket{tokens: loginBurst, at: now}
		l.clients[key] = b
	}
	b.tokens = math.Min(loginBurst, b.tokens+now.Sub(b.at).Seconds()/loginEvery.Seconds())
	b.at = now
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(loginEvery))
	}
	b.tokens--
	return true, 0
}

func (l *loginLimiter) forgetOldest() {
	var oldest string
	var at time.Time
	for k, b := range l.clients {
		if oldest == "" || b.at.Before(at) {
			oldest, at = k, b.at
		}
	}
	delete(l.clients, oldest)
}

// clientOf is the address a login comes from: the peer's IP (a proxy in
// front of the runner is one client; its own limits are its business).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter is d as a Retry-After value, in whole seconds up.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}
