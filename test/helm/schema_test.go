package helm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermesrun/hermes/internal/duration"
	"github.com/hermesrun/hermes/server"
)

// chartSchema is values.schema.json, decoded.
func chartSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// resolve follows a node's local $ref ("#/a/b"), if it has one, or the
// one $ref of an allOf (how draft-07 lets a reference carry a description
// of its own).
func resolve(root, node map[string]any) map[string]any {
	ref, _ := node["$ref"].(string)
	if all, ok := node["allOf"].([]any); ok && len(all) == 1 {
		if m, ok := all[0].(map[string]any); ok {
			ref, _ = m["$ref"].(string)
		}
	}
	if !strings.HasPrefix(ref, "#/") {
		return node
	}
	var cur any = root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, _ := cur.(map[string]any)
		cur = m[part]
	}
	if m, ok := cur.(map[string]any); ok {
		return m
	}
	return node
}

// TestValuesYAMLDescribed: every key of values.yaml, at every depth, is a
// property the schema declares and describes; a key the schema does not
// know would be refused at install, and one it does not describe is a
// value users must guess the meaning of.
func TestValuesYAMLDescribed(t *testing.T) {
	schema := chartSchema(t)
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var problems []string
	checked := 0
	var walk func(v map[string]any, node map[string]any, path string)
	walk = func(v map[string]any, node map[string]any, path string) {
		node = resolve(schema, node)
		props, _ := node["properties"].(map[string]any)
		for k, val := range v {
			p := strings.TrimPrefix(path+"."+k, ".")
			child, declared := props[k].(map[string]any)
			if !declared {
				// A map of the user's own keys (labels, tenants): its
				// entries are described by additionalProperties.
				if ap, ok := node["additionalProperties"].(map[string]any); ok {
					child = ap
				} else if props == nil && node["additionalProperties"] == nil {
					// A Kubernetes object passed through as it is
					// (securityContext): described as a whole.
					continue
				} else {
					problems = append(problems, p+": not in the schema")
					continue
				}
			} else {
				checked++
				if _, ok := child["description"]; !ok {
					if _, ok := resolve(schema, child)["description"]; !ok {
						problems = append(problems, p+": no description")
					}
				}
			}
			if m, ok := val.(map[string]any); ok {
				walk(m, child, p)
			}
		}
	}
	walk(values, schema, "")
	if len(problems) > 0 {
		t.Fatalf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	if checked < 100 {
		t.Fatalf("only %d values checked: the walk lost its way", checked)
	}
}

// TestSchemaAgreesWithRunner: the schema's patterns accept no value the
// runner refuses. Tenant names must match exactly (the schema is the
// runner's rule); a duration the schema accepts, the runner's parser reads
// as a duration that is not negative.
func TestSchemaAgreesWithRunner(t *testing.T) {
	schema := chartSchema(t)
	pattern := func(path ...string) *regexp.Regexp {
		t.Helper()
		var cur any = schema
		for _, p := range path {
			m, _ := cur.(map[string]any)
			cur = m[p]
		}
		s, ok := cur.(string)
		if !ok {
			t.Fatalf("no pattern at %v", path)
		}
		return regexp.MustCompile(s)
	}
	tenant := pattern("properties", "config", "properties", "tenants", "propertyNames", "pattern")
	for _, name := range []string{"alpha", "a", "team-1", "x_y", "0", strings.Repeat("a", 63), strings.Repeat("a", 64),
		"", "Alpha", "-a", "_a", "a.b", "a/b", "..", "a b", "é", "a\n"} {
		if got, want := tenant.MatchString(name), server.ValidTenant(name); got != want {
			t.Errorf("tenant %q: schema accepts %v, runner %v", name, got, want)
		}
	}
	durationPatterns := map[string]*regexp.Regexp{
		"serve.shutdownTimeout": pattern("properties", "serve", "properties", "shutdownTimeout", "pattern"),
	}
	timeout := resolve(schema, schema["properties"].(map[string]any)["config"].(map[string]any)["properties"].(map[string]any)["terminal"].(map[string]any)["properties"].(map[string]any)["timeout"].(map[string]any))
	for _, alt := range timeout["oneOf"].([]any) {
		if p, ok := alt.(map[string]any)["pattern"].(string); ok {
			durationPatterns["config.terminal.timeout"] = regexp.MustCompile(p)
		}
	}
	if len(durationPatterns) != 2 {
		t.Fatalf("config.terminal.timeout has no string pattern: %v", timeout)
	}
	for where, re := range durationPatterns {
		accepted := 0
		for _, v := range []string{"90s", "1h30m", "1.5h", "0s", "250ms", "10us", "10µs", "168h",
			"soon", "-1s", "1d", "5 s", "s", "1e3s", "0x10s", "+1s", "1h-1m", ""} {
			if !re.MatchString(v) {
				continue
			}
			accepted++
			d, err := duration.Parse(v)
			if err != nil || d < 0 {
				t.Errorf("%s: the schema accepts %q, the runner reads %v, %v", where, v, d, err)
			}
		}
		if accepted < 8 {
			t.Errorf("%s: the schema accepts only %d of the good durations", where, accepted)
		}
	}
}
