package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKeys lists the keys of a config.yaml that hermes does not know, as
// "config.yaml: unknown key terminal.timout (line 4)", so that a typo is
// said rather than silently ignored. Keys are known from Config's yaml tags;
// under a map (tenants) every name is a key of the map's value type.
func unknownKeys(b []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []string
	walkKnown(doc.Content[0], reflect.TypeFor[Config](), "", &out)
	return out
}

func walkKnown(n *yaml.Node, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
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
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		if len(fields) == 0 {
			return // a scalar type with its own YAML form (Duration)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				*out = append(*out, fmt.Sprintf("config.yaml: unknown key %s (line %d)", join(path, clip(k.Value)), k.Line))
				continue
			}
			walkKnown(n.Content[i+1], ft, join(path, k.Value), out)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
