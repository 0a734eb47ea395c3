package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/tree"
)

// Defaults of File.
const (
	DefaultWindow        = 24 * time.Hour // the API's late-data window (api.DefaultLateWindow)
	DefaultSpoolMB       = 64
	DefaultSourceTimeout = 10 * time.Second
	DefaultLeafType      = "process"
)

// File is the agent's YAML configuration: where to send, which project, and the sources of
// its leaves. Durations are Go durations ("5m", "30s").
type File struct {
	// URL is the rollup API's base URL.
	URL string `yaml:"url"`
	// Token is the project's ingest token; TokenFile names a file holding it instead (as
	// 'rollup token create' prints it).
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// CAFile names a PEM file of the CA that signed the API's certificate (an https URL
	// served with a private CA, as 'rollup serve --tls-cert' does), trusted in addition to the
	// system's CAs (on Linux SSL_CERT_FILE and SSL_CERT_DIR replace those).
	CAFile string `yaml:"ca_file"`
	// Project is the project whose leaves the sources report.
	Project string `yaml:"project"`
	// Tick is the server's tick (default 5m).
	Tick time.Duration `yaml:"tick"`
	// Interval is how often the sources are sampled (default: once per tick); a shorter one
	// sends the current tick again with a newer observed_at, which replaces the older value.
	Interval time.Duration `yaml:"interval"`
	// Window is how old a tick may be and still be sent: the API's late-data window (default
	// 24h). Older ticks are dropped from the spool, counted and logged.
	Window time.Duration `yaml:"window"`
	// NoJitter samples and sends right at each interval boundary. By default the agent waits
	// agentclient.StartJitter(interval) first (up to a tenth of it), so a fleet's agents do
	// not all send in the same instant.
	NoJitter bool `yaml:"no_jitter"`
	// Spool is the on-disk queue.
	Spool SpoolFile `yaml:"spool"`
	// Sources name the leaves and where their counts come from.
	Sources []SourceFile `yaml:"sources"`
}

// SpoolFile configures the spool.
type SpoolFile struct {
	// Dir is the spool directory (one file per sampled tick).
	Dir string `yaml:"dir"`
	// MaxMB bounds the spool's size in MiB (default 64); when full, the oldest tick goes.
	MaxMB int `yaml:"max_mb"`
}

// SourceFile is one source of leaves: a name, its leaf ids and type, and exactly one of
// prometheus, exec or file.
type SourceFile struct {
	Name string `yaml:"name"`
	// Type is the count type of its leaves (default "process").
	Type       string          `yaml:"type"`
	Leaves     []string        `yaml:"leaves"`
	Prometheus *PromSourceFile `yaml:"prometheus"`
	Exec       *ExecSourceFile `yaml:"exec"`
	File       *FileSourceFile `yaml:"file"`
}

// PromSourceFile configures a PromSource.
type PromSourceFile struct {
	URL     string        `yaml:"url"`
	Metric  string        `yaml:"metric"`
	Label   string        `yaml:"label"`
	Timeout time.Duration `yaml:"timeout"`
}

// ExecSourceFile configures an ExecSource.
type ExecSourceFile struct {
	Command []string      `yaml:"command"`
	Timeout time.Duration `yaml:"timeout"`
}

// FileSourceFile configures a FileSource.
type FileSourceFile struct {
	Path string `yaml:"path"`
	// MaxAge is how old the file may be (default two intervals).
	MaxAge time.Duration `yaml:"max_age"`
}

// ConfigError is an invalid agent configuration; Field names the YAML key.
type ConfigError struct {
	Path  string
	Field string
	Err   error
}

// Error names the file and the key.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("agent config %s: %s: %v", e.Path, e.Field, e.Err)
}

// Unwrap returns what is wrong with the value.
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadFile reads and validates the agent configuration at path, filling in defaults.
func LoadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read agent config: %w", err)
	}
	return ParseFile(path, data)
}

// ParseFile parses and validates an agent configuration (path names it in errors).
func ParseFile(path string, data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, fmt.Errorf("agent config %s: empty", path)
		}
		return f, fmt.Errorf("agent config %s: %w", path, err)
	}
	if err := f.validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return f, err
	}
	return f, nil
}

func invalid(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// validate checks f and fills in its defaults.
func (f *File) validate() error {
	if f.Tick == 0 {
		f.Tick = tree.DefaultTick
	}
	if f.Interval == 0 {
		f.Interval = f.Tick
	}
	if f.Window == 0 {
		f.Window = DefaultWindow
	}
	if f.Spool.MaxMB == 0 {
		f.Spool.MaxMB = DefaultSpoolMB
	}
	u, err := url.Parse(f.URL)
	switch {
	case f.URL == "":
		return invalid("url", "is required: the rollup API's base URL, such as http://rollup:8080")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return invalid("url", "want an http:// or https:// URL")
	case f.CAFile != "" && u.Scheme != "https":
		return invalid("ca_file", "is set but url is %s://: the CA is only used for an https:// URL", u.Scheme)
	case f.Token == "" && f.TokenFile == "":
		return invalid("token", "is required (or token_file)")
	case f.Token != "" && f.TokenFile != "":
		return invalid("token", "token and token_file exclude each other")
	case f.Project == "":
		return invalid("project", "is required")
	case f.Tick < time.Second:
		return invalid("tick", "must be at least 1s, got %s", f.Tick)
	case f.Interval < time.Second || f.Interval > f.Tick:
		return invalid("interval", "must be from 1s to the tick (%s), got %s", f.Tick, f.Interval)
	case f.Window < f.Tick:
		return invalid("window", "must be at least one tick, got %s", f.Window)
	case f.Spool.Dir == "":
		return invalid("spool.dir", "is required: a directory the agent alone writes")
	case f.Spool.MaxMB < 1:
		return invalid("spool.max_mb", "must be at least 1, got %d", f.Spool.MaxMB)
	case len(f.Sources) == 0:
		return invalid("sources", "at least one source is required")
	}
	names := map[string]bool{}
	leaves := map[[2]string]string{}
	for i := range f.Sources {
		s := &f.Sources[i]
		field := fmt.Sprintf("sources[%d]", i)
		if err := s.validate(field, f.Interval); err != nil {
			return err
		}
		if names[s.Name] {
			return invalid(field+".name", "%q names two sources", s.Name)
		}
		names[s.Name] = true
		for _, id := range s.Leaves {
			k := [2]string{id, s.Type}
			if other, dup := leaves[k]; dup {
				return invalid(field+".leaves", "leaf %q (type %s) is also in source %q", id, s.Type, other)
			}
			leaves[k] = s.Name
		}
	}
	return nil
}

func (s *SourceFile) validate(field string, interval time.Duration) error {
	if s.Type == "" {
		s.Type = DefaultLeafType
	}
	kinds := 0
	for _, set := range []bool{s.Prometheus != nil, s.Exec != nil, s.File != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case s.Name == "":
		return invalid(field+".name", "is required")
	case len(s.Leaves) == 0:
		return invalid(field+".leaves", "at least one leaf id is required")
	case kinds != 1:
		return invalid(field, "want exactly one of prometheus, exec and file")
	}
	for j, id := range s.Leaves {
		if id == "" || strings.TrimSpace(id) != id {
			return invalid(fmt.Sprintf("%s.leaves[%d]", field, j), "want a leaf id, got %q", id)
		}
	}
	switch {
	case s.Prometheus != nil:
		p := s.Prometheus
		if p.Timeout == 0 {
			p.Timeout = DefaultSourceTimeout
		}
		u, err := url.Parse(p.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return invalid(field+".prometheus.url", "want the http:// URL of a Prometheus text exposition")
		case p.Metric == "":
			return invalid(field+".prometheus.metric", "is required: the gauge holding the counts")
		case p.Label == "":
			return invalid(field+".prometheus.label", "is required: the label whose value is the leaf id")
		case p.Timeout < 0:
			return invalid(field+".prometheus.timeout", "must be positive")
		}
	case s.Exec != nil:
		if s.Exec.Timeout == 0 {
			s.Exec.Timeout = DefaultSourceTimeout
		}
		switch {
		case len(s.Exec.Command) == 0 || s.Exec.Command[0] == "":
			return invalid(field+".exec.command", `is required: the program and its arguments, such as ["/usr/local/bin/counts", "--json"]`)
		case s.Exec.Timeout < 0:
			return invalid(field+".exec.timeout", "must be positive")
		}
	default:
		if s.File.MaxAge == 0 {
			s.File.MaxAge = 2 * interval
		}
		switch {
		case s.File.Path == "":
			return invalid(field+".file.path", "is required")
		case s.File.MaxAge < 0:
			return invalid(field+".file.max_age", "must be positive")
		}
	}
	return nil
}

// Settings are what an Agent runs with; Build makes them from a File, and SIGHUP replaces
// them (the spool stays).
type Settings struct {
	// Client sends the submissions; its MaxAttempts should be 1 (the agent retries from the
	// spool on its own schedule, sampling meanwhile).
	Client *agentclient.Client
	// Project is the project of every submission.
	Project string
	// Tick is the server's tick; Interval the sampling period (at most Tick).
	Tick, Interval time.Duration
	// Window is the late-data window: older ticks are dropped, never sent.
	Window time.Duration
	// NoJitter samples right at each interval boundary (tests, --once).
	NoJitter bool
	// Sources are sampled every interval.
	Sources []Source
	// Types gives each source's leaf type, by source name (default DefaultLeafType).
	Types map[string]string
}

// Build returns the settings f describes: the token read from its file, the CA file's
// certificates trusted and the sources made.
func (f File) Build() (Settings, error) {
	token := f.Token
	if f.TokenFile != "" {
		var err error
		if token, err = agentclient.ReadTokenFile(f.TokenFile); err != nil {
			return Settings{}, fmt.Errorf("token_file: %w", err)
		}
	}
	hc, err := agentclient.NewHTTPClient(f.CAFile)
	if err != nil {
		return Settings{}, fmt.Errorf("ca_file: %w", err)
	}
	s := Settings{
		Client:  &agentclient.Client{BaseURL: f.URL, Token: token, MaxAttempts: 1, HTTP: hc},
		Project: f.Project, Tick: f.Tick, Interval: f.Interval, Window: f.Window, NoJitter: f.NoJitter,
		Types: map[string]string{},
	}
	for _, sf := range f.Sources {
		s.Types[sf.Name] = sf.Type
		switch {
		case sf.Prometheus != nil:
			s.Sources = append(s.Sources, &PromSource{SourceName: sf.Name, LeafIDs: sf.Leaves, URL: sf.Prometheus.URL,
				Metric: sf.Prometheus.Metric, Label: sf.Prometheus.Label, HTTP: &http.Client{Timeout: sf.Prometheus.Timeout}})
		case sf.Exec != nil:
			s.Sources = append(s.Sources, &ExecSource{SourceName: sf.Name, LeafIDs: sf.Leaves, Command: sf.Exec.Command, Timeout: sf.Exec.Timeout})
		default:
			s.Sources = append(s.Sources, &FileSource{SourceName: sf.Name, LeafIDs: sf.Leaves, Path: sf.File.Path, MaxAge: sf.File.MaxAge})
		}
	}
	return s, nil
}
