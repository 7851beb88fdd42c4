package redisstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/receipts/redisstore/redistest"
)

// fast keeps a paused server from holding each test up for go-redis's
// default three-second timeouts.
const fast = "?dial_timeout=300ms&read_timeout=300ms&write_timeout=300ms"

func receipt(id, owner string) *receipts.Receipt {
	return &receipts.Receipt{
		ID:         id,
		Command:    "echo " + id,
		Backend:    "local",
		Status:     receipts.StatusExited,
		StartedAt:  time.Now().Add(-time.Second).UTC(),
		FinishedAt: time.Now().UTC(),
		Output:     "out " + id + "\n",
		Owner:      job.Owner{ParentSessionID: owner, TaskID: "t"},
	}
}

func open(t *testing.T, url, prefix, spool string, o ...redisstore.Option) *redisstore.Store {
	t.Helper()
	o = append([]redisstore.Option{redisstore.WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond)}, o...)
	if spool != "" {
		o = append(o, redisstore.WithSpool(spool))
	}
	s, err := redisstore.New(context.Background(), url, receipts.Options{}, prefix, o...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func spooled(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "proc_*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func stop(t *testing.T, srv *testenv.RedisProc) {
	t.Helper()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, srv *testenv.RedisProc) {
	t.Helper()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond for up to 20s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewRedisDown(t *testing.T) {
	srv := testenv.RedisServer(t)
	stop(t, srv)
	url := "redis://hermes:hunter2secret@" + srv.Addr() + "/0"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := redisstore.New(ctx, url, receipts.Options{}, "p:")
	if err == nil {
		t.Fatal("New with redis down succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, srv.Addr()) || strings.Contains(msg, "hunter2secret") {
		t.Errorf("error %q should name %s and hide the password", msg, srv.Addr())
	}
	for _, bad := range []string{"http://" + srv.Addr(), "redis://x:pw@[::1", "::nonsense"} {
		_, err := redisstore.New(ctx, bad, receipts.Options{}, "p:")
		if err == nil || strings.Contains(err.Error(), "pw@") {
			t.Errorf("New(%q) = %v; want an error without the password", bad, err)
		}
	}
}

func TestPasswordAndACLUser(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "defaultpw",
		"--user", "alice", "on", ">alicepw", "~*", "&*", "+@all",
		// The least privilege docs/redis.md recommends.
		"--user", "hermes", "on", ">hermespw", "~hermes:*", "resetchannels", "-@all",
		"+@read", "+@write", "+@scripting", "+@connection", "+time")
	ctx := context.Background()
	tests := []struct {
		name, userinfo string
		ok             bool
	}{
		{"default user password", ":defaultpw@", true},
		{"acl user", "alice:alicepw@", true},
		{"least privilege acl user", "hermes:hermespw@", true},
		{"wrong password", "alice:wrongpw@", false},
		{"no password", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := "redis://" + tc.userinfo + srv.Addr() + "/0"
			s, err := redisstore.New(ctx, url, receipts.Options{}, redisdb.ProfilePrefix("acl"), redisstore.WithSweepInterval(0))
			if !tc.ok {
				if err == nil {
					s.Close()
					t.Fatal("connected without the right credentials")
				}
				if strings.Contains(err.Error(), "wrongpw") || !strings.Contains(err.Error(), srv.Addr()) {
					t.Errorf("error %q should name the server and hide the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := receipt("proc_ac1000000001", "sess")
			if err := s.Put(ctx, r); err != nil {
				t.Fatal(err)
			}
			sc := receipts.Scope{Owners: []string{"sess"}}
			if _, err := s.Get(ctx, "proc_ac10", sc); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, r.ID, sc); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, r); !errors.Is(err, receipts.ErrExists) {
				t.Fatalf("Create = %v; want ErrExists", err)
			}
			if rs, err := s.List(ctx, sc, receipts.Filter{}); err != nil || len(rs) != 1 {
				t.Fatalf("List = %d, %v", len(rs), err)
			}
			if _, err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caPool, certFile, keyFile, caFile := makeCerts(t, dir)
	srv := redistest.StartTLS(t, certFile, keyFile, caFile)
	ctx := context.Background()
	if !strings.HasPrefix(srv.URL(), "rediss://") {
		t.Fatalf("URL %s", srv.URL())
	}
	s, err := redisstore.New(ctx, srv.URL(), receipts.Options{}, redisdb.ProfilePrefix("tls"),
		redisstore.WithDial(redisdb.WithTLSConfig(&tls.Config{RootCAs: caPool})))
	if err != nil {
		t.Fatalf("rediss with the CA: %v", err)
	}
	defer s.Close()
	if err := s.Create(ctx, receipt("proc_7150000000a1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "proc_7150", receipts.Anonymous()); err != nil {
		t.Fatal(err)
	}
	// Without the CA the server is not trusted; the plain protocol gets nowhere.
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := redisstore.New(short, srv.URL(), receipts.Options{}, "p:"); err == nil {
		t.Error("rediss without the CA connected")
	}
	if _, err := redisstore.New(short, "redis://"+srv.Addr()+"/0"+fast, receipts.Options{}, "p:"); err == nil {
		t.Error("plain redis:// to a TLS port connected")
	}
}

// makeCerts writes a CA and a server certificate for 127.0.0.1.
func makeCerts(t *testing.T, dir string) (pool *x509.CertPool, certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hermes test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return pool, write("server.crt", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER), write("ca.crt", "CERTIFICATE", caDER)
}

// TestOutageRestart loses Redis mid-run and brings back an empty one (no
// persistence): every receipt written during the outage is there after.
func TestOutageRestart(t *testing.T) {
	srv := testenv.RedisServer(t)
	ctx := context.Background()
	spool := t.TempDir()
	prefix := redisdb.ProfilePrefix("outage")
	s := open(t, srv.URL()+fast, prefix, spool)
	owner := receipts.Scope{Owners: []string{"sess"}}
	if err := s.Put(ctx, receipt("proc_0000000000ff", "sess")); err != nil {
		t.Fatal(err)
	}

	stop(t, srv)
	const n = 50
	var want []string
	for i := range n {
		id := fmt.Sprintf("proc_%012x", 0x100+i)
		want = append(want, id)
		var err error
		if i%2 == 0 {
			r := receipt(id, "sess")
			r.NotifyOnComplete = true // a completion, spooled with its receipt
			err = s.Create(ctx, r)
		} else {
			err = s.Put(ctx, receipt(id, "sess"))
		}
		if err != nil {
			t.Fatalf("write %d during the outage: %v", i, err)
		}
	}
	if err := s.Create(ctx, receipt(want[0], "sess")); !errors.Is(err, receipts.ErrExists) {
		t.Errorf("Create of a spooled id = %v; want ErrExists", err)
	}
	if got := len(spooled(t, spool)); got != n {
		t.Fatalf("%d receipts spooled; want %d", got, n)
	}
	// Reads on this host see the spool while Redis is away.
	if r, err := s.Get(ctx, want[3], owner); err != nil || r.ID != want[3] {
		t.Errorf("Get of a spooled receipt during the outage = %v, %v", r, err)
	}

	start(t, srv)
	eventually(t, "the spool to drain", func() bool { return len(spooled(t, spool)) == 0 })

	// A fresh store without a spool reads from Redis alone.
	fresh := open(t, srv.URL(), prefix, "")
	for _, id := range want {
		r, err := fresh.Get(ctx, id, owner)
		if err != nil || r.Output != "out "+id+"\n" {
			t.Errorf("after the restart, Get(%s) = %v, %v", id, r, err)
		}
	}
	rs, err := fresh.List(ctx, owner, receipts.Filter{})
	if err != nil || len(rs) != n {
		t.Errorf("after the restart List = %d receipts, %v; want %d", len(rs), err, n)
	}
	// The completions of the Creates came back with their receipts.
	cs, err := fresh.TakeCompletions(ctx, owner)
	if err != nil || len(cs) != n/2 {
		t.Errorf("after the restart TakeCompletions = %d, %v; want the %d spooled", len(cs), err, n/2)
	}
	if again, _ := fresh.TakeCompletions(ctx, owner); len(again) != 0 {
		t.Errorf("taken twice: %d", len(again))
	}
	// Back to normal: writes go to Redis directly.
	if err := s.Create(ctx, receipt("proc_0000000001ff", "sess")); err != nil {
		t.Fatal(err)
	}
	if len(spooled(t, spool)) != 0 {
		t.Error("a write after recovery went to the spool")
	}
	if err := s.Create(ctx, receipt(want[1], "sess")); !errors.Is(err, receipts.ErrExists) {
		t.Errorf("Create of a flushed id = %v; want ErrExists", err)
	}
}

// TestOutagePartition freezes Redis (its data survives) while receipts are
// written: spooled Creates stay if-absent when flushed, so a receipt Redis
// already held is not written twice, and a write that reached the frozen
// server before the client gave up is not doubled either.
func TestOutagePartition(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	spool := t.TempDir()
	prefix := redisdb.ProfilePrefix("partition")
	s := open(t, srv.URL()+fast, prefix, spool)
	owner := receipts.Scope{Owners: []string{"sess"}}
	first := receipt("proc_b00000000001", "sess")
	first.Output = "first observer"
	if err := s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	inFlight := receipt("proc_c00000000001", "sess") // reaches the frozen server
	if err := s.Create(ctx, inFlight); err != nil {
		t.Fatalf("Create during the partition: %v", err)
	}
	second := receipt(first.ID, "sess")
	second.Output = "second observer"
	if err := s.Create(ctx, second); err != nil {
		t.Fatalf("Create during the partition: %v", err) // cannot know yet
	}
	put := receipt("proc_d00000000001", "sess")
	if err := s.Put(ctx, put); err != nil {
		t.Fatal(err)
	}
	// Once a write has failed, the next go to the spool without waiting
	// for Redis to time out again (300ms each).
	const more = 20
	start := time.Now()
	for i := range more {
		if err := s.Put(ctx, receipt(fmt.Sprintf("proc_d000000001%02x", i), "sess")); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > more*300*time.Millisecond/4 {
		t.Errorf("%d writes during the partition took %v; the spool should take them at once", more, d)
	}
	if got := len(spooled(t, spool)); got != 3+more {
		t.Fatalf("%d receipts spooled; want %d", got, 3+more)
	}

	srv.Resume()
	eventually(t, "the spool to drain", func() bool { return len(spooled(t, spool)) == 0 })
	fresh := open(t, srv.URL(), prefix, "")
	if r, err := fresh.Get(ctx, first.ID, owner); err != nil || r.Output != "first observer" {
		t.Errorf("the first observer's receipt = %v, %v; want it kept", r, err)
	}
	for _, id := range []string{inFlight.ID, put.ID} {
		if _, err := fresh.Get(ctx, id, owner); err != nil {
			t.Errorf("Get(%s) after the partition: %v", id, err)
		}
	}
	rs, err := fresh.List(ctx, owner, receipts.Filter{})
	if err != nil || len(rs) != 3+more {
		t.Errorf("List after the partition = %d receipts, %v; want %d", len(rs), err, 3+more)
	}
}

// TestSpoolReplayedByNextProcess: receipts spooled by a store that closed
// before Redis came back are flushed by the next store on the directory.
func TestSpoolReplayedByNextProcess(t *testing.T) {
	srv := testenv.RedisServer(t)
	ctx := context.Background()
	spool := t.TempDir()
	prefix := redisdb.ProfilePrefix("replay")
	s := open(t, srv.URL()+fast, prefix, spool)
	stop(t, srv)
	if err := s.Create(ctx, receipt("proc_e00000000001", "")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(spooled(t, spool)) != 1 {
		t.Fatal("nothing spooled")
	}
	start(t, srv)
	next := open(t, srv.URL(), prefix, spool)
	eventually(t, "the spool to drain", func() bool { return len(spooled(t, spool)) == 0 })
	if _, err := next.Get(ctx, "proc_e000", receipts.Anonymous()); err != nil {
		t.Fatal(err)
	}
}

// TestIndices checks the key layout stays consistent: trimming drops keys
// and index entries together, Sweep and readers clean up after expiry, and
// no lookup scans the keyspace.
func TestIndices(t *testing.T) {
	srv := testenv.RedisServer(t) // private: the test reads the server's command statistics
	ctx := context.Background()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	const max = 10
	prefix := redisdb.ProfilePrefix("indices")
	s, err := redisstore.New(ctx, srv.URL(), receipts.Options{MaxRetained: max}, prefix, redisstore.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owners := []string{"a", "b", ""}
	for i := range 3 * max {
		r := receipt(fmt.Sprintf("proc_%012x", 0xf000+i), owners[i%3])
		r.FinishedAt = time.Unix(1_700_000_000+int64(i), 0)
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() map[string]int64 {
		t.Helper()
		keys, err := raw.Keys(ctx, prefix+"r:*").Result() // fine in a test, never in the store
		if err != nil {
			t.Fatal(err)
		}
		c := map[string]int64{"keys": int64(len(keys))}
		for _, o := range owners {
			c["s"] += raw.ZCard(ctx, prefix+"s:"+o).Val()
			c["sl"] += raw.ZCard(ctx, prefix+"sl:"+o).Val()
		}
		c["idx"] = raw.ZCard(ctx, prefix+"idx").Val()
		c["owners"] = raw.HLen(ctx, prefix+"owners").Val()
		return c
	}
	check := func(when string, want int64) {
		t.Helper()
		for k, v := range counts() {
			if v != want {
				t.Errorf("%s: %s holds %d entries; want %d", when, k, v, want)
			}
		}
	}
	check("after trimming", max)
	if ttl := raw.PTTL(ctx, prefix+"r:"+fmt.Sprintf("proc_%012x", 0xf000+3*max-1)).Val(); ttl < receipts.DefaultRetention-time.Minute {
		t.Errorf("receipt TTL %v; want the retention %v", ttl, receipts.DefaultRetention)
	}

	// Expire two: Sweep removes their entries.
	for i := 3*max - 2; i < 3*max; i++ {
		if err := s.ExpireForTest(ctx, fmt.Sprintf("proc_%012x", 0xf000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Sweep(ctx); err != nil || n != 2 {
		t.Errorf("Sweep = %d, %v; want 2", n, err)
	}
	check("after sweep", max-2)

	// Expire one more, and let a reader find it gone.
	if err := s.ExpireForTest(ctx, fmt.Sprintf("proc_%012x", 0xf000+3*max-3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, receipts.Scope{Owners: owners}, receipts.Filter{}); err != nil {
		t.Fatal(err)
	}
	check("after a reader met an expired receipt", max-3)

	// Lookups by prefix and lists never scan the keyspace.
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"proc_0000", "proc_0000000f", fmt.Sprintf("proc_%012x", 0xf000+2*max)} {
		s.Get(ctx, key, receipts.Scope{Owners: owners})
	}
	s.List(ctx, receipts.Scope{Owners: owners}, receipts.Filter{})
	stats, err := raw.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"cmdstat_keys:", "cmdstat_scan:"} {
		if strings.Contains(stats, banned) {
			t.Errorf("the store ran %s\n%s", strings.TrimSuffix(banned, ":"), stats)
		}
	}
}
