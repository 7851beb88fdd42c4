// Package redisdb owns hermes's Redis database: how a process dials it
// (Dial, Connect) and how every key is named (Keys). The stores that keep
// receipts, sessions, admission and the replica directory there take their
// key names from here and nowhere else, so the layout below is the whole
// of it.
//
// # Key layout
//
// Every key of a profile starts with its prefix P, by default
// "hermes:{<profile>}:" (ProfilePrefix). The braces are a hash tag, so all
// of a profile's keys share one Redis Cluster slot: a script may touch keys
// it finds in the data (the receipts a trim drops) besides those it
// declares. O is an owner session id (empty for receipts with no owner).
//
//	P r:<id>       string  a receipt as JSON; PX = retention
//	P s:O          zset    owner O's receipts, score = started_at (ms): listings and their pages
//	P sl:O         zset    the same ids, score 0: the lexicographic index for prefixes
//	P idx          zset    every receipt, score = when written (server clock, ms)
//	P started      zset    every receipt, score = started_at (ms): the profile's listing
//	P layout       string  the version of this layout the indices follow (2)
//	P owners       hash    id → owner, to find a receipt's indices once it is gone
//	P c:O          zset    owner O's pending completions, score = finished_at
//	P cl:O         zset    owner O's leased completions, score = when the lease ends
//	P wb:<key>     string  a wake of a running job as JSON; PX = retention
//	P wc:O         zset    owner O's pending wakes; P wcl:O the leased ones
//	P sess:<id>    hash    a session
//	P sessions     zset    the profile's sessions
//	P adm:run      zset    ids holding a slot, score = when they took it (ms)
//	P adm:q        zset    queued ids, score = order × 1024 + sequence mod 1024
//	P adm:seq      string  the queue's sequence
//	P adm:e        hash    id → admission entry JSON
//	P adm:bucket   hash    the rate bucket: tokens, at (ms)
//	P adm:held     hash    id → entry JSON of a held job
//	P adm:claim    hash    id → when a dispatcher claimed the held job (ms)
//
// The replica directory of a runner lives under its own prefix R
// (ReplicaPrefix):
//
//	R replica:<name>  string  a replica's heartbeat; PX = its TTL
//	R claims          hash    tenant/id → the replica that dispatched a job
//	R epoch           string  the directory's epoch mark
//	R hopkey          string  the key that signs requests between replicas
package redisdb

import "strings"

// The families of keys named after a receipt, an owner or a wake. Scripts
// that meet such a name in the data build the key from these (see
// LuaFamilies), so the names are written once.
const (
	famReceipt          = "r:"
	famOwnerStarted     = "s:"
	famOwnerIDs         = "sl:"
	famPending          = "c:"
	famLeased           = "cl:"
	famWakeBody         = "wb:"
	famPendingWakes     = "wc:"
	famLeasedWakes      = "wcl:"
	famSession          = "sess:"
	famReplicaHeartbeat = "replica:"
)

// ProfilePrefix is the key prefix of a profile: "hermes:{profile}:". Braces
// in the name are replaced, since they would break the hash tag.
func ProfilePrefix(profile string) string {
	profile = strings.NewReplacer("{", "_", "}", "_").Replace(profile)
	return "hermes:{" + profile + "}:"
}

// DefaultReplicaPrefix starts the replica directory's keys when the
// runner's store names no prefix. The hash tag keeps them in one slot.
const DefaultReplicaPrefix = "hermes:{runner}:"

// ReplicaPrefix is the prefix of the replica directory of a runner whose
// store uses storePrefix ("" for the default).
func ReplicaPrefix(storePrefix string) string {
	if storePrefix == "" {
		return DefaultReplicaPrefix
	}
	return storePrefix + "runner:"
}

// Keys names the keys under one prefix (a profile's, or a replica
// directory's).
type Keys struct{ p string }

// NewKeys returns the key names under prefix.
func NewKeys(prefix string) Keys { return Keys{p: prefix} }

// Prefix is the prefix every key starts with.
func (k Keys) Prefix() string { return k.p }

// Receipt is the key of receipt id.
func (k Keys) Receipt(id string) string { return k.p + famReceipt + id }

// OwnerStarted is owner o's receipts by start time.
func (k Keys) OwnerStarted(o string) string { return k.p + famOwnerStarted + o }

// OwnerIDs is owner o's receipt ids, for prefix lookups.
func (k Keys) OwnerIDs(o string) string { return k.p + famOwnerIDs + o }

// Written is every receipt of the profile by when it was written.
func (k Keys) Written() string { return k.p + "idx" }

// Started is every receipt of the profile by start time.
func (k Keys) Started() string { return k.p + "started" }

// Layout holds the version of the key layout the profile's indices follow.
func (k Keys) Layout() string { return k.p + "layout" }

// Owners maps each receipt id to its owner.
func (k Keys) Owners() string { return k.p + "owners" }

// Pending is owner o's pending completions; Leased the leased ones.
func (k Keys) Pending(o string) string { return k.p + famPending + o }

// Leased is owner o's leased completions.
func (k Keys) Leased(o string) string { return k.p + famLeased + o }

// WakeBody is the key of the wake named key.
func (k Keys) WakeBody(key string) string { return k.p + famWakeBody + key }

// PendingWakes is owner o's pending wakes.
func (k Keys) PendingWakes(o string) string { return k.p + famPendingWakes + o }

// LeasedWakes is owner o's leased wakes.
func (k Keys) LeasedWakes(o string) string { return k.p + famLeasedWakes + o }

// NoticeFamilies names the pending set, the leased set and the bodies of
// one kind of notice (completions or wakes), without prefix or owner: a
// take script builds each owner's keys from them.
func NoticeFamilies(wakes bool) (pending, leased, bodies string) {
	if wakes {
		return famPendingWakes, famLeasedWakes, famWakeBody
	}
	return famPending, famLeased, famReceipt
}

// Notices are owner o's pending and leased sets of one kind of notice:
// wakes, or completions.
func (k Keys) Notices(wakes bool, o string) (pending, leased string) {
	p, l, _ := NoticeFamilies(wakes)
	return k.p + p + o, k.p + l + o
}

// Session is the key of session id.
func (k Keys) Session(id string) string { return k.p + famSession + id }

// SessionFamily is what every session's key starts with.
func (k Keys) SessionFamily() string { return k.p + famSession }

// Sessions is the profile's session index.
func (k Keys) Sessions() string { return k.p + "sessions" }

// Admission names the keys of the profile's admission ledger.
func (k Keys) Admission() AdmissionKeys {
	return AdmissionKeys{Running: k.p + "adm:run", Queue: k.p + "adm:q", Seq: k.p + "adm:seq",
		Entries: k.p + "adm:e", Bucket: k.p + "adm:bucket", Held: k.p + "adm:held", Claim: k.p + "adm:claim"}
}

// AdmissionKeys are the keys of one admission ledger.
type AdmissionKeys struct {
	Running, Queue, Seq, Entries, Bucket, Held, Claim string
}

// All lists the keys in the order the ledger's scripts declare them.
func (a AdmissionKeys) All() []string {
	return []string{a.Running, a.Queue, a.Seq, a.Entries, a.Bucket, a.Held, a.Claim}
}

// Replica is the heartbeat key of the replica name.
func (k Keys) Replica(name string) string { return k.p + famReplicaHeartbeat + name }

// ReplicaFamily is what every heartbeat key starts with.
func (k Keys) ReplicaFamily() string { return k.p + famReplicaHeartbeat }

// Claims maps each dispatched job to the replica that dispatched it.
func (k Keys) Claims() string { return k.p + "claims" }

// Epoch is the directory's epoch mark.
func (k Keys) Epoch() string { return k.p + "epoch" }

// HopKey holds the key that signs requests between replicas.
func (k Keys) HopKey() string { return k.p + "hopkey" }

// LuaFamilies is Lua that defines the key families a script meets in its
// data: R (receipts), S and SL (an owner's indices), C and CL (its
// completions), WB (wake bodies), WC and WCL (its wakes). A script prefixes
// them with the profile prefix it is passed; its fixed keys it declares.
func LuaFamilies() string {
	q := func(s string) string { return "'" + s + "'" }
	return "local R, S, SL, C, CL, WB, WC, WCL = " + strings.Join([]string{
		q(famReceipt), q(famOwnerStarted), q(famOwnerIDs), q(famPending), q(famLeased),
		q(famWakeBody), q(famPendingWakes), q(famLeasedWakes)}, ", ") + "\n"
}
