package main

import (
	"bufio"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUICommand: `hermes ui` serves the profile's console on loopback,
// printing its address with a secret that logs in once; it refuses other
// addresses.
func TestUICommand(t *testing.T) {
	p := newProfile(t)
	if r := p.hermes("ui", "--listen", "0.0.0.0:0"); r.code != 2 || !strings.Contains(r.stderr, "loopback") {
		t.Fatalf("ui on every address:\n%s", r)
	}
	cmd := exec.Command(hermesBin, "ui", "--listen", "127.0.0.1:0")
	cmd.Env = p.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
	}()
	var first string
	select {
	case first = <-line:
	case <-time.After(20 * time.Second):
		t.Fatal("hermes ui printed no address")
	}
	m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/ui/login#([0-9a-f]{32})$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q", first)
	}
	base, secret := m[1], m[2]
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(secret string) *http.Response {
		req, _ := http.NewRequest("POST", base+"/ui/login", strings.NewReader(url.Values{"token": {secret}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := login(secret)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/jobs" || len(resp.Cookies()) != 1 {
		t.Fatalf("login with the secret: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest("GET", base+"/ui/jobs", nil)
	req.AddCookie(resp.Cookies()[0])
	jobs, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	jobs.Body.Close()
	if jobs.StatusCode != http.StatusOK {
		t.Fatalf("jobs page: %d", jobs.StatusCode)
	}
	if again := login(secret); again.StatusCode != http.StatusSeeOther || !strings.Contains(again.Header.Get("Location"), "failed") {
		t.Fatalf("the secret worked twice: %d %q", again.StatusCode, again.Header.Get("Location"))
	}
	// A page whose own name was rebound to 127.0.0.1 gets nothing, even
	// with a console session's cookie.
	req, _ = http.NewRequest("GET", base+"/ui/jobs", nil)
	req.Host = "rebound.example"
	req.AddCookie(resp.Cookies()[0])
	rebound, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rebound.Body.Close()
	if rebound.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("the console under another host name: %d", rebound.StatusCode)
	}
}
