package redisdb

import (
	"strings"
	"testing"
)

// Every key a profile uses starts with its prefix, carries its hash tag,
// and no two kinds of key share a name.
func TestKeys(t *testing.T) {
	p := ProfilePrefix("/home/u/{weird}")
	if p != "hermes:{/home/u/_weird_}:" {
		t.Fatalf("ProfilePrefix = %q", p)
	}
	k := NewKeys(p)
	a := k.Admission()
	keys := map[string]string{
		"receipt": k.Receipt("proc_1"), "finished": k.OwnerStarted("s1"), "ids": k.OwnerIDs("s1"),
		"written": k.Written(), "owners": k.Owners(), "pending": k.Pending("s1"), "leased": k.Leased("s1"),
		"wake": k.WakeBody("proc_1.out.0"), "wakes": k.PendingWakes("s1"), "leased wakes": k.LeasedWakes("s1"),
		"session": k.Session("s1"), "sessions": k.Sessions(), "replica": k.Replica("r1"), "claims": k.Claims(),
		"epoch": k.Epoch(), "hopkey": k.HopKey(),
	}
	for i, key := range a.All() {
		keys["admission "+string(rune('0'+i))] = key
	}
	seen := map[string]string{}
	for name, key := range keys {
		if !strings.HasPrefix(key, p) {
			t.Errorf("%s key %q lacks the prefix", name, key)
		}
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s share the key %q", name, other, key)
		}
		seen[key] = name
	}
	pending, leased, bodies := NoticeFamilies(false)
	if p+pending+"s1" != k.Pending("s1") || p+leased+"s1" != k.Leased("s1") || p+bodies+"proc_1" != k.Receipt("proc_1") {
		t.Error("the completion families do not name the completion keys")
	}
	pending, leased, bodies = NoticeFamilies(true)
	if p+pending+"s1" != k.PendingWakes("s1") || p+leased+"s1" != k.LeasedWakes("s1") || p+bodies+"w" != k.WakeBody("w") {
		t.Error("the wake families do not name the wake keys")
	}
	if p, l := k.Notices(true, "s1"); p != k.PendingWakes("s1") || l != k.LeasedWakes("s1") {
		t.Error("Notices(wakes)")
	}
	if p, l := k.Notices(false, "s1"); p != k.Pending("s1") || l != k.Leased("s1") {
		t.Error("Notices(completions)")
	}
	if ReplicaPrefix("") != DefaultReplicaPrefix || ReplicaPrefix("hermes:{x}:") != "hermes:{x}:runner:" {
		t.Error("ReplicaPrefix")
	}
}

// The Lua families are the Go ones: a script's R .. id is Receipt(id).
func TestLuaFamilies(t *testing.T) {
	want := "local R, S, SL, C, CL, WB, WC, WCL = 'r:', 's:', 'sl:', 'c:', 'cl:', 'wb:', 'wc:', 'wcl:'\n"
	if got := LuaFamilies(); got != want {
		t.Fatalf("LuaFamilies = %q", got)
	}
	k := NewKeys("P")
	if k.Receipt("x") != "Pr:x" || k.OwnerStarted("o") != "Ps:o" || k.OwnerIDs("o") != "Psl:o" {
		t.Fatal("the Go names moved away from the Lua ones")
	}
}
