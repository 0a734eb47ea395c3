package bulk

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
)

// DefaultUnwritableGrace is how long the driver must see no writable server before a
// StoreMonitor reports the store unreachable. It outlasts the blips that follow one failed
// command (the driver marks the server unknown until its monitor's next check: at most 500ms
// later while an operation waits for a server, about one heartbeat otherwise).
const DefaultUnwritableGrace = time.Second

// StoreMonitor follows the driver's view of the deployment (the SDAM events of the client the
// writer uses) and tells the writer when no server can take writes: after the driver has seen
// none for a grace period, the writer marks the store down at once — in-flight writes waiting
// for a server are ended (their outcome unknown), submissions are refused — instead of
// waiting for the driver's server selection timeout; and as soon as the driver sees a
// writable server again the writer probes the store rather than waiting for its next probe.
//
// Register it on the client before connecting (options.Client().SetServerMonitor(
// m.ServerMonitor())) and pass it in Options.StoreMonitor. It only watches: it never sends a
// command. Its methods are safe for concurrent use.
type StoreMonitor struct {
	grace time.Duration

	mu       sync.Mutex
	seen     bool // a topology description arrived
	writable bool
	reason   string      // why not writable
	timer    *time.Timer // grace timer while not writable
	reported bool        // the subscriber was told the store is unwritable
	notify   func(writable bool, reason string)
}

// NewStoreMonitor returns a monitor that reports the store unreachable once the driver has
// seen no writable server for grace (0: DefaultUnwritableGrace).
func NewStoreMonitor(grace time.Duration) *StoreMonitor {
	if grace <= 0 {
		grace = DefaultUnwritableGrace
	}
	return &StoreMonitor{grace: grace}
}

// ServerMonitor returns the driver event monitor to register on the client.
func (m *StoreMonitor) ServerMonitor() *event.ServerMonitor {
	return &event.ServerMonitor{TopologyDescriptionChanged: m.topologyChanged}
}

// Writable reports whether the driver currently knows a server that takes writes (true before
// the first topology description).
func (m *StoreMonitor) Writable() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.seen || m.writable
}

// subscribe sets the function told when the store has been unwritable for the grace period
// (writable false) and, only after that, when it is writable again (writable true): blips
// shorter than the grace period are not reported either way, so a store that fails every
// command (the driver marks it unknown after each failure and known at its next check) does
// not make the writer probe at every flap. fn is called without the monitor's lock held and
// must not block: the unwritable report comes from the grace timer, the writable one from the
// driver's event callback (fn must then not wait for anything that may wait for the driver).
func (m *StoreMonitor) subscribe(fn func(writable bool, reason string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = fn
}

// topologyChanged is the driver's callback. The driver holds its topology lock while calling
// it: it only records the state, arms or stops a timer and tells the subscriber that the store
// is writable again (which must not block).
func (m *StoreMonitor) topologyChanged(e *event.TopologyDescriptionChangedEvent) {
	writable, reason := writableTopology(e.NewDescription)
	m.observe(writable, reason)
}

func (m *StoreMonitor) observe(writable bool, reason string) {
	m.mu.Lock()
	was := !m.seen || m.writable
	m.seen, m.writable, m.reason = true, writable, reason
	var back func(bool, string) // told that the store is writable again
	switch {
	case writable && !was:
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
		if m.reported {
			back = m.notify
		}
		m.reported = false
	case !writable && was:
		m.timer = time.AfterFunc(m.grace, m.graceOver)
	}
	m.mu.Unlock()
	if back != nil {
		back(true, "")
	}
}

// graceOver tells the subscriber that the store is unwritable, if it still is.
func (m *StoreMonitor) graceOver() {
	m.mu.Lock()
	fn, writable, reason := m.notify, m.writable, m.reason
	m.timer = nil
	if !writable {
		m.reported = true
	}
	m.mu.Unlock()
	if !writable && fn != nil {
		fn(false, fmt.Sprintf("%s for %v", reason, m.grace))
	}
}

// writableTopology reports whether a topology description has a server that takes writes,
// and if not, says what the driver sees.
func writableTopology(d event.TopologyDescription) (bool, string) {
	if d.Kind == "LoadBalanced" {
		return true, ""
	}
	seen := make([]string, 0, len(d.Servers))
	for _, s := range d.Servers {
		switch s.Kind {
		case "Standalone", "RSPrimary", "Mongos", "LoadBalancer":
			return true, ""
		}
		seen = append(seen, s.Addr.String()+" "+s.Kind)
	}
	sort.Strings(seen)
	return false, "no writable server (the driver sees: " + strings.Join(seen, ", ") + ")"
}
