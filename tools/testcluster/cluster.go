package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cluster's fixed addresses, all inside its network namespace.
const (
	nodeName    = "hermes-node"
	bridge      = "hermes0"
	nodeIP      = "10.89.0.1"
	podCIDR     = "10.89.0.0/16"
	podFirst    = "10.89.1.1"
	serviceCIDR = "10.1.0.0/24"
	serviceIP   = "10.1.0.1" // the kubernetes Service: first of serviceCIDR
	etcdPort    = 2379
	etcdPeer    = 2380

	// PauseImage and BusyboxImage are the images up imports.
	pauseImage   = "hermes.local/pause:1"
	busyboxImage = "hermes.local/busybox:1"
)

// The kernel settings the kubelet insists on (protectKernelDefaults). They
// are shown to it, inside its mount namespace, through read-only bind
// mounts, so that the host's own are never written.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// cluster is one test cluster: where its state and binaries are.
type cluster struct {
	state   string
	bin     string
	apiPort int
	cgroup  string
	log     *slog.Logger
}

func (c *cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.state}, elem...)...)
}

func (c *cluster) kubeconfig() string { return c.path("admin.kubeconfig") }

// components in the order up starts them; down stops them in reverse.
var components = []string{"netns", "etcd", "kube-apiserver", "forward-in", "forward-out",
	"kube-controller-manager", "kube-scheduler", "containerd", "kubelet", "kube-proxy"}

// up brings the cluster up, or finds it up, and returns the admin
// kubeconfig's path.
func (c *cluster) up(ctx context.Context) (string, error) {
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "pause"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			return "", fmt.Errorf("binary %s missing in %s (scripts/ci/build-k8s.sh builds it)", b, c.bin)
		}
	}
	if c.healthy(ctx) == nil {
		c.log.Info("cluster already up", "kubeconfig", c.kubeconfig())
		return c.kubeconfig(), nil
	}
	if _, err := os.Stat(c.path("pids")); err == nil {
		c.log.Info("a cluster is partly up: tearing it down first")
		if err := c.down(); err != nil {
			return "", err
		}
	}
	began := time.Now()
	if err := c.fresh(); err != nil {
		return "", err
	}
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"certificates", c.writePKI},
		{"network namespace", c.startNamespace},
		{"control plane", c.startControlPlane},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kubelet and kube-proxy", c.startNode},
		{"node ready", c.waitNode},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.do(ctx); err != nil {
			return "", fmt.Errorf("%s: %w (logs in %s)", s.what, err, c.path("logs"))
		}
		c.log.Info("step done", "step", s.what, "took", time.Since(t).Round(time.Millisecond))
	}
	for _, name := range components {
		if !c.alive(name) {
			return "", fmt.Errorf("%s exited: %s", name, c.tail(name))
		}
	}
	c.log.Info("cluster up", "took", time.Since(began).Round(time.Millisecond), "node", nodeName, "images", pauseImage+" "+busyboxImage)
	return c.kubeconfig(), nil
}

// fresh empties the state directory.
func (c *cluster) fresh() error {
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(b, []byte(" "+c.state+"/")) {
		return fmt.Errorf("something is still mounted under %s", c.state)
	}
	if err := os.RemoveAll(c.state); err != nil {
		return err
	}
	for _, d := range []string{"pids", "logs", "pki", "etcd", "kubelet", "var-log", "cni", "cni-ipam", "sysctl", "bin-stubs", "images"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) writePKI(context.Context) error {
	pki := c.path("pki")
	ca, err := newAuthority(pki, "ca", "hermes-test-ca")
	if err != nil {
		return err
	}
	proxyCA, err := newAuthority(pki, "front-proxy-ca", "hermes-test-front-proxy-ca")
	if err != nil {
		return err
	}
	local := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP)}
	ids := []identity{
		{file: "apiserver", cn: "kube-apiserver", server: true, ips: append(local, net.ParseIP(serviceIP)),
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", org: "system:masters"},
		{file: "admin", cn: "hermes-test-admin", org: "system:masters"},
		{file: "kubelet", cn: "system:node:" + nodeName, org: "system:nodes"},
		{file: "kubelet-serving", cn: nodeName, server: true, ips: local, dns: []string{"localhost", nodeName}},
		{file: "kube-controller-manager", cn: "system:kube-controller-manager"},
		{file: "kube-scheduler", cn: "system:kube-scheduler"},
		{file: "kube-proxy", cn: "system:kube-proxy"},
	}
	for _, id := range ids {
		if err := ca.issue(pki, id); err != nil {
			return err
		}
	}
	if err := proxyCA.issue(pki, identity{file: "front-proxy-client", cn: "front-proxy-client"}); err != nil {
		return err
	}
	if err := writeServiceAccountKeys(pki); err != nil {
		return err
	}
	// The host reaches the API through the forward; the components inside
	// the namespace reach it directly, on the same port.
	server := "https://127.0.0.1:" + strconv.Itoa(c.apiPort)
	for _, u := range []string{"admin", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if err := writeKubeconfig(c.path(u+".kubeconfig"), server, pki, u); err != nil {
			return err
		}
	}
	return nil
}

// startNamespace starts the process that holds the cluster's mount and
// network namespaces, and lays them out: the bridge, the node address, a
// route to Services, forwarding, and the kubelet's view of the host.
func (c *cluster) startNamespace(ctx context.Context) error {
	var setup []string
	for key, want := range kubeletSysctls {
		have, _ := os.ReadFile("/proc/sys/" + key)
		if strings.TrimSpace(string(have)) == want {
			continue
		}
		f := c.path("sysctl", strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(f, []byte(want+"\n"), 0o644); err != nil {
			return err
		}
		setup = append(setup, fmt.Sprintf("mount --bind -o ro %q /proc/sys/%s", f, key))
	}
	// The kubelet uses fixed host paths (/var/lib/kubelet, /var/log/pods):
	// in the namespace they are the state directory's.
	if _, err := os.Stat("/var/lib/kubelet"); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll("/var/lib/kubelet", 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(c.path("made-var-lib-kubelet"), nil, 0o600); err != nil {
			return err
		}
	}
	setup = append(setup,
		fmt.Sprintf("mount --bind %q /var/lib/kubelet", c.path("kubelet")),
		fmt.Sprintf("mount --bind %q /var/log", c.path("var-log")),
		"ip link set lo up",
		"ip link add "+bridge+" type bridge",
		"ip addr add "+nodeIP+"/16 dev "+bridge,
		"ip link set "+bridge+" up",
		// No default route: nothing leaves the namespace. ClusterIPs must
		// still route from the node itself.
		"ip route add "+serviceCIDR+" dev "+bridge,
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		"touch "+strconv.Quote(c.path("netns.ready")),
		// argv[0] names the state, so that down knows the process is ours.
		"exec -a "+strconv.Quote("testcluster-netns "+c.state)+" sleep infinity",
	)
	if err := c.start("netns", "unshare", "--mount", "--propagation", "slave", "--net", "--", "bash", "-ec", strings.Join(setup, "\n")); err != nil {
		return err
	}
	return c.waitFor(ctx, 10*time.Second, "netns", func() error {
		_, err := os.Stat(c.path("netns.ready"))
		return err
	})
}

// inside prefixes argv to run it in the cluster's namespaces.
func (c *cluster) inside(argv ...string) []string {
	pid, _, _ := c.pid("netns")
	return append([]string{"nsenter", "--target", strconv.Itoa(pid), "--mount", "--net", "--"}, argv...)
}

func (c *cluster) startControlPlane(ctx context.Context) error {
	pki := func(f string) string { return c.path("pki", f) }
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.start("etcd", c.inside(filepath.Join(c.bin, "etcd"), "--name", "hermes-test", "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "hermes-test="+peerURL, "--listen-metrics-urls", "",
		"--log-level", "warn")...); err != nil {
		return err
	}
	port := strconv.Itoa(c.apiPort)
	if err := c.start("kube-apiserver", c.inside(filepath.Join(c.bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL, "--bind-address=0.0.0.0", "--secure-port="+port, "--advertise-address="+nodeIP,
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"), "--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--requestheader-client-ca-file="+pki("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+pki("front-proxy-client.crt"), "--proxy-client-key-file="+pki("front-proxy-client.key"),
		"--cert-dir="+c.path("apiserver-certs"), "--profiling=false", "--v=1")...); err != nil {
		return err
	}
	// The API port, from inside the namespace to the host, through a unix
	// socket in the shared file system.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sock := c.path("apiserver.sock")
	if err := c.start("forward-in", c.inside(self, "forward", "unix:"+sock, "tcp:127.0.0.1:"+port)...); err != nil {
		return err
	}
	if err := c.waitFor(ctx, 10*time.Second, "forward-in", func() error { _, err := os.Stat(sock); return err }); err != nil {
		return err
	}
	if err := c.start("forward-out", self, "forward", "tcp:127.0.0.1:"+port, "unix:"+sock); err != nil {
		return err
	}
	if err := c.waitFor(ctx, 120*time.Second, "kube-apiserver", func() error {
		_, err := c.kubectl(ctx, "get", "--raw=/readyz")
		return err
	}); err != nil {
		return err
	}
	if err := c.start("kube-controller-manager", c.inside(filepath.Join(c.bin, "kube-controller-manager"),
		"--kubeconfig="+c.path("kube-controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+c.path("kube-controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+c.path("kube-controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10257", "--cert-dir="+c.path("kcm-certs"),
		"--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
		"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
		"--service-cluster-ip-range="+serviceCIDR, "--allocate-node-cidrs=false", "--v=1")...); err != nil {
		return err
	}
	return c.start("kube-scheduler", c.inside(filepath.Join(c.bin, "kube-scheduler"),
		"--kubeconfig="+c.path("kube-scheduler.kubeconfig"),
		"--authentication-kubeconfig="+c.path("kube-scheduler.kubeconfig"),
		"--authorization-kubeconfig="+c.path("kube-scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10259", "--cert-dir="+c.path("sched-certs"),
		"--leader-elect=false", "--v=1")...)
}

// cgroupV1 says whether the host mounts cgroup v1 hierarchies (v1 or
// hybrid), which the kubelet refuses unless told.
func cgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err != nil
}

// makeCgroups creates the cgroup subtree of the kubelet and its pods.
func (c *cluster) makeCgroups() error {
	if !cgroupV1() {
		return os.MkdirAll("/sys/fs/cgroup/"+c.cgroup, 0o755)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	for _, procs := range dirs {
		if err := os.MkdirAll(filepath.Join(filepath.Dir(procs), c.cgroup), 0o755); err != nil {
			return err
		}
	}
	// A new cpuset has no CPUs or memory nodes until given its parent's.
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile("/sys/fs/cgroup/cpuset/" + f)
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", c.cgroup, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) containerdSocket() string { return c.path("containerd.sock") }

func (c *cluster) startContainerd(ctx context.Context) error {
	if err := c.makeCgroups(); err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_apparmor = true
    enable_selinux = false
    # Root here may lack CAP_SYS_RESOURCE: the sandboxes' negative
    # oom_score_adj would be refused.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = %[6]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = %[7]q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdSocket(), c.path("containerd", "opt"),
		pauseImage, c.path("runc"), c.path("cni"))
	if err := os.WriteFile(c.path("containerd.toml"), []byte(conf), 0o600); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "hermes-test", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q,
            "ranges": [[{"subnet": %q, "rangeStart": %q, "gateway": %q}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`, bridge, c.path("cni-ipam"), podCIDR, podFirst, nodeIP)
	if err := os.WriteFile(c.path("cni", "10-hermes-test.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	if err := c.start("containerd", c.inside("containerd", "--config", c.path("containerd.toml"))...); err != nil {
		return err
	}
	return c.waitFor(ctx, 30*time.Second, "containerd", func() error {
		_, err := c.ctr(ctx, nil, "version")
		return err
	})
}

// importImages builds the sandbox and busybox images and imports them.
func (c *cluster) importImages(ctx context.Context) error {
	pause, err := os.ReadFile(filepath.Join(c.bin, "pause"))
	if err != nil {
		return err
	}
	if err := c.importImage(ctx, pauseImage, map[string]file{"pause": {mode: 0o755, data: pause}}, []string{"/pause"}, nil); err != nil {
		return err
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("busybox-static: %w", err)
	}
	files := map[string]file{
		"bin": {mode: os.ModeDir | 0o755}, "etc": {mode: os.ModeDir | 0o755},
		"tmp": {mode: os.ModeDir | os.ModeSticky | 0o777}, "bin/busybox": {mode: 0o755, data: busybox},
	}
	out, err := exec.CommandContext(ctx, "/bin/busybox", "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if _, ok := files["bin/"+applet]; !ok && !strings.Contains(applet, "/") {
			files["bin/"+applet] = file{mode: os.ModeSymlink, data: []byte("busybox")}
		}
	}
	// Like docker.io/busybox: no entrypoint, Cmd sh.
	return c.importImage(ctx, busyboxImage, files, nil, []string{"sh"})
}

func (c *cluster) importImage(ctx context.Context, ref string, files map[string]file, entrypoint, cmd []string) error {
	var buf bytes.Buffer
	if err := ociArchive(&buf, ref, files, entrypoint, cmd); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if _, err := c.ctr(ctx, &buf, "images", "import", "-"); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	return nil
}

func (c *cluster) startNode(ctx context.Context) error {
	pki := func(f string) string { return c.path("pki", f) }
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: %t
failSwapOn: false
protectKernelDefaults: true
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
rotateCertificates: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
nodeStatusReportFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 10s
`, pki("kubelet-serving.crt"), pki("kubelet-serving.key"), pki("ca.crt"), c.containerdSocket(), c.cgroup, !cgroupV1())
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(kubelet), 0o600); err != nil {
		return err
	}
	// iptables that always fail come first on the kubelet's PATH: it then
	// leaves the firewall alone ("no iptables support"). kube-proxy keeps
	// the real one: its rules live in the namespace.
	for _, t := range []string{"iptables", "ip6tables", "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore"} {
		if err := os.WriteFile(c.path("bin-stubs", t), []byte("#!/bin/sh\necho 'iptables is off for the test kubelet' >&2\nexit 3\n"), 0o755); err != nil {
			return err
		}
	}
	if err := c.start("kubelet", c.inside("env", "PATH="+c.path("bin-stubs")+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		filepath.Join(c.bin, "kubelet"), "--config="+c.path("kubelet.yaml"), "--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir=/var/lib/kubelet", "--hostname-override="+nodeName, "--node-ip="+nodeIP, "--v=1")...); err != nil {
		return err
	}
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
oomScoreAdj: 0
`, c.path("kube-proxy.kubeconfig"), nodeName, podCIDR)
	if err := os.WriteFile(c.path("kube-proxy.yaml"), []byte(proxy), 0o600); err != nil {
		return err
	}
	return c.start("kube-proxy", c.inside(filepath.Join(c.bin, "kube-proxy"), "--config="+c.path("kube-proxy.yaml"), "--v=1")...)
}

// waitNode waits for the node to be Ready and schedulable, and for what
// the controllers make for every namespace.
func (c *cluster) waitNode(ctx context.Context) error {
	checks := []struct {
		what string
		args []string
		want string
	}{
		{"node Ready", []string{"get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`}, "True"},
		{"not-ready taint lifted", []string{"get", "node", nodeName, "-o", "jsonpath={.spec.taints}"}, ""},
		{"default ServiceAccount", []string{"-n", "default", "get", "serviceaccount", "default", "-o", "name"}, "serviceaccount/default"},
		{"kube-root-ca.crt", []string{"-n", "default", "get", "configmap", "kube-root-ca.crt", "-o", "name"}, "configmap/kube-root-ca.crt"},
	}
	for _, ch := range checks {
		if err := c.waitFor(ctx, 180*time.Second, ch.what, func() error {
			out, err := c.kubectl(ctx, ch.args...)
			if err != nil {
				return err
			}
			if got := strings.TrimSpace(out); got != ch.want {
				return fmt.Errorf("%q", got)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// healthy says whether a cluster of this state answers with a Ready node.
func (c *cluster) healthy(ctx context.Context) error {
	for _, name := range components {
		if !c.alive(name) {
			return fmt.Errorf("%s is not running", name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := c.kubectl(ctx, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "True" {
		return errors.New("the node is not Ready")
	}
	return nil
}

// down stops what up started, newest first, with the pods and shims of
// the cluster's containerd, and removes the cgroups and mount point up
// made. It is safe to run at any time.
func (c *cluster) down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.stop("kube-proxy", 10*time.Second)
	c.stop("kubelet", 20*time.Second)
	if c.alive("containerd") {
		if out, err := c.ctr(ctx, nil, "tasks", "ls", "-q"); err == nil {
			for _, task := range strings.Fields(out) {
				_, _ = c.ctr(ctx, nil, "tasks", "kill", "-s", "SIGKILL", task)
			}
			for _, task := range strings.Fields(out) {
				for range 10 {
					if _, err := c.ctr(ctx, nil, "tasks", "delete", task); err == nil {
						break
					}
					time.Sleep(300 * time.Millisecond)
				}
			}
		}
	}
	c.stop("containerd", 20*time.Second)
	c.killLeftovers()
	for i := len(components) - 1; i >= 0; i-- {
		c.stop(components[i], 15*time.Second)
	}
	// The cgroups, deepest first, once their processes are gone.
	time.Sleep(500 * time.Millisecond)
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + c.cgroup)
	roots = append(roots, "/sys/fs/cgroup/"+c.cgroup)
	for _, root := range roots {
		removeTree(root)
		if _, err := os.Stat(root); err == nil {
			c.log.Warn("cgroup not removed", "path", root)
		}
	}
	if _, err := os.Stat(c.path("made-var-lib-kubelet")); err == nil {
		_ = os.Remove("/var/lib/kubelet")
		_ = os.Remove(c.path("made-var-lib-kubelet"))
	}
	c.log.Info("cluster down", "state", c.state)
	return nil
}

// killLeftovers kills what still runs in the cluster's cgroups (pods whose
// shim died) and the shims of its containerd.
func (c *cluster) killLeftovers() {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == self {
			continue
		}
		cg, _ := os.ReadFile(p + "/cgroup")
		cmd, _ := os.ReadFile(p + "/cmdline")
		inOurs := false
		for _, line := range strings.Split(string(cg), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 &&
				(parts[2] == "/"+c.cgroup || strings.HasPrefix(parts[2], "/"+c.cgroup+"/")) {
				inOurs = true
			}
		}
		shim := bytes.Contains(cmd, []byte("containerd-shim")) && bytes.Contains(cmd, []byte(c.containerdSocket()))
		if inOurs || shim {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func removeTree(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// start runs argv in a session of its own, detached from this process,
// logging to logs/name.log, and records its pid and start time.
func (c *cluster) start(name string, argv ...string) error {
	logf, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	st, err := startTime(pid)
	if err != nil {
		return fmt.Errorf("%s exited at once: %s", name, c.tail(name))
	}
	return os.WriteFile(c.path("pids", name+".pid"), fmt.Appendf(nil, "%d %d\n", pid, st), 0o600)
}

// pid returns the recorded pid of component name and whether that process
// still runs (same pid, same start time: not a recycled pid).
func (c *cluster) pid(name string) (pid int, ok bool, err error) {
	b, err := os.ReadFile(c.path("pids", name+".pid"))
	if err != nil {
		return 0, false, err
	}
	var st uint64
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &st); err != nil {
		return 0, false, fmt.Errorf("pid file of %s: %w", name, err)
	}
	now, err := startTime(pid)
	return pid, err == nil && now == st && !zombie(pid), nil
}

func (c *cluster) alive(name string) bool {
	_, ok, _ := c.pid(name)
	return ok
}

// stop ends component name: SIGTERM, then SIGKILL after grace.
func (c *cluster) stop(name string, grace time.Duration) {
	pid, ok, err := c.pid(name)
	if err != nil {
		return
	}
	defer os.Remove(c.path("pids", name+".pid"))
	if !ok {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for c.alive(name) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if c.alive(name) {
		c.log.Warn("did not stop; killing", "component", name)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// startTime is field 22 of /proc/PID/stat: when the process started, in
// clock ticks since boot.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("short stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}

// tail is the end of component name's log, for an error.
func (c *cluster) tail(name string) string {
	b, _ := os.ReadFile(c.path("logs", name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) waitFor(ctx context.Context, within time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s: %v", within, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig=" + c.kubeconfig(), "--request-timeout=5s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (c *cluster) ctr(ctx context.Context, stdin *bytes.Buffer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
