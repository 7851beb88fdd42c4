package runner

import (
	"strings"

	"github.com/hermesrun/hermes/service"
)

var _ service.Service = (*Registry)(nil)

// WatchEnd implements service.EndWatcher from the registry's process
// events: a follower polling the log hears of the end at once.
func (r *Registry) WatchEnd(id string) (<-chan struct{}, func()) {
	ended := make(chan struct{}, 1)
	cancel := r.Subscribe(func(ev Event) {
		// id may be a prefix: a stray wake-up costs one early poll.
		if ev.Kind == EventEnded && strings.HasPrefix(ev.ID, id) {
			select {
			case ended <- struct{}{}:
			default:
			}
		}
	})
	return ended, cancel
}
