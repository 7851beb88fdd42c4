// Package chartcheck decodes rendered Kubernetes manifests (the output of
// `helm template`) strictly into the Kubernetes API types and checks what
// a decoder alone cannot: names, labels and the references between objects.
//
// It lives in a module of its own so that the hermes module does not carry
// k8s.io/api and its dependencies; only the chart's CI needs them.
//
// Strict means: a document whose apiVersion/kind is not a type this package
// knows fails, and so does any unknown field, any field spelt with the wrong
// case, any duplicate key, and any value the type rejects (a malformed
// quantity, base64 that is not base64). The API server would silently drop
// an unknown field; here it is an error, because a dropped securityContext
// or probe field is a chart bug.
package chartcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Object is one decoded manifest.
type Object struct {
	// Source is the template that rendered it (helm's "# Source:" line),
	// or "document N" when there is none.
	Source string
	GVK    schema.GroupVersionKind
	// Object is the typed value, e.g. *appsv1.Deployment.
	Object runtime.Object
	// Meta is the object's metadata.
	Meta metav1.Object
}

// String names the object as kind/name.
func (o Object) String() string { return o.GVK.Kind + "/" + o.Meta.GetName() }

// Decoder decodes manifests of the kinds registered in its scheme.
type Decoder struct {
	scheme *runtime.Scheme
}

// NewDecoder returns a Decoder for the built-in API groups a workload chart
// renders: core, apps, batch, networking, policy, rbac and autoscaling.
func NewDecoder() (*Decoder, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		networkingv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme,
		autoscalingv2.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return &Decoder{scheme: s}, nil
}

// Decode reads a stream of YAML documents and decodes each one strictly.
// Documents that hold only comments are skipped. All errors are returned
// together, each naming its document.
func (d *Decoder) Decode(r io.Reader) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var (
		objs []Object
		errs []error
	)
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objs, fmt.Errorf("document %d: %w", n, err)
		}
		src := source(doc, n)
		obj, err := d.decodeOne(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
			continue
		}
		if obj == nil {
			continue
		}
		obj.Source = src
		objs = append(objs, *obj)
	}
	return objs, errors.Join(errs...)
}

// decodeOne decodes one document; nil, nil for an empty one.
func (d *Decoder) decodeOne(doc []byte) (*Object, error) {
	// YAMLToJSONStrict rejects duplicate keys, which plain YAMLToJSON
	// would resolve silently to the last one.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	js = bytes.TrimSpace(js)
	if bytes.Equal(js, []byte("null")) || len(js) == 0 {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("apiVersion and kind are required")
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	obj, err := d.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("unknown kind %s: %w", gvk, err)
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", gvk.Kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decode %s strictly: %w", gvk.Kind, errors.Join(strict...))
	}
	meta, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%s has no object metadata", gvk.Kind)
	}
	return &Object{GVK: gvk, Object: obj, Meta: meta}, nil
}

// source finds helm's "# Source: path" comment in a document.
func source(doc []byte, n int) string {
	for _, line := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return fmt.Sprintf("document %d", n)
}
