// Package redact masks secrets in free text before it is persisted.
package redact

// String returns s with secrets masked. Placeholder until the real patterns land.
func String(s string) string { return s }
