package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKeys lists the keys of a config.yaml that hermes does not know, as
// "config.yaml: unknown key terminal.timout (line 4); did you mean
// terminal.timeout?", so that a typo is said rather than silently ignored,
// and the values a key does not take (a field's enum tag), with their line:
// a misspelt terminal.env would otherwise surface only when a job starts.
// Keys are known from Config's yaml tags; under a map (tenants) every name
// is a key of the map's value type.
func unknownKeys(b []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []string
	walkKnown(doc.Content[0], reflect.TypeFor[Config](), "", &out)
	return out
}

// walkKnown appends to out what unknownKeys reports of n, read into a
// value of type t at path.
func walkKnown(n *yaml.Node, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice {
		for i, item := range n.Content { // a list of records: tolerations
			walkKnown(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", out)
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	switch t.Kind() {
	case reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkKnown(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), out)
		}
	case reflect.Struct:
		walkStruct(n, t, path, out)
	}
}

// walkStruct is walkKnown for a mapping read into the struct type t.
func walkStruct(n *yaml.Node, t reflect.Type, path string, out *[]string) {
	fields, enums := yamlFields(t)
	if len(fields) == 0 {
		return // a scalar type with its own YAML form (Duration)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			*out = append(*out, unknownKey(path, k, fields))
			continue
		}
		v := n.Content[i+1]
		if msg := notInEnum(join(path, k.Value), v, enums[k.Value]); msg != "" {
			*out = append(*out, msg)
		}
		walkKnown(v, ft, join(path, k.Value), out)
	}
}

// yamlFields returns the type of each field of the struct type t by its
// yaml name, and the values its enum tag allows (comma-separated, "" for
// any).
func yamlFields(t reflect.Type) (fields map[string]reflect.Type, enums map[string]string) {
	fields = map[string]reflect.Type{}
	enums = map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
			enums[name] = f.Tag.Get("enum")
		}
	}
	return fields, enums
}

// unknownKey is the report of the key k at path, which names none of
// fields, with the nearest that does when one is near enough.
func unknownKey(path string, k *yaml.Node, fields map[string]reflect.Type) string {
	msg := fmt.Sprintf("config.yaml: unknown key %s (line %d)", join(path, clip(k.Value)), k.Line)
	if near := nearest(k.Value, slices.Collect(maps.Keys(fields))); near != "" {
		msg += "; did you mean " + join(path, near) + "?"
	}
	return msg
}

// notInEnum is the report of the value v of the key at path when the key
// takes only the values of enum (an enum tag) and v is not one of them;
// else "". An empty or non-scalar value is left to the decoder.
func notInEnum(path string, v *yaml.Node, enum string) string {
	if enum == "" || v.Kind != yaml.ScalarNode || v.Value == "" {
		return ""
	}
	allowed := strings.Split(enum, ",")
	if slices.Contains(allowed, v.Value) {
		return ""
	}
	msg := fmt.Sprintf("config.yaml: %s: %q is not one of %s (line %d)", path, clip(v.Value), strings.Join(allowed, ", "), v.Line)
	if near := nearest(v.Value, allowed); near != "" {
		msg += "; did you mean " + near + "?"
	}
	return msg
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// nearest is the candidate closest to word by edit distance, when it is
// close enough to be the word meant (at most a third of its letters off,
// and at least one); else "".
func nearest(word string, candidates []string) string {
	slices.Sort(candidates) // a tie goes the same way every time
	best, bestD := "", max(1, len([]rune(word))/3)+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
