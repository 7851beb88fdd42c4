// Package docker runs hermes processes as detached Docker containers through
// the Engine API. A container outlives the hermes process that started it:
// everything a later observer needs to write the receipt (ids, owner session,
// command, trace ids) travels with the container as labels, so any hermes
// process of the same profile can List it, Attach to it, replay its logs and
// collect its exit code.
//
// The backend never writes receipts and never pulls images: the engine is the
// supervisor and the registry is the bookkeeper.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultMemory      = 1 << 30 // bytes
	DefaultNanoCPUs    = 1e9     // one CPU
	DefaultPidsLimit   = 512
	DefaultNetworkMode = "none"
	DefaultLogMaxSize  = "10m"
	// DefaultStartGrace is how long a container may sit created-but-not-started
	// before an observer gives up on it: its starter died between create and
	// start, so no one will ever start it.
	DefaultStartGrace = 30 * time.Second
)

// Labels stamped on every container. They are the durable record of a
// process: List and Attach rebuild backend.Live from them alone.
const (
	LabelID      = "hermes.id"
	LabelProfile = "hermes.profile"
	LabelSession = "hermes.session" // Owner.ParentSessionID, the owner agent session
	LabelTask    = "hermes.task"
	LabelTraceID = "hermes.trace_id"
	LabelSpanID  = "hermes.span_id"
	LabelCommand = "hermes.command"
	LabelCwd     = "hermes.cwd"
	LabelTimeout = "hermes.timeout"
	LabelImage   = "hermes.image"
	LabelStdin   = "hermes.stdin"
	LabelMeta    = "hermes.meta" // the whole job.Job as JSON
)

// ErrImageNotFound is wrapped by Start when the image is not present in the
// engine. The backend never pulls: there is no registry to pull from.
var ErrImageNotFound = errors.New("image not found locally")

// imageError says what to do about a missing image; it is ErrImageNotFound.
type imageError struct{ image string }

func (e imageError) Error() string {
	return fmt.Sprintf("image %q not found locally: build or load it first", e.image)
}

func (e imageError) Is(target error) bool { return target == ErrImageNotFound }

// ErrEngineUnavailable is wrapped by every call that could not reach the
// Docker engine at all.
var ErrEngineUnavailable = errors.New("docker engine not reachable")

// Options configures a Backend. Zero values mean the safe default.
type Options struct {
	// Profile is stamped on every container as hermes.profile and filters
	// List/Attach, so that two profiles never see each other's containers.
	// Required.
	Profile string
	// DefaultImage is used when Spec.Image is empty.
	DefaultImage string
	// Shell runs Spec.Command as its last argument; default /bin/sh -c,
	// which every image with a shell has. It must speak POSIX sh: the
	// command is prefixed with a redirection that merges stderr into
	// stdout.
	Shell []string
	// Memory is the memory limit in bytes (swap included). 0 means
	// DefaultMemory; negative means unlimited.
	Memory int64
	// NanoCPUs is the CPU quota in 1e-9 CPUs. 0 means DefaultNanoCPUs;
	// negative means unlimited.
	NanoCPUs int64
	// PidsLimit caps the number of processes. 0 means DefaultPidsLimit;
	// negative means unlimited.
	PidsLimit int64
	// CapAdd lists capabilities to grant back after dropping ALL.
	CapAdd []string
	// Privileged runs the container privileged. Never set implicitly.
	Privileged bool
	// NetworkMode is the container network; default "none". "host" only
	// when a caller spells it out.
	NetworkMode string
	// MountWorkdir bind-mounts Spec.Cwd into the container at the same
	// path (read-write). Off by default: the host file system stays out.
	MountWorkdir bool
	// User is the container user (uid[:gid] or a name); empty keeps the
	// image's.
	User string
	// NoInit skips the engine's init process. With it off (the default) an
	// init reaps zombies and forwards signals, so SIGTERM reaches a shell
	// that, as pid 1, would otherwise ignore it.
	NoInit bool
	// LogMaxSize bounds the json-file log the engine keeps per container
	// (docker size syntax, e.g. "10m"); the receipt only keeps a tail anyway.
	LogMaxSize string
	// Keep leaves containers in place after Release, for debugging.
	Keep bool
	// StartGrace is how long a created-but-never-started container is given
	// before Wait reports it lost; default DefaultStartGrace.
	StartGrace time.Duration
	// Host overrides DOCKER_HOST (for example unix:///run/user/1000/docker.sock).
	Host string
	// Logger receives debug and warning logs; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if len(o.Shell) == 0 {
		o.Shell = []string{"/bin/sh", "-c"}
	}
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.NanoCPUs == 0 {
		o.NanoCPUs = DefaultNanoCPUs
	}
	if o.PidsLimit == 0 {
		o.PidsLimit = DefaultPidsLimit
	}
	if o.NetworkMode == "" {
		o.NetworkMode = DefaultNetworkMode
	}
	if o.LogMaxSize == "" {
		o.LogMaxSize = DefaultLogMaxSize
	}
	if o.StartGrace <= 0 {
		o.StartGrace = DefaultStartGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Name is the backend's name in receipts.
const Name = "docker"

// Backend starts hermes processes as detached containers. It implements
// backend.Backend with Recover: containers outlive the hermes process that
// started them and are found again by their labels. It is safe for
// concurrent use.
type Backend struct {
	opts Options
	cli  *client.Client
	log  *slog.Logger
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend talking to the engine named by DOCKER_HOST (or
// Options.Host), negotiating the API version on first use. It does not
// contact the engine; call Ping to fail early.
func New(opts Options) (*Backend, error) {
	if opts.Profile == "" {
		return nil, errors.New("docker backend: profile is required (it keeps profiles apart)")
	}
	opts = opts.withDefaults()
	clientOpts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	}
	cli, err := client.NewClientWithOpts(clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("docker backend: client: %w", err)
	}
	return &Backend{opts: opts, cli: cli, log: opts.Logger.With("backend", Name)}, nil
}

// Name is the receipt's backend field.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend. Whoever holds a handle captures
// the output and writes the receipt: there is no supervisor of its own
// (a `hermes watch` process is just another holder).
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Recover: true, Images: true,
		Enforces: backend.Enforcement{CPUs: true, Memory: true, Pids: true, Network: true}}
}

// Close releases the engine client. Containers keep running.
func (b *Backend) Close() error { return b.cli.Close() }

// Ping checks that the engine answers.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cli.Ping(ctx); err != nil {
		return b.engineErr("ping", err)
	}
	return nil
}

// engineErr wraps err with op and, when the engine could not be reached,
// with ErrEngineUnavailable and the address that was tried.
func (b *Backend) engineErr(op string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("docker %s: %w at %s (check DOCKER_HOST and that dockerd is running): %w",
			op, ErrEngineUnavailable, b.cli.DaemonHost(), err)
	}
	return fmt.Errorf("docker %s: %w", op, err)
}

// containerName is docker's rule for names; ids become part of one.
var containerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Start creates and starts a detached container running spec.Command. It
// returns once the engine reports the container started.
func (b *Backend) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	if !containerName.MatchString(spec.ID) {
		return nil, fmt.Errorf("docker start: invalid process id %q", spec.ID)
	}
	if spec.Command == "" {
		return nil, fmt.Errorf("docker start %s: empty command", spec.ID)
	}
	image := spec.Image
	if image == "" {
		image = b.opts.DefaultImage
	}
	if image == "" {
		return nil, fmt.Errorf("docker start %s: no image (set --image or terminal.docker_image)", spec.ID)
	}
	labels, err := b.labels(spec, image)
	if err != nil {
		return nil, fmt.Errorf("docker start %s: %w", spec.ID, err)
	}

	cfg := &container.Config{
		Image:      image,
		Entrypoint: b.opts.Shell,
		Cmd:        []string{mergeStreams + spec.Command},
		Env:        spec.Env,
		WorkingDir: spec.Cwd,
		User:       b.opts.User,
		Labels:     labels,
		OpenStdin:  spec.Stdin,
		// The first attacher's EOF becomes the process's EOF: that is
		// the only way the engine lets a client close a container's stdin.
		StdinOnce: spec.Stdin,
	}
	host := b.hostConfig(spec)
	// With no network wanted, skip the engine's network allocation
	// altogether: the container still gets its own namespace with only a
	// loopback, and start is faster by a store transaction per container.
	cfg.NetworkDisabled = host.NetworkMode.IsNone()

	name := "hermes-" + spec.ID
	created, err := b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		if cerrdefs.IsNotFound(err) && b.imageMissing(ctx, image) {
			return nil, fmt.Errorf("docker start %s: %w", spec.ID, imageError{image})
		}
		return nil, b.engineErr("create container "+name, err)
	}
	if err := b.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// The container must not linger as a created husk that a later
		// observer would report lost.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rmErr := b.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true}); rmErr != nil && !cerrdefs.IsNotFound(rmErr) {
			b.log.Warn("remove container after failed start", "id", spec.ID, "container", created.ID, "err", rmErr)
		}
		return nil, b.engineErr("start container "+name, err)
	}
	b.log.Debug("container started", "id", spec.ID, "container", created.ID, "image", image)
	return b.newHandle(created.ID, spec.ID, spec.Stdin), nil
}

// imageMissing tells a missing image from other things create may not
// find (a named network, say). Only asked after create failed.
func (b *Backend) imageMissing(ctx context.Context, image string) bool {
	_, err := b.cli.ImageInspect(ctx, image)
	return cerrdefs.IsNotFound(err)
}

func (b *Backend) hostConfig(spec backend.Spec) *container.HostConfig {
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(b.opts.NetworkMode),
		Privileged:  b.opts.Privileged,
		CapDrop:     []string{"ALL"},
		CapAdd:      b.opts.CapAdd,
		SecurityOpt: []string{"no-new-privileges"},
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": b.opts.LogMaxSize, "max-file": "2"},
		},
	}
	if !b.opts.NoInit {
		init := true
		host.Init = &init
	}
	if b.opts.Memory > 0 {
		host.Memory = b.opts.Memory
		host.MemorySwap = b.opts.Memory
	}
	if b.opts.NanoCPUs > 0 {
		host.NanoCPUs = b.opts.NanoCPUs
	}
	if b.opts.PidsLimit > 0 {
		pids := b.opts.PidsLimit
		host.PidsLimit = &pids
	}
	if b.opts.MountWorkdir && spec.Cwd != "" {
		host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: spec.Cwd, Target: spec.Cwd}}
	}
	applyResources(host, spec.Resources)
	return host
}

// applyResources puts a job's own bounds over the backend's.
func applyResources(host *container.HostConfig, r job.Resources) {
	if r.Memory > 0 {
		host.Memory, host.MemorySwap = r.Memory, r.Memory // no swap past it: over it is an OOM kill
	}
	if r.CPUs > 0 {
		host.NanoCPUs = int64(r.CPUs * 1e9)
	}
	if r.Pids > 0 {
		pids := r.Pids
		host.PidsLimit = &pids
	}
	switch r.Network {
	case job.NetworkNone:
		host.NetworkMode = "none"
	case job.NetworkDefault:
		host.NetworkMode = "default" // the engine's bridge
	}
}

// mergeStreams prefixes every command so that its stderr goes down the same
// pipe as its stdout. The engine reads the two pipes in separate goroutines,
// so lines written to both within microseconds are logged in either order;
// one pipe keeps them exactly as written, as a terminal would show them.
const mergeStreams = "exec 2>&1\n"

// stopTimeout converts a grace period to the engine's whole seconds,
// rounding up so that a short grace is never turned into none.
func stopTimeout(grace time.Duration) int {
	if grace <= 0 {
		return 0
	}
	return int((grace + time.Second - 1) / time.Second)
}

// signalArg is how the engine accepts a signal: its number works for every
// signal, named or not.
func signalArg(sig int) string { return strconv.Itoa(sig) }
