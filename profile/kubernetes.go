package profile

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/hermesrun/hermes/backends/kubernetes"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/redisdb"
)

// kubernetesWanted reports whether this profile runs kubernetes jobs by
// default (terminal.env). Otherwise only a runner that allows the backend
// by name opens it: credentials are not assumed.
func (e *Profile) kubernetesWanted() bool { return e.Config.Terminal.Env == "kubernetes" }

// Kubernetes returns the profile's kubernetes backend, created on first
// use.
func (e *Profile) Kubernetes() (*kubernetes.Backend, error) {
	if e.kubernetes != nil {
		return e.kubernetes, nil
	}
	c := e.Config.Terminal.Kubernetes
	image := c.Image
	if image == "" {
		image = e.Config.Terminal.DockerImage
	}
	b, err := kubernetes.New(kubernetes.Options{
		Profile: e.identity(), Namespace: c.Namespace, Kubeconfig: c.Kubeconfig, DefaultImage: image,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy), RunAsUser: c.RunAsUser,
		RuntimeClassName: c.RuntimeClassName, NodeSelector: c.NodeSelector, Tolerations: tolerations(c.Tolerations),
		ServiceAccountName: c.ServiceAccountName, APIQPS: c.APIQPS, APIBurst: c.APIBurst,
		CPURequest: c.CPURequest, MemoryRequest: c.MemoryRequest, CPULimit: c.CPULimit, MemoryLimit: c.MemoryLimit,
		Keep: c.Keep, Logger: e.Logger, SharedWatch: e.longLived,
	})
	if err != nil {
		return nil, err
	}
	e.kubernetes = b
	return b, nil
}

// tolerations are the configured tolerations as the pod spec takes them.
func tolerations(ts []config.Toleration) []corev1.Toleration {
	out := make([]corev1.Toleration, len(ts))
	for i, t := range ts {
		out[i] = corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect)}
	}
	return out
}

// kubernetesImage is the image of kubernetes jobs that name none.
func (e *Profile) kubernetesImage() string {
	if img := e.Config.Terminal.Kubernetes.Image; img != "" {
		return img
	}
	return e.Config.Terminal.DockerImage
}

// identity names the profile to what it shares with other hosts: the
// Redis key prefix when receipts live in Redis (replicas of one runner
// share it, whatever their homes), else $HERMES_HOME. Pods of a cluster
// are seen by every host that shares the profile's store, and no other.
func (e *Profile) identity() string {
	if e.Config.Store.RedisURL == "" {
		return e.Home
	}
	if p := e.Config.Store.Prefix; p != "" {
		return "redis:" + p
	}
	return "redis:" + redisdb.ProfilePrefix(e.Home)
}
