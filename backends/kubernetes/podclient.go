package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// podClient is the slice of the core/v1 API a job needs: pods and their
// log and attach subresources, in one namespace.
//
// It exists instead of client-go's typed clientset because importing that
// clientset registers every API group of Kubernetes in init (about 50
// groups, 11 ms of CPU measured with GODEBUG=inittrace=1), and every hermes
// process links this package: a `hermes ps` paid for the whole of
// Kubernetes before doing anything. A scheme holding core/v1 alone costs
// under a millisecond.
type podClient struct {
	rc     *rest.RESTClient
	ns     string
	params runtime.ParameterCodec
	// quiet gives each request's context the backend's logger (see
	// Backend.quietly): client-go reports a body cut short by a cancelled
	// context on klog, which would otherwise print it on stderr.
	quiet func(context.Context) context.Context
}

// newPodClient builds a REST client for core/v1 on cfg, which it copies;
// quiet prepares each request's context.
func newPodClient(cfg *rest.Config, namespace string, quiet func(context.Context) context.Context) (*podClient, error) {
	scheme := runtime.NewScheme()
	// core/v1's registration adds meta/v1's options and WatchEvent to the
	// group version too, which encoding options and decoding watches need.
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	// Protobuf, as the control plane's own components speak: every pod
	// event of the profile reaches each replica's shared watch, and in
	// JSON encoding them (the API server) and decoding them (here) were
	// most of both processes' CPU at 2,000 simulated jobs (bench/kwok.sh
	// with HERMES_SIM_PHASES). JSON stays accepted, for servers and
	// proxies that answer in it.
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &podClient{rc: rc, ns: namespace, params: runtime.NewParameterCodec(scheme), quiet: quiet}, nil
}

func (c *podClient) Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	ctx = c.quiet(ctx)
	out := &corev1.Pod{}
	err := c.rc.Post().Namespace(c.ns).Resource("pods").
		VersionedParams(&opts, c.params).Body(pod).Do(ctx).Into(out)
	return out, err
}

func (c *podClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	ctx = c.quiet(ctx)
	out := &corev1.Pod{}
	err := c.rc.Get().Namespace(c.ns).Resource("pods").Name(name).
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *podClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	ctx = c.quiet(ctx)
	out := &corev1.PodList{}
	req := c.rc.Get().Namespace(c.ns).Resource("pods").VersionedParams(&opts, c.params)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	err := req.Do(ctx).Into(out)
	return out, err
}

func (c *podClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	ctx = c.quiet(ctx)
	opts.Watch = true
	req := c.rc.Get().Namespace(c.ns).Resource("pods").VersionedParams(&opts, c.params)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

func (c *podClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	ctx = c.quiet(ctx)
	out := &corev1.Pod{}
	err := c.rc.Patch(pt).Namespace(c.ns).Resource("pods").Name(name).
		VersionedParams(&opts, c.params).Body(data).Do(ctx).Into(out)
	return out, err
}

func (c *podClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	ctx = c.quiet(ctx)
	return c.rc.Delete().Namespace(c.ns).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

func (c *podClient) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	ctx = c.quiet(ctx)
	return c.rc.Delete().Namespace(c.ns).Resource("pods").
		VersionedParams(&list, c.params).Body(&opts).Do(ctx).Error()
}

// GetLogs is the request for a pod's log; the caller streams it.
func (c *podClient) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return c.rc.Get().Namespace(c.ns).Resource("pods").Name(name).SubResource("log").
		VersionedParams(opts, c.params)
}

// Attach is the request for pods/attach with opts; remotecommand dials it.
func (c *podClient) Attach(name string, opts *corev1.PodAttachOptions) *rest.Request {
	return c.rc.Post().Namespace(c.ns).Resource("pods").Name(name).SubResource("attach").
		VersionedParams(opts, c.params)
}

// Exec is the request for pods/exec with opts; remotecommand dials it.
func (c *podClient) Exec(name string, opts *corev1.PodExecOptions) *rest.Request {
	return c.rc.Post().Namespace(c.ns).Resource("pods").Name(name).SubResource("exec").
		VersionedParams(opts, c.params)
}
