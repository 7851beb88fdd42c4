package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// buildInfo is what `hermes version` reports.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// build is readBuild's answer, read once: it does not change while the
// binary runs, and a supervisor runs many commands (each names the
// version to its parser).
var build = sync.OnceValue(readBuild)

// readBuild reads the stamped values, else what Go recorded in the binary.
func readBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if b.Version == "" {
		b.Version = "dev"
		if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
	}
	if ok && b.Commit == "" {
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				b.Commit = kv.Value
			case "vcs.time":
				if b.BuildDate == "" {
					b.BuildDate = kv.Value
				}
			}
		}
	}
	return b
}

func versionString() string {
	b := build()
	out := "hermes " + b.Version
	if b.Commit != "" {
		out += " (commit " + b.Commit
		if b.BuildDate != "" {
			out += ", built " + b.BuildDate
		}
		out += ")"
	}
	return out + " " + b.GoVersion + " " + b.Platform
}

// VersionCmd prints what this binary is.
type VersionCmd struct{}

// Run implements the command.
func (VersionCmd) Run(g *Globals) error {
	if g.JSON {
		return printJSON(g, build())
	}
	b := build()
	_, err := fmt.Fprintf(g.Stdout, "version:    %s\ncommit:     %s\nbuilt:      %s\ngo:         %s\nplatform:   %s\n",
		b.Version, orDash(b.Commit), orDash(b.BuildDate), b.GoVersion, b.Platform)
	return err
}
