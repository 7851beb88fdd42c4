package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/receipts/storetest"
)

// nonce keeps the keys of one test run apart from any other's on the server.
func nonce(t testing.TB) string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestContract(t *testing.T) {
	url := testenv.Redis(t) // the shared server: keys are unique to this run
	run := nonce(t)
	for _, variant := range []struct {
		name  string
		spool bool
	}{{"spool", true}, {"nospool", false}} {
		t.Run(variant.name, func(t *testing.T) {
			root := t.TempDir()
			storetest.Run(t, storetest.Harness{
				Open: func(t *testing.T, profile string, opts receipts.Options) receipts.Store {
					o := []redisstore.Option{}
					if variant.spool {
						o = append(o, redisstore.WithSpool(filepath.Join(root, profile)))
					}
					s, err := redisstore.New(context.Background(), url, opts,
						redisdb.ProfilePrefix(run+"-"+variant.name+"-"+profile), o...)
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
				Expire: func(t *testing.T, s receipts.Store, id string) {
					if err := s.(*redisstore.Store).ExpireForTest(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				},
				Rewrite: func(t *testing.T, s receipts.Store, id string, body []byte) {
					if err := s.(*redisstore.Store).RewriteForTest(context.Background(), id, body); err != nil {
						t.Fatal(err)
					}
				},
			})
		})
	}
}
