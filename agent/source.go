package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Source reads the online counts of some of the project's leaves.
type Source interface {
	// Name names the source in logs and metrics.
	Name() string
	// Leaves are the leaf ids it reports.
	Leaves() []string
	// Read returns what it found at now. An error fails every leaf of the source; a value
	// that could not be read fails its leaf only (Values.Bad).
	Read(ctx context.Context, now time.Time) (Values, error)
}

// Values is what a source read: the counts by leaf id, and why a leaf's value was unusable.
// A leaf in neither map was absent from the source's data.
type Values struct {
	Online map[string]int64
	Bad    map[string]error
}

// maxSourceBytes bounds what one source's read takes in (a scrape, a command's output, a
// file): 16 MiB is far more than 10,000 leaves need.
const maxSourceBytes = 16 << 20

// errTooBig is the error of a source whose data passes maxSourceBytes.
var errTooBig = fmt.Errorf("more than %d bytes", maxSourceBytes)

// readAllBounded reads r to its end, at most maxSourceBytes.
func readAllBounded(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSourceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSourceBytes {
		return nil, errTooBig
	}
	return data, nil
}

// countValue checks a sampled value: a whole number from 0 to 2^53 (a float above that has
// lost counts).
func countValue(v float64) (int64, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("value %v is not a count", v)
	case v < 0:
		return 0, fmt.Errorf("value %v is negative", v)
	case v != math.Trunc(v):
		return 0, fmt.Errorf("value %v is not a whole number", v)
	case v > 1<<53:
		return 0, fmt.Errorf("value %v is too large to be exact", v)
	}
	return int64(v), nil
}

// PromSource scrapes a Prometheus text exposition from a local URL and reads one gauge: the
// series whose label Label names a leaf give that leaf's count.
type PromSource struct {
	SourceName string
	LeafIDs    []string
	URL        string
	Metric     string
	Label      string
	HTTP       *http.Client
}

// Name implements Source.
func (s *PromSource) Name() string { return s.SourceName }

// Leaves implements Source.
func (s *PromSource) Leaves() []string { return s.LeafIDs }

// Read implements Source: one scrape.
func (s *PromSource) Read(ctx context.Context, _ time.Time) (Values, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return Values{}, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	res, err := s.HTTP.Do(req)
	if err != nil {
		return Values{}, fmt.Errorf("scrape: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	data, err := readAllBounded(res.Body)
	if err != nil {
		return Values{}, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	if res.StatusCode != http.StatusOK {
		return Values{}, fmt.Errorf("scrape %s: HTTP %d", s.URL, res.StatusCode)
	}
	return ParseProm(data, s.Metric, s.Label)
}

// ParseProm reads the gauge (or untyped) metric of a Prometheus text exposition: each series'
// label names its leaf. A series without the label is ignored; two series naming the same
// leaf make it Bad (which one is the count?), as does a value that is not a count.
func ParseProm(data []byte, metric, label string) (Values, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return Values{}, fmt.Errorf("parse exposition: %w", err)
	}
	v := Values{Online: map[string]int64{}, Bad: map[string]error{}}
	fam, ok := fams[metric]
	if !ok {
		return v, fmt.Errorf("metric %s is absent from the exposition", metric)
	}
	if t := fam.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
		return v, fmt.Errorf("metric %s is a %s, want a gauge", metric, t)
	}
	seen := map[string]int{}
	for _, m := range fam.GetMetric() {
		leaf := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				leaf = lp.GetValue()
			}
		}
		if leaf == "" {
			continue
		}
		seen[leaf]++
		var val float64
		if g := m.GetGauge(); g != nil {
			val = g.GetValue()
		} else {
			val = m.GetUntyped().GetValue()
		}
		n, err := countValue(val)
		switch {
		case seen[leaf] > 1:
			delete(v.Online, leaf)
			v.Bad[leaf] = fmt.Errorf("%d series of %s have %s=%q", seen[leaf], metric, label, leaf)
		case err != nil:
			v.Bad[leaf] = fmt.Errorf("%s{%s=%q}: %w", metric, label, leaf, err)
		default:
			v.Online[leaf] = n
		}
	}
	return v, nil
}

// ExecSource runs a command and reads its standard output as a JSON object of counts by leaf
// id (see ParseCountsJSON).
type ExecSource struct {
	SourceName string
	LeafIDs    []string
	Command    []string
	Timeout    time.Duration
}

// Name implements Source.
func (s *ExecSource) Name() string { return s.SourceName }

// Leaves implements Source.
func (s *ExecSource) Leaves() []string { return s.LeafIDs }

// Read implements Source: one run of the command, killed after Timeout.
func (s *ExecSource) Read(ctx context.Context, _ time.Time) (Values, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...) //nolint:gosec // the operator's configured command
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedBuffer{b: &stdout}, &limitedBuffer{b: &stderr}
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Values{}, fmt.Errorf("command %s: no answer within %s", s.Command[0], s.Timeout)
	case err != nil:
		return Values{}, fmt.Errorf("command %s: %w (stderr: %q)", s.Command[0], err, truncate(stderr.String(), 200))
	case stdout.Len() > maxSourceBytes:
		return Values{}, fmt.Errorf("command %s: output of %w", s.Command[0], errTooBig)
	}
	v, err := ParseCountsJSON(stdout.Bytes())
	if err != nil {
		return v, fmt.Errorf("command %s: %w", s.Command[0], err)
	}
	return v, nil
}

// limitedBuffer keeps at most maxSourceBytes+1 bytes and discards the rest.
type limitedBuffer struct{ b *bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxSourceBytes + 1 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// FileSource reads a JSON file of counts by leaf id (see ParseCountsJSON) that the game
// server rewrites; a file not modified within MaxAge is stale and fails every leaf (a
// stopped server must not keep reporting its last counts).
type FileSource struct {
	SourceName string
	LeafIDs    []string
	Path       string
	MaxAge     time.Duration
}

// Name implements Source.
func (s *FileSource) Name() string { return s.SourceName }

// Leaves implements Source.
func (s *FileSource) Leaves() []string { return s.LeafIDs }

// Read implements Source.
func (s *FileSource) Read(_ context.Context, now time.Time) (Values, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return Values{}, fmt.Errorf("read counts file: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return Values{}, fmt.Errorf("read counts file: %w", err)
	}
	if age := now.Sub(info.ModTime()); s.MaxAge > 0 && age > s.MaxAge {
		return Values{}, fmt.Errorf("counts file %s is stale: last written %s ago (max_age %s)", s.Path, age.Round(time.Second), s.MaxAge)
	}
	data, err := readAllBounded(f)
	if err != nil {
		return Values{}, fmt.Errorf("read counts file %s: %w", s.Path, err)
	}
	v, err := ParseCountsJSON(data)
	if err != nil {
		return v, fmt.Errorf("counts file %s: %w", s.Path, err)
	}
	return v, nil
}

// ParseCountsJSON reads the counts of a command's output or a counts file: one JSON object
// whose keys are leaf ids and whose values are counts, e.g. {"g01-s0001-p01": 42}. A value
// that is not a whole number from 0 to 2^53 (a float, a string, a negative number) makes its
// leaf Bad; null is the leaf's way to say it does not know (absent). Anything but one object
// is an error.
func ParseCountsJSON(data []byte) (Values, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Values{}, fmt.Errorf(`want a JSON object of counts such as {"leaf-id": 42}: %w`, err)
	}
	if raw == nil {
		return Values{}, errors.New(`want a JSON object of counts such as {"leaf-id": 42}, got null`)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Values{}, errors.New("unexpected data after the JSON object")
	}
	v := Values{Online: make(map[string]int64, len(raw)), Bad: map[string]error{}}
	for id, val := range raw {
		s := string(bytes.TrimSpace(val))
		if s == "null" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil:
			v.Bad[id] = fmt.Errorf("value %s is not a whole number", truncate(s, 32))
		case n < 0:
			v.Bad[id] = fmt.Errorf("value %d is negative", n)
		case n > 1<<53:
			v.Bad[id] = fmt.Errorf("value %d is too large", n)
		default:
			v.Online[id] = n
		}
	}
	return v, nil
}
