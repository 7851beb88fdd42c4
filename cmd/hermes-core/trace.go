package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/hermesrun/hermes/service"
)

// TraceCmd prints where a process sits in its trace.
type TraceCmd struct {
	ID     string `arg:"" help:"Process id or unique prefix." complete:"ids"`
	Jaeger string `help:"Jaeger UI base URL (e.g. http://127.0.0.1:16686) to print a link to the trace." env:"HERMES_JAEGER_URL"`
}

// Run implements the command.
func (c *TraceCmd) Run(ctx context.Context, g *Globals) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	var base *url.URL
	if c.Jaeger != "" {
		u, err := url.Parse(c.Jaeger)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return badInput("--jaeger %q: want an http(s) URL such as http://127.0.0.1:16686", c.Jaeger)
		}
		base = u
	}
	// Through the Service: against this profile, or a runner (--runner).
	return onProcess(ctx, g, "trace", c.ID, func(ctx context.Context, svc service.Service) error {
		info, err := svc.Get(ctx, c.ID)
		if err != nil {
			return err
		}
		return c.print(g, info, base)
	})
}

func (c *TraceCmd) print(g *Globals, info *service.Info, base *url.URL) error {
	if info.TraceID == "" {
		return fmt.Errorf("%s has no trace id", info.ID)
	}
	link := ""
	if base != nil {
		link = strings.TrimRight(base.String(), "/") + "/trace/" + info.TraceID
	}
	if g.JSON {
		return printJSON(g, map[string]string{"session_id": info.ID, "trace_id": info.TraceID, "span_id": info.SpanID, "url": link})
	}
	fmt.Fprintln(g.Stdout, info.TraceID)
	if link != "" {
		fmt.Fprintln(g.Stdout, link)
	}
	return nil
}
