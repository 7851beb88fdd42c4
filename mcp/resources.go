package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Resource addresses.
const (
	// ProcessesURI lists the session's processes, live and retained.
	ProcessesURI = "hermes://processes"
	// ProcessURITemplate is one process: its receipt once it ended, its
	// live status before.
	ProcessURITemplate = "hermes://processes/{id}"
)

const processURIPrefix = ProcessesURI + "/"

// ProcessURI is the resource address of process id.
func ProcessURI(id string) string { return processURIPrefix + id }

func (c *Conn) addResources() {
	c.server.AddResource(&sdk.Resource{
		URI: ProcessesURI, Name: "processes", Title: "Processes of this session",
		Description: "The processes this session may see, live and retained, as the JSON of hermes ps --retained --json.",
		MIMEType:    "application/json",
	}, c.readList)
	c.server.AddResourceTemplate(&sdk.ResourceTemplate{
		URITemplate: ProcessURITemplate, Name: "process", Title: "One process",
		Description: "A process by id (or unique prefix): its receipt JSON once it ended, else its live status. Subscribe to hear when it ends.",
		MIMEType:    "application/json",
	}, c.readProcess)
}

func (c *Conn) readList(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	ctx, err := c.scoped(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.opts.Service.List(ctx, service.ListOptions{Retained: true})
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	if list == nil {
		list = []*service.Info{}
	}
	return jsonResource(req.Params.URI, list)
}

func (c *Conn) readProcess(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, processURIPrefix)
	if !ok || !job.IsPrefix(id) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	ctx, err := c.scoped(ctx)
	if err != nil {
		return nil, err
	}
	v, err := c.process(ctx, id)
	if errors.Is(err, service.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	return jsonResource(uri, v)
}

// process is what a process resource shows: the receipt of an ended
// process, the live status of a running one.
func (c *Conn) process(ctx context.Context, id string) (any, error) {
	info, err := c.opts.Service.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ended(info.Status) {
		return info, nil
	}
	rec, err := c.opts.Service.Receipt(ctx, info.ID)
	if errors.Is(err, service.ErrRunning) {
		return info, nil // it ended between the two looks at it: show what was seen
	}
	return rec, err
}

func jsonResource(uri string, v any) (*sdk.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", uri, err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe accepts subscriptions to hermes's own resources only; the SDK
// keeps them and the watcher's notifications reach the subscribers.
func (c *Conn) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	if uri == ProcessesURI {
		return nil
	}
	if id, ok := strings.CutPrefix(uri, processURIPrefix); ok && job.IsPrefix(id) {
		return nil
	}
	return sdk.ResourceNotFoundError(uri)
}

// ended reports whether status is final.
func ended(status string) bool {
	switch status {
	case receipts.StatusRunning, receipts.StatusNotFound, "queued", "":
		return false
	}
	return true
}
