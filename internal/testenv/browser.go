package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium ($HERMES_TEST_CHROMIUM, else
// chromium on PATH) for the test, with the flags a closed network needs
// (no background fetches, no component updates, a fresh profile), and
// returns its context; it is closed when the test ends.
func Browser(t testing.TB, width, height int) context.Context {
	t.Helper()
	exe := os.Getenv("HERMES_TEST_CHROMIUM")
	if exe == "" {
		exe, _ = exec.LookPath("chromium")
	}
	if exe == "" {
		unavailable(t, "chromium", "not found (apt-get install chromium, or set HERMES_TEST_CHROMIUM)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Artifacts is where a test writes what people look at afterwards
// (screenshots): $HERMES_TEST_ARTIFACTS, else the test's temporary
// directory.
func Artifacts(t testing.TB) string {
	if d := os.Getenv("HERMES_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// Screenshot writes the whole page as a PNG under Artifacts.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	var png []byte
	var err error
	for try := 0; ; try++ {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		// A page between two documents (a form's redirect that follows
		// a change the test already saw) has no size yet: take it once
		// the next one is there.
		if err == nil || try == 5 || !strings.Contains(err.Error(), "0 width") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(Artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("screenshot: %s", path)
	updateDocImage(t, name, png)
	return path
}

// updateDocImage replaces the picture of the docs named name (docs/ or
// docs/img/) with png when $HERMES_UPDATE_DOC_IMAGES is 1, so that the
// pictures people read come from the browser tests that check what they
// show (scripts/doc-images.sh; CI sets it too). A screenshot the docs do
// not show is left alone.
func updateDocImage(t testing.TB, name string, png []byte) {
	if os.Getenv("HERMES_UPDATE_DOC_IMAGES") != "1" {
		return
	}
	root := Root(t)
	for _, dir := range []string{"docs", filepath.Join("docs", "img")} {
		p := filepath.Join(root, dir, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("update %s: %v", p, err)
			return
		}
		t.Logf("docs picture updated: %s", filepath.Join(dir, name))
		return
	}
}

// WaitFor evaluates the JavaScript predicate js until it is true, or
// fails the test after 30 s with what the page shows.
func WaitFor(t testing.TB, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
			t.Fatalf("the page never showed %s; it shows:\n%s", what, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
