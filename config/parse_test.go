package config_test

import (
	"strings"
	"testing"

	"github.com/hermesrun/hermes/config"
)

func TestParseRefusesNegatives(t *testing.T) {
	for _, y := range []string{
		"result_retention: -1h\n",
		"max_retained_results: -5\n",
		"store:\n  result_retention: -10\n",
		"store:\n  max_retained_results: -1\n",
		"terminal:\n  timeout: -30s\n",
		"result_retention: 1e300\n",
		"result_retention: .nan\n",
	} {
		if _, err := config.Parse([]byte(y)); err == nil {
			t.Errorf("accepted %q", y)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("error for %q is not one line: %v", y, err)
		}
	}
	if c, err := config.Parse([]byte("result_retention: 90\nmax_retained_results: 3\n")); err != nil || c.MaxRetainedResults != 3 {
		t.Fatalf("a sound config: %+v, %v", c, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("terminal:\n  env: local\n  timeout: 30s\nresult_retention: 168h\n"))
	f.Add([]byte("store:\n  redis_url: redis://127.0.0.1:6379/0\n  max_retained_results: 10\n"))
	f.Add([]byte("result_retention: -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse(b)
		if err != nil {
			return
		}
		if c.ResultRetention < 0 || c.MaxRetainedResults < 0 || c.Store.ResultRetention < 0 || c.Store.MaxRetainedResults < 0 {
			t.Fatalf("accepted negative settings: %+v", c)
		}
	})
}
