package agentclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadTokenFile(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{{"abc\n", "abc"}, {"  abc  ", "abc"}, {"", ""}, {"a b\n", ""}, {"a\nb\n", ""}} {
		p := filepath.Join(t.TempDir(), "tok")
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTokenFile(p)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%q: got %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
	if _, err := ReadTokenFile("/nonexistent/token"); err == nil || !strings.Contains(err.Error(), "read token file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestWaitForAPI(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	if err := WaitForAPI(context.Background(), nil, url, time.Second); err != nil {
		t.Fatalf("a server that answers 404 is up: %v", err)
	}
	srv.Close()
	err := WaitForAPI(context.Background(), nil, url, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Fatalf("closed server: %v", err)
	}
	if err := WaitForAPI(context.Background(), nil, url, 0); err != nil {
		t.Fatalf("within 0: %v", err)
	}
}
