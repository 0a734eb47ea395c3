package agentclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// ReadTokenFile reads a token file as 'rollup token create' writes it: one token, with white
// space around it.
func ReadTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s: want one token, as 'rollup token create' prints it", path)
	}
	return tok, nil
}

// WaitForAPI polls the server's base URL with hc (nil: a default client) until it answers
// anything (an agent started with its server waits for it), for at most within; within <= 0
// does not wait.
func WaitForAPI(ctx context.Context, hc *http.Client, baseURL string, within time.Duration) error {
	if within <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/", nil)
		if err != nil {
			return fmt.Errorf("base URL: %w", err)
		}
		res, err := hc.Do(req)
		if err == nil {
			_ = res.Body.Close()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the API at %s did not answer within %s: %w", baseURL, within, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
