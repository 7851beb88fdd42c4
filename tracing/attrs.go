package tracing

import "go.opentelemetry.io/otel/attribute"

// Attribute keys for hermes spans, in one place so the starter of a job and
// whichever OS process records its end describe it alike. Where the
// OpenTelemetry semantic conventions have a name it is used as-is.
const (
	// AttrProcessID is the hermes process id (proc_…).
	AttrProcessID = attribute.Key("hermes.process.id")
	// AttrBackend is "local" or "docker".
	AttrBackend = attribute.Key("hermes.backend")
	// AttrCommand is the command line, redacted before it is set.
	AttrCommand = attribute.Key("process.command_line")
	// AttrPID is the host pid of a local process.
	AttrPID = attribute.Key("process.pid")
	// AttrContainerID is the container id of a docker process.
	AttrContainerID = attribute.Key("container.id")
	// AttrExitCode is the process exit status.
	AttrExitCode = attribute.Key("process.exit.code")
	// AttrStatus is the receipt status (exited, killed, timeout, …).
	AttrStatus = attribute.Key("hermes.process.status")
	// AttrSessionID is the agent session id on agent.turn spans.
	AttrSessionID = attribute.Key("hermes.session.id")
	// AttrTurnIndex is the turn's index within its session.
	AttrTurnIndex = attribute.Key("hermes.turn.index")
)
