package history

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/agent/openai"
)

func msg(role, content string) openai.Message {
	return openai.Message{Role: role, Content: openai.String(content)}
}

func TestRoundTripRedacted(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secret := "sk-" + "proj" + strings.Repeat("Ab3Xy9", 8)
	in := []openai.Message{
		msg(openai.RoleSystem, "be brief"),
		msg(openai.RoleUser, "use key "+secret),
		{Role: openai.RoleAssistant, ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "terminal", Arguments: `{"command":"curl -H 'Authorization: Bearer ` + secret + `'"}`}}}},
		{Role: openai.RoleTool, ToolCallID: "c1", Content: openai.String("token=" + secret)},
	}
	if err := s.Save("with/slash", in); err != nil {
		t.Fatal(err)
	}
	out, err := s.Load("with/slash")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) || out[2].ToolCalls[0].ID != "c1" || out[3].ToolCallID != "c1" {
		t.Fatalf("round trip = %+v", out)
	}
	for _, m := range out {
		all := m.Text()
		for _, tc := range m.ToolCalls {
			all += tc.Function.Arguments
		}
		if strings.Contains(all, secret) {
			t.Errorf("secret kept in %+v", m)
		}
	}
	if *in[1].Content != "use key "+secret {
		t.Error("Save changed the caller's messages")
	}
	if _, err := s.Load("other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(unknown) = %v; want ErrNotFound", err)
	}
}

func TestRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	if err := s.Save("a", []openai.Message{msg(openai.RoleUser, "hi")}); err != nil {
		t.Fatal(err)
	}
	// b's file holding a's conversation (a copy, a rename) is not b's.
	if err := os.Rename(s.path("a"), s.path("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("b"); err == nil {
		t.Error("Load(b) accepted a's conversation")
	}
	// A symlink must not lend another file.
	target := filepath.Join(t.TempDir(), "x.json")
	_ = os.WriteFile(target, []byte(`{"session":"c","messages":[]}`), 0o600)
	if err := os.Symlink(target, s.path("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("c"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Load through a symlink = %v; want an error", err)
	}
}

func TestDropOldestTurn(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"s u a t a u a", "s u a"},
		{"s u a", "s u a"},
		{"u a u", "u"},
		{"s", "s"},
	}
	roles := map[byte]string{'s': openai.RoleSystem, 'u': openai.RoleUser, 'a': openai.RoleAssistant, 't': openai.RoleTool}
	for _, tc := range tests {
		var msgs []openai.Message
		for _, f := range strings.Fields(tc.in) {
			msgs = append(msgs, msg(roles[f[0]], f))
		}
		var got []string
		for _, m := range dropOldestTurn(msgs) {
			got = append(got, m.Text())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("dropOldestTurn(%s) = %v; want %s", tc.in, got, tc.want)
		}
	}
}

func TestSaveCutsToTheBound(t *testing.T) {
	s, _ := Open(t.TempDir())
	big := strings.Repeat("x", MaxBytes/3)
	msgs := []openai.Message{msg(openai.RoleSystem, "sys")}
	for range 5 {
		msgs = append(msgs, msg(openai.RoleUser, big), msg(openai.RoleAssistant, "ok"))
	}
	if err := s.Save("s", msgs); err != nil {
		t.Fatal(err)
	}
	out, err := s.Load("s")
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Text() != "sys" || len(out) >= len(msgs) || out[1].Role != openai.RoleUser {
		t.Errorf("cut conversation: %d messages, first %q", len(out), out[0].Text())
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"session":"s","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"session":"s","messages":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _ := Open(t.TempDir())
		if err := os.WriteFile(s.path("s"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = s.Load("s") // any answer but a panic
	})
}
