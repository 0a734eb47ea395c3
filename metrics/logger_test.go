package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestNewLogger(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		log, err := NewLogger("info", true, &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Named("watcher").Info("burst written", zap.Int("leaves", 3))
		log.Debug("below the level")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("got %d lines %q, want 1", len(lines), buf.String())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", lines[0], err)
		}
		if m["level"] != "info" || m["logger"] != "watcher" || m["msg"] != "burst written" || m["leaves"] != float64(3) || m["ts"] == nil {
			t.Fatalf("fields %v", m)
		}
	})
	t.Run("console", func(t *testing.T) {
		var buf bytes.Buffer
		log, err := NewLogger("debug", false, &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("hello", zap.String("k", "v"))
		out := buf.String()
		if !strings.Contains(out, "DEBUG") || !strings.Contains(out, "hello") || !strings.Contains(out, `{"k": "v"}`) || strings.HasPrefix(out, "{") {
			t.Fatalf("console line %q", out)
		}
	})
	t.Run("bad level", func(t *testing.T) {
		if _, err := NewLogger("loud", true, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `"loud"`) {
			t.Fatalf("err %v, want one naming the level", err)
		}
	})
}
