package chartcheck

import (
	"strings"
	"testing"
)

// A small, valid set of manifests; the cases below break it one way each.
const validDeployment = `
# Source: demo/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo
  labels: {app: demo}
spec:
  selector:
    matchLabels: {app: demo}
  template:
    metadata:
      labels: {app: demo}
    spec:
      containers:
        - name: web
          image: demo:1
          ports: [{name: http, containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /readyz, port: http}
          resources:
            limits: {memory: 64Mi}
          env:
            - name: TOKEN
              valueFrom:
                secretKeyRef: {name: demo, key: token}
          volumeMounts:
            - {name: config, mountPath: /etc/demo/config.yaml, subPath: config.yaml}
      volumes:
        - name: config
          configMap: {name: demo}
`

const validRest = `
---
# Source: demo/templates/service.yaml
apiVersion: v1
kind: Service
metadata: {name: demo}
spec:
  selector: {app: demo}
  ports: [{port: 80, targetPort: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: demo}
data:
  config.yaml: "a: 1"
---
apiVersion: v1
kind: Secret
metadata: {name: demo}
data:
  token: dG9rZW4=
---
# only a comment: skipped
`

func decodeCheck(t *testing.T, manifests string) ([]Object, Report, error) {
	t.Helper()
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := dec.Decode(strings.NewReader(manifests))
	if err != nil {
		return objs, Report{}, err
	}
	rep, err := Check(objs)
	return objs, rep, err
}

func TestValid(t *testing.T) {
	objs, rep, err := decodeCheck(t, validDeployment+validRest)
	if err != nil {
		t.Fatalf("valid manifests rejected: %v", err)
	}
	if len(objs) != 4 {
		t.Fatalf("decoded %d objects, want 4", len(objs))
	}
	if objs[0].Source != "demo/templates/deployment.yaml" || objs[0].String() != "Deployment/demo" {
		t.Errorf("first object = %s from %q", objs[0], objs[0].Source)
	}
	if len(rep.External) != 0 {
		t.Errorf("external refs = %v, want none", rep.External)
	}
}

func TestExternalRefs(t *testing.T) {
	_, rep, err := decodeCheck(t, validDeployment)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range rep.External {
		got = append(got, r.String())
	}
	if strings.Join(got, " ") != "ConfigMap/demo Secret/demo" {
		t.Errorf("external = %v, want [ConfigMap/demo Secret/demo]", got)
	}
}

func TestRejects(t *testing.T) {
	all := validDeployment + validRest
	tests := []struct {
		name      string
		manifests string
		want      string
	}{
		{"unknown field", strings.Replace(all, "image: demo:1", "image: demo:1\n          imagePolicy: Always", 1), `unknown field "spec.template.spec.containers[0].imagePolicy"`},
		{"field with the wrong case", strings.Replace(all, "containerPort: 8080", "containerport: 8080", 1), "containerport"},
		{"field at the wrong level", strings.Replace(all, "      volumes:", "      securityContext: {readOnlyRootFilesystem: true}\n      volumes:", 1), "readOnlyRootFilesystem"},
		{"duplicate key", strings.Replace(all, "image: demo:1", "image: demo:1\n          image: demo:2", 1), "image"},
		{"unknown kind", all + "---\napiVersion: v1\nkind: Widget\nmetadata: {name: w}\n", "unknown kind"},
		{"removed api version", strings.Replace(all, "apiVersion: apps/v1", "apiVersion: extensions/v1beta1", 1), "unknown kind"},
		{"no kind", all + "---\nmetadata: {name: w}\n", "apiVersion and kind are required"},
		{"wrong type", strings.Replace(all, "containerPort: 8080", "containerPort: eighty", 1), "containerPort"},
		{"bad quantity", strings.Replace(all, "memory: 64Mi", "memory: 64 megs", 1), "quantities must match"},
		{"bad base64", strings.Replace(all, "token: dG9rZW4=", "token: not-base64!", 1), "illegal base64"},
		{"bad name", strings.Replace(all, "metadata: {name: demo}\nspec:", "metadata: {name: Demo_Svc}\nspec:", 1), `name "Demo_Svc"`},
		{"bad label value", strings.Replace(all, "labels: {app: demo}\nspec:", "labels: {app: \"no spaces\"}\nspec:", 1), "labels app value"},
		{"selector misses own pods", strings.Replace(all, "matchLabels: {app: demo}", "matchLabels: {app: other}", 1), "does not select its own pod template"},
		{"service selects nothing", strings.Replace(all, "selector: {app: demo}", "selector: {app: nobody}", 1), "selects no rendered pod"},
		{"service target port undeclared", strings.Replace(all, "targetPort: http", "targetPort: web", 1), `targetPort "web"`},
		{"undeclared volume", strings.Replace(all, "{name: config, mountPath", "{name: settings, mountPath", 1), `undeclared volume "settings"`},
		{"probe on undeclared port", strings.Replace(all, "port: http}", "port: admin}", 1), `undeclared port "admin"`},
		{"missing configmap key", strings.Replace(all, "subPath: config.yaml", "subPath: settings.yaml", 1), `key "settings.yaml" of ConfigMap/demo`},
		{"missing secret key", strings.Replace(all, "key: token}", "key: password}", 1), `key "password" of Secret/demo`},
		{"rendered twice", all + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo}\n", "rendered twice"},
		{"privileged without escalation", strings.Replace(all, "image: demo:1", "image: demo:1\n          securityContext: {privileged: true, allowPrivilegeEscalation: false}", 1), "privileged with allowPrivilegeEscalation false"},
		{"not yaml", all + "---\n{a: [\n", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.manifests == all {
				t.Fatal("test case did not change the manifests")
			}
			_, _, err := decodeCheck(t, tt.manifests)
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}
