package redisdb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DialOption adjusts how Dial connects.
type DialOption func(*redis.Options)

// WithTLSConfig sets the TLS configuration used for rediss:// URLs, for a
// private CA or a client certificate. ServerName defaults to the URL's host.
func WithTLSConfig(c *tls.Config) DialOption {
	return func(o *redis.Options) {
		if o.TLSConfig == nil {
			return // redis:// stays plain text whatever the caller passes
		}
		c = c.Clone()
		if c.ServerName == "" {
			c.ServerName = o.TLSConfig.ServerName
		}
		c.InsecureSkipVerify = c.InsecureSkipVerify || o.TLSConfig.InsecureSkipVerify
		o.TLSConfig = c
	}
}

// Dial connects to the Redis server named by rawURL and checks that it
// answers. The URL carries everything: redis:// or rediss:// (TLS), an ACL
// user and password in the userinfo, the database number as the path, and
// go-redis tuning as query parameters (dial_timeout, read_timeout, ...).
//
// Unless the URL sets max_retries, the client does not retry commands on its
// own, nor dials more than once per command: a retried script could apply
// twice and turn a successful Create into ErrExists, and the store's spool
// does the retrying anyway.
//
// Errors name the URL with its password masked.
func Dial(ctx context.Context, rawURL string, dopts ...DialOption) (*redis.Client, error) {
	c, err := Connect(rawURL, dopts...)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		u, _ := url.Parse(rawURL)
		return nil, fmt.Errorf("redis %s unreachable: %w", u.Redacted(), scrub(err, u))
	}
	return c, nil
}

// Connect is Dial without the check that the server answers: for a job's
// supervisor, which must start its job during an outage too (its receipt
// then waits in the store's spool).
func Connect(rawURL string, dopts ...DialOption) (*redis.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the input, password included: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis URL does not parse: %w", err)
	}
	shown := u.Redacted()
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", shown, scrub(err, u))
	}
	if !u.Query().Has("max_retries") {
		o.MaxRetries = -1
	}
	// One dial per attempt, not go-redis's five: against an unreachable
	// host each costs a dial timeout, and a read during an outage should
	// fail after one.
	o.DialerRetries = 1
	for _, f := range dopts {
		f(o)
	}
	return redis.NewClient(o), nil
}

// RedactURL returns rawURL fit for logs and error messages: the password, if
// any, replaced by "xxxxx". A URL that does not parse is not shown at all.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// scrub keeps a password out of an error whose text might echo the URL.
func scrub(err error, u *url.URL) error {
	if u.User == nil {
		return err
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return redactedError{err: err, secret: p}
	}
	return err
}

type redactedError struct {
	err    error
	secret string
}

func (e redactedError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.secret, "xxxxx")
}

func (e redactedError) Unwrap() error { return e.err }
