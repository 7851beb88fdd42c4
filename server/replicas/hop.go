package replicas

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A request one replica forwards to another is marked as forwarded, so that
// it is answered where it lands and never forwarded again. A client could
// set the mark itself and have a replica answer for a job another one runs
// (as if it were not there); so the mark is signed. The key is shared by
// the replicas through the Redis they share (made by the first that needs
// it), which only the runner reaches: a signature proves the request came
// from a replica.
//
// The signature covers the forwarder's name, the method, the request URI
// and a time, and is good for HopSkew either side of it.

// HopSkew is how far a forwarded request's time may be from the
// receiver's clock.
const HopSkew = time.Minute

func (d *Directory) hopKeyKey() string { return d.keys.HopKey() }

// hopKey is the replicas' shared key, made on first use.
func (d *Directory) hopKey(ctx context.Context) ([]byte, error) {
	d.keyMu.Lock()
	defer d.keyMu.Unlock()
	if d.key != nil {
		return d.key, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if err := d.rdb.SetNX(ctx, d.hopKeyKey(), hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, fmt.Errorf("replica hop key: %w", err)
	}
	v, err := d.rdb.Get(ctx, d.hopKeyKey()).Result()
	if errors.Is(err, redis.Nil) {
		return nil, errors.New("replica hop key: gone as it was made")
	}
	if err != nil {
		return nil, fmt.Errorf("replica hop key: %w", err)
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) < 16 {
		return nil, errors.New("replica hop key: not a key")
	}
	d.key = key
	return key, nil
}

func hopMAC(key []byte, name, method, uri string, at int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\n%s\n%s\n%d", name, method, uri, at)
	return hex.EncodeToString(m.Sum(nil))
}

// SignHop is the signature of a request this replica forwards: the value
// of the header that carries it.
func (d *Directory) SignHop(ctx context.Context, method, uri string, now time.Time) (string, error) {
	key, err := d.hopKey(ctx)
	if err != nil {
		return "", err
	}
	at := now.Unix()
	return strconv.FormatInt(at, 10) + "." + hopMAC(key, d.self.Name, method, uri, at), nil
}

// VerifyHop reports whether sig proves that replica name forwarded the
// request (method, uri).
func (d *Directory) VerifyHop(ctx context.Context, sig, name, method, uri string, now time.Time) bool {
	at, mac, ok := strings.Cut(sig, ".")
	if !ok {
		return false
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > HopSkew {
		return false
	}
	key, err := d.hopKey(ctx)
	if err != nil {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(hopMAC(key, name, method, uri, t)))
}
