// Command testcluster brings up, and tears down, the real single-node
// Kubernetes cluster hermes's tests run against: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, a kubelet with a containerd of
// its own, and kube-proxy, all inside a private network namespace (pod IPs
// on a bridge, Services through kube-proxy, no route out), with the API
// server's port carried to the host's 127.0.0.1. There is no registry: a
// pause image and a busybox image are built here and imported.
//
//	testcluster up        # prints the admin kubeconfig's path
//	testcluster down
//	testcluster status
//	testcluster forward FROM TO   # internal: the API port's forwarder
//
// It learned how from the reference lab in ../shared/k8slab; the binaries
// come from tools/k8s (scripts/ci/build-k8s.sh). It needs root, and the
// Debian packages containerd, runc, containernetworking-plugins,
// busybox-static and iproute2 (scripts/ci/start-k8s.sh installs them).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	home, _ := os.UserHomeDir()
	stateRoot := os.Getenv("HERMES_CI_STATE_DIR")
	if stateRoot == "" {
		stateRoot = "/tmp/hermes-ci"
	}
	fs := flag.NewFlagSet("testcluster", flag.ContinueOnError)
	c := &cluster{}
	fs.StringVar(&c.state, "state", filepath.Join(stateRoot, "k8s", "cluster"), "state directory (wiped by a fresh up)")
	fs.StringVar(&c.bin, "bin", envOr("HERMES_K8S_BIN", filepath.Join(home, ".cache", "hermes", "k8s", "bin")), "directory of the cluster's binaries")
	fs.IntVar(&c.apiPort, "port", 6443, "host port of the API server (127.0.0.1)")
	fs.StringVar(&c.cgroup, "cgroup", "hermes-k8s", "cgroup subtree of the kubelet and its pods")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: testcluster [flags] up|down|status|forward FROM TO")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch fs.Arg(0) {
	case "up":
		if os.Geteuid() != 0 {
			return fmt.Errorf("up needs root")
		}
		kubeconfig, err := c.up(ctx)
		if err != nil {
			return err
		}
		fmt.Println(kubeconfig)
		return nil
	case "down":
		return c.down()
	case "status":
		if err := c.healthy(ctx); err != nil {
			return err
		}
		fmt.Println(c.kubeconfig())
		return nil
	case "forward":
		if fs.NArg() != 3 {
			return fmt.Errorf("forward FROM TO")
		}
		return forward(ctx, fs.Arg(1), fs.Arg(2))
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", fs.Arg(0))
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
